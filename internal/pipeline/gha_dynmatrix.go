package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gantry-ci/gantry/internal/ghaexpr"
)

// A matrix computed from what a job's needs left (strategy.matrix: ${{ fromJSON(
// needs.setup.outputs.matrix) }}, or one axis, include or exclude so written) is known
// only once those needs are done. Until then the plan holds the job as one placeholder:
// its needs and if:, no steps, and a DynamicMatrix naming the expressions. When its needs
// are done and its if: says run, ExpandMatrix evaluates the expressions by GitHub's rules
// (internal/ghaexpr), writes the values into the workflow where the expressions stood,
// and translates and plans the workflow again: the instances are made by the very code
// that makes a static matrix's (include, exclude, mapping values, names, runs-on, every
// key reading matrix.*), and only the job's own instances are kept. The store replaces
// the placeholder by them in the transaction in which it became ready.
//
// The job's body is translated when the plan is made too, for its mistakes, with every
// matrix reference taken as good; what it is planned as is only known at expansion, and
// a mistake only the values show (matrix.os a label Gantry refuses) fails the job then.

// MaxMatrixInstances bounds the instances a computed matrix may make, as GitHub does.
const MaxMatrixInstances = 256

// maxExpandErrors bounds the mistakes an expansion that failed reports: the reason a job
// failed is read by people, and a long matrix can repeat one mistake in every instance.
const maxExpandErrors = 5

// DynamicMatrix is the matrix of a placeholder job (see ExpandMatrix).
type DynamicMatrix struct {
	// Exprs are the parts of the matrix written as expressions, in the workflow's order.
	Exprs []MatrixExpr `json:"exprs"`
	// Uses are the actions the job's steps name without an expression. They are pinned
	// with the run (Pins, Docker), before any instance exists, so that the instances run
	// the code every other job of the run runs.
	Uses []string             `json:"uses,omitempty"`
	Pins map[string]ActionPin `json:"pins,omitempty"`
	// Docker are the actions of Uses that run in a container of their own.
	Docker []string `json:"docker,omitempty"`
}

// MatrixExpr is one part of a matrix written as an expression.
type MatrixExpr struct {
	// Key is the axis it gives the values of, include or exclude; "" for the whole matrix.
	Key string `json:"key,omitempty"`
	// Expr is the expression, without ${{ }}.
	Expr string `json:"expr"`
}

// ghaDynExpr is a part of a matrix written as an expression, where it stands.
type ghaDynExpr struct {
	MatrixExpr
	node *yaml.Node
	path string
	// whole is the text of the scalar, for errors.
	whole string
}

// dynamicMatrixExprs finds the parts of a job's matrix written as expressions: the whole
// matrix, or the values of its keys.
func dynamicMatrixExprs(d *decoder, job *yaml.Node, path string) []ghaDynExpr {
	m := d.resolve(mappingValue(d.resolve(mappingValue(job, "strategy")), "matrix"))
	if m == nil {
		return nil
	}
	mp := path + ".strategy.matrix"
	if isExprScalar(m) {
		return []ghaDynExpr{{MatrixExpr: MatrixExpr{Expr: m.Value}, node: m, path: mp, whole: m.Value}}
	}
	if m.Kind != yaml.MappingNode {
		return nil
	}
	var out []ghaDynExpr
	for i := 0; i+1 < len(m.Content); i += 2 {
		if v := d.resolve(m.Content[i+1]); isExprScalar(v) {
			k := m.Content[i].Value
			out = append(out, ghaDynExpr{MatrixExpr: MatrixExpr{Key: k, Expr: v.Value}, node: v, path: joinPath(mp, k), whole: v.Value})
		}
	}
	return out
}

func isExprScalar(n *yaml.Node) bool {
	return n != nil && n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "${{")
}

// innerExpr is the expression of text that is one ${{ }} and nothing else.
func innerExpr(s string) (string, bool) {
	s = strings.TrimSpace(s)
	inner, ok := strings.CutPrefix(s, "${{")
	if !ok {
		return "", false
	}
	inner, ok = strings.CutSuffix(inner, "}}")
	if !ok || strings.Contains(inner, "${{") {
		return "", false
	}
	return strings.TrimSpace(inner), true
}

