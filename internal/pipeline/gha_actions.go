package pipeline

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The actions a workflow may use. Gantry runs none of them: each is translated into what
// Gantry does itself (the checkout before the first step, a job's artifacts and its needs'
// inputs) or into a step that finds a toolchain already on the worker.

// uses translates a step that uses an action. It returns the step Gantry runs in its
// place, or nil when the action becomes a setting of the job.
func (t *ghaTranslator) uses(j *ghaJob, st *ghaStep, r *yaml.Node, u field, with, name, cond *field) *yaml.Node {
	d := t.d
	v, ok := d.str(u.val, u.path, "an action, as in actions/checkout@v4")
	if !ok {
		return nil
	}
	if actionName(v) == "actions/checkout" && (cond != nil || j.checkout != nil || j.checkoutSteps || with != nil && slices.ContainsFunc([]string{"ref", "repository", "sparse-checkout"},
		func(k string) bool { return mappingValue(d.resolve(with.val), k) != nil })) {
		// Not the job's one checkout of its commit (or a sparse one): a step where it
		// stands, which the worker does itself (agent: checkoutStep). Every later
		// checkout is one too, so they happen in the order written.
		j.checkoutSteps = true
		if with != nil {
			args := map[string]field{}
			for _, f := range d.fields(with.val, with.path, "a mapping of action inputs") {
				args[f.key] = f
			}
			t.unsupportedInputs("actions/checkout", args, checkoutStepInputs, append([]string{"token", "ssh-key", "ssh-known-hosts", "ssh-strict", "ssh-user"}, checkoutIgnored...))
		}
		return t.action(j, st, r, u, v, with, name, cond)
	}
	args := map[string]field{}
	if with != nil {
		for _, f := range d.fields(with.val, with.path, "a mapping of action inputs") {
			args[f.key] = f
		}
	}
	action := actionName(v)
	switch action {
	case "actions/checkout":
		t.checkout(j, u, args)
		return nil
	case "actions/upload-artifact":
		t.unsupportedInputs(action, args, nativeInputs[NativeUpload], []string{"compression-level", "overwrite"})
		if _, ok := args["path"]; !ok {
			d.add(ErrRequired, u.val, u.path, "actions/upload-artifact needs a path")
		}
		return t.action(j, st, r, u, v, with, name, cond)
	case "actions/download-artifact":
		t.download(j, u, args)
		return t.action(j, st, r, u, v, with, name, cond)
	case TestReportAction:
		return t.testReport(j, st, r, u, v, with, name, cond)
	case "actions/setup-go", "actions/setup-node", "actions/setup-python":
		return t.setup(j, st, r, u, action, args, name, cond)
	case "actions/cache", "actions/cache/restore", "actions/cache/save":
		if action == "actions/cache" && t.jobCache(j, st, r, u, args, cond) {
			return nil
		}
		native := strings.TrimPrefix(action, "actions/")
		t.unsupportedInputs(action, args, nativeInputs[native], []string{"enableCrossOsArchive", "upload-chunk-size"})
		for _, k := range []string{"key", "path"} {
			if _, ok := args[k]; !ok {
				d.add(ErrRequired, u.val, u.path, "%s needs a %s", action, k)
			}
		}
		return t.action(j, st, r, u, v, with, name, cond)
	}
	if out := t.reporter(j, st, r, u, v, args, name, cond); out != nil {
		return out
	}
	return t.action(j, st, r, u, v, with, name, cond)
}

// nativeInputs are the inputs of the actions the worker does itself as steps at their
// place (agent: nativeStep), by Uses.NativeAction.
var nativeInputs = map[string][]string{
	NativeUpload:       {"name", "path", "retention-days", "if-no-files-found", "include-hidden-files"},
	NativeCache:        {"path", "key", "restore-keys", "fail-on-cache-miss", "lookup-only", "save-always"},
	NativeCacheRestore: {"path", "key", "restore-keys", "fail-on-cache-miss", "lookup-only"},
	NativeCacheSave:    {"path", "key"},
}

// tried runs translate and keeps what it did when it reported no error; otherwise its
// errors are dropped and tried reports false, for the caller to translate another way.
func (t *ghaTranslator) tried(translate func()) bool {
	n := len(t.d.errs)
	translate()
	if len(t.d.errs) == n {
		return true
	}
	t.d.errs = t.d.errs[:n]
	return false
}

