package pipeline

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gantry-ci/gantry/internal/ghaexpr"
)

// The GitHub Actions front end. A workflow is translated, node by node, into a definition
// in Gantry's own language, which the one compiler then decodes and plans: the two front
// ends share every check, the matrix expansion and the DAG. Translated nodes keep the
// line and column of what they came from, and paths in errors are written back into the
// workflow's own (jobs.test.strategy.matrix, not jobs.test.matrix), so a mistake is
// reported where it was written.

// isWorkflowPath reports a file under .github/workflows, which is a workflow whatever it
// holds.
func isWorkflowPath(p string) bool {
	p = "/" + strings.ReplaceAll(p, `\`, "/")
	return strings.Contains(p, "/.github/workflows/")
}

// isWorkflow reports a document written for GitHub Actions: one with a step that uses
// an action, or with on: (which GitHub requires) and runs-on in every job (which GitHub
// requires of every job that is not a reusable workflow call). Gantry's language spells
// the key runs_on, so a Gantry definition with a slip of runs-on in one job is still
// read as Gantry's and told about it; and a job with a key only Gantry's language has
// (gantryOnlyJobKeys, which a converted workflow's every job has) makes the document
// Gantry's, whatever actions its steps use.
func isWorkflow(root *yaml.Node) bool {
	jobs := mappingValue(root, "jobs")
	if jobs == nil || jobs.Kind != yaml.MappingNode || len(jobs.Content) == 0 {
		return false
	}
	for i := 1; i < len(jobs.Content); i += 2 {
		for _, k := range gantryOnlyJobKeys {
			if jobs.Content[i].Kind == yaml.MappingNode && mappingValue(jobs.Content[i], k) != nil {
				return false
			}
		}
	}
	every := mappingValue(root, "on") != nil
	for i := 1; i < len(jobs.Content); i += 2 {
		j := jobs.Content[i]
		if j.Kind != yaml.MappingNode {
			every = false
			continue
		}
		if mappingValue(j, "runs-on") == nil && mappingValue(j, "uses") == nil {
			every = false
		}
		if steps := mappingValue(j, "steps"); steps != nil && steps.Kind == yaml.SequenceNode {
			for _, st := range steps.Content {
				if st.Kind == yaml.MappingNode && mappingValue(st, "uses") != nil {
					return true
				}
			}
		}
	}
	return every
}

// gantryOnlyJobKeys are keys of a job in Gantry's language that no GitHub workflow's job
// has.
var gantryOnlyJobKeys = []string{"runs_on", "checkout", "timeout", "fail_fast", "continue_on_error", "artifacts", "cache", "reports"}

// IsWorkflow reports whether Compile reads src, given as the file at path, as a GitHub
// Actions workflow rather than as a definition in Gantry's language.
func IsWorkflow(src []byte, path string) bool {
	if isWorkflowPath(path) {
		return true
	}
	d := &decoder{limits: DefaultLimits}
	root := d.parseDocument(src)
	return root != nil && d.checkShape(root, 0) && isWorkflow(root)
}

// mappingValue is the value of key in a mapping node written out (no aliases followed),
// or nil.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// GitHub Actions keys the front end reads, and those it accepts and ignores because they
// only mean something on GitHub.
var (
	ghaTopKeys      = []string{"name", "run-name", "on", "env", "defaults", "jobs", "permissions", "concurrency"}
	ghaDefaultsKeys = []string{"run"}
	ghaRunKeys      = []string{"shell", "working-directory"}
	ghaJobKeys      = []string{"name", "runs-on", "needs", "if", "strategy", "timeout-minutes", "continue-on-error", "env", "defaults",
		"concurrency", "outputs", "environment", "services", "container", "steps", "permissions", "uses", "with", "secrets"}
	ghaStrategyKeys = []string{"matrix", "fail-fast", "max-parallel"}
	ghaStepKeys     = []string{"name", "id", "run", "shell", "env", "if", "working-directory", "timeout-minutes", "continue-on-error", "uses", "with"}
	ghaConcKeys     = []string{"group", "cancel-in-progress"}
	ghaEnvKeys      = []string{"name", "url"}
	// ghaEvents are the events of on: that Gantry receives (workflow_dispatch is its
	// dispatch; workflow_run its runs of the project's pipelines ending); the rest need
	// GitHub and are dropped.
	ghaEvents = []string{"push", "pull_request", "schedule", "workflow_dispatch", "dispatch", "workflow_run"}
)

// ghaTranslator holds what translating one workflow needs across jobs.
type ghaTranslator struct {
	d        *decoder
	workflow string // the workflow's name, for github.workflow
	env      []string
	shell    ghaShell
	workDir  *yaml.Node
	// jobs are the workflow's job ids, in order, and uploads the artifact name each job's
	// upload-artifacts keep.
	jobs    []string
	uploads map[string][]string
	// inputs are the types of the workflow_dispatch inputs, so if: reads a boolean input
	// as the boolean it is.
	inputs map[string]string
	// renames maps a path of the translated definition to the path it was written at in
	// the workflow; paths in the compiler's errors are rewritten through it.
	renames map[string]string
	// exprRunsOn are the jobs whose runs-on holds an expression, by id.
	exprRunsOn map[string]ghaRunsOn
	// exprNames are the jobs whose name: is evaluated per instance, by id.
	exprNames map[string]ghaLabelExpr
	// settingExprs are the timeout-minutes and continue-on-error expressions of each job
	// (gha_settings.go), by id; pendingSettings those of the step being translated.
	settingExprs map[string][]ghaSettingExpr
	// evaluatedShells are the shells that shell expressions came to, by job id and
	// step, for gantry convert (gha_settings.go).
	evaluatedShells map[string]map[int][]ghaShell
	pendingSettings []ghaSettingExpr
	// pendingRenames are renames of the step being translated, each a path below the
	// step's in the translation and the workflow's path it was written at, made once
	// the step's index is known.
	pendingRenames [][2]string
	// objectAxes are the axes of mappings of each job's matrix, whose values are indexes
	// (gha_matrix.go), by id.
	objectAxes map[string][]string
	// dynamic are the jobs whose matrix is computed from their needs' outputs, by id,
	// and dynamicUses the actions their steps name (gha_dynmatrix.go).
	dynamic     map[string][]ghaDynExpr
	dynamicUses map[string][]string
	// calls is what expanding calls of reusable workflows keeps (gha_call.go); nil for a
	// workflow that makes none.
	calls *callState
	// reusable is set for a workflow whose on: has workflow_call (gha_reusable.go), and
	// warnings are what checking it as called leaves for the plan.
	reusable *ghaReusable
	warnings []*Error
}

// gNode makes a node of the translated definition at the position of at.
func gNode(kind yaml.Kind, tag, value string, at *yaml.Node) *yaml.Node {
	n := &yaml.Node{Kind: kind, Tag: tag, Value: value}
	if at != nil {
		n.Line, n.Column = at.Line, at.Column
	}
	if kind == yaml.ScalarNode && strings.Contains(value, "\n") {
		n.Style = yaml.LiteralStyle
	}
	return n
}

func gStr(v string, at *yaml.Node) *yaml.Node { return gNode(yaml.ScalarNode, "!!str", v, at) }
func gMap(at *yaml.Node) *yaml.Node           { return gNode(yaml.MappingNode, "!!map", "", at) }
func gSeq(at *yaml.Node) *yaml.Node           { return gNode(yaml.SequenceNode, "!!seq", "", at) }
func gBool(v bool, at *yaml.Node) *yaml.Node {
	return gNode(yaml.ScalarNode, "!!bool", strconv.FormatBool(v), at)
}
func gInt(v int, at *yaml.Node) *yaml.Node {
	return gNode(yaml.ScalarNode, "!!int", strconv.Itoa(v), at)
}

// put adds key: val to the mapping m; the key takes the position of keyAt.
func put(m *yaml.Node, key string, keyAt, val *yaml.Node) {
	m.Content = append(m.Content, gStr(key, keyAt), val)
}

// rename records that the translated path to was written at from in the workflow.
func (t *ghaTranslator) rename(to, from string) {
	if to != from {
		t.renames[to] = from
	}
}

// originalPath writes a path of the translated definition as the workflow has it: the
// longest renamed prefix, at a segment boundary, is replaced.
func (t *ghaTranslator) originalPath(p string) string {
	for q := p; q != ""; {
		if from, ok := t.renames[q]; ok {
			return from + p[len(q):]
		}
		i := strings.LastIndexAny(q, ".[")
		if i < 0 {
			break
		}
		q = q[:i]
	}
	return p
}

// workflow translates a workflow's root node into a definition in Gantry's language.
// Errors are added to the decoder at the workflow's own paths; nil means nothing usable.
func (d *decoder) workflow(root *yaml.Node) (*yaml.Node, *ghaTranslator) {
	t := &ghaTranslator{d: d, shell: ghaShell{name: "bash"}, uploads: map[string][]string{}, renames: map[string]string{}, inputs: map[string]string{},
		exprRunsOn: map[string]ghaRunsOn{}, objectAxes: map[string][]string{}, exprNames: map[string]ghaLabelExpr{},
		settingExprs: map[string][]ghaSettingExpr{}}
	out := gMap(root)
	if d.resolve(root) == nil || root.Kind != yaml.MappingNode {
		d.typeError(root, root, "", "a workflow: a mapping with on and jobs")
		return nil, t
	}
	var jobsNode *yaml.Node
	var on, env *yaml.Node
	var onKey, envKey *yaml.Node
	d.object(root, "", "a workflow", ghaTopKeys, func(f field) {
		switch f.key {
		case "name":
			if v, ok := d.str(f.val, f.path, "a workflow name"); ok {
				t.workflow = v
				put(out, "name", f.keyNode, gStr(v, f.val))
			}
		case "on":
			on, onKey = f.val, f.keyNode
		case "env":
			env, envKey = f.val, f.keyNode
		case "defaults":
			t.defaults(f, &t.shell, &t.workDir)
		case "jobs":
			jobsNode = f.val
		}
	})
	if d.abort {
		return nil, t
	}
	if on != nil {
		t.reusable = t.readReusable(on)
		if n := t.on(on, "on"); n != nil {
			put(out, "on", onKey, n)
		}
	}
	if env != nil {
		if n := t.envMap(env, "env", nil, nil); n != nil {
			put(out, "env", envKey, n)
			for i := 0; i < len(n.Content); i += 2 {
				t.env = append(t.env, n.Content[i].Value)
			}
		}
	}
	// GitHub gives a job six hours unless it says otherwise.
	defaults := gMap(root)
	put(defaults, "timeout", root, gStr("6h", root))
	put(out, "defaults", root, defaults)
	if jobsNode == nil {
		d.add(ErrRequired, root, "jobs", "a workflow needs a jobs mapping with at least one job")
		return nil, t
	}
	fields := d.fields(jobsNode, "jobs", "a mapping of job ids to jobs")
	for _, jf := range fields {
		if !jobNamePattern.MatchString(jf.key) {
			d.add(ErrInvalid, jf.keyNode, jf.path, "job id %q: use letters, digits, '-' and '_' (at most 100)", jf.key)
		}
	}
	if len(d.errs) > 0 {
		return nil, t
	}
	// Calls of reusable workflows are replaced by the jobs of the workflows they call.
	entries := t.expandCalls(fields)
	if d.abort {
		return nil, t
	}
	for _, e := range entries {
		t.jobs = append(t.jobs, e.f.key)
	}
	// upload-artifact names are read first, so download-artifact can be checked against
	// the jobs a job needs whatever their order in the file.
	for _, e := range entries {
		t.scanUploads(e.f)
	}
	expanded := make([]field, len(entries))
	for i, e := range entries {
		expanded[i] = e.f
	}
	t.findDynamicMatrices(expanded)
	t.refuseCalledDynamicMatrices()
	jobs := gMap(jobsNode)
	for _, e := range entries {
		if d.abort {
			return nil, t
		}
		if j := t.scopedJob(e); j != nil {
			if t.dynamic[e.f.key] != nil {
				j = t.placeholder(e.f, j)
			}
			put(jobs, e.f.key, e.f.keyNode, j)
		}
	}
	if len(jobs.Content) == 0 && len(fields) > 0 {
		// Every job was refused, and said why: a definition with no jobs would only be
		// refused again for having none.
		return nil, t
	}
	put(out, "jobs", jobsNode, jobs)
	return out, t
}

// defaults reads defaults: {run: {shell, working-directory}}.
func (t *ghaTranslator) defaults(f field, shell *ghaShell, dir **yaml.Node) {
	d := t.d
	d.object(f.val, f.path, "defaults", ghaDefaultsKeys, func(g field) {
		d.object(g.val, g.path, "defaults.run", ghaRunKeys, func(h field) {
			switch h.key {
			case "shell":
				if v, ok := t.shellName(h.val, h.path); ok {
					*shell = v
				}
			case "working-directory":
				if _, ok := d.str(h.val, h.path, "a directory"); ok {
					*dir = d.resolve(h.val)
				}
			}
		})
	})
}

// ghaShell is the shell of a run step: one of Gantry's, and a first line of its script
// that sets the shell options a custom shell of GitHub's (bash {0}) asks for where they
// differ from those Gantry runs the shell with.
type ghaShell struct {
	name    string // sh, bash, python3, pwsh, powershell, cmd or a command with {0}
	prelude string // "" or a set line ending in a newline
	// file says the shell runs the script as a file (pwsh, cmd, perl {0}): Gantry writes
	// nothing into the script, in a language it does not know.
	file bool
	// expr is a shell given by an expression (${{ matrix.x && 'msys2 {0}' || 'bash' }}),
	// without its ${{ }}: decided for each instance of the matrix (gha_settings.go).
	expr     string
	exprNode *yaml.Node
	exprPath string
}

// shellName maps a GitHub shell to one of Gantry's.
func (t *ghaTranslator) shellName(n *yaml.Node, p string) (ghaShell, bool) {
	v, ok := t.d.str(n, p, "a shell")
	if !ok {
		return ghaShell{}, false
	}
	if strings.Contains(v, "${{") {
		return t.shellExpr(v, t.d.resolve(n), p)
	}
	sh, msg := ghaShellOf(v)
	if msg != "" {
		t.d.add(ErrInvalid, n, p, "%s", msg)
		return ghaShell{}, false
	}
	return sh, true
}

// ghaShellOf maps a shell as GitHub reads it to Gantry's, or says why it cannot.
func ghaShellOf(v string) (ghaShell, string) {
	switch v {
	case "bash", "sh":
		return ghaShell{name: v}, ""
	case "python":
		return ghaShell{name: "python3"}, ""
	case "pwsh", "powershell", "cmd":
		// Run where the worker has them (the step fails naming the program where it
		// does not): GitHub runs cmd and powershell on Windows only.
		return ghaShell{name: v, file: true}, ""
	}
	if sh, ok := shellTemplate(v); ok {
		return sh, ""
	}
	if strings.Contains(v, "{0}") {
		if first := strings.Fields(v)[0]; !strings.Contains(first, "{0}") && !strings.ContainsAny(first[:1], `'"`) &&
			strings.Count(v, "'")%2 == 0 && strings.Count(strings.ReplaceAll(v, "'", ""), `"`)%2 == 0 {
			return ghaShell{name: v, file: true}, ""
		}
		return ghaShell{}, fmt.Sprintf("shell %q: write the command first and {0}, where the script file's path goes, after it, with every quote closed", v)
	}
	return ghaShell{}, fmt.Sprintf("shell %q is not supported; Gantry runs steps with bash, sh, python, pwsh, powershell, cmd, or a command with {0} for the script's file (perl {0})", v)
}

