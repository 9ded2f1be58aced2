package pipeline

import (
	"path"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gantry-ci/gantry/internal/lazyre"
)

// text is a string from the definition together with where it was written, so that later
// phases (substitution, references) can still point at it.
type text struct {
	v    string
	node *yaml.Node
	path string
}

type envVar struct {
	name  string
	value text
}

// spec is the decoded definition before planning. Optional settings are pointers or have
// a set flag so that defaults can be layered under job values.
type spec struct {
	name     string
	on       *Triggers
	env      []envVar
	stages   []text
	defaults settings
	jobs     []*jobSpec
	byName   map[string]*jobSpec
}

type settings struct {
	timeout, cancelGrace *time.Duration
	retry                retrySpec
	priority             Priority
	runsOn               []text
	runsOnSet            bool
	milliCPU, memory     *int64
	shell                string
	env                  []envVar
	checkout             checkoutSpec
	// caches are cache: as written; a job's replace those of defaults when cachesSet.
	caches    []cacheSpec
	cachesSet bool
	image     *text
	imageSet  bool
	container containerSpec
}

// checkoutSpec is a checkout: setting; each key left out is nil, so a job's keys layer
// over those of defaults one by one.
type checkoutSpec struct {
	enabled         *bool
	depth           *int
	submodules, lfs *bool
	path            *string
}

type retrySpec struct {
	maxAttempts         *int
	backoff, maxBackoff *time.Duration
	on                  []FailureKind
	onSet               bool
}

type jobSpec struct {
	name            string
	key             *yaml.Node
	path            string
	stage           text
	needs           []text
	cond            text
	matrix          *matrixSpec
	settings        settings
	steps           []stepSpec
	concurrency     *concurrencySpec
	environment     *environmentSpec
	artifacts       *artifactSpec
	reports         *reportSpec
	continueOnError bool
	network         bool
	services        []serviceSpec
	servicesPath    string
	// displayName is the job's name: template, shown instead of its key.
	displayName text
	// outputs are the job's declared outputs, in the order written; nil when it
	// declares none (then every output its steps write is the job's).
	outputs  []envVar
	failFast bool
}

// environmentSpec is a job's environment: as written, substituted at compile time.
type environmentSpec struct {
	name, url text
}

type stepSpec struct {
	path            string
	node            *yaml.Node
	name, run       text
	id, cond        text
	uses            text
	with            []envVar
	shell           string
	env             []envVar
	once            bool
	continueOnError bool
	timeout         time.Duration
	// testReport: the step uses gantry/test-report (testReportStep).
	testReport bool
}

type concurrencySpec struct {
	group  text
	cancel bool
}

type artifactSpec struct {
	name     text
	paths    []text
	expireIn time.Duration
	when     string
}

// reportSpec is a job's test reports: per format, the paths or globs of its files.
type reportSpec struct {
	paths [3][]text // by the index of the format in reportFormats
}

type matrixSpec struct {
	node             *yaml.Node
	path             string
	axes             []axis
	include, exclude []combo
}

type axis struct {
	name   string
	node   *yaml.Node
	values []text
}

type combo struct {
	node   *yaml.Node
	path   string
	values []MatrixValue
}

