package pipeline

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Reading a called workflow (its on: workflow_call, env, defaults and jobs) and checking
// what a calling job gives against what it declares.

// ghaCallee is a called workflow, read once however many jobs call it.
type ghaCallee struct {
	file    *ghaWorkflowFile
	called  bool // its on: has workflow_call
	inputs  []ghaCallInput
	secrets []ghaCallSecret
	outputs []ghaCallOutput
	jobs    []field
	env     []field
	scope   *ghaScope
	// notRead is set when the loader declined to read it (ErrWorkflowNotRead).
	notRead bool
	err     error // it could not be read
}

type ghaCallInput struct {
	name     string
	typ      string // boolean, number or string
	required bool
	def      *yaml.Node
}

type ghaCallSecret struct {
	name     string
	required bool
}

type ghaCallOutput struct {
	name  string
	value *yaml.Node
	path  string
	// rewritten is set when value already reads the jobs of the call (a matrix of
	// calls joins its calls' values).
	rewritten bool
}

// ghaCallRef is what a job's uses: names.
type ghaCallRef struct {
	owner, repo string // "" for a workflow of the calling repository
	file        string // .github/workflows/build.yml
	ref         string
}

// parseCallRef reads a job's uses: ./.github/workflows/FILE or
// OWNER/REPO/.github/workflows/FILE@REF; the problem says what is wrong.
func parseCallRef(uses string) (ghaCallRef, string) {
	const want = "a reusable workflow is ./.github/workflows/FILE.yml, of this repository at this commit, or OWNER/REPO/.github/workflows/FILE.yml@REF"
	s := strings.TrimSpace(uses)
	if strings.Contains(s, "${{") {
		return ghaCallRef{}, "uses: of a job cannot hold an expression (nor can it on GitHub); " + want
	}
	var r ghaCallRef
	if rest, ok := strings.CutPrefix(s, "./"); ok {
		if strings.Contains(rest, "@") {
			return ghaCallRef{}, "a workflow of this repository is read at this commit: ./" + rest + " takes no @ref"
		}
		r.file = rest
	} else {
		at := strings.LastIndex(s, "@")
		if at < 0 {
			return ghaCallRef{}, fmt.Sprintf("uses %q names no ref: %s", s, want)
		}
		r.ref = s[at+1:]
		parts := strings.SplitN(s[:at], "/", 3)
		if len(parts) < 3 || parts[0] == "" || parts[1] == "" || r.ref == "" {
			return ghaCallRef{}, fmt.Sprintf("uses %q: %s", s, want)
		}
		r.owner, r.repo, r.file = parts[0], parts[1], parts[2]
	}
	dir, name := path.Split(r.file)
	ext := path.Ext(name)
	switch {
	case dir != ".github/workflows/" || path.Clean(r.file) != r.file:
		return ghaCallRef{}, fmt.Sprintf("uses %q: reusable workflows are files of .github/workflows itself, not of a directory below it or elsewhere; %s", s, want)
	case ext != ".yml" && ext != ".yaml":
		return ghaCallRef{}, fmt.Sprintf("uses %q: a workflow is a .yml or .yaml file", s)
	}
	return r, ""
}

// callee reads the workflow a job calls, once per compile.
func (t *ghaTranslator) callee(c *callerJob, uses, usesPath string, chain []*ghaWorkflowFile) *ghaCallee {
	d := t.d
	ref, problem := parseCallRef(uses)
	if problem != "" {
		d.add(ErrInvalid, c.at, usesPath, "%s", problem)
		return nil
	}
	from := chain[len(chain)-1]
	file := &ghaWorkflowFile{name: ref.file, key: ref.file}
	switch {
	case ref.owner != "":
		file = &ghaWorkflowFile{name: fmt.Sprintf("%s/%s/%s@%s", ref.owner, ref.repo, ref.file, ref.ref), owner: ref.owner, repo: ref.repo}
		file.key = file.name
	case from.owner != "":
		// ./ in a workflow of another repository is that repository's, at the commit the
		// workflow was read at.
		file = &ghaWorkflowFile{name: fmt.Sprintf("%s/%s/%s@%s", from.owner, from.repo, ref.file, from.commit), owner: from.owner, repo: from.repo, commit: from.commit}
		file.key = file.name
		ref = ghaCallRef{owner: from.owner, repo: from.repo, file: ref.file, ref: from.commit}
	}
	for _, f := range chain {
		if f.key == file.key {
			d.add(ErrCycle, c.at, usesPath, "reusable workflows call each other in a cycle: %s", chainText(chain, file.name))
			return nil
		}
	}
	n, seen := t.calls.unique[file.key]
	if !seen {
		n = len(t.calls.unique) + 1
		t.calls.unique[file.key] = n
	}
	if n > MaxCalledWorkflows {
		d.add(ErrLimit, c.at, usesPath, "job %s calls %s, past GitHub's limit of %d unique reusable workflows a workflow may call, its calls' calls included", c.id, file.name, MaxCalledWorkflows)
		return nil
	}
	cl, ok := t.calls.callees[file.key]
	if !ok {
		cl = t.readCallee(file, ref)
		t.calls.callees[file.key] = cl
	}
	switch {
	case cl.notRead:
		return cl
	case cl.err != nil:
		d.add(ErrInvalid, c.at, usesPath, "job %s calls the reusable workflow %s, which cannot be read: %v", c.id, file.name, cl.err)
		return nil
	case !cl.called:
		d.add(ErrInvalid, c.at, usesPath, "job %s calls %s, which is not a reusable workflow: its on: has no workflow_call", c.id, file.name)
		return nil
	case cl.jobs == nil:
		return nil // its own errors say why
	}
	return cl
}