// shellExpr reads a shell given by an expression, which is decided for each instance of
// the matrix when the plan is made and so may read matrix values and literals only.
func (t *ghaTranslator) shellExpr(v string, r *yaml.Node, p string) (ghaShell, bool) {
	src := strings.TrimSpace(v)
	inner := strings.TrimSuffix(strings.TrimPrefix(src, "${{"), "}}")
	if !strings.HasPrefix(src, "${{") || !strings.HasSuffix(src, "}}") || strings.Contains(inner, "${{") {
		t.d.add(ErrInvalid, r, p, "shell: write a shell, or one expression in ${{ }}")
		return ghaShell{}, false
	}
	e, err := ghaexpr.Parse(inner)
	if err != nil {
		t.d.add(ErrExpression, r, p, "%v", err)
		return ghaShell{}, false
	}
	for _, ref := range ghaexpr.Refs(e) {
		if !strings.EqualFold(ref.Context, "matrix") {
			t.d.add(ErrExpression, r, p, "shell is decided for each instance of the matrix when the plan is made, so an expression there may read matrix and literals only, not %s", ref.Context)
			return ghaShell{}, false
		}
	}
	return ghaShell{name: DefaultShell, expr: inner, exprNode: r, exprPath: p}, true
}

// shellTemplate reads a custom shell, COMMAND [OPTIONS] {0}, whose command is one Gantry
// runs: bash, sh or python. GitHub runs bash as bash -eo pipefail and sh as sh -e, but a
// template runs with the options it names and no others: bash {0}, which a step writes to
// go on past a failing command and read its exit status, has neither -e nor pipefail.
// Gantry always starts bash with -e -o pipefail and sh with -e, so the difference is a
// first line of the script: set +e +o pipefail for bash {0}. Options that would change
// what the shell reads before the script (-l, --rcfile) are not accepted.
func shellTemplate(v string) (ghaShell, bool) {
	words := strings.Fields(v)
	if len(words) < 2 || words[len(words)-1] != "{0}" {
		return ghaShell{}, false
	}
	cmd, args := words[0], words[1:len(words)-1]
	switch cmd {
	case "python", "python3":
		return ghaShell{name: "python3"}, len(args) == 0
	case "bash", "sh":
	default:
		return ghaShell{}, false
	}
	errexit, pipefail := false, false
	var on []string // -u, -x, -v in the order given
	for i := 0; i < len(args); i++ {
		a := args[i]
		if cmd == "bash" && (a == "--noprofile" || a == "--norc") {
			continue // bash -c, as Gantry starts it, reads no startup files either
		}
		if len(a) < 2 || a[0] != '-' {
			return ghaShell{}, false
		}
		for k, c := range a[1:] {
			switch c {
			case 'e':
				errexit = true
			case 'u', 'x', 'v':
				on = append(on, "-"+string(c))
			case 'o':
				// -o takes the next word; only the last letter of a group may be o.
				if k != len(a)-2 || i+1 >= len(args) || args[i+1] != "pipefail" || cmd != "bash" {
					return ghaShell{}, false
				}
				pipefail = true
				i++
			default:
				return ghaShell{}, false
			}
		}
	}
	var set []string
	if !errexit {
		set = append(set, "+e")
	}
	if cmd == "bash" && !pipefail {
		set = append(set, "+o pipefail")
	}
	set = append(set, on...)
	sh := ghaShell{name: cmd}
	if len(set) > 0 {
		sh.prelude = "set " + strings.Join(set, " ") + "\n"
	}
	return sh, true
}

