package pipeline

import (
	"slices"
	"sort"
	"strings"
	"time"
)

// Limits protect a server from definitions that are too large or built to be expensive.
type Limits struct {
	MaxBytes int // size of the document; default 1 MiB
	MaxJobs  int // jobs after matrix expansion; default 10,000
	MaxDepth int // nesting of YAML collections; default 64
	// MaxNodes bounds the nodes visited while decoding, each alias expansion counted
	// again, which defeats alias bombs; default 1,000,000.
	MaxNodes int
}

// DefaultLimits are the limits used for zero fields of Options.Limits.
var DefaultLimits = Limits{MaxBytes: 1 << 20, MaxJobs: 10_000, MaxDepth: 64, MaxNodes: 1_000_000}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultLimits.MaxBytes
	}
	if l.MaxJobs <= 0 {
		l.MaxJobs = DefaultLimits.MaxJobs
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultLimits.MaxDepth
	}
	if l.MaxNodes <= 0 {
		l.MaxNodes = DefaultLimits.MaxNodes
	}
	return l
}

// Options tune Compile.
type Options struct {
	Limits Limits
	// Path is where the definition was read from, when known. A file under
	// .github/workflows is read as a GitHub Actions workflow whatever it holds; otherwise
	// the document's shape decides (see docs/github-actions.md).
	Path string
	// Workflows reads the reusable workflows a workflow's jobs call (jobs.<id>.uses);
	// without it, a call is an error saying that there is no repository to read from.
	Workflows WorkflowLoader
	// CheckReusable checks a reusable workflow (on: workflow_call and no event of its own)
	// as GitHub checks one on its own: a setting Gantry decides when it plans that reads
	// the workflow's inputs is decided when a workflow calls it, and is named in
	// Plan.Warnings instead of refused (see docs/github-actions.md). Such a plan is for
	// showing, not running. gantry validate and gantry plan set it.
	CheckReusable bool
}

// Defaults for settings a definition leaves out.
const (
	DefaultTimeout = time.Hour
	DefaultShell   = "sh"
)

// DefaultRetry is the retry policy of a job that sets none: one attempt. Fields a
// definition leaves out of its retry block come from here.
//
// Lost attempts (the worker died) are not in the default On: they are redelivered a few
// times without counting against MaxAttempts, because a crashed machine is not the job's
// fault. A policy that lists lost makes them count.
var DefaultRetry = RetryPolicy{
	MaxAttempts: 1,
	Backoff:     Duration(10 * time.Second),
	MaxBackoff:  Duration(10 * time.Minute),
	On:          []FailureKind{FailureExit, FailureTimeout},
}

// Compile decodes, validates and plans a pipeline definition given as YAML or JSON. When
// the definition has mistakes it returns a nil plan and Errors listing every one of them,
// ordered by position.
func Compile(src []byte, opts Options) (*Plan, error) {
	d := &decoder{limits: opts.Limits.withDefaults(), workflows: opts.Workflows, path: opts.Path, checkReusable: opts.CheckReusable}
	p := d.compile(src, opts.Path)
	if len(d.errs) > 0 {
		return nil, sortErrors(d.errs)
	}
	return p, nil
}

func (d *decoder) compile(src []byte, path string) *Plan {
	root := d.parseDocument(src)
	if root == nil || !d.checkShape(root, 0) {
		return nil
	}
	if isWorkflowPath(path) || isWorkflow(root) {
		p, _ := d.compileWorkflow(root)
		return p
	}
	s := d.decodeSpec(root)
	if d.abort {
		return nil
	}
	return d.plan(s)
}

