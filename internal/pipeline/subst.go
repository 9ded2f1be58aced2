package pipeline

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/gantry-ci/gantry/internal/ghaexpr"
	"github.com/gantry-ci/gantry/internal/lazyre"
)

var refPattern = lazyre.New(`^(matrix|env|secrets|inputs|pr|workflow_run)\.([A-Za-z_][A-Za-z0-9_-]*)$`)

// runNames are the run's own values that ${{ }} may name bare, besides inputs.X and pr.X:
// they are known only when a run is created (see Job.WithRunValues).
var runNames = []string{"ref", "branch", "tag", "sha", "event", "repository"}

// runRefPattern finds the canonical run-time references a plan keeps (what runRef writes).
var runRefPattern = lazyre.New(`\$\{\{ (ref|branch|tag|sha|event|repository|inputs\.[A-Za-z_][A-Za-z0-9_-]*|pr\.(?:number|fork)|workflow_run\.(?:id|name|number|action|conclusion|branch|sha)) \}\}`)

func runRef(name string) string { return "${{ " + name + " }}" }

// needsRefPattern and stepsRefPattern are what a job may read of the jobs it needs and
// of its earlier steps: kept in the plan, written canonically, and put in when the job
// is claimed (needs, WithNeeds) or when the step runs (steps, on the worker).
var (
	needsRefPattern = lazyre.New(`^needs\.([A-Za-z0-9_][A-Za-z0-9_-]*)\.outputs\.([A-Za-z_][A-Za-z0-9_-]*)$`)
	stepsRefPattern = lazyre.New(`^steps\.([A-Za-z_][A-Za-z0-9_-]*)\.(outputs\.([A-Za-z_][A-Za-z0-9_-]*)|outcome|conclusion)$`)
	// NeedsRefs and StepsRefs find those references as the plan keeps them.
	needsRefs = lazyre.New(`\$\{\{ needs\.([A-Za-z0-9_][A-Za-z0-9_-]*)\.outputs\.([A-Za-z_][A-Za-z0-9_-]*) \}\}`)
	stepsRefs = lazyre.New(`\$\{\{ steps\.([A-Za-z_][A-Za-z0-9_-]*)\.(outputs\.[A-Za-z_][A-Za-z0-9_-]*|outcome|conclusion) \}\}`)
)

// refScope is what ${{ needs.X.outputs.Y }} and ${{ steps.X... }} may name where text is
// being substituted: the job's needs, and the ids of the steps before this one (nil
// where steps cannot be read).
type refScope struct {
	needs []string
	steps []string
	// readsNeeds is set once a needs reference was kept.
	readsNeeds bool
}

// substitute replaces every ${{ matrix.NAME }} and ${{ env.NAME }} in t. Anything else
// inside ${{ }} is an error: these are resolved when the plan is made, and a reference that
// cannot be resolved then would otherwise reach a shell as literal text.
func (d *decoder) substitute(t text, matrix []MatrixValue, env map[string]string) string {
	return d.substituteRefs(t, matrix, env, false, false)
}

// concurrencyGroup substitutes a job's concurrency group: matrix and env values now, the
// run's own values (${{ ref }} ...) and GitHub expressions of what the trigger tells
// (WorkerExpr, RunCreationExprError) when a run is created (Job.WithRunValues). What a
// job or step makes is not known then, and is refused.
func (d *decoder) concurrencyGroup(t text, matrix []MatrixValue, env map[string]string) string {
	return d.replaceRefs(t, func(offset int, inner string) string {
		if expr, ok := decodeWorkerExpr(inner); ok && strings.HasPrefix(inner, workerExprPrefix) {
			if msg := RunCreationExprError(expr); msg != "" {
				d.addAt(ErrUnknownReference, t, offset, "%s", msg)
			}
			return "${{ " + inner + " }}"
		}
		if strings.HasPrefix(inner, "needs.") || strings.HasPrefix(inner, "steps.") {
			d.addAt(ErrUnknownReference, t, offset, "${{ %s }} is not known when a run is created, when its concurrency group is decided", inner)
			return ""
		}
		sub := text{v: "${{ " + inner + " }}", node: t.node, path: t.path}
		return d.substituteRun(sub, matrix, env)
	})
}