var (
	jobNamePattern   = lazyre.New(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,99}$`)
	stageNamePattern = lazyre.New(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,99}$`)
	envNamePattern   = lazyre.New(`^[A-Za-z_][A-Za-z0-9_-]*$`)
	axisNamePattern  = lazyre.New(`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`)
	labelPattern     = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._:/=-]{0,127}$`)
	// outputNamePattern is an output's name and a step's id: what ${{ steps.ID.outputs.NAME }}
	// and needs.JOB.outputs.NAME may name.
	outputNamePattern = lazyre.New(`^[A-Za-z_][A-Za-z0-9_-]{0,99}$`)
)

var (
	topKeys         = []string{"name", "on", "env", "stages", "defaults", "jobs"}
	defaultsKeys    = []string{"timeout", "retry", "priority", "runs_on", "resources", "env", "shell", "cancel_grace", "checkout", "cache", "image", "container"}
	jobKeys         = []string{"stage", "needs", "if", "matrix", "runs_on", "resources", "steps", "env", "timeout", "retry", "priority", "concurrency", "artifacts", "continue_on_error", "cancel_grace", "network", "shell", "checkout", "environment", "cache", "image", "services", "container", "name", "outputs", "fail_fast", "reports"}
	stepKeys        = []string{"name", "id", "if", "run", "uses", "with", "shell", "env", "once", "continue_on_error", "timeout"}
	retryKeys       = []string{"max_attempts", "backoff", "max_backoff", "on"}
	resourceKeys    = []string{"cpu", "memory"}
	concurrencyKeys = []string{"group", "cancel_in_progress"}
	environmentKeys = []string{"name", "url"}
	artifactKeys    = []string{"name", "paths", "expire_in", "when"}
	artifactWhens   = []string{ArtifactsOnSuccess, ArtifactsOnFailure, ArtifactsAlways}
	reportFormats   = []string{ReportJUnit, ReportGoTestJSON, ReportTAP}
	checkoutKeys    = []string{"depth", "submodules", "lfs", "path"}
	shells          = []string{"sh", "bash", "python3", "pwsh", "powershell", "cmd"}
	priorities      = []string{string(PriorityCritical), string(PriorityHigh), string(PriorityNormal), string(PriorityLow)}
	failureKinds    = []string{string(FailureExit), string(FailureLost), string(FailureTimeout), string(FailureFlaky)}
)

// decodeSpec walks the document root into a spec, collecting every error.
func (d *decoder) decodeSpec(root *yaml.Node) *spec {
	s := &spec{byName: map[string]*jobSpec{}}
	var jobsNode *yaml.Node
	visible := 0
	d.object(root, "", "the pipeline", topKeys, func(f field) {
		if isTemplateKey(f.key) {
			return // holds YAML anchors for reuse; not part of the schema
		}
		switch f.key {
		case "name":
			s.name, _ = d.str(f.val, f.path, "a pipeline name")
		case "on":
			s.on = d.on(f.val, f.path)
		case "env":
			s.env = d.env(f.val, f.path)
		case "stages":
			s.stages = d.stages(f.val, f.path)
		case "defaults":
			d.object(f.val, f.path, "defaults", defaultsKeys, func(g field) {
				d.setting(&s.defaults, g)
			})
		case "jobs":
			jobsNode = f.val
			for _, jf := range d.fields(f.val, f.path, "a mapping of job names to jobs") {
				if d.abort {
					break
				}
				if strings.HasPrefix(jf.key, ".") {
					continue // a hidden job: a template for merge keys, never run
				}
				visible++
				if !jobNamePattern.MatchString(jf.key) {
					d.add(ErrInvalid, jf.keyNode, jf.path, "job name %q: use letters, digits, '-' and '_' (at most 100)", jf.key)
					continue
				}
				j := d.job(jf)
				s.jobs = append(s.jobs, j)
				s.byName[j.name] = j
			}
		}
	})
	switch {
	case d.abort || root.Kind != yaml.MappingNode:
	case jobsNode == nil:
		d.add(ErrRequired, root, "jobs", "a pipeline needs a jobs mapping with at least one job")
	case visible == 0:
		if r := d.resolve(jobsNode); r != nil && r.Kind == yaml.MappingNode {
			d.add(ErrRequired, jobsNode, "jobs", "a pipeline needs at least one job (jobs whose names start with '.' are templates)")
		}
	}
	return s
}

// isTemplateKey reports top-level keys that exist only to hold YAML anchors: "x-"
// extension fields and "."-prefixed hidden keys.
func isTemplateKey(k string) bool {
	return strings.HasPrefix(k, "x-") || strings.HasPrefix(k, ".")
}

func (d *decoder) stages(n *yaml.Node, p string) []text {
	var out []text
	seen := map[string]bool{}
	for i, item := range d.items(n, p, "a list of stage names", false) {
		ip := indexPath(p, i)
		v, ok := d.str(item, ip, "a stage name")
		if !ok {
			continue
		}
		switch {
		case !stageNamePattern.MatchString(v):
			d.add(ErrInvalid, item, ip, "stage name %q: use letters, digits, '-' and '_'", v)
		case seen[v]:
			d.add(ErrDuplicateKey, item, ip, "stage %q is listed twice", v)
		default:
			seen[v] = true
			out = append(out, text{v: v, node: item, path: ip})
		}
	}
	return out
}

func (d *decoder) job(jf field) *jobSpec {
	j := &jobSpec{name: jf.key, key: jf.keyNode, path: jf.path}
	stepsSeen := false
	d.object(jf.val, jf.path, "job "+jf.key, jobKeys, func(f field) {
		switch f.key {
		case "stage":
			if v, ok := d.str(f.val, f.path, "a stage name"); ok {
				j.stage = text{v: v, node: f.val, path: f.path}
			}
		case "needs":
			j.needs = d.needs(f.val, f.path)
		case "if":
			if v, ok := d.str(f.val, f.path, "an expression"); ok {
				j.cond = text{v: v, node: d.resolve(f.val), path: f.path}
			}
		case "matrix":
			j.matrix = d.matrix(f.val, f.path)
		case "steps":
			stepsSeen = true
			items := d.items(f.val, f.path, "a list of steps", false)
			if len(items) == 0 && d.resolve(f.val) != nil && d.resolve(f.val).Kind == yaml.SequenceNode {
				d.add(ErrRequired, f.val, f.path, "a job needs at least one step")
			}
			for i, item := range items {
				if st, ok := d.step(item, indexPath(f.path, i)); ok {
					j.steps = append(j.steps, st)
				}
			}
		case "concurrency":
			j.concurrency = d.concurrency(f.val, f.path)
		case "environment":
			j.environment = d.environment(f.val, f.path)
		case "artifacts":
			j.artifacts = d.artifacts(f.val, f.path)
		case "reports":
			j.reports = d.reports(f.val, f.path)
		case "continue_on_error":
			j.continueOnError, _ = d.boolean(f.val, f.path)
		case "network":
			j.network, _ = d.boolean(f.val, f.path)
		case "services":
			j.servicesPath = f.path
			j.services = d.services(f.val, f.path)
		case "fail_fast":
			j.failFast, _ = d.boolean(f.val, f.path)
		case "name":
			if v, ok := d.str(f.val, f.path, "a job name"); ok {
				j.displayName = text{v: v, node: d.resolve(f.val), path: f.path}
			}
		case "outputs":
			j.outputs = d.outputs(f.val, f.path)
		default:
			d.setting(&j.settings, f)
		}
	})
	if !stepsSeen && !d.abort {
		if n := d.resolve(jf.val); n != nil && n.Kind == yaml.MappingNode {
			d.add(ErrRequired, jf.keyNode, jf.path+".steps", "job %q has no steps", jf.key)
		}
	}
	ids := map[string]bool{}
	for _, st := range j.steps {
		if st.id.node == nil {
			continue
		}
		if ids[st.id.v] {
			d.add(ErrDuplicateKey, st.id.node, st.id.path, "step id %q is used by an earlier step of this job", st.id.v)
		}
		ids[st.id.v] = true
	}
	return j
}

// outputs decodes a job's outputs: a mapping of names to values, which are usually
// ${{ steps.ID.outputs.NAME }}.
func (d *decoder) outputs(n *yaml.Node, p string) []envVar {
	out := []envVar{}
	for _, f := range d.fields(n, p, "a mapping of output names to values") {
		if d.abort {
			break
		}
		if !outputNamePattern.MatchString(f.key) {
			d.add(ErrInvalid, f.keyNode, f.path, "output name %q: use letters, digits, '-' and '_', not starting with a digit or '-'", f.key)
			continue
		}
		if s, ok := d.str(f.val, f.path, "a value"); ok {
			out = append(out, envVar{name: f.key, value: text{v: s, node: d.resolve(f.val), path: f.path}})
		}
	}
	return out
}

func (d *decoder) needs(n *yaml.Node, p string) []text {
	var out []text
	for i, item := range d.items(n, p, "a list of job names", true) {
		ip := indexPath(p, i)
		if v, ok := d.str(item, ip, "a job name"); ok {
			out = append(out, text{v: v, node: d.resolve(item), path: ip})
		}
	}
	if out == nil {
		out = []text{} // needs: [] is explicit and means "start at once", even in a stage
	}
	return out
}

// setting decodes the keys shared by defaults and jobs.
func (d *decoder) setting(s *settings, f field) {
	switch f.key {
	case "timeout":
		if v, ok := d.duration(f.val, f.path, true); ok {
			s.timeout = &v
		}
	case "cancel_grace":
		if v, ok := d.duration(f.val, f.path, false); ok {
			s.cancelGrace = &v
		}
	case "retry":
		d.retry(&s.retry, f.val, f.path)
	case "priority":
		if v, ok := d.enum(f.val, f.path, "a priority", priorities); ok {
			s.priority = Priority(v)
		}
	case "runs_on":
		s.runsOnSet = true
		s.runsOn = d.labels(f.val, f.path)
	case "resources":
		d.object(f.val, f.path, "resources", resourceKeys, func(g field) {
			v, ok := d.str(g.val, g.path, "an amount")
			if !ok {
				return
			}
			var amount int64
			var err error
			if g.key == "cpu" {
				amount, err = ParseCPU(v)
			} else {
				amount, err = ParseSize(v)
			}
			switch {
			case err != nil:
				d.add(ErrInvalid, g.val, g.path, "%v", err)
			case amount <= 0:
				d.add(ErrInvalid, g.val, g.path, "%s must be more than zero", g.key)
			case g.key == "cpu":
				s.milliCPU = &amount
			default:
				s.memory = &amount
			}
		})
	case "env":
		s.env = d.env(f.val, f.path)
	case "shell":
		s.shell, _ = d.shell(f.val, f.path)
	case "checkout":
		d.checkout(&s.checkout, f.val, f.path)
	case "cache":
		s.cachesSet = true
		s.caches = d.caches(f.val, f.path)
	case "image":
		s.imageSet = true
		s.image = d.image(f.val, f.path)
	case "container":
		d.container(&s.container, f.val, f.path)
	}
}

// maxCheckoutDepth bounds checkout.depth; a deeper history is as good as all of it.
const maxCheckoutDepth = 1_000_000

// checkout decodes `checkout: false`, `checkout: true` or a mapping of its options; a
// mapping turns the checkout on, whatever defaults say.
func (d *decoder) checkout(c *checkoutSpec, n *yaml.Node, p string) {
	r := d.resolve(n)
	if r == nil {
		return
	}
	if r.Kind != yaml.MappingNode {
		if r.Kind != yaml.ScalarNode || r.Tag != "!!bool" {
			d.typeError(n, r, p, "false, true or a mapping of depth, submodules, lfs and path")
			return
		}
		if v, ok := d.boolean(n, p); ok {
			c.enabled = &v
		}
		return
	}
	on := true
	c.enabled = &on
	d.object(r, p, "checkout", checkoutKeys, func(f field) {
		switch f.key {
		case "depth":
			if v, ok := d.integer(f.val, f.path, 0, maxCheckoutDepth); ok {
				c.depth = &v
			}
		case "submodules":
			if v, ok := d.boolean(f.val, f.path); ok {
				c.submodules = &v
			}
		case "lfs":
			if v, ok := d.boolean(f.val, f.path); ok {
				c.lfs = &v
			}
		case "path":
			v, ok := d.str(f.val, f.path, "a directory in the workspace")
			if !ok {
				return
			}
			if msg := checkCheckoutPath(v); msg != "" {
				d.add(ErrInvalid, f.val, f.path, "checkout path %q %s", v, msg)
				return
			}
			v = path.Clean(v)
			c.path = &v
		}
	})
}

// checkCheckoutPath rejects a checkout directory that is not strictly inside the job's
// workspace: the worker would otherwise write outside it, or over the whole of it.
func checkCheckoutPath(p string) string {
	switch {
	case strings.TrimSpace(p) == "":
		return "is empty; leave path out to check out at the workspace's root"
	case strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) || (len(p) > 1 && p[1] == ':'):
		return "must be relative to the workspace"
	case strings.Contains(p, `\`):
		return "must use / as separator"
	case strings.ContainsAny(p, "\x00\n\r"):
		return "must not hold control characters"
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "must not leave the workspace with .."
		}
	}
	if path.Clean(p) == "." {
		return "names the workspace itself; leave path out to check out at its root"
	}
	return ""
}

func (d *decoder) retry(r *retrySpec, n *yaml.Node, p string) {
	d.object(n, p, "retry", retryKeys, func(f field) {
		switch f.key {
		case "max_attempts":
			if v, ok := d.integer(f.val, f.path, 1, 100); ok {
				r.maxAttempts = &v
			}
		case "backoff":
			if v, ok := d.duration(f.val, f.path, false); ok {
				r.backoff = &v
			}
		case "max_backoff":
			if v, ok := d.duration(f.val, f.path, false); ok {
				r.maxBackoff = &v
			}
		case "on":
			r.onSet = true
			r.on = []FailureKind{}
			for i, item := range d.items(f.val, f.path, "a list of failure kinds", true) {
				if v, ok := d.enum(item, indexPath(f.path, i), "a failure kind", failureKinds); ok && !contains(kindsToStrings(r.on), v) {
					r.on = append(r.on, FailureKind(v))
				}
			}
		}
	})
}

func kindsToStrings(ks []FailureKind) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = string(k)
	}
	return out
}

func (d *decoder) enum(n *yaml.Node, p, what string, allowed []string) (string, bool) {
	v, ok := d.str(n, p, what)
	if !ok {
		return "", false
	}
	if !contains(allowed, v) {
		d.add(ErrInvalid, n, p, "%q is not %s; expected one of %s%s", v, what, strings.Join(allowed, ", "), suggest(v, allowed))
		return "", false
	}
	return v, true
}

// shell reads a shell: one of shells, or a command line with {0} where the path of a
// file holding the step's script goes (perl {0}, msys2 {0}); executor.ShellArgs runs it.
func (d *decoder) shell(n *yaml.Node, p string) (string, bool) {
	v, ok := d.str(n, p, "a shell")
	if !ok {
		return "", false
	}
	if !strings.Contains(v, "{0}") {
		return d.enum(n, p, "a shell (or a command with {0} for the script's file)", shells)
	}
	if first := strings.Fields(v); strings.Contains(first[0], "{0}") || strings.HasPrefix(first[0], "'") || strings.HasPrefix(first[0], `"`) {
		d.add(ErrInvalid, n, p, "shell %q: the command comes first, unquoted, and {0} after it, where the script file's path goes", v)
		return "", false
	}
	if strings.Count(v, "'")%2 != 0 || strings.Count(strings.ReplaceAll(v, "'", ""), `"`)%2 != 0 {
		d.add(ErrInvalid, n, p, "shell %q: a quote is not closed", v)
		return "", false
	}
	return v, true
}

