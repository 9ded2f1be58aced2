package pipeline

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gantry-ci/gantry/internal/ghaexpr"
)

// An input a caller fills from what a job it needs left (with: {who: ${{
// needs.a.outputs.x }}}) is known only when the called jobs are claimed. GitHub evaluates
// a job's name, runs-on, timeout-minutes, continue-on-error, environment and concurrency
// when the job starts, so there any of them may read such an input. Gantry evaluates a
// job's name when the job is claimed too (jobname.go): a called job's name reading such
// an input is kept as the caller's expression for the claim. The others it decides
// earlier, when it plans the run (or, for a concurrency group, when it creates it), and a
// called job's setting that reads such an input is refused, naming the input, what the
// caller gave and why, rather than failing later with a message about text the called
// file does not hold.

// readsNeeds reports whether expr, a GitHub expression without ${{ }}, reads the needs
// context.
func readsNeeds(expr string) bool {
	n, err := ghaexpr.Parse(strings.TrimSpace(expr))
	if err != nil {
		return false
	}
	return slices.ContainsFunc(ghaexpr.Refs(n), func(r ghaexpr.Ref) bool { return strings.EqualFold(r.Context, "needs") })
}

// claimReadable reports whether expr reads what a job's name evaluated at its claim
// reads (needs) and nothing else a claim cannot know.
func claimReadable(expr string) bool {
	n, err := ghaexpr.Parse(strings.TrimSpace(expr))
	if err != nil {
		return false
	}
	refs := ghaexpr.Refs(n)
	return len(refs) > 0 && !slices.ContainsFunc(refs, func(r ghaexpr.Ref) bool { return !strings.EqualFold(r.Context, "needs") })
}

// plannedWhen says, for a key of a called job (or of one of its steps) that Gantry
// decides before the job is claimed, when it decides it; "" for any other key.
func plannedWhen(key string) string {
	switch key {
	case "runs-on", "timeout-minutes", "continue-on-error", "environment", "container", "services":
		return "when it plans the run"
	case "concurrency":
		return "when it creates the run"
	}
	return ""
}

// planTimeNeeds reports, and refuses, a setting of a called job (its key written in the
// called workflow at f) that reads an input the caller fills from a need: see the top of
// this file.
func (rw *ghaCallRewrite) planTimeNeeds(f field) bool {
	when := plannedWhen(f.key)
	if when == "" {
		return false
	}
	refused := false
	for _, tx := range settingTexts(rw.t.d, f) {
		segs, ok := exprSegments(tx.val.Value)
		if !ok {
			continue // the translation reports it
		}
		for _, seg := range segs {
			n, err := ghaexpr.Parse(seg.inner)
			if err != nil {
				continue
			}
			for _, ref := range ghaexpr.Refs(n) {
				if !strings.EqualFold(ref.Context, "inputs") || len(ref.Path) == 0 {
					continue
				}
				given, ok := rw.inputs[strings.ToLower(ref.Path[0])]
				if !ok || !readsNeeds(given) {
					continue
				}
				given = strings.TrimSpace(given)
				if strings.HasPrefix(given, "(") && strings.HasSuffix(given, ")") {
					given = strings.TrimSpace(given[1 : len(given)-1])
				}
				rw.t.textError(tx.val.Value, tx.val, tx.path, seg.start+3+ref.At, fmt.Sprintf(
					"%s reads inputs.%s, which job %s gives as ${{ %s }}: what a job it needs left is known only when the job is claimed, but Gantry decides %s %s, before any job has run (GitHub decides it when the job starts); give the input a value written out or from the caller's matrix",
					tx.key, ref.Path[0], rw.caller, given, tx.key, when))
				refused = true
			}
		}
	}
	return refused
}

// settingTexts are the texts of a setting (key f.key, written at f) that Gantry decides
// before the job is claimed, each with what it is called in messages (key): all of
// runs-on, a job's name, timeout-minutes and continue-on-error; environment's name (its
// url is evaluated when the job ends); concurrency's group; the image of the container
// and of each service.
func settingTexts(d *decoder, f field) []field {
	var texts []field
	r := d.resolve(f.val)
	switch {
	case r == nil:
	case f.key == "runs-on":
		var walk func(n *yaml.Node, p string)
		walk = func(n *yaml.Node, p string) {
			switch n = d.resolve(n); {
			case n == nil:
			case n.Kind == yaml.ScalarNode:
				texts = append(texts, field{key: f.key, val: n, path: p})
			case n.Kind == yaml.SequenceNode:
				for i, item := range n.Content {
					walk(item, indexPath(p, i))
				}
			case n.Kind == yaml.MappingNode:
				for i := 0; i+1 < len(n.Content); i += 2 {
					walk(n.Content[i+1], joinPath(p, n.Content[i].Value))
				}
			}
		}
		walk(r, f.path)
	case r.Kind == yaml.ScalarNode:
		texts = append(texts, field{key: f.key, val: r, path: f.path})
	case f.key == "services" && r.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(r.Content); i += 2 {
			p := joinPath(f.path, r.Content[i].Value)
			if img := d.resolve(mappingValue(d.resolve(r.Content[i+1]), "image")); img != nil {
				texts = append(texts, field{key: "the image of service " + r.Content[i].Value, val: img, path: p + ".image"})
			}
		}
	case r.Kind == yaml.MappingNode:
		sub := map[string]string{"environment": "name", "concurrency": "group", "container": "image"}[f.key]
		if v := d.resolve(mappingValue(r, sub)); sub != "" && v != nil {
			what := f.key + "'s " + sub
			if f.key == "container" {
				what = "the container's image"
			}
			texts = append(texts, field{key: what, val: v, path: f.path + "." + sub})
		}
	}
	return slices.DeleteFunc(texts, func(tx field) bool {
		return tx.val.Kind != yaml.ScalarNode || !strings.Contains(tx.val.Value, "${{")
	})
}