// substituteRun is substitute for a step's run and name, where the run's own values
// (${{ ref }}, ${{ inputs.NAME }}, ${{ pr.number }} ...) may also stand: they are kept as
// references, written canonically, and resolved when a run of the plan is created.
func (d *decoder) substituteRun(t text, matrix []MatrixValue, env map[string]string) string {
	return d.substituteRefs(t, matrix, env, false, true)
}

// substituteEnv is substitute for an env value, where ${{ secrets.NAME }} may also stand:
// it is kept as a reference, written canonically, and resolved only by the worker that
// claims the job, so no secret's value is ever part of a plan. The run's own values may
// stand there too, as in substituteRun.
func (d *decoder) substituteEnv(t text, matrix []MatrixValue, env map[string]string) string {
	return d.substituteRefs(t, matrix, env, true, true)
}

// replaceRefs rewrites each ${{ ... }} of t to what repl makes of its trimmed inner text
// (given with its offset in t, for errors) and keeps the text around them. An unclosed
// ${{ is an error, and t is kept as it is.
func (d *decoder) replaceRefs(t text, repl func(offset int, inner string) string) string {
	s := t.v
	if !strings.Contains(s, "${{") {
		return s
	}
	var b strings.Builder
	for {
		start := strings.Index(s, "${{")
		if start < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:start])
		offset := len(t.v) - len(s) + start
		end := strings.Index(s[start:], "}}")
		if end < 0 {
			d.addAt(ErrInvalid, t, offset, "${{ is not closed with }}")
			return t.v
		}
		inner := strings.TrimSpace(s[start+3 : start+end])
		s = s[start+end+2:]
		b.WriteString(repl(offset, inner))
	}
}

func (d *decoder) substituteRefs(t text, matrix []MatrixValue, env map[string]string, secrets, runValues bool) string {
	return d.replaceRefs(t, func(offset int, inner string) string {
		var b strings.Builder
		if strings.HasPrefix(inner, workerExprPrefix) {
			return d.keepWorkerExpr(t, offset, inner, runValues)
		}
		m := refPattern.FindStringSubmatch(inner)
		if kept, ok := d.jobRef(t, offset, inner, runValues); ok {
			return kept
		}
		switch {
		case contains(runNames, inner) || (m != nil && (m[1] == "inputs" || m[1] == "pr" || m[1] == "workflow_run")):
			if !runValues {
				d.addAt(ErrUnknownReference, t, offset, "${{ %s }} is known only when a run is created and may stand only in a step's run and name and in env values", inner)
			} else if msg := d.checkRunRef(m); msg != "" {
				d.addAt(ErrUnknownReference, t, offset, "%s", msg)
			}
			b.WriteString(runRef(inner))
		case m == nil:
			d.addAt(ErrUnknownReference, t, offset, "${{ %s }} is not a reference Gantry can resolve; use ${{ matrix.<axis> }}, ${{ env.<NAME> }}, ${{ inputs.<name> }}, ${{ pr.number }}, ${{ pr.fork }}, ${{ workflow_run.<field> }} or one of ${{ %s }}%s",
				inner, strings.Join(runNames, " }}, ${{ "), suggest(inner, append(append([]string(nil), runNames...), "pr.number", "pr.fork")))
		case m[1] == "matrix":
			v, ok := lookupMatrix(matrix, m[2])
			if !ok {
				d.addAt(ErrUnknownReference, t, offset, "%s", missingMatrixMessage(m[2], matrix))
			}
			b.WriteString(v)
		case m[1] == "secrets":
			switch {
			case !secrets:
				d.addAt(ErrUnknownReference, t, offset, "${{ secrets.%s }} may only stand in an env value; set it in env and read it in the step as $%s", m[2], m[2])
			case !ValidSecretName(m[2]):
				d.addAt(ErrInvalid, t, offset, "secrets.%s: a secret's name is upper case letters, digits and _, not starting with a digit", m[2])
			}
			b.WriteString(SecretRef(m[2]))
		default:
			v, ok := env[m[2]]
			if !ok {
				d.addAt(ErrUnknownReference, t, offset, "env.%s is not set here%s", m[2], suggest(m[2], sortedKeys(env)))
			}
			if !secrets && len(SecretRefs(v)) > 0 {
				d.addAt(ErrInvalid, t, offset, "env.%s holds a secret, which is resolved only when the job runs; read it in the step as $%s", m[2], m[2])
				v = ""
			}
			if !runValues && (needsRefs.MatchString(v) || stepsRefs.MatchString(v)) {
				d.addAt(ErrInvalid, t, offset, "env.%s holds a value known only when the job runs, which may stand only in a step's run and name and in env values", m[2])
				v = ""
			}
			if !runValues && runRefPattern.MatchString(v) {
				d.addAt(ErrInvalid, t, offset, "env.%s holds a value known only when a run is created, which may stand only in a step's run and name and in env values", m[2])
				v = ""
			}
			b.WriteString(v)
		}
		return b.String()
	})
}