func (d *decoder) duration(n *yaml.Node, p string, positive bool) (time.Duration, bool) {
	v, ok := d.str(n, p, "a duration such as 30s, 10m or 1h")
	if !ok {
		return 0, false
	}
	if r := d.resolve(n); r != nil && r.Tag == "!!int" && v != "0" {
		d.add(ErrInvalid, n, p, "%s has no unit; write %ss or %sm", v, v, v)
		return 0, false
	}
	dur, err := ParseDuration(v)
	if err != nil {
		d.add(ErrInvalid, n, p, "%v", err)
		return 0, false
	}
	if positive && dur <= 0 {
		d.add(ErrInvalid, n, p, "must be longer than zero")
		return 0, false
	}
	return dur, true
}

func (d *decoder) labels(n *yaml.Node, p string) []text {
	out := []text{}
	for i, item := range d.items(n, p, "a list of labels", true) {
		ip := indexPath(p, i)
		v, ok := d.str(item, ip, "a label")
		if !ok {
			continue
		}
		if !labelPattern.MatchString(v) && !strings.Contains(v, "${{") {
			d.add(ErrInvalid, item, ip, "label %q: use letters, digits and . _ : / = -", v)
			continue
		}
		out = append(out, text{v: v, node: d.resolve(item), path: ip})
	}
	return out
}

