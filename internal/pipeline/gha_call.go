package pipeline

import (
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Reusable workflows: a job that calls one (jobs.<id>.uses) is replaced, before the jobs
// are translated, by the called workflow's jobs, each renamed <caller>-<job> and shown as
// "<caller name> / <job name>", as GitHub shows them. Their expressions read what the
// caller gives (gha_callexpr.go). Every one of them gets the caller's needs (so that what
// the caller gave may read needs.X.outputs wherever it is read) and the caller's if:
// (gha_callexpr.go joins the two conditions). When a job of the run needs
// the caller, a small job with the caller's id stands for the whole call: it needs every
// job the call added, ends failed when one of them failed, and has the called workflow's
// outputs. needs.<caller>.result and .outputs, and a dependant's default success(), then
// read what they read on GitHub (see docs/github-actions.md).

// WorkflowLoader reads the workflows that a workflow's jobs call (jobs.<id>.uses), so
// that Compile can put their jobs in the plan; the pipeline package does no I/O itself.
// Implementations are given to Compile in Options.Workflows.
type WorkflowLoader interface {
	// LocalWorkflow reads a file of the calling workflow's repository at the commit the
	// calling workflow was read at; file is relative to the repository's root
	// (.github/workflows/build.yml).
	LocalWorkflow(file string) ([]byte, error)
	// RemoteWorkflow reads file in the repository owner/repo at ref (a branch, a tag or a
	// commit) and returns it with the commit ref named, at which the workflow's own
	// calls of ./.github/workflows/... are read.
	RemoteWorkflow(owner, repo, file, ref string) (data []byte, commit string, err error)
}

// ErrWorkflowNotRead is what a WorkflowLoader returns, wrapped, for a workflow it does
// not read on purpose (gantry validate does not fetch other repositories unless asked).
// Compile then checks only the calling job's side of the call and plans, in its place, a
// job that fails saying the workflow was not read: such a plan is for showing, not
// running.
var ErrWorkflowNotRead = errors.New("workflow not read")

// SkipWorkflows is a WorkflowLoader that reads nothing: every workflow is not read
// (ErrWorkflowNotRead). A compile with it does no I/O and plans the rest of the
// definition, its triggers among them, with a stand-in for each call.
var SkipWorkflows WorkflowLoader = skipWorkflows{}

type skipWorkflows struct{}

func (skipWorkflows) LocalWorkflow(file string) ([]byte, error) {
	return nil, fmt.Errorf("%s: %w", file, ErrWorkflowNotRead)
}

func (skipWorkflows) RemoteWorkflow(owner, repo, file, ref string) ([]byte, string, error) {
	return nil, "", fmt.Errorf("%s/%s/%s@%s: %w", owner, repo, file, ref, ErrWorkflowNotRead)
}

// GitHub's limits on reusable workflows (github.com; GitHub Enterprise Server has four
// levels and 20 workflows).
const (
	// MaxWorkflowLevels is how many levels of workflows may be connected: the top-level
	// one and up to nine levels of calls.
	MaxWorkflowLevels = 10
	// MaxCalledWorkflows is how many unique workflows one top-level workflow may call,
	// the calls of called workflows included.
	MaxCalledWorkflows = 50
)

// ghaCallerKeys are the keys of a job that calls a reusable workflow.
var ghaCallerKeys = []string{"name", "uses", "with", "secrets", "needs", "if", "strategy", "permissions", "concurrency"}

// ghaWorkflowFile is a workflow file the translation read: the top-level one or a called
// one.
type ghaWorkflowFile struct {
	// name is the file as messages show it: "" for the top-level file,
	// .github/workflows/build.yml for one of the same repository,
	// owner/repo/.github/workflows/build.yml@ref for another repository's.
	name string
	// owner, repo and commit say where a workflow of another repository was read; empty
	// for one of the calling repository.
	owner, repo, commit string
	// key names the file for cycles and the limit of unique workflows.
	key string
}

// ghaScope is what jobs of a called workflow read of their own workflow rather than of the
// top-level one: its file, env and defaults.run.
type ghaScope struct {
	file    *ghaWorkflowFile
	env     []string
	shell   ghaShell
	workDir *yaml.Node
}

// ghaJobEntry is one job to translate: written in the top-level workflow (scope nil) or
// added by a call.
type ghaJobEntry struct {
	f     field
	scope *ghaScope
	// result is set on the place kept for the job that stands for a call, filled in when
	// some job needs the caller and dropped otherwise.
	result *ghaCallResult
}

// ghaCallPath is where a job the calls added, or a part of it, was written: in which
// file, and at which path of that file.
type ghaCallPath struct {
	file string
	path string
}

// ghaCallResult is what the job standing for a call needs to be made.
type ghaCallResult struct {
	id   string
	name string     // the caller's name, shown for it
	at   *yaml.Node // the caller's uses:, where it is placed
	file string
	jobs []string // every job the call added
	// inner are the jobs of the called workflow that call other workflows, by their
	// ids in the run: the jobs standing for those calls are needed too.
	inner     []string
	needs     []*yaml.Node // the caller's, at needsPath
	needsPath string
	cond      string // the caller's if: as ghaCallRewrite.callerRewritten has it
	outputs   []ghaCallOutput
	rewrite   *ghaCallRewrite
}

// errNoWorkflows is why a call cannot be read when Compile was given no WorkflowLoader.
var errNoWorkflows = errors.New("there is no repository to read it from (Gantry reads called workflows for the runs of a project's repository, gantry run and gantry validate)")

// callState is what expanding the calls of one top-level workflow keeps.
type callState struct {
	root    *ghaWorkflowFile
	callees map[string]*ghaCallee // by key
	// unique numbers the workflows called, by key, in the order they were first called.
	unique map[string]int
	// ids are the ids of every job, written or added, and what added each.
	ids map[string]string
	// paths maps the path of each job a call added to where it was written.
	paths map[string]ghaCallPath
	// roots are the ids of the top-level workflow's jobs.
	roots []string
}

// rootWorkflowFile names the top-level workflow for cycles: a file under
// .github/workflows is the one a call of ./.github/workflows/<name> reads.
func rootWorkflowFile(p string) *ghaWorkflowFile {
	p = strings.ReplaceAll(p, `\`, "/")
	if i := strings.LastIndex("/"+p, "/.github/workflows/"); i >= 0 {
		rel := p[i:]
		return &ghaWorkflowFile{key: rel}
	}
	return &ghaWorkflowFile{key: "\x00top-level"}
}

// hasCalls reports whether any job of a workflow's jobs mapping calls a reusable
// workflow.
func hasCalls(fields []field, d *decoder) bool {
	for _, f := range fields {
		if mappingValue(d.resolve(f.val), "uses") != nil {
			return true
		}
	}
	return false
}

// expandCalls replaces each job that calls a reusable workflow with the jobs of the
// workflow it calls, and, where a job needs the caller, adds the job that stands for
// the call.
func (t *ghaTranslator) expandCalls(fields []field) []ghaJobEntry {
	if !hasCalls(fields, t.d) {
		out := make([]ghaJobEntry, len(fields))
		for i, f := range fields {
			out[i] = ghaJobEntry{f: f}
		}
		return out
	}
	t.calls = &callState{root: rootWorkflowFile(t.d.path), callees: map[string]*ghaCallee{}, unique: map[string]int{},
		ids: map[string]string{}, paths: map[string]ghaCallPath{}}
	for _, f := range fields {
		t.calls.ids[f.key] = "the workflow"
		t.calls.roots = append(t.calls.roots, f.key)
	}
	var out []ghaJobEntry
	for _, f := range fields {
		e := ghaJobEntry{f: f}
		if mappingValue(t.d.resolve(f.val), "uses") == nil {
			out = append(out, e)
			continue
		}
		out = append(out, t.expandCall(e, []*ghaWorkflowFile{t.calls.root})...)
	}
	// A job that stands for a call is made only when a job needs the caller, or when
	// the job standing for an outer call does: its outputs may read the inner call's.
	// A call's place comes after the places of the calls it makes, so the outer ones
	// are decided first from the end.
	needed := map[string]bool{}
	for _, e := range out {
		if e.result != nil {
			continue
		}
		for _, n := range t.neededIDs(e.f.val) {
			needed[n] = true
		}
	}
	for i := len(out) - 1; i >= 0; i-- {
		if res := out[i].result; res != nil && needed[res.id] {
			for _, id := range res.inner {
				needed[id] = true
			}
		}
	}
	kept := out[:0]
	for _, e := range out {
		if e.result != nil {
			if !needed[e.result.id] {
				continue
			}
			e.f.val = t.resultJob(e.result)
			e.scope = gantryScope(e.scope)
		}
		kept = append(kept, e)
	}
	return kept
}

// gantryScope is the scope of a job Gantry makes in a workflow (the job standing for a
// call): no defaults.run of the workflow's, which its step does not expect.
func gantryScope(in *ghaScope) *ghaScope {
	out := &ghaScope{file: &ghaWorkflowFile{}, shell: ghaShell{name: "sh"}}
	if in != nil {
		out.file, out.env = in.file, in.env
	}
	return out
}

// scopedJob translates one job, in the scope of the workflow it was written in: a called
// workflow's jobs read its env and defaults.run, not the top-level workflow's.
func (t *ghaTranslator) scopedJob(e ghaJobEntry) *yaml.Node {
	if e.scope == nil {
		return t.job(e.f)
	}
	env, shell, dir := t.env, t.shell, t.workDir
	t.env, t.shell, t.workDir = e.scope.env, e.scope.shell, e.scope.workDir
	defer func() { t.env, t.shell, t.workDir = env, shell, dir }()
	return t.job(e.f)
}

// neededIDs lists the ids a job's needs: names.
func (t *ghaTranslator) neededIDs(job *yaml.Node) []string {
	n := t.d.resolve(mappingValue(t.d.resolve(job), "needs"))
	if n == nil {
		return nil
	}
	if n.Kind == yaml.ScalarNode {
		return []string{n.Value}
	}
	var out []string
	for _, item := range n.Content {
		if item = t.d.resolve(item); item != nil && item.Kind == yaml.ScalarNode {
			out = append(out, item.Value)
		}
	}
	return out
}

// sourceOf says where a path of the expanded workflow was written: in which file ("" for
// the top-level one) and at which path there.
func (t *ghaTranslator) sourceOf(p string) ghaCallPath {
	if t.calls == nil {
		return ghaCallPath{path: p}
	}
	for q := p; q != ""; {
		if cp, ok := t.calls.paths[q]; ok {
			return ghaCallPath{file: cp.file, path: cp.path + p[len(q):]}
		}
		i := strings.LastIndexAny(q, ".[")
		if i < 0 {
			break
		}
		q = q[:i]
	}
	return ghaCallPath{path: p}
}

// placeCallErrors says, for each error at a path of a job a call added, the file and the
// path it was written at. Errors that already name a file are left as they are.
func (t *ghaTranslator) placeCallErrors(es Errors) {
	if t.calls == nil {
		return
	}
	for _, e := range es {
		if e.File != "" || e.Path == "" {
			continue
		}
		cp := t.sourceOf(e.Path)
		e.File, e.Path = cp.file, cp.path
	}
}

// inFile names file on every error fn adds without one: the errors of a called
// workflow's own keys.
func (t *ghaTranslator) inFile(file string, fn func()) {
	from := len(t.d.errs)
	fn()
	for _, e := range t.d.errs[from:] {
		if e.File == "" {
			e.File = file
		}
	}
}

// callerJob is what a calling job says besides uses:.
type callerJob struct {
	id, path string
	name     string
	f        map[string]field
	needs    []*yaml.Node
	cond     string
	condNode *yaml.Node
	at       *yaml.Node // the uses: value
}

// expandCall expands one calling job; chain is the workflows from the top-level one to
// the one the job is written in.
func (t *ghaTranslator) expandCall(e ghaJobEntry, chain []*ghaWorkflowFile) []ghaJobEntry {
	d := t.d
	if d.abort {
		return nil
	}
	r := d.resolve(e.f.val)
	if r == nil || r.Kind != yaml.MappingNode {
		d.typeError(e.f.val, r, e.f.path, "a job")
		return nil
	}
	c := &callerJob{id: e.f.key, path: e.f.path, name: e.f.key, f: map[string]field{}}
	for _, f := range d.fields(r, e.f.path, "job "+e.f.key) {
		if !contains(ghaCallerKeys, f.key) {
			if contains(ghaJobKeys, f.key) {
				d.add(ErrInvalid, f.keyNode, f.path, "job %s calls a reusable workflow, which has its own jobs: %s belongs to them; a calling job has only %s", c.id, f.key, strings.Join(ghaCallerKeys, ", "))
			} else {
				d.add(ErrUnknownKey, f.keyNode, f.path, "unknown key %q in job %s%s", f.key, c.id, suggest(f.key, ghaCallerKeys))
			}
			continue
		}
		c.f[f.key] = f
	}
	uf := c.f["uses"]
	uses, ok := d.str(uf.val, uf.path, "a reusable workflow")
	if !ok {
		return nil
	}
	c.at = d.resolve(uf.val)
	if f, ok := c.f["name"]; ok {
		if v, ok := d.str(f.val, f.path, "a job name"); ok {
			c.name = v
		}
	}
	if f, ok := c.f["needs"]; ok {
		// Checked here, once, as every job of the call gets them. Those of a job of a
		// called workflow were checked as it was copied (calledJob).
		for i, item := range d.items(f.val, f.path, "a list of job ids", true) {
			v, ok := d.str(item, indexPath(f.path, i), "a job id")
			switch {
			case !ok:
				return nil
			case v == c.id:
				d.add(ErrCycle, d.resolve(item), indexPath(f.path, i), "job %q needs itself", v)
				return nil
			case e.scope == nil && !contains(t.calls.roots, v):
				known := t.calls.roots
				d.add(ErrUnknownNeed, d.resolve(item), indexPath(f.path, i), "needs %q, but there is no such job%s", v, suggest(v, known))
				return nil
			}
			c.needs = append(c.needs, d.resolve(item))
		}
	}
	cj := &ghaJob{id: c.id, path: c.path, env: append([]string(nil), t.env...), shell: t.shell, workDir: t.workDir}
	if e.scope != nil {
		cj.env = append([]string(nil), e.scope.env...)
	}
	for _, n := range c.needs {
		cj.needs = append(cj.needs, n.Value)
	}
	if f, ok := c.f["if"]; ok {
		if v, ok := d.str(f.val, f.path, "an expression"); ok {
			// Checked here, in the caller's own terms, so a mistake is shown where it
			// was written; the jobs of the call read it again.
			before := len(d.errs)
			t.condition(v, d.resolve(f.val), f.path, cj)
			if len(d.errs) > before {
				return nil
			}
			c.cond, c.condNode = bareCondition(v), d.resolve(f.val)
		}
	}
	if _, ok := c.f["strategy"]; ok {
		return t.expandMatrixCall(e, c, chain)
	}
	if len(chain) >= MaxWorkflowLevels {
		d.add(ErrLimit, c.at, uf.path, "job %s calls %s, past GitHub's limit of %d levels of workflows: %s", c.id, uses, MaxWorkflowLevels, chainText(chain, uses))
		return nil
	}
	callee := t.callee(c, uses, uf.path, chain)
	if callee == nil {
		return nil
	}
	if callee.notRead {
		t.checkCallerSide(c, cj)
		return []ghaJobEntry{t.notReadJob(e, c, uses)}
	}
	rw := t.callRewrite(c, cj, callee, uses)
	if rw == nil {
		return nil
	}
	res := &ghaCallResult{id: c.id, name: c.name, at: c.at, file: callee.file.name, needs: c.needs, outputs: callee.outputs,
		rewrite: rw, cond: rw.callerRewritten, needsPath: c.path + ".needs"}
	// Every id first, so that a job's needs may name any job of its workflow.
	before := len(d.errs)
	for _, jf := range callee.jobs {
		id := c.id + "-" + jf.key
		if !jobNamePattern.MatchString(id) {
			d.add(ErrInvalid, c.at, uf.path, "job %s calls %s, whose job %s would be the job %s of the run: use letters, digits, '-' and '_' (at most 100); shorten the calling job's id", c.id, callee.file.name, jf.key, clip(id, 120))
			continue
		}
		if by, taken := t.calls.ids[id]; taken {
			d.add(ErrInvalid, c.at, uf.path, "job %s calls %s, whose job %s would be the job %s of the run, which %s already has; rename one of them", c.id, callee.file.name, jf.key, id, by)
			continue
		}
		if len(t.calls.ids) >= d.limits.MaxJobs {
			// Calls of calls multiply: stop before the expansion itself is the cost.
			d.add(ErrLimit, c.at, uf.path, "the workflows called expand past the limit of %d jobs", d.limits.MaxJobs)
			d.abort = true
			return nil
		}
		t.calls.ids[id] = "the call of " + callee.file.name + " by job " + c.id
	}
	if len(d.errs) > before {
		return nil
	}
	var out []ghaJobEntry
	for _, jf := range callee.jobs {
		id := c.id + "-" + jf.key
		node := t.calledJob(c, callee, rw, jf, id)
		if node == nil {
			continue
		}
		t.calls.paths["jobs."+id] = ghaCallPath{file: callee.file.name, path: jf.path}
		own := len(t.neededIDs(jf.val))
		for k := range c.needs {
			// The caller's needs come after the called job's own: errors in them are the
			// caller's.
			t.calls.paths[indexPath("jobs."+id+".needs", own+k)] = t.sourceOf(indexPath(c.f["needs"].path, k))
		}
		je := ghaJobEntry{f: field{key: id, keyNode: gStr(id, jf.keyNode), val: node, path: "jobs." + id}, scope: callee.scope}
		if mappingValue(node, "uses") != nil {
			res.inner = append(res.inner, id)
			inner := t.expandCall(je, append(chain[:len(chain):len(chain)], callee.file))
			for _, ie := range inner {
				if ie.result == nil {
					res.jobs = append(res.jobs, ie.f.key)
				}
			}
			out = append(out, inner...)
			continue
		}
		res.jobs = append(res.jobs, id)
		out = append(out, je)
	}
	return append(out, ghaJobEntry{f: e.f, scope: e.scope, result: res})
}

// bareCondition strips the ${{ }} an if: may be wrapped in.
func bareCondition(v string) string {
	s := strings.TrimSpace(v)
	if strings.HasPrefix(s, "${{") && strings.HasSuffix(s, "}}") && strings.Count(s, "${{") == 1 {
		return strings.TrimSpace(s[3 : len(s)-2])
	}
	return s
}

// chainText writes the workflows of a chain of calls, ending with next.
func chainText(chain []*ghaWorkflowFile, next string) string {
	var names []string
	for _, f := range chain {
		n := f.name
		if n == "" {
			n = "this workflow"
		}
		names = append(names, n)
	}
	return strings.Join(append(names, next), " -> ")
}

// calledJob copies a job of the called workflow as a job of the run with the id id:
// its expressions rewritten, its needs renamed and the caller's added, the caller's if:
// joined to its own, and its name after the caller's.
func (t *ghaTranslator) calledJob(c *callerJob, cl *ghaCallee, rw *ghaCallRewrite, jf field, id string) *yaml.Node {
	d := t.d
	r := d.resolve(jf.val)
	if r == nil || r.Kind != yaml.MappingNode {
		t.inFile(cl.file.name, func() { d.typeError(jf.val, r, jf.path, "a job") })
		return nil
	}
	out := gMap(r)
	var ownNeeds []string
	var needsAt []*yaml.Node
	var needsKey, ifKey, nameKey, envKey *yaml.Node
	var ownCond string
	var ownCondNode *yaml.Node
	var ownName string
	var ownEnv *yaml.Node
	t.inFile(cl.file.name, func() {
		for _, f := range d.fields(r, jf.path, "job "+jf.key) {
			switch f.key {
			case "needs":
				needsKey = f.keyNode
				for i, item := range d.items(f.val, f.path, "a list of job ids", true) {
					if v, ok := d.str(item, indexPath(f.path, i), "a job id"); ok {
						ownNeeds = append(ownNeeds, v)
						needsAt = append(needsAt, d.resolve(item))
					}
				}
			case "if":
				ifKey = f.keyNode
				if v, ok := d.str(f.val, f.path, "an expression"); ok {
					ownCond, ownCondNode = rw.condition(v, d.resolve(f.val), f.path), d.resolve(f.val)
				}
			case "name":
				nameKey = f.keyNode
				if v, ok := d.str(f.val, f.path, "a job name"); ok {
					ownName = rw.label(v, d.resolve(f.val), f.path)
				}
			case "env":
				envKey = f.keyNode
				ownEnv = t.callCopy(f.val, rw, f.path, false)
			case "uses":
				u := d.resolve(f.val)
				if u != nil && u.Kind == yaml.ScalarNode && rw.remote != nil && strings.HasPrefix(strings.TrimSpace(u.Value), "./") {
					// ./ in another repository's workflow is that repository's, at the
					// commit it was read at.
					ref := fmt.Sprintf("%s/%s/%s@%s", rw.remote.owner, rw.remote.repo, strings.TrimPrefix(strings.TrimSpace(u.Value), "./"), rw.remote.commit)
					put(out, "uses", f.keyNode, gStr(ref, u))
					continue
				}
				put(out, "uses", f.keyNode, t.callCopy(f.val, rw, f.path, false))
			default:
				if rw.planTimeNeeds(f) {
					continue
				}
				put(out, f.key, f.keyNode, t.callCopy(f.val, rw, f.path, f.key == "steps"))
			}
		}
	})
	// Needs: its own, renamed, then the caller's.
	if len(ownNeeds) > 0 || len(c.needs) > 0 {
		at := needsKey
		if at == nil {
			at = jf.keyNode
		}
		needs := gSeq(at)
		var renamed []string
		for i, n := range ownNeeds {
			nid := n
			if x, ok := rw.jobs[strings.ToLower(n)]; ok {
				nid = rw.prefix + x
			} else {
				var known []string
				for _, jf := range cl.jobs {
					known = append(known, jf.key)
				}
				t.inFile(cl.file.name, func() {
					d.add(ErrUnknownNeed, needsAt[i], indexPath(jf.path+".needs", i), "needs %q, but there is no such job in %s%s", n, cl.file.name, suggest(n, known))
				})
				return nil
			}
			renamed = append(renamed, nid)
			needs.Content = append(needs.Content, gStr(nid, at))
		}
		for _, n := range c.needs {
			needs.Content = append(needs.Content, gStr(n.Value, n))
		}
		put(out, "needs", at, needs)
		ownNeeds = renamed
	}
	if cond := rw.joinConditions(ownCond, ownNeeds); cond != "" {
		at := ownCondNode
		key := ifKey
		if at == nil {
			at, key = c.condNode, jf.keyNode
		}
		put(out, "if", key, gStr(cond, at))
	}
	name := ownName
	if name == "" {
		name = jf.key
	}
	at := nameKey
	if at == nil {
		at = jf.keyNode
	}
	put(out, "name", at, gStr(c.name+" / "+name, at))
	if len(cl.env) > 0 || ownEnv != nil {
		// The called workflow's env is its jobs' own: the caller's is not passed on.
		at := envKey
		if at == nil {
			at = jf.keyNode
		}
		env := gMap(at)
		for _, g := range cl.env {
			if mappingValue(ownEnv, g.key) == nil {
				var v *yaml.Node
				t.inFile(cl.file.name, func() { v = t.callCopy(g.val, rw, g.path, false) })
				env.Content = append(env.Content, g.keyNode, v)
			}
		}
		if ownEnv != nil {
			env.Content = append(env.Content, ownEnv.Content...)
		}
		put(out, "env", at, env)
	}
	return out
}

// callCopy copies a node of a called workflow, aliases expanded, rewriting the
// expressions of its text; steps says n is a job's steps, whose if: are expressions
// without ${{ }}.
func (t *ghaTranslator) callCopy(n *yaml.Node, rw *ghaCallRewrite, p string, steps bool) *yaml.Node {
	d := t.d
	r := d.resolve(n)
	if r == nil {
		return nil
	}
	switch r.Kind {
	case yaml.ScalarNode:
		if r.Tag != "!!str" || !strings.Contains(r.Value, "${{") {
			c := *r
			c.Anchor = ""
			return &c
		}
		if inner, ok := wholeExpr(r.Value); ok {
			if out, err := rewriteExpr(inner, rw.expr(false)); err == nil {
				if v, ok := foldConst(out); ok {
					// An input the caller wrote out stands as the value it is, so
					// that a boolean or a list reads as one where a value is typed.
					return valueNode(v, r)
				}
			}
		}
		c := *r
		c.Anchor = ""
		c.Value = rw.text(r.Value, r, p, false)
		return &c
	case yaml.SequenceNode:
		c := *r
		c.Anchor = ""
		c.Content = nil
		for i, item := range r.Content {
			ip := indexPath(p, i)
			if steps {
				c.Content = append(c.Content, t.callStep(item, rw, ip))
				continue
			}
			if v := t.callCopy(item, rw, ip, false); v != nil {
				c.Content = append(c.Content, v)
			}
		}
		return &c
	case yaml.MappingNode:
		c := *r
		c.Anchor = ""
		c.Content = nil
		for _, f := range d.fields(r, p, "a mapping") {
			if v := t.callCopy(f.val, rw, f.path, false); v != nil {
				c.Content = append(c.Content, f.keyNode, v)
			}
		}
		return &c
	}
	return t.plain(r)
}

// callStep copies a step of a called workflow: its if: is an expression.
func (t *ghaTranslator) callStep(n *yaml.Node, rw *ghaCallRewrite, p string) *yaml.Node {
	d := t.d
	r := d.resolve(n)
	if r == nil || r.Kind != yaml.MappingNode {
		return t.callCopy(n, rw, p, false)
	}
	c := *r
	c.Anchor = ""
	c.Content = nil
	for _, f := range d.fields(r, p, "a step") {
		v := d.resolve(f.val)
		if f.key == "if" && v != nil && v.Kind == yaml.ScalarNode {
			cond := *v
			cond.Anchor = ""
			cond.Value = rw.condition(v.Value, v, f.path)
			c.Content = append(c.Content, f.keyNode, &cond)
			continue
		}
		if (f.key == "timeout-minutes" || f.key == "continue-on-error") && rw.planTimeNeeds(f) {
			continue
		}
		if x := t.callCopy(f.val, rw, f.path, false); x != nil {
			c.Content = append(c.Content, f.keyNode, x)
		}
	}
	return &c
}

// resultJob makes the job that stands for a call: it needs every job the call added,
// ends failed when one of them failed or was cancelled, and has the called workflow's
// outputs. It is skipped when the caller's if: is false, as the caller is on GitHub.
func (t *ghaTranslator) resultJob(res *ghaCallResult) *yaml.Node {
	at := res.at
	out := gMap(at)
	put(out, "name", at, gStr(res.name, at))
	needs := gSeq(at)
	for _, id := range append(res.jobs, res.inner...) {
		needs.Content = append(needs.Content, gStr(id, at))
	}
	for k, n := range res.needs {
		t.calls.paths[indexPath("jobs."+res.id+".needs", len(needs.Content))] = t.sourceOf(indexPath(res.needsPath, k))
		needs.Content = append(needs.Content, gStr(n.Value, n))
	}
	put(out, "needs", at, needs)
	cond := res.cond
	if cond == "" {
		cond = "!cancelled()"
	} else {
		cond = "!cancelled() && " + cond
	}
	put(out, "if", at, gStr(cond, at))
	put(out, "runs-on", at, gStr("ubuntu-latest", at))
	if len(res.outputs) > 0 {
		outputs := gMap(at)
		for _, o := range res.outputs {
			var v *yaml.Node
			t.inFile(res.file, func() {
				c := *o.value
				if !o.rewritten {
					c.Value = res.rewrite.text(o.value.Value, o.value, o.path, true)
				}
				v = &c
			})
			put(outputs, o.name, at, v)
			t.calls.paths["jobs."+res.id+".outputs."+o.name] = ghaCallPath{file: res.file, path: o.path}
		}
		put(out, "outputs", at, outputs)
	}
	// One step, which always runs: it shows how each job of the call ended, and fails
	// when one failed or was cancelled. The worker evaluates what it reads of needs.
	var b strings.Builder
	var failed []string
	for _, id := range res.jobs {
		ref := "needs" + refPath([]string{id}) + ".result"
		fmt.Fprintf(&b, "echo '%s: ${{ %s }}'\n", id, ref)
		failed = append(failed, ref+" == 'failure'", ref+" == 'cancelled'")
	}
	fmt.Fprintf(&b, "if [ '${{ %s }}' = true ]; then\n  echo %s >&2\n  exit 1\nfi", strings.Join(failed, " || "),
		shellQuote("a job of "+res.file+" failed or was cancelled"))
	step := gMap(at)
	put(step, "name", at, gStr("Jobs of "+res.file, at))
	put(step, "shell", at, gStr("sh", at))
	put(step, "run", at, gStr(b.String(), at))
	steps := gSeq(at)
	steps.Content = append(steps.Content, step)
	put(out, "steps", at, steps)
	return out
}

// notReadJob stands in the plan for a call of a workflow the loader did not read: a job
// with the caller's id, needs and if: that fails, saying so.
func (t *ghaTranslator) notReadJob(e ghaJobEntry, c *callerJob, uses string) ghaJobEntry {
	at := c.at
	out := gMap(at)
	put(out, "name", at, gStr(c.name, at))
	if len(c.needs) > 0 {
		needs := gSeq(at)
		for _, n := range c.needs {
			needs.Content = append(needs.Content, gStr(n.Value, n))
		}
		put(out, "needs", at, needs)
	}
	if c.cond != "" {
		put(out, "if", at, gStr(c.cond, c.condNode))
	}
	put(out, "runs-on", at, gStr("ubuntu-latest", at))
	step := gMap(at)
	put(step, "name", at, gStr("Call "+uses, at))
	put(step, "shell", at, gStr("sh", at))
	put(step, "run", at, gStr(fmt.Sprintf("echo %s >&2\nexit 1", shellQuote(uses+" was not read when this plan was made")), at))
	steps := gSeq(at)
	steps.Content = append(steps.Content, step)
	put(out, "steps", at, steps)
	return ghaJobEntry{f: field{key: e.f.key, keyNode: e.f.keyNode, val: out, path: e.f.path}, scope: gantryScope(e.scope)}
}

// shellQuote quotes s as one word for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// refuseCalledDynamicMatrices refuses a job of a called workflow whose matrix is
// computed from its needs' outputs: such a matrix is made, when its needs are done, from
// the run's own file (Job.ExpandMatrix), which does not hold the called workflow's jobs.
func (t *ghaTranslator) refuseCalledDynamicMatrices() {
	if t.calls == nil {
		return
	}
	for _, id := range sortedKeys(t.dynamic) {
		if _, called := t.calls.paths["jobs."+id]; !called || len(t.dynamic[id]) == 0 {
			continue
		}
		e := t.dynamic[id][0]
		t.d.add(ErrInvalid, e.node, e.path, "a job of a called workflow whose matrix is computed from its needs' outputs is not supported yet; write the matrix out, or compute it in the calling workflow and call the workflow from a matrix of calls")
	}
}