// on copies the triggers Gantry receives. Events that only GitHub sends are dropped; a
// workflow left with none runs only when dispatched.
func (t *ghaTranslator) on(n *yaml.Node, p string) *yaml.Node {
	d := t.d
	r := d.resolve(n)
	if r == nil {
		return nil
	}
	switch r.Kind {
	case yaml.ScalarNode, yaml.SequenceNode:
		out := gSeq(r)
		items := d.items(n, p, "an event name, a list of event names or a mapping of events", true)
		for i, item := range items {
			v, ok := d.str(item, indexPath(p, i), "an event name")
			if ok && contains(ghaEvents, v) {
				out.Content = append(out.Content, gStr(v, d.resolve(item)))
			}
		}
		if len(out.Content) == 0 && len(items) > 0 {
			out.Content = append(out.Content, gStr("dispatch", r))
		}
		return out
	case yaml.MappingNode:
		out := gMap(r)
		for _, f := range d.fields(n, p, "a mapping of events") {
			if !contains(ghaEvents, f.key) {
				continue
			}
			val := t.plain(f.val)
			if f.key == "pull_request" && val != nil && val.Kind == yaml.MappingNode {
				val = t.prFilters(val)
			}
			if (f.key == "workflow_dispatch" || f.key == "dispatch") && val != nil && val.Kind == yaml.MappingNode {
				val = t.dispatch(val, f.path)
			}
			put(out, f.key, f.keyNode, val)
		}
		if len(out.Content) == 0 {
			dispatch := gNode(yaml.ScalarNode, "!!null", "", r)
			if rs := t.reusable; rs != nil && rs.checked && len(rs.declared) > 0 {
				// Checked as called: ${{ inputs.NAME }} is checked against what
				// workflow_call declares, and if: reads a boolean input as one.
				dispatch = gMap(r)
				put(dispatch, "inputs", r, rs.dispatchInputs(r))
				t.d.inputsFrom = "on.workflow_call.inputs"
				for _, name := range rs.declared {
					t.inputs[name] = rs.inputs[strings.ToLower(name)].typ
				}
			}
			put(out, "dispatch", r, dispatch)
		}
		return out
	}
	d.typeError(n, r, p, "an event name, a list of event names or a mapping of events")
	return nil
}