// keepWorkerExpr keeps an expression for the worker (WorkerExpr) where text is put in
// when a step runs; a job that reads needs in one reads what its needs left.
func (d *decoder) keepWorkerExpr(t text, offset int, inner string, runValues bool) string {
	expr, ok := decodeWorkerExpr(inner)
	switch {
	case !ok:
		d.addAt(ErrInvalid, t, offset, "${{ %s }} is not an expression Gantry kept", inner)
	case !runValues:
		d.addAt(ErrUnknownReference, t, offset, "${{ %s }} is evaluated when a step runs, so it may stand only in a step's run and name, env values and outputs", expr)
	case d.refs != nil && strings.Contains(expr, "needs"):
		d.refs.readsNeeds = true
	}
	return "${{ " + inner + " }}"
}

// jobRef handles needs.JOB.outputs.NAME and steps.ID.outputs.NAME (.outcome,
// .conclusion): it reports whether inner is one, and gives the reference to keep.
func (d *decoder) jobRef(t text, offset int, inner string, runValues bool) (string, bool) {
	if !strings.HasPrefix(inner, "needs.") && !strings.HasPrefix(inner, "steps.") {
		return "", false
	}
	scope := d.refs
	if m := needsRefPattern.FindStringSubmatch(inner); m != nil {
		switch {
		case !runValues || scope == nil:
			d.addAt(ErrUnknownReference, t, offset, "${{ %s }} is known only when the job starts and may stand only in the job's name, a step's run and name, env values, outputs and an environment's url", inner)
		case !contains(scope.needs, m[1]):
			msg := fmt.Sprintf("this job does not need %q, so it cannot read its outputs", m[1])
			if len(scope.needs) > 0 {
				msg += " (needs: " + strings.Join(scope.needs, ", ") + ")" + suggest(m[1], scope.needs)
			}
			d.addAt(ErrUnknownReference, t, offset, "%s", msg)
		default:
			scope.readsNeeds = true
		}
		return runRef(inner), true
	}
	if m := stepsRefPattern.FindStringSubmatch(inner); m != nil {
		switch {
		case !runValues || scope == nil || scope.steps == nil:
			d.addAt(ErrUnknownReference, t, offset, "${{ %s }} may stand only in a step's run, name and env and in the job's outputs and environment url", inner)
		case !contains(scope.steps, m[1]):
			msg := fmt.Sprintf("no step before this one has id %q", m[1])
			if len(scope.steps) > 0 {
				msg += " (ids: " + strings.Join(scope.steps, ", ") + ")" + suggest(m[1], scope.steps)
			}
			d.addAt(ErrUnknownReference, t, offset, "%s", msg)
		}
		return runRef(inner), true
	}
	d.addAt(ErrUnknownReference, t, offset, "${{ %s }}: read needs.<job>.outputs.<name> or steps.<id>.outputs.<name>, .outcome or .conclusion", inner)
	return runRef(inner), true
}