// plan validates what spans jobs (stages, needs, cycles, references) and builds the jobs.
func (d *decoder) plan(s *spec) *Plan {
	p := &Plan{Name: s.name, On: s.on}
	if s.on != nil {
		d.dispatch = s.on.Dispatch
	}
	stageIndex := map[string]int{}
	stageNames := make([]string, len(s.stages))
	for i, st := range s.stages {
		stageIndex[st.v] = i
		stageNames[i] = st.v
		p.Stages = append(p.Stages, st.v)
	}
	jobNames := make([]string, len(s.jobs))
	for i, j := range s.jobs {
		jobNames[i] = j.name
	}

	// Stages.
	byStage := make([][]string, len(s.stages))
	for _, j := range s.jobs {
		if j.stage.node == nil {
			if len(s.stages) > 0 && j.needs == nil {
				d.add(ErrRequired, j.key, j.path+".stage", "job %q needs a stage (one of %s) or an explicit needs list", j.name, strings.Join(stageNames, ", "))
			}
			continue
		}
		i, ok := stageIndex[j.stage.v]
		switch {
		case ok:
			byStage[i] = append(byStage[i], j.name)
		case len(s.stages) == 0:
			d.add(ErrUnknownReference, j.stage.node, j.stage.path, "stage %q is used, but the pipeline declares no stages list", j.stage.v)
		default:
			d.add(ErrUnknownReference, j.stage.node, j.stage.path, "stage %q is not declared in stages (%s)%s", j.stage.v, strings.Join(stageNames, ", "), suggest(j.stage.v, stageNames))
		}
	}

	// Needs: explicit lists, else the jobs of the nearest earlier stage that has any.
	needs := map[string][]string{}
	needAt := map[[2]string]text{} // where each explicit edge was written
	for _, j := range s.jobs {
		if j.needs != nil {
			for _, n := range j.needs {
				other, ok := s.byName[n.v]
				switch {
				case n.v == j.name:
					d.add(ErrCycle, n.node, n.path, "job %q needs itself", j.name)
				case !ok:
					d.add(ErrUnknownNeed, n.node, n.path, "needs %q, but there is no such job%s", n.v, suggest(n.v, jobNames))
				case contains(needs[j.name], n.v):
					d.add(ErrInvalid, n.node, n.path, "%q is listed twice", n.v)
				case j.stage.node != nil && other.stage.node != nil && stageIndex[other.stage.v] > stageIndex[j.stage.v]:
					d.add(ErrInvalid, n.node, n.path, "needs %q of the later stage %q", n.v, other.stage.v)
				default:
					needs[j.name] = append(needs[j.name], n.v)
					needAt[[2]string{j.name, n.v}] = n
				}
			}
			continue
		}
		if j.stage.node == nil {
			continue
		}
		if i, ok := stageIndex[j.stage.v]; ok {
			for k := i - 1; k >= 0; k-- {
				if len(byStage[k]) > 0 {
					needs[j.name] = append([]string(nil), byStage[k]...)
					break
				}
			}
		}
	}
	waves, acyclic := d.waves(s, needs, needAt)

	// Expand matrices and build jobs.
	budget := d.limits.MaxJobs
	instances := map[string][]instance{}
	for _, j := range s.jobs {
		ins, ok := d.expand(j, budget)
		if !ok {
			continue
		}
		if len(ins) > budget {
			d.add(ErrLimit, j.key, j.path, "pipeline expands past the limit of %d jobs", d.limits.MaxJobs)
			break
		}
		budget -= len(ins)
		instances[j.name] = ins
	}
	type built struct {
		wave, order int
		job         *Job
	}
	var all []built
	for order, j := range s.jobs {
		ins, ok := instances[j.name]
		if !ok {
			continue
		}
		cond := d.condition(j, ins, needs[j.name], s.on)
		keys := matrixKeys(ins)
		stepConds := d.stepConditions(j, keys, needs[j.name], s.on)
		for _, in := range ins {
			job := d.buildJob(s, j, in, padMatrix(in, keys), needs[j.name], cond, stepConds)
			job.InputTypes = cond.InputTypes()
			job.NeedsNames = needs[j.name]
			for _, n := range needs[j.name] {
				for _, other := range instances[n] {
					job.Needs = append(job.Needs, other.key(n))
				}
			}
			job.Wave = waves[j.name]
			all = append(all, built{wave: job.Wave, order: order, job: job})
		}
	}
	if len(d.errs) > 0 || !acyclic {
		return nil
	}
	sort.SliceStable(all, func(a, b int) bool {
		if all[a].wave != all[b].wave {
			return all[a].wave < all[b].wave
		}
		return all[a].order < all[b].order
	})
	byKey := make(map[string]*Job, len(all))
	for _, b := range all {
		byKey[b.job.Key] = b.job
	}
	for _, b := range all {
		if len(b.job.Needs) > 0 {
			b.job.NoInputs = !slices.ContainsFunc(b.job.Needs, func(k string) bool { return byKey[k].Artifacts != nil })
		}
	}
	uniqueDisplayNames(all2jobs(len(all), func(i int) *Job { return all[i].job }))
	for _, b := range all {
		p.Jobs = append(p.Jobs, b.job)
		for len(p.Waves) <= b.wave {
			p.Waves = append(p.Waves, nil)
		}
		p.Waves[b.wave] = append(p.Waves[b.wave], b.job.Key)
	}
	return p
}

