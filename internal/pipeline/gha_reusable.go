package pipeline

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gantry-ci/gantry/internal/ghaexpr"
)

// A reusable workflow (on: workflow_call) runs when a workflow calls it, with the inputs
// the caller gives. GitHub checks such a file on its own as it will be called: its
// inputs are known only then. Gantry decides some settings when it plans a run (runs-on,
// a job's name, timeout-minutes, continue-on-error, an environment, the images of the
// container and services, the matrix), and refuses there what is known only when a run
// is created, such as a dispatch's inputs; but called with inputs written out, a
// reusable workflow's settings may read them (gha_call.go).
//
// So, with Options.CheckReusable (gantry validate, gantry plan), a workflow whose on:
// has workflow_call and no event of its own is checked as called: a setting decided when
// the plan is made that reads its inputs is checked for what holds whatever the inputs
// are (its expressions parse, the inputs it reads are declared, it reads nothing else the
// setting may not read), by translating it with each input read as a stand-in literal of
// the same length and keeping the translation's errors but not its value, and a warning
// names it as decided when the workflow is called. The plan is for showing, not running:
// such a setting is left out of it (a job's name shows the inputs it reads as written;
// an image is a stand-in; a matrix is made when the job's needs are done, which a
// reusable workflow checked on its own has none of).
//
// A workflow with workflow_call and events of its own (push, workflow_dispatch) is also
// started by them, with a dispatch's inputs, and is checked as today for them: an error
// at a setting that reads inputs says why (reusableHint). So is a reusable workflow run on
// its own (gantry run, a project's dispatch).

// WarnDecidedWhenCalled is the kind of a warning that a setting of a reusable workflow
// checked on its own reads its inputs, and is decided when a workflow calls it.
const WarnDecidedWhenCalled ErrorKind = "decided_when_called"

// ghaReusable is what the translation of a workflow with on: workflow_call keeps.
type ghaReusable struct {
	inputs   map[string]ghaCallInput // by lower-case name
	declared []string
	// checked says the workflow is checked as called; otherwise hint is added to the
	// first error at each setting of hinted, which read inputs.
	checked bool
	hint    string
	hinted  []string
}

// readReusable reads the on: of the top-level workflow for workflow_call; nil for a
// workflow without one. Its inputs' declarations are checked only when the workflow is
// checked as called (a workflow run by its own events never reads them).
func (t *ghaTranslator) readReusable(on *yaml.Node) *ghaReusable {
	d := t.d
	cl := &ghaCallee{}
	before := len(d.errs)
	t.workflowCall(cl, field{key: "on", val: on, path: "on"})
	var own []string
	r := d.resolve(on)
	switch {
	case r == nil:
	case r.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(r.Content); i += 2 {
			if k := r.Content[i].Value; contains(ghaEvents, k) {
				own = append(own, k)
			}
		}
	default:
		for _, item := range append([]*yaml.Node{r}, r.Content...) {
			if item = d.resolve(item); item != nil && item.Kind == yaml.ScalarNode && contains(ghaEvents, item.Value) {
				own = append(own, item.Value)
			}
		}
	}
	rs := &ghaReusable{inputs: map[string]ghaCallInput{}, checked: d.checkReusable && len(own) == 0 && cl.called}
	if !rs.checked {
		d.errs = d.errs[:before]
	}
	if !cl.called {
		return nil
	}
	for _, in := range cl.inputs {
		rs.inputs[strings.ToLower(in.name)] = in
		rs.declared = append(rs.declared, in.name)
	}
	if len(own) > 0 {
		rs.hint = fmt.Sprintf("; it reads inputs, and started by its own events (%s) this workflow has the inputs a dispatch gives (none for other events), known only when the run is created: called by another workflow (on: workflow_call), it would have the caller's, known when the plan is made", strings.Join(own, ", "))
	} else {
		rs.hint = "; it reads inputs, and run on its own this reusable workflow (on: workflow_call) has a dispatch's inputs, known only when the run is created: called by another workflow, it has the caller's, known when the plan is made (gantry validate checks it so)"
	}
	return rs
}

