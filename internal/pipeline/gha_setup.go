package pipeline

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// setupAction describes the inputs of one actions/setup-* action.
type setupAction struct {
	label, versionKey, fileKey string
	// inputs are those the worker honours besides the version and its file; ignored
	// those that change nothing a job can see where nothing is downloaded.
	inputs, ignored []string
}

// setupIgnored are the inputs every setup action takes that only matter to a download
// (check-latest, architecture, token) or to GitHub's cache service.
var setupIgnored = []string{"cache", "cache-dependency-path", "check-latest", "architecture", "token"}

var setupActions = map[string]setupAction{
	"actions/setup-go": {label: "Go", versionKey: "go-version", fileKey: "go-version-file"},
	"actions/setup-node": {label: "Node.js", versionKey: "node-version", fileKey: "node-version-file",
		// package-manager-cache switches GitHub's dependency cache on or off: the worker
		// says in the log that Gantry's caches are configured with actions/cache.
		inputs:  []string{"package-manager-cache"},
		ignored: []string{"registry-url", "scope", "always-auth", "mirror", "mirror-token"}},
	"actions/setup-python": {label: "Python", versionKey: "python-version", fileKey: "python-version-file",
		inputs:  []string{"allow-prereleases", "pip-version"},
		ignored: []string{"update-environment"}},
}

// setup becomes a step that the worker does itself (agent: setupStep): it finds the
// version asked for among the toolchains installed where the job's steps run, by the
// action's own rules, and puts it first on the PATH of the later steps, or fails naming
// the version and what it found. Gantry never downloads a toolchain.
func (t *ghaTranslator) setup(j *ghaJob, st *ghaStep, r *yaml.Node, u field, action string, args map[string]field, name, cond *field) *yaml.Node {
	d := t.d
	sa := setupActions[action]
	known := append([]string{sa.versionKey, sa.fileKey}, sa.inputs...)
	t.unsupportedInputs(action, args, known, append(append([]string(nil), setupIgnored...), sa.ignored...))
	stepName := "Set up " + sa.label
	if f, ok := args[sa.versionKey]; ok {
		if v, _, ok := t.actionInput(j, st, f, ghaStepName); ok {
			if first := strings.TrimSpace(strings.SplitN(strings.TrimSpace(v), "\n", 2)[0]); first != "" {
				stepName += " " + first
			}
		}
	}
	out := gMap(r)
	if name != nil {
		if v, ok := d.str(name.val, name.path, "a step name"); ok {
			stepName = t.text(v, d.resolve(name.val), name.path, j, st, ghaStepName)
		}
	}
	put(out, "name", u.keyNode, gStr(stepName, u.val))
	uses, _ := d.str(u.val, u.path, "an action")
	put(out, "uses", u.keyNode, gStr(uses, d.resolve(u.val)))
	if cond != nil {
		if v, ok := d.str(cond.val, cond.path, "an expression"); ok {
			put(out, "if", cond.keyNode, gStr(t.condition(v, d.resolve(cond.val), cond.path, j), d.resolve(cond.val)))
		}
	}
	// The worker reads what it honours; the ignored inputs are left out.
	var with *yaml.Node
	for _, k := range sortedKeys(args) {
		f := args[k]
		if !contains(known, k) {
			continue
		}
		val := d.resolve(f.val)
		if val == nil || val.Kind == yaml.ScalarNode && val.Tag == "!!null" {
			continue
		}
		v, _, ok := t.actionInput(j, st, f, ghaEnvValue)
		if !ok {
			continue
		}
		if with == nil {
			with = gMap(f.keyNode)
		}
		put(with, k, f.keyNode, gStr(v, val))
	}
	if with != nil {
		put(out, "with", u.keyNode, with)
	}
	return out
}