// prFilters drops pull request activity types Gantry never sees (labeled, ...).
func (t *ghaTranslator) prFilters(n *yaml.Node) *yaml.Node {
	out := gMap(n)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], t.d.resolve(n.Content[i+1])
		if k.Value == "types" && v != nil && v.Kind == yaml.SequenceNode {
			kept := gSeq(v)
			for _, item := range v.Content {
				if item.Kind == yaml.ScalarNode && contains(pullRequestTypes, item.Value) {
					kept.Content = append(kept.Content, item)
				}
			}
			if len(kept.Content) == 0 {
				kept.Content = append(kept.Content, gStr(PullRequestOpened, v))
			}
			v = kept
		}
		out.Content = append(out.Content, k, v)
	}
	return out
}

// dispatch keeps workflow_dispatch inputs, an environment input read as a string.
func (t *ghaTranslator) dispatch(n *yaml.Node, p string) *yaml.Node {
	d := t.d
	out := gMap(n)
	for _, f := range d.fields(n, p, "workflow_dispatch") {
		if f.key != "inputs" {
			continue // GitHub has nothing else here
		}
		inputs := gMap(d.resolve(f.val))
		for _, in := range d.fields(f.val, f.path, "a mapping of input names to inputs") {
			r := d.resolve(in.val)
			if r == nil || r.Kind != yaml.MappingNode {
				inputs.Content = append(inputs.Content, in.keyNode, t.plain(in.val))
				continue
			}
			m := gMap(r)
			t.inputs[in.key] = string(InputString)
			for i := 0; i+1 < len(r.Content); i += 2 {
				k, v := r.Content[i], r.Content[i+1]
				if k.Value == "type" && v.Kind == yaml.ScalarNode {
					t.inputs[in.key] = v.Value
				}
				if k.Value == "type" && v.Kind == yaml.ScalarNode && v.Value == "environment" {
					v = gStr(string(InputString), v)
				}
				m.Content = append(m.Content, k, t.plain(v))
			}
			inputs.Content = append(inputs.Content, in.keyNode, m)
		}
		put(out, "inputs", f.keyNode, inputs)
	}
	return out
}

// scanUploads records the names a job's upload-artifact steps keep.
func (t *ghaTranslator) scanUploads(jf field) {
	j := t.d.resolve(jf.val)
	steps := t.d.resolve(mappingValue(j, "steps"))
	if steps == nil || steps.Kind != yaml.SequenceNode {
		return
	}
	for _, st := range steps.Content {
		st = t.d.resolve(st)
		uses := t.d.resolve(mappingValue(st, "uses"))
		if uses == nil || actionName(uses.Value) != "actions/upload-artifact" {
			continue
		}
		name := "artifact"
		if n := t.d.resolve(mappingValue(t.d.resolve(mappingValue(st, "with")), "name")); n != nil && n.Kind == yaml.ScalarNode {
			name = n.Value
		}
		t.uploads[jf.key] = append(t.uploads[jf.key], name)
	}
}

// actionName is an action's owner/name without its @version.
func actionName(uses string) string {
	if i := strings.IndexByte(uses, '@'); i >= 0 {
		uses = uses[:i]
	}
	return strings.ToLower(strings.TrimSpace(uses))
}

// jobSetting translates a setting of a job that a reusable workflow checked on its own
// may take as decided when it is called (decidedWhenCalled); services are translated
// after the rest.
func (t *ghaTranslator) jobSetting(j *ghaJob, f field) {
	switch f.key {
	case "name":
		t.jobName(j, f)
	case "runs-on":
		t.runsOn(j, f)
	case "timeout-minutes", "continue-on-error":
		t.settingExpr(j, f.key, f.val, f.path, false)
	case "environment":
		t.environment(j, f)
	case "container":
		t.container(j, f)
	}
}

// jobName translates a job's name:.
func (t *ghaTranslator) jobName(j *ghaJob, f field) {
	d := t.d
	v, ok := d.str(f.val, f.path, "a job name")
	if !ok {
		return
	}
	if name, atClaim := t.claimName(v, d.resolve(f.val), f.path, j); atClaim {
		put(j.out, "name", f.keyNode, gStr(name, d.resolve(f.val)))
		return
	}
	if evaluate, ok := t.jobNameEvaluated(v, d.resolve(f.val), f.path); evaluate {
		// Evaluated for each instance once the matrix is known (nameByExpressions).
		if ok {
			t.exprNames[j.id] = ghaLabelExpr{src: v, node: d.resolve(f.val), path: f.path}
		}
		return
	}
	put(j.out, "name", f.keyNode, gStr(t.text(v, d.resolve(f.val), f.path, j, nil, ghaPlanTime), d.resolve(f.val)))
}

// ghaJob is what translating one job collects besides its node.
type ghaJob struct {
	id       string
	path     string
	out      *yaml.Node
	env      []string // names the workflow's and job's env set
	matrix   bool
	needs    []string
	shell    ghaShell
	workDir  *yaml.Node
	checkout *yaml.Node // the checkout: mapping, once an actions/checkout step is seen
	// checkoutSteps is set once a checkout became a step of its own (another ref or
	// repository, an if:, a second checkout): later ones are steps too.
	checkoutSteps bool
	caches        []*yaml.Node // cache: entries, one per actions/cache step
	image         bool         // the job runs in a container
	// flat are the matrix keys whose values are mappings (flatMatrixKeys).
	flat map[string]bool
	// matrixKeys are the keys its matrix gives, when all are known (matrixKeys).
	matrixKeys map[string]bool
	// stepIDs are the ids its steps are given.
	stepIDs map[string]bool
	// dynamic: the matrix is computed when the job's needs are done, so any matrix
	// reference may be good (gha_dynmatrix.go).
	dynamic bool
}