// jobCache makes an actions/cache step one of the job's caches, restored before its
// steps and saved after them, where that is what the step does: no id (nothing reads
// its outputs), no if:, key and paths known when the plan is made, and no input only
// the step can honour. It reports false for a step the worker must do at its place.
func (t *ghaTranslator) jobCache(j *ghaJob, st *ghaStep, r *yaml.Node, u field, args map[string]field, cond *field) bool {
	if cond != nil || mappingValue(r, "id") != nil {
		return false
	}
	for k, f := range args {
		if !slices.Contains([]string{"path", "key", "restore-keys", "enableCrossOsArchive", "upload-chunk-size"}, k) {
			return false
		}
		if v := t.d.resolve(f.val); k == "path" && v != nil && strings.Contains(v.Value, "${{") {
			// A path made by an expression is known when the step runs.
			return false
		}
	}
	n := len(j.caches)
	if !t.tried(func() { t.cache(j, st, u, args) }) {
		j.caches = j.caches[:n]
		return false
	}
	return true
}

// action translates a step that uses any other action into a Gantry step that runs it:
// the worker fetches the action (pinned when the run is created) and runs it as GitHub's
// runner does.
func (t *ghaTranslator) action(j *ghaJob, st *ghaStep, r *yaml.Node, u field, v string, with, name, cond *field) *yaml.Node {
	return t.actionAs(j, st, r, u, v, with, name, cond, ghaEnvValue)
}

// actionAs is action with the with: values read as text of kind: ghaEnvValue, read by
// the worker when the step runs, for an action's inputs.
func (t *ghaTranslator) actionAs(j *ghaJob, st *ghaStep, r *yaml.Node, u field, v string, with, name, cond *field, kind ghaTextKind) *yaml.Node {
	d := t.d
	if err := CheckUses(v); err != nil {
		d.add(ErrInvalid, u.val, u.path, "%v", err)
		return nil
	}
	out := gMap(r)
	if name != nil {
		if s, ok := d.str(name.val, name.path, "a step name"); ok {
			put(out, "name", name.keyNode, gStr(t.text(s, d.resolve(name.val), name.path, j, st, ghaStepName), d.resolve(name.val)))
		}
	}
	put(out, "uses", u.keyNode, gStr(v, d.resolve(u.val)))
	if cond != nil {
		if s, ok := d.str(cond.val, cond.path, "an expression"); ok {
			put(out, "if", cond.keyNode, gStr(t.condition(s, d.resolve(cond.val), cond.path, j), d.resolve(cond.val)))
		}
	}
	if with != nil {
		w := gMap(d.resolve(with.val))
		for _, f := range d.fields(with.val, with.path, "a mapping of action inputs") {
			val := d.resolve(f.val)
			if val == nil || val.Kind == yaml.ScalarNode && val.Tag == "!!null" {
				continue
			}
			if s, ok := d.str(f.val, f.path, "a value"); ok {
				put(w, f.key, f.keyNode, gStr(t.text(s, val, f.path, j, st, kind), val))
			}
		}
		put(out, "with", with.keyNode, w)
	}
	return out
}

// actionInput reads one with: value as text, with its expressions translated for when
// the plan is made (matrix and env values).
func (t *ghaTranslator) actionInput(j *ghaJob, st *ghaStep, f field, kind ghaTextKind) (string, *yaml.Node, bool) {
	v, ok := t.d.str(f.val, f.path, "a value")
	if !ok {
		return "", nil, false
	}
	r := t.d.resolve(f.val)
	return t.text(v, r, f.path, j, st, kind), r, true
}

// unsupportedInputs reports with: keys an action takes on GitHub that Gantry cannot honour;
// ignored are those that change nothing a job could see.
func (t *ghaTranslator) unsupportedInputs(action string, args map[string]field, known, ignored []string) {
	for _, k := range sortedKeys(args) {
		if contains(known, k) || contains(ignored, k) {
			continue
		}
		f := args[k]
		t.d.add(ErrInvalid, f.keyNode, f.path, "%s input %q is not supported by Gantry%s", action, k, suggest(k, known))
	}
}

// checkoutIgnored are actions/checkout's inputs that change nothing a job could see.
var checkoutIgnored = []string{"clean", "persist-credentials", "show-progress", "set-safe-directory", "fetch-tags", "filter"}

