package pipeline

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A matrix of calls: a calling job with strategy.matrix calls the workflow once for each
// combination, as GitHub does. The combinations are made when the plan is made, by
// GitHub's rules for include and exclude, from the values as written: a value that is an
// expression (${{ needs.version.outputs.v }}) stays one, which the called jobs read when
// they run. Each combination is a call of its own, <caller>-<n>, shown as
// "<caller name> (<values>)"; the job standing for the whole call keeps the caller's id.

// ghaCombo is one combination of a matrix: its values by key, in the order the keys came.
type ghaCombo struct {
	keys   []string
	values map[string]*yaml.Node
}

func (c *ghaCombo) set(k string, v *yaml.Node) {
	if _, ok := c.values[k]; !ok {
		c.keys = append(c.keys, k)
	}
	c.values[k] = v
}

func (c *ghaCombo) clone() *ghaCombo {
	out := &ghaCombo{keys: append([]string(nil), c.keys...), values: make(map[string]*yaml.Node, len(c.values))}
	for k, v := range c.values {
		out.values[k] = v
	}
	return out
}

// comboValue is a matrix value as the combinations compare it.
func comboValue(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	return n.Value
}

// callMatrix makes the combinations of a calling job's strategy.matrix; nil when it has
// mistakes, which are reported.
func (t *ghaTranslator) callMatrix(c *callerJob, f field) []*ghaCombo {
	d := t.d
	var matrix *field
	d.object(f.val, f.path, "strategy", ghaStrategyKeys, func(g field) {
		if g.key == "matrix" {
			g := g
			matrix = &g
		}
		// fail-fast and max-parallel: the calls run as workers take their jobs, and
		// one that fails does not cancel the others.
	})
	if matrix == nil {
		return []*ghaCombo{{values: map[string]*yaml.Node{}}}
	}
	r := d.resolve(matrix.val)
	if r == nil {
		return nil
	}
	if r.Kind == yaml.ScalarNode && strings.Contains(r.Value, "${{") {
		d.add(ErrInvalid, r, matrix.path, "a matrix of calls of a reusable workflow computed by an expression is not supported (the called jobs are made when the plan is); write its axes out, each value may be an expression")
		return nil
	}
	before := len(d.errs)
	combos := []*ghaCombo{{values: map[string]*yaml.Node{}}}
	var axes []string
	var include, exclude []map[string]*yaml.Node
	entries := func(g field) []map[string]*yaml.Node {
		var out []map[string]*yaml.Node
		for i, item := range d.items(g.val, g.path, "a list of mappings", false) {
			m := map[string]*yaml.Node{}
			for _, h := range d.fields(item, indexPath(g.path, i), "a mapping of matrix keys to values") {
				if v := t.matrixScalar(h); v != nil {
					m[h.key] = v
				}
			}
			out = append(out, m)
		}
		return out
	}
	for _, g := range d.fields(matrix.val, matrix.path, "a mapping of matrix axes to lists of values") {
		switch g.key {
		case "include":
			include = entries(g)
			continue
		case "exclude":
			exclude = entries(g)
			continue
		}
		v := d.resolve(g.val)
		if v != nil && v.Kind == yaml.ScalarNode && strings.Contains(v.Value, "${{") {
			d.add(ErrInvalid, v, g.path, "matrix %s of calls of a reusable workflow computed by an expression is not supported (the called jobs are made when the plan is); write its values out, each may be an expression", g.key)
			continue
		}
		var next []*ghaCombo
		for i, item := range d.items(g.val, g.path, "a list of values", false) {
			val := t.matrixScalar(field{key: g.key, val: item, path: indexPath(g.path, i)})
			if val == nil {
				continue
			}
			for _, cb := range combos {
				n := cb.clone()
				n.set(g.key, val)
				next = append(next, n)
			}
		}
		axes = append(axes, g.key)
		combos = next
	}
	if len(d.errs) > before {
		return nil
	}
	if len(axes) == 0 {
		combos = nil
	}
	// exclude drops the combinations it matches every key of.
	kept := combos[:0]
	for _, cb := range combos {
		out := false
		for _, ex := range exclude {
			match := len(ex) > 0
			for k, v := range ex {
				if got, ok := cb.values[k]; !ok || comboValue(got) != comboValue(v) {
					match = false
				}
			}
			out = out || match
		}
		if !out {
			kept = append(kept, cb)
		}
	}
	combos = kept
	// include adds its keys to every combination whose axis values it does not change,
	// or is a combination of its own when there is none.
	original := len(combos)
	for _, in := range include {
		added := false
		for _, cb := range combos[:original] {
			fits := true
			for k, v := range in {
				if contains(axes, k) && comboValue(cb.values[k]) != comboValue(v) {
					fits = false
				}
			}
			if !fits {
				continue
			}
			added = true
			for _, k := range sortedKeys(in) {
				cb.set(k, in[k])
			}
		}
		if !added {
			n := &ghaCombo{values: map[string]*yaml.Node{}}
			for _, k := range sortedKeys(in) {
				n.set(k, in[k])
			}
			combos = append(combos, n)
		}
	}
	if len(combos) == 0 {
		d.add(ErrInvalid, r, matrix.path, "the matrix of job %s has no combination left: the job would call nothing", c.id)
		return nil
	}
	return combos
}