func (t *ghaTranslator) job(jf field) *yaml.Node {
	d := t.d
	r := d.resolve(jf.val)
	if r == nil {
		return nil
	}
	if r.Kind != yaml.MappingNode {
		d.typeError(jf.val, r, jf.path, "a job")
		return nil
	}
	j := &ghaJob{id: jf.key, path: jf.path, out: gMap(r), env: append([]string(nil), t.env...), shell: t.shell, workDir: t.workDir,
		flat: t.flatMatrixKeys(r), dynamic: t.dynamic[jf.key] != nil}
	if keys, known := t.matrixKeys(r); known {
		j.matrixKeys = keys
	}
	j.stepIDs = t.stepIDs(r)
	// Env first, so that every other key may read it whatever the order of the keys.
	var stepsField *field
	var fs []field
	d.object(r, jf.path, "job "+jf.key, ghaJobKeys, func(f field) { fs = append(fs, f) })
	for _, f := range fs {
		switch f.key {
		case "env":
			if n := t.envMap(f.val, f.path, j, nil); n != nil {
				put(j.out, "env", f.keyNode, n)
				for i := 0; i < len(n.Content); i += 2 {
					j.env = append(j.env, n.Content[i].Value)
				}
			}
		case "strategy":
			j.matrix = mappingValue(d.resolve(f.val), "matrix") != nil
		case "needs":
			for i, item := range d.items(f.val, f.path, "a list of job ids", true) {
				if v, ok := d.str(item, indexPath(f.path, i), "a job id"); ok {
					j.needs = append(j.needs, v)
				}
			}
		case "defaults":
			t.defaults(f, &j.shell, &j.workDir)
		}
	}
	for _, f := range fs {
		if d.abort {
			return nil
		}
		if t.reusable != nil && f.key != "services" && t.decidedWhenCalled(j, f, t.jobSetting) {
			continue
		}
		switch f.key {
		case "permissions", "env", "defaults":
			// permissions: there is no GitHub token to scope.
		case "uses", "with", "secrets":
			// A job that calls a reusable workflow was replaced by its jobs
			// (expandCalls); one left here is a mistake with no uses:.
			d.add(ErrInvalid, f.keyNode, f.path, "%s: belongs to a job that calls a reusable workflow (with uses:)", f.key)
		case "name":
			t.jobName(j, f)
		case "outputs":
			out := gMap(d.resolve(f.val))
			for _, g := range d.fields(f.val, f.path, "a mapping of output names to values") {
				if v, ok := d.str(g.val, g.path, "a value"); ok {
					out.Content = append(out.Content, g.keyNode, gStr(t.text(v, d.resolve(g.val), g.path, j, nil, ghaOutputValue), d.resolve(g.val)))
				}
			}
			put(j.out, "outputs", f.keyNode, out)
		case "runs-on":
			t.runsOn(j, f)
		case "needs":
			put(j.out, "needs", f.keyNode, t.plain(f.val))
		case "if":
			if v, ok := d.str(f.val, f.path, "an expression"); ok {
				put(j.out, "if", f.keyNode, gStr(t.condition(v, f.val, f.path, j), d.resolve(f.val)))
			}
		case "strategy":
			t.strategy(j, f)
		case "timeout-minutes":
			if t.settingExpr(j, f.key, f.val, f.path, false) {
				break
			}
			if v, ok := t.minutes(f.val, f.path); ok {
				put(j.out, "timeout", f.keyNode, gStr(v, d.resolve(f.val)))
				t.rename(j.path+".timeout", f.path)
			}
		case "continue-on-error":
			if t.settingExpr(j, f.key, f.val, f.path, false) {
				break
			}
			if v, ok := t.boolean(f.val, f.path); ok {
				put(j.out, "continue_on_error", f.keyNode, gBool(v, d.resolve(f.val)))
				t.rename(j.path+".continue_on_error", f.path)
			}
		case "concurrency":
			t.concurrency(j, f)
		case "environment":
			t.environment(j, f)
		case "container":
			t.container(j, f)
		case "steps":
			sf := f
			stepsField = &sf
		}
	}
	for _, f := range fs {
		if f.key == "services" && !d.abort && (t.reusable == nil || !t.decidedWhenCalled(j, f, t.services)) {
			t.services(j, f) // after container:, which they need
		}
	}
	if stepsField == nil {
		d.add(ErrRequired, jf.keyNode, jf.path+".steps", "job %s has no steps", jf.key)
		return nil
	}
	steps := t.steps(j, *stepsField)
	if j.checkout == nil {
		// A GitHub job without actions/checkout starts in an empty workspace.
		put(j.out, "checkout", stepsField.keyNode, gBool(false, stepsField.keyNode))
	} else {
		put(j.out, "checkout", stepsField.keyNode, j.checkout)
	}
	if len(j.caches) > 0 {
		caches := gSeq(stepsField.keyNode)
		caches.Content = j.caches
		put(j.out, "cache", stepsField.keyNode, caches)
	}
	put(j.out, "steps", stepsField.keyNode, steps)
	return j.out
}

// Labels for the system a job runs on. A workflow's runs-on asks for them (windows-2022
// is WindowsLabel), and a worker carries the one of its own system (PlatformLabels).
const (
	LinuxLabel   = "linux"
	WindowsLabel = "windows"
	MacOSLabel   = "macos"
)

// PlatformLabels are the labels of a worker on the system goos with the processor goarch:
// Go's names of both (linux, amd64), and macos besides darwin on a Mac, the name GitHub's
// runs-on uses and the translation of a workflow asks for.
func PlatformLabels(goos, goarch string) []string {
	out := []string{goos, goarch}
	if goos == "darwin" {
		out = append(out, MacOSLabel)
	}
	return out
}

// runnerLabels are the labels GitHub gives a self-hosted runner for its system and
// architecture, as a Gantry worker carries them (linux, amd64, arm64).
var runnerLabels = map[string]string{"linux": LinuxLabel, "windows": WindowsLabel, "macos": MacOSLabel,
	"x64": "amd64", "arm64": "arm64", "arm": "arm"}

// ghaRunnerLabel is the label a Gantry worker must carry for one label of runs-on, or ""
// for none. GitHub's images name their system: windows-* and macos-* ask for a worker of
// that system, so that a job written for Windows never runs on Linux and reports success.
// ubuntu-* asks for nothing, as it always did here: any worker runs it, and a fleet with
// Windows or macOS workers writes [self-hosted, linux] to keep it off them. self-hosted
// says nothing a Gantry worker could carry.
func ghaRunnerLabel(v string) string {
	l := strings.ToLower(v)
	switch {
	case l == "self-hosted", strings.HasPrefix(l, "ubuntu-"):
		return ""
	case strings.HasPrefix(l, "windows-"):
		return WindowsLabel
	case strings.HasPrefix(l, "macos-"):
		return MacOSLabel
	}
	if m, ok := runnerLabels[l]; ok {
		return m
	}
	return v
}

// ghaRunsOn is a job whose runs-on holds an expression (${{ matrix.os }}): its labels are
// known only per instance, once the plan is made, and then mapped by ghaRunnerLabel.
type ghaRunsOn struct {
	node *yaml.Node
	path string
	// evaluated are the labels with an operator or a function, evaluated per instance
	// (gha_runson.go), by the placeholder the translation holds for each.
	evaluated map[string]ghaLabelExpr
}

func (t *ghaTranslator) runsOn(j *ghaJob, f field) {
	d := t.d
	r := d.resolve(f.val)
	if r == nil {
		return
	}
	var items []*yaml.Node
	base := f.path
	if r.Kind == yaml.MappingNode {
		// runs-on: {group: ..., labels: [...]}: a runner group is GitHub's; the labels
		// are what a worker must carry.
		d.object(r, f.path, "runs-on", []string{"group", "labels"}, func(g field) {
			if g.key == "labels" {
				items = d.items(g.val, g.path, "a list of labels", true)
				base = g.path
			}
		})
	} else {
		items = d.items(f.val, f.path, "a label or a list of labels", true)
	}
	labels := gSeq(r)
	for i, item := range items {
		ip := indexPath(base, i)
		if r.Kind == yaml.ScalarNode {
			ip = base // runs-on: windows-latest, not a list
		}
		v, ok := d.str(item, ip, "a label")
		if !ok {
			continue
		}
		if strings.Contains(v, "${{") {
			// runs-on: ${{ matrix.os }}: the compiler puts the value in for each
			// instance, and compileWorkflow maps what it put in.
			ro := t.exprRunsOn[j.id]
			ro.node, ro.path = d.resolve(item), ip
			evaluate, ok := t.runsOnEvaluated(v, d.resolve(item), ip)
			switch {
			case !ok:
				continue
			case evaluate:
				if ro.evaluated == nil {
					ro.evaluated = map[string]ghaLabelExpr{}
				}
				ph := runsOnPlaceholder(len(ro.evaluated))
				ro.evaluated[ph] = ghaLabelExpr{src: v, node: d.resolve(item), path: ip}
				v = ph
			default:
				v = t.text(v, d.resolve(item), ip, j, nil, ghaPlanTime)
			}
			t.exprRunsOn[j.id] = ro
		} else if v = ghaRunnerLabel(v); v == "" {
			continue
		}
		t.rename(fmt.Sprintf("%s.runs_on[%d]", j.path, len(labels.Content)), ip)
		labels.Content = append(labels.Content, gStr(v, d.resolve(item)))
	}
	if len(labels.Content) > 0 {
		put(j.out, "runs_on", f.keyNode, labels)
		t.rename(j.path+".runs_on", f.path)
	}
}