// checkRunRef checks inputs.NAME against the definition's on: dispatch inputs, when it
// declares any, and pr.FIELD against the fields pr has; m is nil for a bare name.
func (d *decoder) checkRunRef(m []string) string {
	if m == nil {
		return ""
	}
	if m[1] == "pr" {
		if !contains(prFields, m[2]) {
			return fmt.Sprintf("pr has no field %q (has: %s)%s", m[2], strings.Join(prFields, ", "), suggest(m[2], prFields))
		}
		return ""
	}
	if m[1] == "workflow_run" {
		if !contains(workflowRunFields, m[2]) {
			return fmt.Sprintf("workflow_run has no field %q (has: %s)%s", m[2], strings.Join(workflowRunFields, ", "), suggest(m[2], workflowRunFields))
		}
		return ""
	}
	if d.dispatch == nil || len(d.dispatch.Inputs) == 0 {
		return ""
	}
	if _, ok := d.dispatch.Input(m[2]); ok {
		return ""
	}
	names := make([]string, len(d.dispatch.Inputs))
	for i, in := range d.dispatch.Inputs {
		names[i] = in.Name
	}
	return fmt.Sprintf("%s declares no input %q (has: %s)%s", d.inputsDeclarer(), m[2], strings.Join(names, ", "), suggest(m[2], names))
}

// WithRunValues gives the job with the run's own values put in for the references its
// steps' run and name, its env values and its environment's url keep (see
// substituteRun): ref, branch, tag, sha,
// event and repository as the trigger has them, inputs.NAME as the dispatch gave it (""
// when not given), pr.number ("" outside a pull request) and pr.fork (true or false). The
// job is copied only when it holds such a reference. A value that holds ${{, or makes it
// with the text around it, is an error: put in, it would be read as a reference (to a
// secret, at worst) by what reads the text next (insertText).
func (j *Job) WithRunValues(in ConditionInput) (*Job, error) {
	if !j.hasRunRefs() {
		return j, nil
	}
	var bad error
	resolve := func(s string) string {
		if !strings.Contains(s, "${{") {
			return s
		}
		var names []string
		out, ok := insertText(s, runRefPattern, func(ref string) string {
			name := strings.TrimSuffix(strings.TrimPrefix(ref, "${{ "), " }}")
			names = append(names, name)
			return in.runValue(name)
		})
		if !ok && bad == nil {
			bad = fmt.Errorf("job %s: the value of %s holds ${{, or makes it with the text around it, which Gantry would read as a reference; read it in the step from its GANTRY_ variable instead", j.Key, strings.Join(names, ", "))
		}
		return out
	}
	out := *j
	out.Env = resolveMap(j.Env, resolve)
	out.Outputs = resolveMap(j.Outputs, resolve)
	out.Steps = make([]Step, len(j.Steps))
	for i, st := range j.Steps {
		st.Run, st.Name = resolve(st.Run), resolve(st.Name)
		st.Env = resolveMap(st.Env, resolve)
		st.With = resolveMap(st.With, resolve)
		out.Steps[i] = st
	}
	if j.Environment != nil && (j.Environment.URL != "" || j.Environment.URLTemplate != "") {
		e := *j.Environment
		e.URL, e.URLTemplate = resolve(e.URL), resolve(e.URLTemplate)
		out.Environment = &e
	}
	if j.Concurrency != nil && strings.Contains(j.Concurrency.Group, "${{") {
		c := *j.Concurrency
		group, err := ExpandWorkerExprs(resolve(c.Group), func(expr string) (string, error) {
			v, err := ghaexpr.EvalString(expr, in.githubContext(j.Env, j.Matrix))
			if err != nil {
				return "", fmt.Errorf("job %s: concurrency group: ${{ %s }}: %w", j.Key, expr, err)
			}
			return ghaexpr.ToString(v), nil
		})
		if err != nil && bad == nil {
			bad = err
		}
		c.Group = group
		out.Concurrency = &c
	}
	if len(j.Caches) > 0 {
		out.Caches = make([]Cache, len(j.Caches))
		for i, c := range j.Caches {
			c.Key = resolve(c.Key)
			c.RestoreKeys = append([]string(nil), c.RestoreKeys...)
			for k, rk := range c.RestoreKeys {
				c.RestoreKeys[k] = resolve(rk)
			}
			out.Caches[i] = c
		}
	}
	if bad != nil {
		return nil, bad
	}
	return &out, nil
}