// waves finds cycles, naming each one, and otherwise gives every job its depth in the DAG.
func (d *decoder) waves(s *spec, needs map[string][]string, needAt map[[2]string]text) (map[string]int, bool) {
	const (
		unvisited = iota
		visiting
		done
	)
	state := map[string]int{}
	wave := map[string]int{}
	acyclic := true
	var stack []string
	var visit func(name string)
	visit = func(name string) {
		state[name] = visiting
		stack = append(stack, name)
		w := 0
		for _, n := range needs[name] {
			switch state[n] {
			case unvisited:
				visit(n)
			case visiting:
				acyclic = false
				d.reportCycle(s, stack, n, needAt)
				continue
			}
			if wave[n]+1 > w {
				w = wave[n] + 1
			}
		}
		wave[name] = w
		stack = stack[:len(stack)-1]
		state[name] = done
	}
	for _, j := range s.jobs {
		if state[j.name] == unvisited {
			visit(j.name)
		}
	}
	return wave, acyclic
}

// reportCycle names the cycle that closes at target, reporting it at the needs entry that
// leads from the cycle's first job (in document order) to the next.
func (d *decoder) reportCycle(s *spec, stack []string, target string, needAt map[[2]string]text) {
	i := len(stack) - 1
	for stack[i] != target {
		i--
	}
	cycle := append([]string(nil), stack[i:]...)
	// stack holds the path a -> b -> c where each needs the next; print it in the order
	// jobs run, so the message reads "c before b before a" as "a needs b needs c".
	first := 0
	for k := range cycle {
		if jobOrder(s, cycle[k]) < jobOrder(s, cycle[first]) {
			first = k
		}
	}
	cycle = append(cycle[first:], cycle[:first]...)
	names := append(append([]string(nil), cycle...), cycle[0])
	at := needAt[[2]string{cycle[0], cycle[1%len(cycle)]}]
	msg := "needs form a cycle: " + strings.Join(names, " -> ")
	if at.node == nil {
		j := s.byName[cycle[0]]
		d.add(ErrCycle, j.key, j.path+".needs", "%s", msg)
		return
	}
	d.add(ErrCycle, at.node, at.path, "%s", msg)
}

func jobOrder(s *spec, name string) int {
	for i, j := range s.jobs {
		if j.name == name {
			return i
		}
	}
	return len(s.jobs)
}

// condition compiles a job's if: once for all its instances.
func (d *decoder) condition(j *jobSpec, ins []instance, needNames []string, on *Triggers) *Condition {
	if j.cond.node == nil {
		return nil
	}
	src := strings.TrimSpace(j.cond.v)
	if src == "" {
		d.add(ErrRequired, j.cond.node, j.cond.path, "if: is empty")
		return nil
	}
	// A matrix value that some instances lack (an include entry's own key) reads as ""
	// in those, as on GitHub.
	scope := &condScope{needs: needNames, matrix: matrixKeys(ins), inputsFrom: d.inputsDeclarer()}
	if on != nil && on.Dispatch != nil && len(on.Dispatch.Inputs) > 0 {
		scope.inputs = on.Dispatch
	}
	c, err := compileCondition(src, scope)
	if err != nil {
		if at := runeOffsetToByte(src, err.offset); at < len(src) && src[at] == '=' && (at+1 == len(src) || src[at+1] != '=') &&
			(at == 0 || !strings.ContainsRune("=!<>", rune(src[at-1]))) {
			err.msg += "; compare with =="
		}
		lead := strings.Index(j.cond.v, src)
		d.addAt(err.kind, j.cond, lead+runeOffsetToByte(src, err.offset), "%s", err.msg)
		return nil
	}
	return c
}