// matrixScalar is a value of a matrix of calls: a scalar, which may be an expression.
func (t *ghaTranslator) matrixScalar(f field) *yaml.Node {
	v := t.d.resolve(f.val)
	if v == nil {
		return nil
	}
	if v.Kind != yaml.ScalarNode {
		t.d.add(ErrInvalid, v, f.path, "a matrix of calls takes values that are strings, numbers or booleans (matrix %s is %s); pass a mapping's fields as values of their own", f.key, describe(v))
		return nil
	}
	return v
}

// comboLabel writes a combination's values as GitHub shows them after a job's name:
// an expression as its text.
func comboLabel(cb *ghaCombo) string {
	var parts []string
	for _, k := range cb.keys {
		v := cb.values[k].Value
		if inner, ok := wholeExpr(v); ok {
			v = strings.TrimSpace(inner)
		}
		parts = append(parts, v)
	}
	return strings.Join(parts, ", ")
}

// matrixRewrite rewrites matrix.X of a caller's text to combination cb's value X; for
// labels, an expression becomes its own text, which a name cannot read when the plan is
// made.
func matrixRewrite(cb *ghaCombo, label bool) exprRewrite {
	return exprRewrite{ref: func(head string, p []string) (string, bool, string) {
		if head != "matrix" {
			return "", false, ""
		}
		if len(p) != 1 || p[0] == "*" {
			return "", false, "a matrix of calls is read by key here (matrix.KEY)"
		}
		var v *yaml.Node
		for k, n := range cb.values {
			if strings.EqualFold(k, p[0]) {
				v = n
			}
		}
		if v == nil {
			return "''", true, "" // a key this combination lacks reads as "", as on GitHub
		}
		e := templateExpr(v)
		if label {
			if inner, ok := wholeExpr(v.Value); ok {
				e = quoteGHA(strings.TrimSpace(inner))
			}
		}
		if !simpleExpr(e) {
			e = "(" + e + ")"
		}
		return e, true, ""
	}}
}

// comboCaller is the calling job of one combination: its id <caller>-<n>, its name with
// the combination's values, and matrix.X read in its with:, secrets: and if:.
func (t *ghaTranslator) comboCaller(e ghaJobEntry, c *callerJob, cb *ghaCombo, n int) (ghaJobEntry, bool) {
	d := t.d
	r := d.resolve(e.f.val)
	id := c.id + "-" + strconv.Itoa(n)
	out := gMap(r)
	ok := true
	rewrite := func(s string, at *yaml.Node, p string, rw exprRewrite, cond bool) string {
		var got string
		var err *ghaExprError
		if cond {
			got, err = rewriteExpr(bareCondition(s), rw)
		} else {
			got, err = rewriteTemplate(s, rw)
		}
		if err != nil {
			t.textError(s, at, p, err.offset, err.msg)
			ok = false
			return s
		}
		return got
	}
	var copyNode func(n *yaml.Node, p string) *yaml.Node
	copyNode = func(n *yaml.Node, p string) *yaml.Node {
		v := d.resolve(n)
		if v == nil {
			return nil
		}
		cp := *v
		cp.Anchor = ""
		switch v.Kind {
		case yaml.ScalarNode:
			if v.Tag != "!!str" || !strings.Contains(v.Value, "${{") {
				break
			}
			if inner, whole := wholeExpr(v.Value); whole {
				if got, err := rewriteExpr(inner, matrixRewrite(cb, false)); err == nil {
					if val, ok := foldConst(got); ok {
						return valueNode(val, v) // a value written out keeps its type
					}
				}
			}
			cp.Value = rewrite(v.Value, v, p, matrixRewrite(cb, false), false)
		case yaml.MappingNode:
			cp.Content = nil
			for _, f := range d.fields(v, p, "a mapping") {
				cp.Content = append(cp.Content, f.keyNode, copyNode(f.val, f.path))
			}
		default:
			return t.plain(v)
		}
		return &cp
	}
	name := c.name
	if f, has := c.f["name"]; has && strings.Contains(c.name, "${{") {
		name = rewrite(c.name, d.resolve(f.val), f.path, matrixRewrite(cb, true), false)
	} else if label := comboLabel(cb); label != "" {
		name += " (" + label + ")"
	}
	for _, f := range d.fields(r, e.f.path, "job "+c.id) {
		switch f.key {
		case "strategy", "name":
		case "if":
			v := d.resolve(f.val)
			cp := *v
			cp.Value = rewrite(v.Value, v, f.path, matrixRewrite(cb, false), true)
			put(out, "if", f.keyNode, &cp)
		case "with", "secrets":
			put(out, f.key, f.keyNode, copyNode(f.val, f.path))
		default:
			put(out, f.key, f.keyNode, t.plain(f.val))
		}
	}
	at := c.at
	if f, has := c.f["name"]; has {
		at = d.resolve(f.val)
	}
	put(out, "name", at, gStr(name, at))
	return ghaJobEntry{f: field{key: id, keyNode: e.f.keyNode, val: out, path: "jobs." + id}, scope: e.scope}, ok
}