// readCallee reads and decodes a called workflow's own keys; its jobs are translated
// for each call.
func (t *ghaTranslator) readCallee(file *ghaWorkflowFile, ref ghaCallRef) *ghaCallee {
	d := t.d
	cl := &ghaCallee{file: file}
	if d.workflows == nil {
		cl.err = errNoWorkflows
		return cl
	}
	var data []byte
	var err error
	if ref.owner == "" {
		data, err = d.workflows.LocalWorkflow(ref.file)
	} else {
		var commit string
		data, commit, err = d.workflows.RemoteWorkflow(ref.owner, ref.repo, ref.file, ref.ref)
		file.commit = commit
	}
	switch {
	case errors.Is(err, ErrWorkflowNotRead):
		cl.notRead = true
		return cl
	case err != nil:
		cl.err = err
		return cl
	}
	t.inFile(file.name, func() { t.decodeCallee(cl, data) })
	return cl
}

// decodeCallee reads a called workflow's on: workflow_call, env, defaults and jobs.
func (t *ghaTranslator) decodeCallee(cl *ghaCallee, data []byte) {
	d := t.d
	root := d.parseDocument(data)
	if root == nil || !d.checkShape(root, 0) {
		cl.called = true // its errors say what is wrong
		return
	}
	cl.scope = &ghaScope{file: cl.file, shell: ghaShell{name: "bash"}}
	if d.resolve(root) == nil || root.Kind != yaml.MappingNode {
		cl.called = true
		d.typeError(root, root, "", "a workflow: a mapping with on and jobs")
		return
	}
	var jobsNode *yaml.Node
	d.object(root, "", "a workflow", ghaTopKeys, func(f field) {
		switch f.key {
		case "on":
			t.workflowCall(cl, f)
		case "env":
			cl.env = d.fields(f.val, f.path, "a mapping of variable names to values")
			for _, g := range cl.env {
				cl.scope.env = append(cl.scope.env, g.key)
			}
		case "defaults":
			t.defaults(f, &cl.scope.shell, &cl.scope.workDir)
		case "jobs":
			jobsNode = f.val
		}
	})
	if !cl.called || d.abort {
		return
	}
	if jobsNode == nil {
		d.add(ErrRequired, root, "jobs", "a workflow needs a jobs mapping with at least one job")
		return
	}
	jobs := d.fields(jobsNode, "jobs", "a mapping of job ids to jobs")
	for _, jf := range jobs {
		if !jobNamePattern.MatchString(jf.key) {
			d.add(ErrInvalid, jf.keyNode, jf.path, "job id %q: use letters, digits, '-' and '_' (at most 100)", jf.key)
			return
		}
	}
	if len(jobs) == 0 {
		d.add(ErrRequired, jobsNode, "jobs", "a workflow needs a jobs mapping with at least one job")
		return
	}
	cl.jobs = jobs
}

// ghaInputTypes are the types of a workflow_call input.
var ghaInputTypes = []string{"boolean", "number", "string"}