func runeOffsetToByte(s string, runes int) int {
	for i := range s {
		if runes == 0 {
			return i
		}
		runes--
	}
	return len(s)
}

// stepConditions compiles the if: of each of a job's steps, once for all its instances;
// nil for a step without one.
func (d *decoder) stepConditions(j *jobSpec, keys, needNames []string, on *Triggers) []*Condition {
	out := make([]*Condition, len(j.steps))
	ids := []string{}
	for i, st := range j.steps {
		if st.testReport {
			// It says what it named whatever happened before it (testReportStep refuses
			// an if:).
			out[i], _ = compileCondition("always()", &condScope{})
		}
		if st.cond.node != nil {
			src := strings.TrimSpace(st.cond.v)
			if src == "" {
				d.add(ErrRequired, st.cond.node, st.cond.path, "if: is empty")
			} else {
				scope := &condScope{needs: needNames, matrix: keys, steps: append([]string{}, ids...), inputsFrom: d.inputsDeclarer()}
				if on != nil && on.Dispatch != nil && len(on.Dispatch.Inputs) > 0 {
					scope.inputs = on.Dispatch
				}
				c, err := compileCondition(src, scope)
				if err != nil {
					lead := strings.Index(st.cond.v, src)
					d.addAt(err.kind, st.cond, lead+runeOffsetToByte(src, err.offset), "%s", err.msg)
				}
				out[i] = c
			}
		}
		if st.id.node != nil {
			ids = append(ids, st.id.v)
		}
	}
	return out
}

// matrixKeys are the names of a job's matrix values, every instance's, in the order
// they first appear.
func matrixKeys(ins []instance) []string {
	var keys []string
	for _, in := range ins {
		for _, m := range in {
			if !contains(keys, m.Name) {
				keys = append(keys, m.Name)
			}
		}
	}
	return keys
}

// padMatrix gives an instance the keys it lacks, as "", for substitution.
func padMatrix(in instance, keys []string) instance {
	if len(in) == len(keys) {
		return in
	}
	out := append(instance(nil), in...)
	for _, k := range keys {
		if _, ok := lookupMatrix(in, k); !ok {
			out = append(out, MatrixValue{Name: k})
		}
	}
	return out
}

func all2jobs(n int, at func(int) *Job) []*Job {
	out := make([]*Job, n)
	for i := range out {
		out[i] = at(i)
	}
	return out
}

// uniqueDisplayNames makes display names that came out alike tell their jobs apart:
// a matrix instance gets its values after the name, any other job its key.
func uniqueDisplayNames(jobs []*Job) {
	count := map[string]int{}
	for _, j := range jobs {
		if j.DisplayName != "" {
			count[j.DisplayName]++
		}
	}
	taken := map[string]bool{}
	for _, j := range jobs {
		if j.DisplayName == "" || count[j.DisplayName] == 1 {
			continue
		}
		name := j.DisplayName + " [" + j.Key + "]"
		if len(j.Matrix) > 0 {
			name = j.DisplayName + " " + strings.TrimPrefix(j.Key, j.Name+" ")
		}
		if taken[name] {
			name = j.Key
		}
		taken[name] = true
		j.DisplayName = name
	}
}