// actionInputs reads a step's with: the inputs of the action it uses, by name (names
// may hold '-', as action.yml's do).
func (d *decoder) actionInputs(n *yaml.Node, p string) []envVar {
	var out []envVar
	for _, f := range d.fields(n, p, "a mapping of action inputs to values") {
		if d.abort {
			break
		}
		if !actionInputPattern.MatchString(f.key) {
			d.add(ErrInvalid, f.keyNode, f.path, "input name %q: use letters, digits, '-' and '_', not starting with a digit or '-'", f.key)
			continue
		}
		v := d.resolve(f.val)
		if v == nil || v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			continue
		}
		if s, ok := d.str(v, f.path, "a value"); ok {
			out = append(out, envVar{name: f.key, value: text{v: s, node: v, path: f.path}})
		}
	}
	return out
}

// actionInputPattern is what an action's input may be called.
var actionInputPattern = lazyre.New(`^[A-Za-z_][A-Za-z0-9_-]*$`)

func (d *decoder) env(n *yaml.Node, p string) []envVar {
	var out []envVar
	for _, f := range d.fields(n, p, "a mapping of variable names to values") {
		if d.abort {
			break
		}
		switch {
		case !envNamePattern.MatchString(f.key):
			d.add(ErrInvalid, f.keyNode, f.path, "variable name %q: use letters, digits, '_' and '-', not starting with a digit or '-'", f.key)
			continue
		case strings.HasPrefix(strings.ToUpper(f.key), "GANTRY_"):
			d.add(ErrInvalid, f.keyNode, f.path, "variable names starting with GANTRY_ are reserved for Gantry")
			continue
		}
		v := d.resolve(f.val)
		if v == nil {
			continue
		}
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			out = append(out, envVar{name: f.key, value: text{node: v, path: f.path}})
			continue
		}
		if s, ok := d.str(v, f.path, "a value"); ok {
			out = append(out, envVar{name: f.key, value: text{v: s, node: v, path: f.path}})
		}
	}
	return out
}