// checkoutStepInputs are the inputs a checkout done as a step takes (agent: checkoutStep).
var checkoutStepInputs = []string{"repository", "ref", "path", "fetch-depth", "submodules", "lfs", "sparse-checkout", "sparse-checkout-cone-mode"}

// checkout becomes the job's checkout: setting. GitHub fetches one commit unless
// fetch-depth says otherwise; Gantry's default is the whole history, so depth 1 is written
// out.
func (t *ghaTranslator) checkout(j *ghaJob, u field, args map[string]field) {
	d := t.d
	if j.checkout != nil {
		d.add(ErrInvalid, u.val, u.path, "a job checks out its repository once; a second actions/checkout (another repository or ref) is not supported")
		return
	}
	t.unsupportedInputs("actions/checkout", args, []string{"fetch-depth", "submodules", "lfs", "path"}, checkoutIgnored)
	c := gMap(u.val)
	depth := 1
	if f, ok := args["fetch-depth"]; ok {
		if v, ok := d.integer(f.val, f.path, 0, maxCheckoutDepth); ok {
			depth = v
		}
	}
	if depth > 0 {
		put(c, "depth", u.keyNode, gInt(depth, u.val))
	}
	if f, ok := args["submodules"]; ok {
		if v, ok := d.str(f.val, f.path, "true, false or recursive"); ok {
			switch strings.ToLower(v) {
			case "true", "recursive":
				put(c, "submodules", f.keyNode, gBool(true, d.resolve(f.val)))
			case "false":
			default:
				d.add(ErrInvalid, f.val, f.path, "expected true, false or recursive, found %q", v)
			}
		}
	}
	if f, ok := args["lfs"]; ok {
		if v, ok := d.boolean(f.val, f.path); ok && v {
			put(c, "lfs", f.keyNode, gBool(true, d.resolve(f.val)))
		}
	}
	if f, ok := args["path"]; ok {
		if v, ok := d.str(f.val, f.path, "a directory in the workspace"); ok {
			put(c, "path", f.keyNode, gStr(v, d.resolve(f.val)))
		}
	}
	j.checkout = c
	t.rename(j.path+".checkout", u.path)
}

// download checks a download-artifact step, which the worker does where it stands
// (agent: downloadStep): the run's own artifacts, or with run-id those of another run of
// the project (the coordinator checks which); a name written out for the run's own must
// be one that a job this one needs uploads. repository, with run-id, must name the
// project's repository, which the coordinator checks too.
func (t *ghaTranslator) download(j *ghaJob, u field, args map[string]field) {
	d := t.d
	t.unsupportedInputs("actions/download-artifact", args, []string{"name", "path", "pattern", "merge-multiple", "artifact-ids", "run-id", "repository"}, []string{"github-token"})
	if f, ok := args["repository"]; ok {
		if _, ok := args["run-id"]; !ok {
			d.add(ErrInvalid, f.keyNode, f.path, "actions/download-artifact: repository is read with run-id; without it a step gets the artifacts of its own run")
		}
	}
	if f, ok := args["run-id"]; ok {
		if v, ok := d.str(f.val, f.path, "a run id"); ok && strings.TrimSpace(v) == "" {
			d.add(ErrInvalid, f.val, f.path, "actions/download-artifact: run-id is empty; leave it out for the artifacts of this run")
		}
		// Another run's artifacts: which names it kept is known when the step runs.
		return
	}
	f, ok := args["name"]
	if !ok {
		return
	}
	want, ok := d.str(f.val, f.path, "an artifact name")
	if !ok || strings.Contains(want, "${{") {
		return
	}
	var kept []string
	for _, n := range j.needs {
		for _, name := range t.uploads[n] {
			if name == want || strings.Contains(name, "${{") {
				// A name made by an expression may be this one: that is known only
				// when the run has it.
				return
			}
			kept = append(kept, name)
		}
	}
	msg := fmt.Sprintf("artifact %q is not kept by a job this one needs", want)
	if len(kept) > 0 {
		msg += " (they keep: " + strings.Join(sortedCopy(kept), ", ") + ")" + suggest(want, kept)
	} else {
		msg += "; add the job that uploads it to needs"
	}
	d.add(ErrUnknownReference, f.val, f.path, "%s", msg)
}