// workflowCall reads on: for workflow_call and its inputs, secrets and outputs.
func (t *ghaTranslator) workflowCall(cl *ghaCallee, f field) {
	d := t.d
	r := d.resolve(f.val)
	if r == nil {
		return
	}
	var call *field
	switch r.Kind {
	case yaml.ScalarNode, yaml.SequenceNode:
		for _, item := range d.items(f.val, f.path, "an event name, a list of event names or a mapping of events", true) {
			if item = d.resolve(item); item != nil && item.Value == "workflow_call" {
				cl.called = true
			}
		}
		return
	case yaml.MappingNode:
		for _, g := range d.fields(f.val, f.path, "a mapping of events") {
			if g.key == "workflow_call" {
				g := g
				call = &g
			}
		}
	}
	if call == nil {
		return
	}
	cl.called = true
	if v := d.resolve(call.val); v == nil || v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return
	}
	d.object(call.val, call.path, "workflow_call", []string{"inputs", "secrets", "outputs"}, func(g field) {
		switch g.key {
		case "inputs":
			for _, in := range d.fields(g.val, g.path, "a mapping of input names to inputs") {
				ci := ghaCallInput{name: in.key}
				typed := false
				d.object(in.val, in.path, "an input", []string{"description", "required", "type", "default"}, func(h field) {
					switch h.key {
					case "required":
						ci.required, _ = d.boolean(h.val, h.path)
					case "type":
						if v, ok := d.str(h.val, h.path, "a type"); ok {
							typed = true
							if !contains(ghaInputTypes, v) {
								d.add(ErrInvalid, d.resolve(h.val), h.path, "type %q: a workflow_call input is a boolean, a number or a string", v)
							}
							ci.typ = v
						}
					case "default":
						ci.def = d.resolve(h.val)
					}
				})
				if !typed {
					d.add(ErrRequired, in.keyNode, in.path+".type", "input %s needs a type: boolean, number or string", in.key)
				}
				cl.inputs = append(cl.inputs, ci)
			}
		case "secrets":
			for _, s := range d.fields(g.val, g.path, "a mapping of secret names to secrets") {
				cs := ghaCallSecret{name: s.key}
				if v := d.resolve(s.val); v != nil && !(v.Kind == yaml.ScalarNode && v.Tag == "!!null") {
					d.object(s.val, s.path, "a secret", []string{"description", "required"}, func(h field) {
						if h.key == "required" {
							cs.required, _ = d.boolean(h.val, h.path)
						}
					})
				}
				cl.secrets = append(cl.secrets, cs)
			}
		case "outputs":
			for _, o := range d.fields(g.val, g.path, "a mapping of output names to outputs") {
				co := ghaCallOutput{name: o.key}
				d.object(o.val, o.path, "an output", []string{"description", "value"}, func(h field) {
					if h.key == "value" {
						if _, ok := d.str(h.val, h.path, "a value"); ok {
							co.value, co.path = d.resolve(h.val), h.path
						}
					}
				})
				if co.value == nil {
					d.add(ErrRequired, o.keyNode, o.path+".value", "output %s needs a value, such as ${{ jobs.JOB.outputs.NAME }}", o.key)
					continue
				}
				cl.outputs = append(cl.outputs, co)
			}
		}
	})
}

// checkCallerSide checks what a calling job gives, in its own terms, when the workflow
// it calls was not read.
func (t *ghaTranslator) checkCallerSide(c *callerJob, cj *ghaJob) {
	for _, k := range []string{"with", "secrets"} {
		f, ok := c.f[k]
		if !ok {
			continue
		}
		if k == "secrets" {
			if v := t.d.resolve(f.val); v != nil && v.Kind == yaml.ScalarNode && v.Value == "inherit" {
				continue
			}
		}
		for _, g := range t.d.fields(f.val, f.path, "a mapping of names to values") {
			if v := t.d.resolve(g.val); v != nil && v.Kind == yaml.ScalarNode {
				t.text(v.Value, v, g.path, cj, nil, ghaEnvValue)
			} else if v != nil {
				t.d.typeError(g.val, v, g.path, "a value")
			}
		}
	}
}