// buildJob resolves one instance: settings layered over defaults, env, and substitution.
// padded is the instance with the matrix keys other instances have and it lacks, as "".
func (d *decoder) buildJob(s *spec, j *jobSpec, in, padded instance, needNames []string, cond *Condition, stepConds []*Condition) *Job {
	def, own := s.defaults, j.settings
	job := &Job{
		Key:             in.key(j.name),
		Name:            j.name,
		Matrix:          in,
		Stage:           j.stage.v,
		If:              cond,
		Priority:        PriorityNormal,
		Timeout:         Duration(DefaultTimeout),
		ContinueOnError: j.continueOnError,
		Network:         j.network,
		FailFast:        j.failFast && j.matrix != nil,
	}
	scope := &refScope{needs: needNames}
	d.refs = scope
	defer func() { d.refs = nil }()
	in = padded
	for _, v := range []*time.Duration{def.timeout, own.timeout} {
		if v != nil {
			job.Timeout = Duration(*v)
		}
	}
	for _, v := range []*time.Duration{def.cancelGrace, own.cancelGrace} {
		if v != nil {
			job.CancelGrace = Duration(*v)
		}
	}
	for _, v := range []Priority{def.priority, own.priority} {
		if v != "" {
			job.Priority = v
		}
	}
	for _, v := range []*int64{def.milliCPU, own.milliCPU} {
		if v != nil {
			job.Resources.MilliCPU = *v
		}
	}
	for _, v := range []*int64{def.memory, own.memory} {
		if v != nil {
			job.Resources.MemoryBytes = *v
		}
	}
	job.Retry = mergeRetry(def.retry, own.retry)
	job.Checkout = mergeCheckout(def.checkout, own.checkout)
	shell := DefaultShell
	for _, v := range []string{def.shell, own.shell} {
		if v != "" {
			shell = v
		}
	}

	// Each env layer may read the layers beneath it.
	env := map[string]string{}
	for _, layer := range [][]envVar{s.env, def.env, own.env} {
		next := make(map[string]string, len(env)+len(layer))
		for k, v := range env {
			next[k] = v
		}
		for _, v := range layer {
			next[v.name] = d.substituteEnv(v.value, in, env)
		}
		env = next
	}
	if len(env) > 0 {
		job.Env = env
	}

	labels := def.runsOn
	if own.runsOnSet {
		labels = own.runsOn
	}
	for _, l := range labels {
		v := d.substitute(l, in, env)
		if !labelPattern.MatchString(v) {
			d.add(ErrInvalid, l.node, l.path, "label %q: use letters, digits and . _ : / = -", v)
			continue
		}
		if !contains(job.RunsOn, v) {
			job.RunsOn = append(job.RunsOn, v)
		}
	}
	d.buildContainer(job, def, own, j, in, env)
	if j.concurrency != nil {
		job.Concurrency = &Concurrency{Group: d.concurrencyGroup(j.concurrency.group, in, env), CancelInProgress: j.concurrency.cancel}
	}
	if j.environment != nil {
		// Its url may read the job's steps, as its outputs do: it is evaluated when they
		// are done.
		scope.steps = stepIDs(j.steps)
		job.Environment = d.compileEnvironment(j.environment, in, env)
		scope.steps = nil
	}
	if j.artifacts != nil {
		a := &Artifacts{Name: d.substitute(j.artifacts.name, in, env), ExpireIn: Duration(j.artifacts.expireIn), When: j.artifacts.when}
		for _, p := range j.artifacts.paths {
			v := d.substitute(p, in, env)
			if msg := checkArtifactPath(v); msg != "" {
				d.add(ErrInvalid, p.node, p.path, "artifact path %q %s", v, msg)
				continue
			}
			a.Paths = append(a.Paths, v)
		}
		job.Artifacts = a
	}
	if j.reports != nil {
		job.Reports = d.compileReports(j.reports, in, env)
	}
	caches := def.caches
	if own.cachesSet {
		caches = own.caches
	}
	job.Caches = d.compileCaches(caches, in, env)
	for i, st := range j.steps {
		step := Step{
			Index:           i,
			Shell:           shell,
			Once:            st.once,
			ContinueOnError: st.continueOnError,
			Timeout:         Duration(st.timeout),
		}
		if st.shell != "" {
			step.Shell = st.shell
		}
		step.ID = st.id.v
		step.If = stepConds[i]
		scope.steps = stepIDs(j.steps[:i])
		stepEnv := env
		if len(st.env) > 0 {
			step.Env = map[string]string{}
			stepEnv = make(map[string]string, len(env)+len(st.env))
			for k, v := range env {
				stepEnv[k] = v
			}
			for _, v := range st.env {
				step.Env[v.name] = d.substituteEnv(v.value, in, env)
				stepEnv[v.name] = step.Env[v.name]
			}
		}
		step.Run = d.substituteRun(st.run, in, stepEnv)
		step.Name = d.substituteRun(st.name, in, stepEnv)
		if st.uses.node != nil {
			step.Uses = d.substitute(st.uses, in, stepEnv)
			if st.testReport {
				d.compileTestReportStep(job, &step, st, in, stepEnv)
			} else if len(st.with) > 0 {
				step.With = make(map[string]string, len(st.with))
				for _, v := range st.with {
					step.With[v.name] = d.substituteEnv(v.value, in, stepEnv)
				}
			}
			if step.Name == "" {
				step.Name = "Run " + step.Uses
			}
			if strings.HasPrefix(step.Uses, "docker://") && !contains(job.RunsOn, DockerLabel) {
				// A container of the image runs the step: only a worker with the docker
				// executor can.
				job.RunsOn = append(job.RunsOn, DockerLabel)
			}
		}
		if step.Name == "" {
			step.Name = defaultStepName(step.Run)
		}
		job.Steps = append(job.Steps, step)
		if step.If != nil && step.If.readsNeeds {
			scope.readsNeeds = true
		}
	}
	if j.displayName.node != nil {
		scope.steps = nil
		name, atClaim := d.jobName(j.displayName, in, env)
		job.DisplayName = name
		if atClaim {
			job.NameTemplate, job.DisplayName = name, readableName(name)
		}
	}
	if j.outputs != nil {
		scope.steps = stepIDs(j.steps)
		job.Outputs = make(map[string]string, len(j.outputs))
		for _, o := range j.outputs {
			job.Outputs[o.name] = d.substituteRun(o.value, in, env)
		}
	}
	job.ReadsNeeds = scope.readsNeeds
	return job
}