// expandMatrixCall expands a calling job with a matrix: one call per combination, and
// the job standing for them all.
func (t *ghaTranslator) expandMatrixCall(e ghaJobEntry, c *callerJob, chain []*ghaWorkflowFile) []ghaJobEntry {
	d := t.d
	combos := t.callMatrix(c, c.f["strategy"])
	if combos == nil {
		return nil
	}
	var out []ghaJobEntry
	all := &ghaCallResult{id: c.id, name: c.name, at: c.at, needs: c.needs, needsPath: c.path + ".needs"}
	var conds []string
	var results []*ghaCallResult
	for i, cb := range combos {
		ce, ok := t.comboCaller(e, c, cb, i+1)
		if !ok {
			return nil
		}
		if by, taken := t.calls.ids[ce.f.key]; taken {
			d.add(ErrInvalid, c.at, c.f["uses"].path, "job %s calls a workflow for each combination of its matrix, and the call of combination %d would be the job %s, which %s already has; rename one of them", c.id, i+1, ce.f.key, by)
			return nil
		}
		t.calls.ids[ce.f.key] = "the matrix of job " + c.id
		t.calls.paths[ce.f.path] = t.sourceOf(e.f.path)
		before := len(results)
		for _, x := range t.expandCall(ce, chain) {
			if x.result == nil {
				out = append(out, x)
				continue
			}
			if x.result.id == ce.f.key {
				results = append(results, x.result)
				all.jobs = append(all.jobs, x.result.jobs...)
				all.inner = append(all.inner, x.result.inner...)
				conds = append(conds, x.result.cond)
				all.file, all.rewrite = x.result.file, x.result.rewrite
				continue
			}
			out = append(out, x) // the place of a call its workflow makes
		}
		if len(results) == before {
			return nil // the call said what was wrong, as the others' would again
		}
	}
	// It runs when any combination's call did.
	for _, cond := range conds {
		if cond == "" {
			conds = nil
			break
		}
	}
	if len(conds) > 0 {
		all.cond = "(" + strings.Join(conds, ") || (") + ")"
	}
	all.outputs = matrixOutputs(results)
	return append(out, ghaJobEntry{f: e.f, scope: e.scope, result: all})
}

// matrixOutputs are the outputs of a matrix of calls: as on GitHub, an output is the
// value of a call that set it; here, of the last in the matrix's order that did.
func matrixOutputs(results []*ghaCallResult) []ghaCallOutput {
	var out []ghaCallOutput
	for k, o := range results[0].outputs {
		exprs := make([]string, 0, len(results))
		whole := true
		for i := len(results) - 1; i >= 0; i-- {
			r := results[i]
			v := r.rewrite.t.callRewritten(r, r.outputs[k])
			inner, ok := wholeExpr(v)
			if !ok {
				whole = false
				break
			}
			exprs = append(exprs, "("+strings.TrimSpace(inner)+")")
		}
		value := o.value
		if whole {
			c := *o.value
			c.Value = "${{ " + strings.Join(exprs, " || ") + " }}"
			value = &c
		}
		out = append(out, ghaCallOutput{name: o.name, value: value, path: o.path, rewritten: whole})
	}
	return out
}

// callRewritten is an output's value as the call r reads it.
func (t *ghaTranslator) callRewritten(r *ghaCallResult, o ghaCallOutput) string {
	var v string
	t.inFile(r.file, func() { v = r.rewrite.text(o.value.Value, o.value, o.path, true) })
	return v
}