// dispatchInputs are the inputs a reusable workflow checked as called declares, as the
// translation's on: dispatch declares them, so that every ${{ inputs.NAME }} is checked
// against them.
func (rs *ghaReusable) dispatchInputs(at *yaml.Node) *yaml.Node {
	out := gMap(at)
	for _, name := range rs.declared {
		in := rs.inputs[strings.ToLower(name)]
		m := gMap(at)
		typ := in.typ
		if !contains(ghaInputTypes, typ) {
			typ = string(InputString) // its declaration's error says why
		}
		put(m, "type", at, gStr(typ, at))
		switch {
		case in.def != nil && in.def.Kind == yaml.ScalarNode && in.def.Tag != "!!null" && inputTypeProblem(typ, in.def) == "":
			put(m, "default", at, gStr(in.def.Value, at))
		case in.required:
			put(m, "required", at, gBool(true, at))
		}
		put(out, name, at, m)
	}
	return out
}

// standIns rewrites the ${{ }} of text tx that read inputs, for checking a setting
// decided when the workflow is called: one that reads inputs and nothing else becomes a
// string literal of the same length, and in one that reads more each input does, so that
// what the translation says of the rest is at its place. An input the workflow does not
// declare is reported. It returns the text and the inputs read, as written.
func (rs *ghaReusable) standIns(t *ghaTranslator, tx field) (string, []string) {
	s := tx.val.Value
	segs, ok := exprSegments(s)
	if !ok {
		return s, nil // the translation reports it
	}
	var b strings.Builder
	var reads []string
	last := 0
	for _, seg := range segs {
		n, err := ghaexpr.Parse(seg.inner)
		if err != nil {
			continue
		}
		others := false
		readsInputs := false
		for _, r := range ghaexpr.Refs(n) {
			if !strings.EqualFold(r.Context, "inputs") {
				others = true
				continue
			}
			readsInputs = true
			at := seg.start + 3 + r.At
			switch {
			case len(r.Path) == 0 || r.Path[0] == "*":
				t.textError(s, tx.val, tx.path, at, "a reusable workflow reads its inputs by name here (inputs.NAME)")
			case rs.inputs[strings.ToLower(r.Path[0])].name == "":
				decl := "it declares none"
				if len(rs.declared) > 0 {
					decl = "it declares " + strings.Join(rs.declared, ", ")
				}
				t.textError(s, tx.val, tx.path, at, fmt.Sprintf("inputs.%s is not an input of this workflow (on.workflow_call.inputs: %s)%s", r.Path[0], decl, suggest(r.Path[0], rs.declared)))
			default:
				if name := "inputs." + r.Path[0]; !slices.Contains(reads, name) {
					reads = append(reads, name)
				}
			}
		}
		if !readsInputs {
			continue
		}
		b.WriteString(s[last:seg.start])
		last = seg.end
		if !others {
			b.WriteString("${{ '" + strings.Repeat("x", max(seg.end-seg.start-9, 0)) + "' }}")
			continue
		}
		out, rerr := rewriteExpr(seg.inner, exprRewrite{written: func(src, head string, _ []string) (string, bool, string) {
			if head != "inputs" {
				return "", false, ""
			}
			return "'" + strings.Repeat("x", max(len(src)-2, 0)) + "'", true, ""
		}})
		if rerr != nil {
			out = seg.inner
		}
		b.WriteString("${{" + out + "}}")
	}
	b.WriteString(s[last:])
	return b.String(), reads
}

// shownName is a job's name as a plan of a reusable workflow checked on its own shows
// it: each ${{ }} that reads inputs as the text of its expression.
func shownName(s string) string {
	segs, ok := exprSegments(s)
	if !ok {
		return s
	}
	var b strings.Builder
	last := 0
	for _, seg := range segs {
		n, err := ghaexpr.Parse(seg.inner)
		if err != nil || !slices.ContainsFunc(ghaexpr.Refs(n), func(r ghaexpr.Ref) bool { return strings.EqualFold(r.Context, "inputs") }) {
			continue
		}
		b.WriteString(s[last:seg.start])
		b.WriteString(strings.TrimSpace(seg.inner))
		last = seg.end
	}
	b.WriteString(s[last:])
	return b.String()
}

// withTexts copies n, aliases expanded, with the scalars of texts given new values.
func withTexts(d *decoder, n *yaml.Node, texts map[*yaml.Node]string) *yaml.Node {
	r := d.resolve(n)
	if r == nil {
		return nil
	}
	c := *r
	c.Anchor = ""
	if v, ok := texts[r]; ok {
		c.Value = v
		return &c
	}
	if len(r.Content) > 0 {
		c.Content = make([]*yaml.Node, len(r.Content))
		for i, x := range r.Content {
			c.Content[i] = withTexts(d, x, texts)
		}
	}
	return &c
}