func stepIDs(steps []stepSpec) []string {
	ids := []string{}
	for _, st := range steps {
		if st.id.node != nil {
			ids = append(ids, st.id.v)
		}
	}
	return ids
}

func mergeRetry(layers ...retrySpec) RetryPolicy {
	r := DefaultRetry
	r.On = append([]FailureKind(nil), r.On...)
	for _, l := range layers {
		if l.maxAttempts != nil {
			r.MaxAttempts = *l.maxAttempts
		}
		if l.backoff != nil {
			r.Backoff = Duration(*l.backoff)
		}
		if l.maxBackoff != nil {
			r.MaxBackoff = Duration(*l.maxBackoff)
		}
		if l.onSet {
			r.On = append([]FailureKind(nil), l.on...)
		}
	}
	if r.MaxBackoff < r.Backoff {
		r.MaxBackoff = r.Backoff
	}
	return r
}

// defaultStepName names an unnamed step after the first line of its command.
func defaultStepName(run string) string {
	line := strings.TrimSpace(run)
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		line = strings.TrimSpace(line[:i]) + " ..."
	}
	if r := []rune(line); len(r) > 60 {
		line = string(r[:57])
		// A reference cut in half would be left as text; cut before it instead.
		if open := strings.LastIndex(line, "${{"); open > strings.LastIndex(line, "}}") {
			line = line[:open]
		}
		line += "..."
	}
	return line
}

// mergeCheckout layers a job's checkout keys over those of defaults; nil when the result
// is the default checkout, so that plans of definitions without checkout: do not change.
func mergeCheckout(def, own checkoutSpec) *Checkout {
	c := Checkout{}
	for _, l := range []checkoutSpec{def, own} {
		if l.enabled != nil {
			c.Skip = !*l.enabled
		}
		if l.depth != nil {
			c.Depth = *l.depth
		}
		if l.submodules != nil {
			c.Submodules = *l.submodules
		}
		if l.lfs != nil {
			c.LFS = *l.lfs
		}
		if l.path != nil {
			c.Path = *l.path
		}
	}
	if c.Skip {
		return &Checkout{Skip: true}
	}
	if c == (Checkout{}) {
		return nil
	}
	return &c
}