// callRewrite checks what the caller gives against what the called workflow declares
// and makes the rewrite of the called workflow's expressions.
func (t *ghaTranslator) callRewrite(c *callerJob, cj *ghaJob, cl *ghaCallee, uses string) *ghaCallRewrite {
	d := t.d
	rw := &ghaCallRewrite{t: t, prefix: c.id + "-", jobs: map[string]string{}, inputs: map[string]string{}, secrets: map[string]string{},
		file: cl.file.name, caller: c.id}
	if cl.file.owner != "" {
		rw.remote = cl.file
	}
	for _, n := range c.needs {
		rw.callerNeeds = append(rw.callerNeeds, n.Value)
	}
	rw.callerCond, rw.callerRewritten = c.cond, rw.callerCondition(c.cond)
	for _, jf := range cl.jobs {
		rw.jobs[strings.ToLower(jf.key)] = jf.key
	}
	before := len(d.errs)
	given := map[string]field{}
	if f, ok := c.f["with"]; ok {
		for _, g := range d.fields(f.val, f.path, "a mapping of input names to values") {
			var in *ghaCallInput
			for i := range cl.inputs {
				if strings.EqualFold(cl.inputs[i].name, g.key) {
					in = &cl.inputs[i]
				}
			}
			if in == nil {
				var names []string
				for _, x := range cl.inputs {
					names = append(names, x.name)
				}
				d.undeclared(g, "input", "an input", cl.file.name, "inputs", names)
				continue
			}
			v := d.resolve(g.val)
			if v == nil || v.Kind != yaml.ScalarNode {
				if v != nil {
					d.typeError(g.val, v, g.path, "a value")
				}
				continue
			}
			if strings.Contains(v.Value, "${{") {
				t.text(v.Value, v, g.path, cj, nil, ghaEnvValue)
			} else if msg := inputTypeProblem(in.typ, v); msg != "" {
				d.add(ErrType, v, g.path, "input %s of %s is a %s: %s", in.name, cl.file.name, in.typ, msg)
			}
			given[strings.ToLower(in.name)] = g
		}
	}
	for _, in := range cl.inputs {
		rw.declared = append(rw.declared, in.name)
		g, ok := given[strings.ToLower(in.name)]
		switch {
		case ok:
			rw.inputs[strings.ToLower(in.name)] = templateExpr(d.resolve(g.val))
		case in.required && in.def == nil:
			d.add(ErrRequired, c.at, c.f["uses"].path, "job %s does not give input %s, which %s requires (on.workflow_call.inputs.%s); give it in with:", c.id, in.name, cl.file.name, in.name)
		case in.def != nil:
			rw.inputs[strings.ToLower(in.name)] = templateExpr(in.def)
		default:
			rw.inputs[strings.ToLower(in.name)] = map[string]string{"boolean": "false", "number": "0"}[in.typ]
			if rw.inputs[strings.ToLower(in.name)] == "" {
				rw.inputs[strings.ToLower(in.name)] = "''"
			}
		}
	}
	passed := map[string]bool{}
	if f, ok := c.f["secrets"]; ok {
		if v := d.resolve(f.val); v != nil && v.Kind == yaml.ScalarNode {
			if v.Value != "inherit" {
				d.add(ErrInvalid, v, f.path, "secrets: of a calling job is inherit or a mapping of the called workflow's secrets to values, not %q", v.Value)
			}
			rw.inherit = true
		} else {
			for _, g := range d.fields(f.val, f.path, "inherit or a mapping of secret names to values") {
				var sec *ghaCallSecret
				for i := range cl.secrets {
					if strings.EqualFold(cl.secrets[i].name, g.key) {
						sec = &cl.secrets[i]
					}
				}
				if sec == nil {
					var names []string
					for _, x := range cl.secrets {
						names = append(names, x.name)
					}
					d.undeclared(g, "secret", "a secret", cl.file.name, "secrets", names)
					continue
				}
				v := d.resolve(g.val)
				if v == nil || v.Kind != yaml.ScalarNode {
					if v != nil {
						d.typeError(g.val, v, g.path, "a value")
					}
					continue
				}
				if strings.Contains(v.Value, "${{") {
					t.text(v.Value, v, g.path, cj, nil, ghaEnvValue)
				}
				rw.secrets[strings.ToLower(sec.name)] = templateExpr(v)
				passed[strings.ToLower(sec.name)] = true
			}
		}
	}
	if !rw.inherit {
		for _, s := range cl.secrets {
			if s.required && !passed[strings.ToLower(s.name)] {
				d.add(ErrRequired, c.at, c.f["uses"].path, "job %s does not pass secret %s, which %s requires (on.workflow_call.secrets.%s); pass it in secrets: or write secrets: inherit", c.id, s.name, cl.file.name, s.name)
			}
		}
	}
	if len(d.errs) > before {
		return nil
	}
	return rw
}

// inputTypeProblem says what is wrong with a value written out for an input of type typ,
// or "".
func inputTypeProblem(typ string, v *yaml.Node) string {
	switch typ {
	case "boolean":
		if v.Tag != "!!bool" {
			return fmt.Sprintf("write true or false, not %s", describe(v))
		}
	case "number":
		if v.Tag != "!!int" && v.Tag != "!!float" {
			return fmt.Sprintf("write a number, not %s", describe(v))
		}
	}
	return ""
}

// undeclared reports a key of a calling job's with: or secrets: that the called workflow
// does not declare in on.workflow_call.<section>, naming those it does.
func (d *decoder) undeclared(g field, what, aWhat, file, section string, names []string) {
	decl := "it declares none"
	if len(names) > 0 {
		decl = "it declares " + strings.Join(names, ", ")
	}
	d.add(ErrUnknownKey, g.keyNode, g.path, "%s %s is not %s of %s (on.workflow_call.%s: %s)%s", what, g.key, aWhat, file, section, decl, suggest(g.key, names))
}