// mapRunsOn maps the labels the compiler put in for runs-on expressions, instance by
// instance: runs-on: ${{ matrix.os }} over [ubuntu-latest, windows-latest] asks for
// nothing in the one and for windows in the other.
func (t *ghaTranslator) mapRunsOn(p *Plan) {
	for _, job := range p.Jobs {
		ro, ok := t.exprRunsOn[job.Name]
		if !ok {
			continue
		}
		var out []string
		for _, l := range job.RunsOn {
			labels := []string{l}
			if e, ok := ro.evaluated[l]; ok {
				labels = t.evalRunsOn(e, job)
			}
			for _, l := range labels {
				if m := ghaRunnerLabel(l); m != "" && !contains(out, m) {
					out = append(out, m)
				}
			}
		}
		job.RunsOn = out
	}
}

// staticRunsOn writes, for gantry convert, the labels a runs-on expression came to as a
// plain runs_on: Gantry's language puts a value in but does not map GitHub's runner names,
// so the translation must say the mapped labels. When the instances of a job come to
// different labels (a matrix over ubuntu-latest and windows-latest) no one runs_on says
// them, and the conversion is refused at the runs-on.
func (t *ghaTranslator) staticRunsOn(p *Plan, raw [][]string, out *yaml.Node) {
	jobs := mappingValue(out, "jobs")
	for name, at := range t.exprRunsOn {
		var want []string
		same, changed, seen := true, false, false
		for i, job := range p.Jobs {
			if job.Name != name {
				continue
			}
			if !slices.Equal(job.RunsOn, raw[i]) {
				changed = true
			}
			if seen && !slices.Equal(job.RunsOn, want) {
				same = false
			}
			want, seen = job.RunsOn, true
		}
		if !changed {
			continue
		}
		if !same {
			t.d.add(ErrInvalid, at.node, at.path, "runs-on of job %s asks for other labels in different instances of its matrix (GitHub's runner names, such as windows-latest, mean the label windows), which Gantry's language cannot write in one runs_on; make the matrix's values the labels (os: [linux, windows, macos]) and write runs_on: ${{ matrix.os }}", name)
			continue
		}
		j := mappingValue(jobs, name)
		for i := 0; i+1 < len(j.Content); i += 2 {
			if j.Content[i].Value != "runs_on" {
				continue
			}
			labels := gSeq(j.Content[i+1])
			for _, l := range want {
				labels.Content = append(labels.Content, gStr(l, j.Content[i+1]))
			}
			if len(want) == 0 {
				j.Content = append(j.Content[:i], j.Content[i+2:]...)
			} else {
				j.Content[i+1] = labels
			}
			break
		}
	}
}

func (t *ghaTranslator) strategy(j *ghaJob, f field) {
	d := t.d
	// GitHub cancels a matrix's other instances when one fails, unless told not to.
	failFast, failFastAt := true, f.keyNode
	defer func() {
		if mappingValue(j.out, "matrix") != nil {
			put(j.out, "fail_fast", failFastAt, gBool(failFast, failFastAt))
			t.rename(j.path+".fail_fast", f.path+".fail-fast")
		}
	}()
	d.object(f.val, f.path, "strategy", ghaStrategyKeys, func(g field) {
		switch g.key {
		case "matrix":
			if m := t.matrix(j, g); m != nil {
				put(j.out, "matrix", g.keyNode, m)
				t.rename(j.path+".matrix", g.path)
			}
		case "fail-fast":
			if v, ok := t.boolean(g.val, g.path); ok {
				failFast = v
				failFastAt = g.keyNode
			}
		case "max-parallel":
			// Gantry runs as many instances at once as workers take; there is no cap.
		}
	})
}

func (t *ghaTranslator) concurrency(j *ghaJob, f field) {
	d := t.d
	r := d.resolve(f.val)
	if r == nil {
		return
	}
	out := gMap(r)
	if r.Kind == yaml.ScalarNode {
		if v, ok := d.str(r, f.path, "a group name or a mapping"); ok {
			put(out, "group", r, gStr(t.text(v, r, f.path, j, nil, ghaRunCreation), r))
			t.rename(j.path+".concurrency.group", f.path)
		}
	} else {
		d.object(f.val, f.path, "concurrency", ghaConcKeys, func(g field) {
			switch g.key {
			case "group":
				if v, ok := d.str(g.val, g.path, "a group name"); ok {
					put(out, "group", g.keyNode, gStr(t.text(v, d.resolve(g.val), g.path, j, nil, ghaRunCreation), d.resolve(g.val)))
				}
			case "cancel-in-progress":
				if v, ok := t.boolean(g.val, g.path); ok {
					put(out, "cancel_in_progress", g.keyNode, gBool(v, d.resolve(g.val)))
					t.rename(j.path+".concurrency.cancel_in_progress", g.path)
				}
			}
		})
	}
	put(j.out, "concurrency", f.keyNode, out)
}

func (t *ghaTranslator) environment(j *ghaJob, f field) {
	d := t.d
	r := d.resolve(f.val)
	if r == nil {
		return
	}
	if r.Kind == yaml.ScalarNode {
		if v, ok := d.str(r, f.path, "an environment name or a mapping"); ok {
			put(j.out, "environment", f.keyNode, gStr(t.text(v, r, f.path, j, nil, ghaPlanTime), r))
		}
		return
	}
	out := gMap(r)
	d.object(f.val, f.path, "environment", ghaEnvKeys, func(g field) {
		if v, ok := d.str(g.val, g.path, "a "+g.key); ok {
			kind := ghaPlanTime
			if g.key == "url" {
				// Evaluated when the job's steps are done, as its outputs are: it may read
				// them (the GitHub Pages deployment's page_url).
				kind = ghaOutputValue
			}
			put(out, g.key, g.keyNode, gStr(t.text(v, d.resolve(g.val), g.path, j, nil, kind), d.resolve(g.val)))
		}
	})
	put(j.out, "environment", f.keyNode, out)
}

// minutes reads timeout-minutes as a Gantry duration.
func (t *ghaTranslator) minutes(n *yaml.Node, p string) (string, bool) {
	r := t.d.resolve(n)
	if r == nil {
		return "", false
	}
	if r.Kind == yaml.ScalarNode && strings.Contains(r.Value, "${{") {
		t.d.add(ErrInvalid, r, p, "timeout-minutes from an expression is not supported; write a number")
		return "", false
	}
	if r.Kind != yaml.ScalarNode || (r.Tag != "!!int" && r.Tag != "!!float") {
		t.d.typeError(n, r, p, "a number of minutes")
		return "", false
	}
	v, err := strconv.ParseFloat(r.Value, 64)
	if err != nil || v <= 0 || v > 60*24*365 {
		t.d.add(ErrInvalid, r, p, "expected a number of minutes more than zero, found %s", r.Value)
		return "", false
	}
	return strconv.FormatFloat(v, 'f', -1, 64) + "m", true
}