func (d *decoder) step(n *yaml.Node, p string) (stepSpec, bool) {
	st := stepSpec{path: p, node: n}
	d.object(n, p, "a step", stepKeys, func(f field) {
		switch f.key {
		case "name":
			if v, ok := d.str(f.val, f.path, "a step name"); ok {
				st.name = text{v: v, node: f.val, path: f.path}
			}
		case "run":
			if v, ok := d.str(f.val, f.path, "a command"); ok {
				st.run = text{v: v, node: d.resolve(f.val), path: f.path}
			}
		case "uses":
			if v, ok := d.str(f.val, f.path, "an action, as in owner/repo@v1 or ./dir"); ok {
				st.uses = text{v: v, node: d.resolve(f.val), path: f.path}
				if err := CheckUses(v); err != nil {
					d.add(ErrInvalid, f.val, f.path, "%v", err)
				}
			}
		case "with":
			st.with = d.actionInputs(f.val, f.path)
		case "id":
			if v, ok := d.str(f.val, f.path, "a step id"); ok {
				if !outputNamePattern.MatchString(v) {
					d.add(ErrInvalid, f.val, f.path, "step id %q: use letters, digits, '-' and '_', not starting with a digit or '-'", v)
					return
				}
				st.id = text{v: v, node: d.resolve(f.val), path: f.path}
			}
		case "if":
			if v, ok := d.str(f.val, f.path, "an expression"); ok {
				st.cond = text{v: v, node: d.resolve(f.val), path: f.path}
			}
		case "shell":
			st.shell, _ = d.shell(f.val, f.path)
		case "env":
			st.env = d.env(f.val, f.path)
		case "once":
			st.once, _ = d.boolean(f.val, f.path)
		case "continue_on_error":
			st.continueOnError, _ = d.boolean(f.val, f.path)
		case "timeout":
			st.timeout, _ = d.duration(f.val, f.path, true)
		}
	})
	if st.uses.node != nil {
		if st.run.node != nil {
			d.add(ErrInvalid, st.uses.node, p+".uses", "a step has either uses or run, not both")
			return st, false
		}
		if st.shell != "" {
			d.add(ErrInvalid, st.uses.node, p+".shell", "shell: belongs to a run step; an action says how it runs")
		}
		d.testReportStep(&st)
		return st, true
	}
	if st.with != nil {
		d.add(ErrInvalid, n, p+".with", "with: belongs to a step that uses an action")
	}
	if r := d.resolve(n); r != nil && r.Kind == yaml.MappingNode && strings.TrimSpace(st.run.v) == "" && !d.abort {
		if st.run.node == nil {
			d.add(ErrRequired, n, p+".run", "a step needs a run command or uses: an action")
		} else {
			d.add(ErrRequired, st.run.node, p+".run", "run command is empty")
		}
		return st, false
	}
	return st, st.run.node != nil
}