// ghaSideTables are what translating a setting may leave, by job, besides its node.
type ghaSideTables struct {
	runsOn      ghaRunsOn
	hasRunsOn   bool
	name        ghaLabelExpr
	hasName     bool
	settings    int
	pendingFrom int
}

func (t *ghaTranslator) saveSideTables(id string) ghaSideTables {
	s := ghaSideTables{settings: len(t.settingExprs[id]), pendingFrom: len(t.pendingSettings)}
	s.runsOn, s.hasRunsOn = t.exprRunsOn[id]
	s.name, s.hasName = t.exprNames[id]
	return s
}

func (t *ghaTranslator) restoreSideTables(id string, s ghaSideTables) {
	if s.hasRunsOn {
		t.exprRunsOn[id] = s.runsOn
	} else {
		delete(t.exprRunsOn, id)
	}
	if s.hasName {
		t.exprNames[id] = s.name
	} else {
		delete(t.exprNames, id)
	}
	t.settingExprs[id] = t.settingExprs[id][:s.settings]
	if len(t.settingExprs[id]) == 0 {
		delete(t.settingExprs, id)
	}
	t.pendingSettings = t.pendingSettings[:s.pendingFrom]
}

// decidedWhenCalled takes a setting of job j (or of one of its steps), written at f, of
// a reusable workflow checked as called, when a text of it that Gantry decides when it
// plans reads the workflow's inputs: see the top of this file. translate is the
// setting's own translation. It reports whether it took the setting; for a workflow not
// checked as called, it notes the setting for reusableHint and does not.
func (t *ghaTranslator) decidedWhenCalled(j *ghaJob, f field, translate func(*ghaJob, field)) bool {
	rs := t.reusable
	if rs == nil || (f.key != "name" && plannedWhen(f.key) != "when it plans the run") {
		return false
	}
	d := t.d
	texts := settingTexts(d, f)
	standIns := map[*yaml.Node]string{}
	var reads []string
	var first *field
	from := len(d.errs)
	for i, tx := range texts {
		s, names := rs.standIns(t, tx)
		if len(names) == 0 && s == tx.val.Value {
			continue
		}
		standIns[tx.val] = s
		for _, n := range names {
			if !slices.Contains(reads, n) {
				reads = append(reads, n)
			}
		}
		if first == nil {
			first = &texts[i]
		}
	}
	if first == nil {
		return false
	}
	if !rs.checked {
		d.errs = d.errs[:from] // the translation says it its own way
		rs.hinted = append(rs.hinted, f.path)
		return false
	}
	// The check: the setting's own translation, with the inputs as stand-ins, whose
	// errors are kept and whose value is not.
	scratch := *j
	scratch.out = gMap(j.out)
	side := t.saveSideTables(j.id)
	translate(&scratch, field{key: f.key, keyNode: f.keyNode, val: withTexts(d, f.val, standIns), path: f.path})
	t.restoreSideTables(j.id, side)
	if len(d.errs) > from {
		return true
	}
	// What the plan shows.
	shown := map[*yaml.Node]string{}
	for _, tx := range texts {
		switch {
		case f.key == "name":
			shown[tx.val] = shownName(tx.val.Value)
		case standIns[tx.val] != "":
			shown[tx.val] = "decided-when-called" // an image
		}
	}
	switch f.key {
	case "name", "container", "services":
		before := len(d.errs)
		translate(j, field{key: f.key, keyNode: f.keyNode, val: withTexts(d, f.val, shown), path: f.path})
		d.errs = d.errs[:before] // the check said what is wrong
	}
	if f.key == "name" {
		return true // it shows the inputs it reads: nothing is left to check
	}
	what := first.key
	line, col := positionIn(first.val, first.val.Value, strings.Index(first.val.Value, "${{"))
	t.warnings = append(t.warnings, &Error{Kind: WarnDecidedWhenCalled, Path: f.path, Line: line, Column: col,
		Message: fmt.Sprintf("%s reads %s, known only when a workflow calls this one; what it comes to is checked then", what, strings.Join(reads, ", "))})
	return true
}

// hintReusable adds, to the first error at each setting of a workflow with
// workflow_call that reads inputs and was not checked as called, why it is refused.
func (t *ghaTranslator) hintReusable(es Errors) {
	rs := t.reusable
	if rs == nil || rs.checked {
		return
	}
	for _, p := range rs.hinted {
		for _, e := range es {
			if e.File == "" && (e.Path == p || strings.HasPrefix(e.Path, p+".") || strings.HasPrefix(e.Path, p+"[")) {
				e.Message += rs.hint
				break
			}
		}
	}
}