// findDynamicMatrices reads, before any job is translated, which jobs have a matrix
// computed by expressions, and checks the expressions. A constant one
// (${{ fromJSON('["a","b"]') }}) is evaluated at once and written into the workflow, and
// the job's matrix is then as static as if it had been written out.
func (t *ghaTranslator) findDynamicMatrices(fields []field) {
	d := t.d
	for _, jf := range fields {
		job := d.resolve(jf.val)
		exprs := dynamicMatrixExprs(d, job, jf.path)
		if len(exprs) == 0 {
			continue
		}
		var needs []string
		if n := d.resolve(mappingValue(job, "needs")); n != nil {
			if n.Kind == yaml.ScalarNode {
				needs = append(needs, n.Value)
			}
			for _, item := range n.Content {
				if item = d.resolve(item); item != nil && item.Kind == yaml.ScalarNode {
					needs = append(needs, item.Value)
				}
			}
		}
		ok, constant := true, true
		for i := range exprs {
			e := &exprs[i]
			inner, one := innerExpr(e.whole)
			if !one {
				d.add(ErrInvalid, e.node, e.path, "a matrix computed by an expression is one ${{ }} and nothing else; found %q", clip(e.whole, 80))
				ok = false
				continue
			}
			e.Expr = inner
			n, err := ghaexpr.Parse(inner)
			if err != nil {
				d.add(ErrExpression, e.node, e.path, "%v", err)
				ok = false
				continue
			}
			readsNeeds, readsInputs := false, false
			var reads []string
			for _, r := range ghaexpr.Refs(n) {
				constant = false
				switch strings.ToLower(r.Context) {
				case "inputs":
					readsInputs = true
					if rs := t.reusable; rs != nil && rs.checked && len(r.Path) > 0 && r.Path[0] != "*" {
						if rs.inputs[strings.ToLower(r.Path[0])].name == "" {
							d.add(ErrUnknownReference, e.node, e.path, "the matrix reads inputs.%s, which is not an input of this workflow (on.workflow_call.inputs: %s)%s", r.Path[0], strings.Join(rs.declared, ", "), suggest(r.Path[0], rs.declared))
							ok = false
						} else if name := "inputs." + r.Path[0]; !slices.Contains(reads, name) {
							reads = append(reads, name)
						}
					}
				case "needs":
					readsNeeds = true
					if len(r.Path) > 0 && !slices.Contains(needs, r.Path[0]) {
						d.add(ErrUnknownReference, e.node, e.path, "the matrix reads needs.%s, but job %s does not need %s%s", r.Path[0], jf.key, r.Path[0], suggest(r.Path[0], needs))
						ok = false
					}
				case "github", "vars":
				default:
					d.add(ErrExpression, e.node, e.path, "a matrix computed by an expression may read needs, github, inputs and vars, not %s", r.Context)
					ok = false
				}
			}
			if rs := t.reusable; !readsNeeds && readsInputs && rs != nil && rs.checked {
				// Made when a workflow calls this one, with its inputs: planned as a
				// job whose matrix is computed, for showing.
				if len(reads) > 0 {
					t.warnings = append(t.warnings, &Error{Kind: WarnDecidedWhenCalled, Path: e.path, Line: e.node.Line, Column: e.node.Column,
						Message: fmt.Sprintf("the matrix reads %s, known only when a workflow calls this one; it is made and checked then", strings.Join(reads, ", "))})
				}
				continue
			}
			if !readsNeeds && len(needs) == 0 && !constant {
				d.add(ErrInvalid, e.node, e.path, "Gantry computes a matrix from an expression when the job's needs are done, and job %s needs none; read the outputs of a job it needs", jf.key)
				ok = false
			}
		}
		if ok && constant {
			// Nothing to wait for: the values are known now.
			for _, e := range exprs {
				v, err := ghaexpr.EvalString(e.Expr, nil)
				if err == nil {
					err = setMatrixValue(e.node, e.Key, v, keyOrders([]string{e.Expr}))
				}
				if err != nil {
					d.add(ErrInvalid, e.node, e.path, "%v", err)
				}
			}
			continue
		}
		if t.dynamic == nil {
			t.dynamic = map[string][]ghaDynExpr{}
		}
		t.dynamic[jf.key] = exprs
	}
}