func (d *decoder) concurrency(n *yaml.Node, p string) *concurrencySpec {
	r := d.resolve(n)
	if r == nil {
		return nil
	}
	c := &concurrencySpec{}
	if r.Kind == yaml.ScalarNode {
		v, ok := d.str(r, p, "a group name or a mapping")
		if !ok {
			return nil
		}
		c.group = text{v: v, node: r, path: p}
	} else {
		d.object(r, p, "concurrency", concurrencyKeys, func(f field) {
			switch f.key {
			case "group":
				if v, ok := d.str(f.val, f.path, "a group name"); ok {
					c.group = text{v: v, node: d.resolve(f.val), path: f.path}
				}
			case "cancel_in_progress":
				c.cancel, _ = d.boolean(f.val, f.path)
			}
		})
	}
	if strings.TrimSpace(c.group.v) == "" {
		if r.Kind == yaml.MappingNode || c.group.node != nil {
			d.add(ErrRequired, r, p+".group", "concurrency needs a group name")
		}
		return nil
	}
	return c
}

// environment reads `environment: NAME` or `environment: {name: NAME, url: URL}`.
func (d *decoder) environment(n *yaml.Node, p string) *environmentSpec {
	r := d.resolve(n)
	if r == nil {
		return nil
	}
	e := &environmentSpec{}
	if r.Kind == yaml.ScalarNode {
		v, ok := d.str(r, p, "an environment name or a mapping")
		if !ok {
			return nil
		}
		e.name = text{v: v, node: r, path: p}
	} else {
		d.object(r, p, "environment", environmentKeys, func(f field) {
			switch f.key {
			case "name":
				if v, ok := d.str(f.val, f.path, "an environment name"); ok {
					e.name = text{v: v, node: d.resolve(f.val), path: f.path}
				}
			case "url":
				if v, ok := d.str(f.val, f.path, "a URL"); ok {
					e.url = text{v: v, node: d.resolve(f.val), path: f.path}
				}
			}
		})
	}
	if strings.TrimSpace(e.name.v) == "" {
		if r.Kind == yaml.MappingNode || e.name.node != nil {
			d.add(ErrRequired, r, p+".name", "environment needs a name")
		}
		return nil
	}
	return e
}