func (j *Job) hasRunRefs() bool {
	has := func(s string) bool { return strings.Contains(s, "${{") && runRefPattern.MatchString(s) }
	for _, v := range j.Env {
		if has(v) {
			return true
		}
	}
	for _, c := range j.Caches {
		if has(c.Key) || slices.ContainsFunc(c.RestoreKeys, has) {
			return true
		}
	}
	if j.Environment != nil && (has(j.Environment.URL) || has(j.Environment.URLTemplate)) {
		return true
	}
	if j.Concurrency != nil && strings.Contains(j.Concurrency.Group, "${{") {
		return true
	}
	for _, v := range j.Outputs {
		if has(v) {
			return true
		}
	}
	for _, st := range j.Steps {
		if has(st.Run) || has(st.Name) {
			return true
		}
		for _, v := range st.Env {
			if has(v) {
				return true
			}
		}
		for _, v := range st.With {
			if has(v) {
				return true
			}
		}
	}
	return false
}

func resolveMap(m map[string]string, resolve func(string) string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = resolve(v)
	}
	return out
}

// runValue is the text of a run-time reference's value.
func (in ConditionInput) runValue(name string) string {
	switch name {
	case "ref":
		return in.Ref
	case "branch":
		return in.Branch
	case "tag":
		return in.Tag
	case "sha":
		return in.SHA
	case "event":
		return in.Event
	case "repository":
		return in.Repository
	case "pr.number":
		if in.PRNumber == 0 {
			return ""
		}
		return strconv.Itoa(in.PRNumber)
	case "pr.fork":
		return strconv.FormatBool(in.Fork)
	}
	if field, ok := strings.CutPrefix(name, "workflow_run."); ok {
		return in.WorkflowRun.value(field)
	}
	return in.Inputs[strings.TrimPrefix(name, "inputs.")]
}

func lookupMatrix(matrix []MatrixValue, name string) (string, bool) {
	for _, m := range matrix {
		if m.Name == name {
			return m.Value, true
		}
	}
	return "", false
}

func missingMatrixMessage(name string, matrix []MatrixValue) string {
	if len(matrix) == 0 {
		return "matrix." + name + " is used, but this job has no matrix"
	}
	names := make([]string, len(matrix))
	for i, m := range matrix {
		names[i] = m.Name
	}
	return "matrix." + name + " is not an axis of this job (axes: " + strings.Join(names, ", ") + ")" + suggest(name, names)
}

// addAt reports an error at a byte offset inside a scalar. The column is exact for scalars
// written on one line; for block scalars the scalar's own position is used.
func (d *decoder) addAt(kind ErrorKind, t text, offset int, format string, args ...any) {
	d.add(kind, t.node, t.path, format, args...)
	e := d.errs[len(d.errs)-1]
	e.Line, e.Column = positionIn(t.node, t.v, offset)
}

func positionIn(n *yaml.Node, value string, offset int) (line, col int) {
	if n == nil {
		return 0, 0
	}
	line, col = n.Line, n.Column
	if strings.Contains(value, "\n") || offset < 0 || offset > len(value) {
		return line, col
	}
	switch n.Style {
	case 0:
	case yaml.DoubleQuotedStyle, yaml.SingleQuotedStyle:
		col++
	default:
		return line, col
	}
	return line, col + utf8.RuneCountInString(value[:offset])
}

// Limits on what a job leaves its dependants: at most MaxOutputs outputs of at most
// MaxOutputBytes together (names and values).
const (
	MaxOutputs     = 256
	MaxOutputBytes = 1 << 20
)

// CheckOutputs says what is wrong with a job's outputs, or nil: too many or too large,
// a name ${{ needs.JOB.outputs.NAME }} could not read, or a value holding ${{, which
// would be read as a reference (to a secret, at worst) where it is put in.
func CheckOutputs(outputs map[string]string) error {
	return checkOutputs(outputs, true)
}