// boolean reads true or false; an expression is not supported where Gantry needs to know
// the value when it plans.
func (t *ghaTranslator) boolean(n *yaml.Node, p string) (bool, bool) {
	r := t.d.resolve(n)
	if r != nil && r.Kind == yaml.ScalarNode && strings.Contains(r.Value, "${{") {
		t.d.add(ErrInvalid, r, p, "an expression here is not supported; write true or false")
		return false, false
	}
	return t.d.boolean(n, p)
}

// envMap copies an env mapping, translating the expressions in its values. A step's
// secrets (read by ${{ secrets.X }} in its run) are added by the caller.
func (t *ghaTranslator) envMap(n *yaml.Node, p string, j *ghaJob, st *ghaStep) *yaml.Node {
	d := t.d
	r := d.resolve(n)
	if r == nil {
		return nil
	}
	out := gMap(r)
	for _, f := range d.fields(n, p, "a mapping of variable names to values") {
		v := d.resolve(f.val)
		if v == nil {
			continue
		}
		if v.Kind == yaml.ScalarNode && v.Tag == "!!str" && strings.Contains(v.Value, "${{") {
			v = gStr(t.text(v.Value, v, f.path, j, st, ghaEnvValue), v)
		}
		out.Content = append(out.Content, f.keyNode, v)
	}
	return out
}

// stepIDs are the ids the steps of a job's node are given, written out.
func (t *ghaTranslator) stepIDs(job *yaml.Node) map[string]bool {
	steps := t.d.resolve(mappingValue(job, "steps"))
	if steps == nil || steps.Kind != yaml.SequenceNode {
		return nil
	}
	ids := map[string]bool{}
	for _, st := range steps.Content {
		if id := t.d.resolve(mappingValue(t.d.resolve(st), "id")); id != nil && id.Kind == yaml.ScalarNode {
			ids[id.Value] = true
		}
	}
	return ids
}

// ghaStep is one step being translated.
type ghaStep struct {
	path    string
	env     []string
	secrets []string // secrets its run reads, put in its env
}

func (t *ghaTranslator) steps(j *ghaJob, f field) *yaml.Node {
	d := t.d
	out := gSeq(d.resolve(f.val))
	items := d.items(f.val, f.path, "a list of steps", false)
	for i, item := range items {
		p := indexPath(f.path, i)
		t.pendingSettings, t.pendingRenames = nil, nil
		if st := t.step(j, item, p); st != nil {
			t.placeSettings(j, len(out.Content))
			at := indexPath(j.path+".steps", len(out.Content))
			t.rename(at, p)
			for _, r := range t.pendingRenames {
				t.rename(at+r[0], r[1])
			}
			out.Content = append(out.Content, st)
		}
	}
	if len(out.Content) == 0 && len(items) > 0 {
		// Every step was an action Gantry does itself (checkout, artifacts): the job
		// still needs a step to run.
		st := gMap(items[0])
		put(st, "name", items[0], gStr("actions", items[0]))
		put(st, "run", items[0], gStr("true", items[0]))
		out.Content = append(out.Content, st)
	}
	return out
}

func (t *ghaTranslator) step(j *ghaJob, n *yaml.Node, p string) *yaml.Node {
	d := t.d
	r := d.resolve(n)
	if r == nil {
		return nil
	}
	if r.Kind != yaml.MappingNode {
		d.typeError(n, r, p, "a step")
		return nil
	}
	st := &ghaStep{path: p, env: append([]string(nil), j.env...)}
	out := gMap(r)
	var fs []field
	d.object(n, p, "a step", ghaStepKeys, func(f field) { fs = append(fs, f) })
	get := func(k string) *field {
		for i := range fs {
			if fs[i].key == k {
				return &fs[i]
			}
		}
		return nil
	}
	if e := get("env"); e != nil {
		for _, g := range d.fields(e.val, e.path, "a mapping of variable names to values") {
			st.env = append(st.env, g.key)
		}
	}
	if u := get("uses"); u != nil {
		if get("run") != nil {
			d.add(ErrInvalid, u.keyNode, u.path, "a step has either uses or run, not both")
			return nil
		}
		for _, k := range []string{"shell", "working-directory"} {
			if f := get(k); f != nil {
				d.add(ErrInvalid, f.keyNode, f.path, "%s: belongs to a run step, not to one that uses an action", k)
			}
		}
		out := t.uses(j, st, r, *u, get("with"), get("name"), get("if"))
		if out != nil {
			t.stepSettings(j, st, r, out, fs, p)
		}
		return out
	}
	if w := get("with"); w != nil {
		d.add(ErrInvalid, w.keyNode, w.path, "with: belongs to a step that uses an action")
	}
	shell, dir := j.shell, j.workDir
	if s := get("shell"); s != nil {
		if v, ok := t.shellName(s.val, s.path); ok {
			shell = v
		}
	}
	if w := get("working-directory"); w != nil {
		if _, ok := d.str(w.val, w.path, "a directory"); ok {
			dir = d.resolve(w.val)
		}
	}
	var run string
	var runNode *yaml.Node
	for _, f := range fs {
		switch f.key {
		case "name":
			if v, ok := d.str(f.val, f.path, "a step name"); ok {
				put(out, "name", f.keyNode, gStr(t.text(v, d.resolve(f.val), f.path, j, st, ghaStepName), d.resolve(f.val)))
			}
		case "run":
			if v, ok := d.str(f.val, f.path, "a command"); ok {
				run, runNode = t.text(v, d.resolve(f.val), f.path, j, st, ghaRunScript), d.resolve(f.val)
			}
		case "if":
			if v, ok := d.str(f.val, f.path, "an expression"); ok {
				put(out, "if", f.keyNode, gStr(t.condition(v, d.resolve(f.val), f.path, j), d.resolve(f.val)))
			}
		}
	}
	if runNode == nil {
		d.add(ErrRequired, r, p+".run", "a step needs run or uses")
		return nil
	}
	if dir != nil && (shell.file || shell.expr != "") {
		// The change of directory is a line of the script, which Gantry writes for bash,
		// sh and python only.
		d.add(ErrInvalid, dir, p+".working-directory", "working-directory with shell %q is not supported: Gantry changes directory in the script, which it does for bash, sh and python only; cd in the script instead", cmp.Or(shell.exprSource(), shell.name))
	}
	if shell.expr != "" {
		t.pendingSettings = append(t.pendingSettings, ghaSettingExpr{key: "shell", step: -1, src: shell.expr, node: shell.exprNode, path: shell.exprPath})
	}
	// The options of a custom shell are set after the change of directory, which
	// GitHub makes before it starts the shell: a directory missing fails the step.
	run = shell.prelude + run
	if dir != nil && !shell.file && shell.expr == "" {
		run = chdir(shell.name, t.text(dir.Value, dir, p+".working-directory", j, st, ghaRunScript)) + run
	}
	if shell.name != DefaultShell {
		put(out, "shell", r, gStr(shell.name, r))
	}
	t.stepSettings(j, st, r, out, fs, p)
	put(out, "run", runNode, gStr(run, runNode))
	return out
}