func (d *decoder) artifacts(n *yaml.Node, p string) *artifactSpec {
	r := d.resolve(n)
	if r == nil {
		return nil
	}
	a := &artifactSpec{}
	pathsAt := p
	if r.Kind == yaml.SequenceNode {
		a.paths = d.workspacePaths(r, p, "artifact")
	} else {
		pathsAt = p + ".paths"
		d.object(r, p, "artifacts", artifactKeys, func(f field) {
			switch f.key {
			case "name":
				if v, ok := d.str(f.val, f.path, "an artifact name"); ok {
					a.name = text{v: v, node: f.val, path: f.path}
				}
			case "paths":
				a.paths = d.workspacePaths(f.val, f.path, "artifact")
			case "expire_in":
				a.expireIn, _ = d.duration(f.val, f.path, true)
			case "when":
				a.when, _ = d.enum(f.val, f.path, "when artifacts are kept", artifactWhens)
			}
		})
	}
	if len(a.paths) == 0 {
		if r.Kind == yaml.MappingNode || r.Kind == yaml.SequenceNode {
			d.add(ErrRequired, r, pathsAt, "artifacts need at least one path")
		}
		return nil
	}
	return a
}

// reports decodes a job's reports: a mapping of format to the paths or globs of its
// files, each a list or one string.
func (d *decoder) reports(n *yaml.Node, p string) *reportSpec {
	r := d.resolve(n)
	if r == nil {
		return nil
	}
	rs := &reportSpec{}
	some := false
	d.object(r, p, "reports", reportFormats, func(f field) {
		i := slices.Index(reportFormats, f.key)
		rs.paths[i] = d.workspacePaths(f.val, f.path, "report")
		some = some || len(rs.paths[i]) > 0
	})
	if !some {
		// A mapping with keys has had its mistakes told already.
		if r.Kind == yaml.MappingNode && len(r.Content) == 0 {
			d.add(ErrRequired, r, p, "reports need at least one path of a format: %s", strings.Join(reportFormats, ", "))
		}
		return nil
	}
	return rs
}