// placeholder is what the plan holds of a job with a computed matrix until its needs are
// done: its needs and if: as translated, and a step, which the compiler asks of every job
// and markDynamic takes away again. What the translation of the job set aside to do per
// instance is dropped: the instances are planned afresh (ExpandMatrix).
func (t *ghaTranslator) placeholder(jf field, out *yaml.Node) *yaml.Node {
	ph := gMap(out)
	for _, k := range []string{"needs", "if"} {
		if v := mappingValue(out, k); v != nil {
			put(ph, k, out, v)
		}
	}
	var uses []string
	if steps := mappingValue(out, "steps"); steps != nil {
		for _, st := range steps.Content {
			u := mappingValue(st, "uses")
			if u != nil && u.Kind == yaml.ScalarNode && !strings.Contains(u.Value, "${{") && !slices.Contains(uses, u.Value) {
				uses = append(uses, u.Value)
			}
		}
	}
	if t.dynamicUses == nil {
		t.dynamicUses = map[string][]string{}
	}
	t.dynamicUses[jf.key] = uses
	put(ph, "checkout", out, gBool(false, out))
	st := gMap(out)
	put(st, "name", out, gStr("matrix", out))
	put(st, "run", out, gStr("true", out))
	steps := gSeq(out)
	steps.Content = append(steps.Content, st)
	put(ph, "steps", out, steps)
	delete(t.exprRunsOn, jf.key)
	delete(t.exprNames, jf.key)
	delete(t.settingExprs, jf.key)
	delete(t.objectAxes, jf.key)
	return ph
}

// markDynamic makes the placeholders of the plan what they are: a DynamicMatrix and no
// steps. A job that needs one may read the artifacts of its instances, which the plan
// cannot see yet, so it asks for its inputs.
func (t *ghaTranslator) markDynamic(p *Plan) {
	if len(t.dynamic) == 0 {
		return
	}
	for _, job := range p.Jobs {
		if exprs, ok := t.dynamic[job.Name]; ok {
			dm := &DynamicMatrix{Uses: t.dynamicUses[job.Name]}
			for _, e := range exprs {
				dm.Exprs = append(dm.Exprs, e.MatrixExpr)
			}
			job.DynamicMatrix = dm
			job.Steps = nil
			job.DisplayName = ""
		}
		if slices.ContainsFunc(job.NeedsNames, func(n string) bool { return t.dynamic[n] != nil }) {
			job.NoInputs = false
		}
	}
}

// refuseDynamic is gantry convert's error for a matrix computed by an expression, which
// Gantry's language has no way to write.
func (t *ghaTranslator) refuseDynamic() {
	for _, id := range t.jobs {
		for _, e := range t.dynamic[id] {
			t.d.add(ErrInvalid, e.node, e.path, "a matrix computed from needs' outputs is known only when the run runs; Gantry's language cannot write it (run the workflow as it is)")
		}
	}
}

// setMatrixValue writes the value an expression of a matrix came to into the workflow,
// in place of the expression, after checking it has the shape GitHub asks of that part
// of the matrix. order gives the keys of a mapping value their order (see keyOrders).
func setMatrixValue(n *yaml.Node, key string, v any, order map[string][]string) error {
	if err := checkMatrixValue(key, v); err != nil {
		return err
	}
	if err := checkMatrixText(v); err != nil {
		return err
	}
	*n = *jsonNode(v, n, order)
	return nil
}

// keyOrders finds the order the keys of the JSON objects in texts were written in. An
// expression's value is a Go map, which has none, but the order of a matrix's axes and of
// an include entry's keys is the order of the instances and of the values in their names,
// as on GitHub: a mapping the expression came to takes the order of an object of the
// needs' outputs with the same keys, and sorted keys when there is none.
func keyOrders(texts []string) map[string][]string {
	out := map[string][]string{}
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		if n == nil || depth > 32 {
			return
		}
		if n.Kind == yaml.MappingNode {
			keys := make([]string, 0, len(n.Content)/2)
			for i := 0; i+1 < len(n.Content); i += 2 {
				keys = append(keys, n.Content[i].Value)
			}
			if sig := keySignature(keys); out[sig] == nil {
				out[sig] = keys
			}
		}
		for _, c := range n.Content {
			walk(c, depth+1)
		}
	}
	for _, s := range texts {
		s = strings.TrimSpace(s)
		if !strings.HasPrefix(s, "{") && !strings.HasPrefix(s, "[") {
			continue
		}
		var n yaml.Node
		if yaml.Unmarshal([]byte(s), &n) == nil {
			walk(&n, 0)
		}
	}
	return out
}

func keySignature(keys []string) string {
	s := slices.Clone(keys)
	slices.Sort(s)
	return strings.Join(s, "\x00")
}