// stepSetting translates a step's timeout-minutes or continue-on-error written as an
// expression (see decidedWhenCalled).
func (t *ghaTranslator) stepSetting(j *ghaJob, f field) {
	t.settingExpr(j, f.key, f.val, f.path, true)
}

// stepSettings translates what run steps and action steps share: id, timeout-minutes,
// continue-on-error and env (with the secrets the step's text reads).
func (t *ghaTranslator) stepSettings(j *ghaJob, st *ghaStep, r, out *yaml.Node, fs []field, p string) {
	d := t.d
	var envField *field
	for _, f := range fs {
		switch f.key {
		case "env":
			envField = &f
		case "id":
			if v, ok := d.str(f.val, f.path, "a step id"); ok {
				put(out, "id", f.keyNode, gStr(v, d.resolve(f.val)))
			}
		case "timeout-minutes":
			if t.reusable != nil && t.decidedWhenCalled(j, f, t.stepSetting) || t.settingExpr(j, f.key, f.val, f.path, true) {
				break
			}
			if v, ok := t.minutes(f.val, f.path); ok {
				put(out, "timeout", f.keyNode, gStr(v, d.resolve(f.val)))
				t.rename(p+".timeout", f.path)
			}
		case "continue-on-error":
			if t.reusable != nil && t.decidedWhenCalled(j, f, t.stepSetting) || t.settingExpr(j, f.key, f.val, f.path, true) {
				break
			}
			if v, ok := t.boolean(f.val, f.path); ok {
				put(out, "continue_on_error", f.keyNode, gBool(v, d.resolve(f.val)))
				t.rename(p+".continue_on_error", f.path)
			}
		}
	}
	if e := envField; e != nil || len(st.secrets) > 0 {
		at := r
		var env *yaml.Node
		if e != nil {
			at = e.keyNode
			env = t.envMap(e.val, e.path, j, st)
		}
		if env == nil {
			env = gMap(at)
		}
		for _, s := range st.secrets {
			if mappingValue(env, s) == nil {
				put(env, s, at, gStr(WorkerExpr("secrets."+s), at))
			}
		}
		put(out, "env", at, env)
	}
}

// exprSource is a shell expression as written, or "".
func (sh ghaShell) exprSource() string {
	if sh.expr == "" {
		return ""
	}
	return "${{" + sh.expr + "}}"
}

// chdir is the line that puts a step in its working-directory before its script. The
// directory may read variables the translation wrote (${GANTRY_WORKSPACE}/sub for
// ${{ github.workspace }}/sub), so they are expanded: in double quotes for the shells,
// by os.path.expandvars for Python.
func chdir(shell, dir string) string {
	if shell == "python3" {
		if strings.Contains(dir, "$") {
			return "import os; os.chdir(os.path.expandvars(" + strconv.Quote(dir) + "))\n"
		}
		return "import os; os.chdir(" + strconv.Quote(dir) + ")\n"
	}
	if !strings.Contains(dir, "$") {
		return "cd -- '" + strings.ReplaceAll(dir, "'", `'\''`) + "'\n"
	}
	return `cd -- "` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "`", "\\`").Replace(dir) + "\"\n"
}

// sortedCopy returns the keys of a set in order, for stable output.
func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// encodeYAML writes a node as YAML with two-space indentation.
func encodeYAML(n *yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// compileWorkflow translates a workflow and compiles the translation. It returns the plan
// and the translated definition; errors are at the workflow's paths.
func (d *decoder) compileWorkflow(root *yaml.Node) (*Plan, *yaml.Node) {
	p, out, _, _ := d.translateAndPlan(root)
	return p, out
}

// translateAndPlan is compileWorkflow, returning besides the translator and the labels
// the compiler put in for each job before runs-on expressions were mapped.
func (d *decoder) translateAndPlan(root *yaml.Node) (*Plan, *yaml.Node, *ghaTranslator, [][]string) {
	out, t := d.workflow(root)
	if out == nil || d.abort {
		t.hintReusable(d.errs)
		t.placeCallErrors(d.errs)
		return nil, nil, t, nil
	}
	translated := len(d.errs) == 0
	before := len(d.errs)
	// The translation was metered as it read the workflow; the definition it made holds
	// no aliases and is bounded by that, so it is metered afresh.
	d.nodes = 0
	s := d.decodeSpec(out)
	var p *Plan
	var raw [][]string
	if translated && !d.abort {
		// A workflow with mistakes the translation found is not planned: jobs it had
		// to leave out would show up as needs of no job.
		p = d.plan(s)
	}
	if p != nil {
		t.markDynamic(p)
		raw = make([][]string, len(p.Jobs))
		for i, job := range p.Jobs {
			raw[i] = slices.Clone(job.RunsOn)
		}
		t.mapRunsOn(p)
		t.nameInstances(p)
		t.nameByExpressions(p)
		t.applySettings(p)
	}
	for _, e := range d.errs[before:] {
		e.Path = t.originalPath(e.Path)
	}
	t.hintReusable(d.errs)
	t.placeCallErrors(d.errs)
	if p != nil && len(t.warnings) > 0 {
		t.placeCallErrors(t.warnings)
		p.Warnings = sortErrors(t.warnings)
	}
	return p, out, t, raw
}

// ErrNotWorkflow is returned by ConvertWorkflow for a document that is not a GitHub
// Actions workflow.
var ErrNotWorkflow = fmt.Errorf("not a GitHub Actions workflow: no step uses an action, and on: with runs-on in every job is missing")

// ConvertWorkflow translates a GitHub Actions workflow into Gantry's language and returns
// it as YAML: the definition that Compile plans exactly as it plans the workflow. A
// workflow with mistakes returns Errors, as Compile does; a document that is not a
// workflow (and whose path is not under .github/workflows) returns ErrNotWorkflow.
func ConvertWorkflow(src []byte, opts Options) ([]byte, error) {
	d := &decoder{limits: opts.Limits.withDefaults(), workflows: opts.Workflows, path: opts.Path}
	root := d.parseDocument(src)
	if root == nil || !d.checkShape(root, 0) {
		return nil, sortErrors(d.errs)
	}
	if !isWorkflowPath(opts.Path) && !isWorkflow(root) {
		return nil, ErrNotWorkflow
	}
	p, out, t, raw := d.translateAndPlan(root)
	if len(d.errs) > 0 || p == nil {
		return nil, sortErrors(d.errs)
	}
	t.refuseDynamic()
	t.staticRunsOn(p, raw, out)
	t.staticShells(out)
	if len(d.errs) > 0 {
		return nil, sortErrors(d.errs)
	}
	return encodeYAML(out)
}

// plain copies a node of the workflow that goes into the translation as it is, with
// aliases expanded and anchors dropped, so the translation can be written out alone.
func (t *ghaTranslator) plain(n *yaml.Node) *yaml.Node {
	r := t.d.resolve(n)
	if r == nil {
		return nil
	}
	c := *r
	c.Anchor = ""
	if len(r.Content) > 0 {
		c.Content = make([]*yaml.Node, 0, len(r.Content))
		for _, k := range r.Content {
			if v := t.plain(k); v != nil {
				c.Content = append(c.Content, v)
			}
		}
	}
	return &c
}