// workspacePaths decodes a list of paths or globs of files in the job's workspace (one
// string is a list of one); what names the files in errors.
func (d *decoder) workspacePaths(n *yaml.Node, p, what string) []text {
	var out []text
	for i, item := range d.items(n, p, "a list of paths", true) {
		ip := indexPath(p, i)
		v, ok := d.str(item, ip, "a path or glob")
		if !ok {
			continue
		}
		if msg := checkArtifactPath(v); msg != "" {
			d.add(ErrInvalid, item, ip, "%s path %q %s", what, v, msg)
			continue
		}
		out = append(out, text{v: v, node: d.resolve(item), path: ip})
	}
	return out
}

// checkArtifactPath rejects paths that could name files outside the job's workspace and
// glob patterns that cannot match anything.
func checkArtifactPath(p string) string {
	switch {
	case strings.TrimSpace(p) == "":
		return "is empty"
	case strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) || (len(p) > 1 && p[1] == ':'):
		return "must be relative to the workspace"
	case strings.Contains(p, `\`):
		return "must use / as separator"
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "must not leave the workspace with .."
		}
		if seg == "**" {
			continue
		}
		if _, err := path.Match(seg, ""); err != nil {
			return "is not a valid glob pattern"
		}
	}
	return ""
}

func (d *decoder) matrix(n *yaml.Node, p string) *matrixSpec {
	r := d.resolve(n)
	if r == nil {
		return nil
	}
	m := &matrixSpec{node: r, path: p}
	for _, f := range d.fields(r, p, "a mapping of matrix axes to lists of values") {
		if d.abort {
			return nil
		}
		switch f.key {
		case "include", "exclude":
			var combos []combo
			for i, item := range d.items(f.val, f.path, "a list of mappings", false) {
				if c, ok := d.combo(item, indexPath(f.path, i)); ok {
					combos = append(combos, c)
				}
			}
			if f.key == "include" {
				m.include = combos
			} else {
				m.exclude = combos
			}
		default:
			if !axisNamePattern.MatchString(f.key) {
				d.add(ErrInvalid, f.keyNode, f.path, "matrix axis %q: use letters, digits, '-' and '_'", f.key)
				continue
			}
			ax := axis{name: f.key, node: f.keyNode}
			seen := map[string]bool{}
			for i, item := range d.items(f.val, f.path, "a list of values", false) {
				ip := indexPath(f.path, i)
				v, ok := d.str(item, ip, "a value")
				if !ok {
					continue
				}
				if seen[v] {
					d.add(ErrInvalid, item, ip, "value %q is listed twice", v)
					continue
				}
				seen[v] = true
				ax.values = append(ax.values, text{v: v, node: d.resolve(item), path: ip})
			}
			if len(ax.values) == 0 {
				if rv := d.resolve(f.val); rv != nil && rv.Kind == yaml.SequenceNode {
					d.add(ErrRequired, f.val, f.path, "matrix axis %q has no values", f.key)
				}
				continue
			}
			m.axes = append(m.axes, ax)
		}
	}
	return m
}

func (d *decoder) combo(n *yaml.Node, p string) (combo, bool) {
	c := combo{node: d.resolve(n), path: p}
	fs := d.fields(n, p, "a mapping of matrix axes to values")
	for _, f := range fs {
		v, ok := d.str(f.val, f.path, "a value")
		if !ok {
			return c, false
		}
		c.values = append(c.values, MatrixValue{Name: f.key, Value: v})
	}
	if len(c.values) == 0 {
		if c.node != nil && c.node.Kind == yaml.MappingNode {
			d.add(ErrRequired, n, p, "an empty entry matches nothing")
		}
		return c, false
	}
	return c, true
}