// checkMatrixText refuses a computed matrix value (or key) that holds ${{ or {{, or ends
// with $: put into a step's text when the plan is made, it would be read as a reference by
// the worker (to a secret, at worst), alone or with the text around it ($${{ matrix.x
// }}). A need's output cannot hold ${{ (CheckOutputs), but its JSON can say \u0024{{.
func checkMatrixText(v any) error {
	switch v := v.(type) {
	case string:
		if strings.Contains(v, "{{") || strings.HasSuffix(v, "$") {
			return fmt.Errorf("the matrix value %q holds {{ or ends with $, which Gantry would read as a reference where it is put in", clip(v, 80))
		}
	case []any:
		for _, e := range v {
			if err := checkMatrixText(e); err != nil {
				return err
			}
		}
	case map[string]any:
		for k, e := range v {
			if err := checkMatrixText(k); err != nil {
				return err
			}
			if err := checkMatrixText(e); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkMatrixValue(key string, v any) error {
	switch key {
	case "":
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("the matrix came to %s, not a mapping of axes to lists of values", describeValue(v))
		}
		vectors := 0
		for _, k := range sortedKeys(m) {
			if err := checkMatrixValue(k, m[k]); err != nil {
				return err
			}
			if k != "exclude" {
				vectors++
			}
		}
		if vectors == 0 {
			return errors.New("the matrix came to no axes and no include: Matrix must define at least one vector")
		}
	case "include", "exclude":
		list, ok := v.([]any)
		if !ok {
			return fmt.Errorf("matrix %s came to %s, not a list of mappings", key, describeValue(v))
		}
		for i, item := range list {
			if _, ok := item.(map[string]any); !ok {
				return fmt.Errorf("matrix %s[%d] came to %s, not a mapping", key, i, describeValue(item))
			}
		}
	default:
		list, ok := v.([]any)
		if !ok {
			return fmt.Errorf("matrix %s came to %s, not a list of values", key, describeValue(v))
		}
		if len(list) == 0 {
			return fmt.Errorf("matrix %s came to an empty list: Matrix vector '%s' does not contain any values", key, key)
		}
	}
	return nil
}

// describeValue names what a value is, with a short piece of it.
func describeValue(v any) string {
	b, _ := json.Marshal(v)
	s := clip(string(b), 60)
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "the string " + s
	case float64:
		return "the number " + s
	case bool:
		return "the boolean " + s
	case []any:
		return "the list " + s
	}
	return "the mapping " + s
}

// jsonNode writes a value of an expression as a YAML node at the position of at, the
// keys of a mapping in the order order has for them.
func jsonNode(v any, at *yaml.Node, order map[string][]string) *yaml.Node {
	switch v := v.(type) {
	case nil:
		return gNode(yaml.ScalarNode, "!!null", "null", at)
	case bool:
		return gBool(v, at)
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1e15 {
			return gNode(yaml.ScalarNode, "!!int", strconv.FormatInt(int64(v), 10), at)
		}
		return gNode(yaml.ScalarNode, "!!float", strconv.FormatFloat(v, 'f', -1, 64), at)
	case string:
		return gStr(v, at)
	case []any:
		n := gSeq(at)
		for _, item := range v {
			n.Content = append(n.Content, jsonNode(item, at, order))
		}
		return n
	case map[string]any:
		n := gMap(at)
		keys := sortedKeys(v)
		if o := order[keySignature(keys)]; len(o) == len(keys) {
			keys = o
		}
		for _, k := range keys {
			put(n, k, at, jsonNode(v[k], at, order))
		}
		return n
	}
	return gStr(ghaexpr.ToString(v), at)
}

// matrixExprContext is what an expression of a computed matrix reads: needs (results in
// GitHub's words, and outputs), github's run values, inputs and vars.
func matrixExprContext(in ConditionInput) *ghaexpr.Context {
	needs := map[string]any{}
	for name, r := range in.Needs {
		outs := map[string]any{}
		for k, v := range in.NeedOutputs[name] {
			outs[k] = v
		}
		if r == ResultFailed {
			r = "failure"
		}
		needs[name] = map[string]any{"result": r, "outputs": outs}
	}
	refName := in.Branch
	if in.Tag != "" {
		refName = in.Tag
	}
	github := map[string]any{"ref": in.Ref, "sha": in.SHA, "event_name": in.Event, "repository": in.Repository,
		"ref_name": refName, "actor": in.Actor, "run_id": in.RunID}
	if len(in.Payload) > 0 {
		var ev any
		if json.Unmarshal(in.Payload, &ev) == nil {
			github["event"] = ev
		}
	}
	inputs := map[string]any{}
	for k, v := range in.Inputs {
		inputs[k] = v
	}
	vars := map[string]any{}
	for k, v := range in.Vars {
		vars[k] = v
	}
	return &ghaexpr.Context{Values: map[string]any{"needs": needs, "github": github, "inputs": inputs, "vars": vars}}
}

// ExpandMatrix makes the instances of a placeholder job (one with a DynamicMatrix) once
// its needs are done: def is the workflow the run was planned from and in what the run
// and the needs hold (Needs and NeedOutputs). The instances are whole jobs, with the
// placeholder's needs and the run's values put in, ready to be stored. An error says why
// the job cannot run, in words for the person who wrote the workflow: an expression that
// fails, a value of the wrong shape, an empty axis, too many instances, or a mistake in
// the job that only its values show.
//
// It is pure, so every replica computes the same instances from the same inputs.
func (j *Job) ExpandMatrix(def []byte, in ConditionInput) ([]*Job, error) {
	dm := j.DynamicMatrix
	if dm == nil {
		return nil, fmt.Errorf("job %s has no computed matrix", j.Key)
	}
	limits := DefaultLimits
	limits.MaxBytes = max(limits.MaxBytes, len(def)+1)
	limits.MaxJobs = 1 << 20 // the plan was within the server's limit; the matrix is bounded below
	// The job is the workflow's own (a called workflow's is refused when the plan is
	// made): the workflows it calls need not be read again, and are not.
	d := &decoder{limits: limits, workflows: SkipWorkflows}
	root := d.parseDocument(def)
	if root == nil || !d.checkShape(root, 0) {
		return nil, fmt.Errorf("the run's workflow does not read as it did when the run was created: %w", sortErrors(d.errs))
	}
	job := d.resolve(mappingValue(d.resolve(mappingValue(root, "jobs")), j.Name))
	exprs := dynamicMatrixExprs(d, job, "jobs."+j.Name)
	if len(exprs) != len(dm.Exprs) {
		return nil, fmt.Errorf("the run's workflow has no computed matrix for job %s", j.Name)
	}
	ctx := matrixExprContext(in)
	var texts []string
	for _, outs := range in.NeedOutputs {
		for _, v := range outs {
			texts = append(texts, v)
		}
	}
	slices.Sort(texts) // the first object with given keys decides their order, on every replica alike
	order := keyOrders(texts)
	for i, e := range exprs {
		want := dm.Exprs[i]
		if inner, _ := innerExpr(e.whole); e.Key != want.Key || inner != want.Expr {
			return nil, fmt.Errorf("the run's workflow has another matrix for job %s than it was planned with", j.Name)
		}
		v, err := ghaexpr.EvalString(want.Expr, ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.path, err)
		}
		if err := setMatrixValue(e.node, e.Key, v, order); err != nil {
			return nil, fmt.Errorf("%s: %w", e.path, err)
		}
	}
	p, _ := d.compileWorkflow(root)
	if len(d.errs) > 0 || p == nil {
		errs := sortErrors(d.errs)
		var mine Errors
		for _, e := range errs {
			if e.Path == "jobs."+j.Name || strings.HasPrefix(e.Path, "jobs."+j.Name+".") {
				mine = append(mine, e)
			}
		}
		if len(mine) == 0 {
			mine = errs
		}
		if len(mine) > maxExpandErrors {
			more := &Error{Kind: ErrInvalid, Message: fmt.Sprintf("and %d more", len(mine)-maxExpandErrors)}
			mine = append(mine[:maxExpandErrors:maxExpandErrors], more)
		}
		return nil, fmt.Errorf("job %s with its computed matrix: %w", j.Name, mine)
	}
	var out []*Job
	for _, inst := range p.Jobs {
		if inst.Name == j.Name {
			out = append(out, inst)
		}
	}
	switch {
	case len(out) == 0:
		return nil, fmt.Errorf("job %s: its computed matrix made no instances", j.Name)
	case len(out) > MaxMatrixInstances:
		return nil, fmt.Errorf("job %s: its computed matrix makes %d instances, more than the %d allowed", j.Name, len(out), MaxMatrixInstances)
	case len(out) == 1 && out[0].DynamicMatrix != nil:
		return nil, fmt.Errorf("job %s: its matrix is still computed after expansion", j.Name)
	}
	for i, inst := range out {
		inst.Needs = slices.Clone(j.Needs)
		inst.NeedsNames = slices.Clone(j.NeedsNames)
		inst.Wave = j.Wave
		inst.NoInputs = j.NoInputs
		for s := range inst.Steps {
			st := &inst.Steps[s]
			if st.Uses == "" || len(dm.Pins) == 0 {
				continue
			}
			// The pins of the run, the composite actions' among them: a superset of what
			// the step runs, which the worker looks up by name.
			st.Actions = dm.Pins
			if slices.Contains(dm.Docker, st.Uses) && !slices.Contains(inst.RunsOn, DockerLabel) {
				inst.RunsOn = append(inst.RunsOn, DockerLabel)
			}
		}
		withRun, err := inst.WithRunValues(in)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", inst.Key, err)
		}
		out[i] = withRun
	}
	return out, nil
}