// CheckStepOutputs is CheckOutputs for what a step leaves the steps after it: a value may
// hold ${{ there, as on GitHub, because the worker puts it in as text
// (RunValues.Expand). Passed on as the job's, it is refused then.
func CheckStepOutputs(outputs map[string]string) error {
	return checkOutputs(outputs, false)
}

func checkOutputs(outputs map[string]string, refuseRefs bool) error {
	if len(outputs) > MaxOutputs {
		return fmt.Errorf("%d outputs, more than the limit of %d", len(outputs), MaxOutputs)
	}
	size := 0
	for _, name := range sortedKeys(outputs) {
		v := outputs[name]
		size += len(name) + len(v)
		switch {
		case !outputNamePattern.MatchString(name):
			return fmt.Errorf("output name %q: use letters, digits, '-' and '_', not starting with a digit or '-' (at most 100)", name)
		case refuseRefs && strings.Contains(v, "${{"):
			return fmt.Errorf("output %s holds ${{, which Gantry would read as a reference where it is put in", name)
		case !utf8.ValidString(v):
			return fmt.Errorf("output %s is not UTF-8 text", name)
		}
	}
	if size > MaxOutputBytes {
		return fmt.Errorf("outputs take %d bytes, more than the limit of %d", size, MaxOutputBytes)
	}
	return nil
}

// insertText replaces each match of refs in s by value's text for it, and says whether
// the result holds ${{ only where s does outside those refs. The text is read for
// references again after this (the worker's expressions, a step's outputs, secrets), so
// a value that holds ${{, or makes it with the text around it ($ before a value that
// starts {{, or one value after another), would be read as one: to a secret, at worst.
func insertText(s string, refs *lazyre.Regexp, value func(ref string) string) (string, bool) {
	n := 0
	out := refs.ReplaceAllStringFunc(s, func(ref string) string {
		n++
		return value(ref)
	})
	return out, strings.Count(out, "${{") == strings.Count(s, "${{")-n
}

// WithNeeds gives the job with ${{ needs.JOB.outputs.NAME }} put in from outputs (by
// need name; a name a need did not set is ""), in its env, its steps' run, name and env,
// its outputs and its environment's url template. The job is copied only when it reads
// any. (Its name: is ClaimedName's.) Outputs that make ${{ with the text around them
// where they are put in are an error (insertText); CheckOutputs refused any that holds
// it when its job ended.
func (j *Job) WithNeeds(outputs map[string]map[string]string) (*Job, error) {
	if !j.ReadsNeeds {
		return j, nil
	}
	var bad error
	resolve := func(s string) string {
		if !strings.Contains(s, "${{ needs.") {
			return s
		}
		var names []string
		out, ok := insertText(s, needsRefs, func(ref string) string {
			m := needsRefs.FindStringSubmatch(ref)
			names = append(names, m[1]+".outputs."+m[2])
			return outputs[m[1]][m[2]]
		})
		if !ok && bad == nil {
			bad = fmt.Errorf("needs.%s: put in where the job reads it, it makes ${{ with the text around it, which Gantry would read as a reference; set an env value to it alone and read that variable in the step instead", strings.Join(names, ", needs."))
		}
		return out
	}
	out := *j
	out.Env = resolveMap(j.Env, resolve)
	out.Outputs = resolveMap(j.Outputs, resolve)
	out.Steps = make([]Step, len(j.Steps))
	for i, st := range j.Steps {
		st.Run, st.Name = resolve(st.Run), resolve(st.Name)
		st.Env = resolveMap(st.Env, resolve)
		st.With = resolveMap(st.With, resolve)
		out.Steps[i] = st
	}
	if j.Environment != nil && j.Environment.URLTemplate != "" {
		e := *j.Environment
		e.URLTemplate = resolve(e.URLTemplate)
		out.Environment = &e
	}
	if bad != nil {
		return nil, fmt.Errorf("job %s: %w", j.Key, bad)
	}
	return &out, nil
}
