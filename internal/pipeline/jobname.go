package pipeline

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gantry-ci/gantry/internal/ghaexpr"
	"github.com/gantry-ci/gantry/internal/lazyre"
)

// A job's name: may read what the jobs it needs left (${{ needs.JOB.outputs.NAME }}, or
// a workflow's expression reading needs), as on GitHub, which evaluates a job's name
// when the job starts. Such a name is known only when the job is claimed: the plan keeps
// it as NameTemplate and shows it as written until then (DisplayName), and the
// coordinator evaluates it when it hands the job out (ClaimedName), with what it gives
// the worker of the job's needs.

// claimNameContexts are the contexts an expression in a name evaluated at the claim may
// read.
var claimNameContexts = []string{"needs", "matrix"}

// MaxJobNameBytes bounds a job's name as its claim evaluates it: longer is cut.
const MaxJobNameBytes = 1000

// jobName substitutes a job's name:: matrix and env values now, and, kept for the claim,
// needs.JOB.outputs.NAME and expressions kept for the worker that read needs, matrix and
// literals. atClaim says whether it kept any.
func (d *decoder) jobName(t text, matrix []MatrixValue, env map[string]string) (name string, atClaim bool) {
	out := d.replaceRefs(t, func(offset int, inner string) string {
		switch {
		case strings.HasPrefix(inner, workerExprPrefix):
			atClaim = true
			expr, ok := decodeWorkerExpr(inner)
			switch {
			case !ok:
				d.addAt(ErrInvalid, t, offset, "${{ %s }} is not an expression Gantry kept", inner)
			default:
				if msg := ClaimNameExprError(expr); msg != "" {
					d.addAt(ErrUnknownReference, t, offset, "%s", msg)
				}
			}
			if d.refs != nil {
				d.refs.readsNeeds = true
			}
			return "${{ " + inner + " }}"
		case strings.HasPrefix(inner, "needs."):
			atClaim = true
			kept, _ := d.jobRef(t, offset, inner, true)
			return kept
		case strings.HasPrefix(inner, "steps."):
			d.addAt(ErrUnknownReference, t, offset, "${{ %s }}: a job's name is decided when the job is claimed, before its steps run; it may read needs.<job>.outputs.<name>", inner)
			return ""
		}
		return d.substitute(text{v: "${{ " + inner + " }}", node: t.node, path: t.path}, matrix, env)
	})
	return strings.TrimSpace(out), atClaim
}

// ClaimNameExprError says why a GitHub expression cannot stand in a job's name that is
// evaluated when the job is claimed, or "".
func ClaimNameExprError(expr string) string {
	n, err := ghaexpr.Parse(expr)
	if err != nil {
		return err.Error()
	}
	for _, r := range ghaexpr.Refs(n) {
		if !slices.Contains(claimNameContexts, strings.ToLower(r.Context)) {
			return claimNameMessage(r.Context)
		}
	}
	return ""
}

func claimNameMessage(context string) string {
	return fmt.Sprintf("a job's name that reads needs is evaluated when the job is claimed, so it may read %s and literals, not %s",
		strings.Join(claimNameContexts, ", "), context)
}

// claimNameRefs finds what ClaimedName puts in: needs.JOB.outputs.NAME (1, 2) and
// expressions kept for the worker (3).
var claimNameRefs = lazyre.New(`\$\{\{ (?:needs\.([A-Za-z0-9_][A-Za-z0-9_-]*)\.outputs\.([A-Za-z_][A-Za-z0-9_-]*)|gha:([A-Za-z0-9_-]*)) \}\}`)

// readableName is a name as it is written: the expressions kept for the worker as
// ${{ expression }} again.
func readableName(s string) string {
	return workerExprPattern.ReplaceAllStringFunc(s, func(ref string) string {
		expr, ok := decodeWorkerExpr(strings.TrimSuffix(strings.TrimPrefix(ref, "${{ "), " }}"))
		if !ok {
			return ref
		}
		return "${{ " + expr + " }}"
	})
}

// ClaimedName evaluates the job's NameTemplate with what its needs left, by need name:
// each one's result (ResultSuccess ...) and outputs (a name a need did not set is "").
// Control characters become spaces, the name is trimmed and cut to MaxJobNameBytes, and
// a name that comes out empty is the job's key. An instance of a matrix job whose
// written name the plan told apart from its like by its values (DisplayName) keeps them
// after the name. It returns "" for a job whose name is known from the plan.
func (j *Job) ClaimedName(results map[string]string, outputs map[string]map[string]string) (string, error) {
	if j.NameTemplate == "" {
		return "", nil
	}
	var ctx *ghaexpr.Context
	var first error
	name := claimNameRefs.ReplaceAllStringFunc(j.NameTemplate, func(ref string) string {
		m := claimNameRefs.FindStringSubmatch(ref)
		if m[3] == "" {
			return outputs[m[1]][m[2]]
		}
		expr, ok := decodeWorkerExpr(workerExprPrefix + m[3])
		if !ok {
			return ref
		}
		if ctx == nil {
			needs := make(map[string]any, len(results))
			for _, n := range j.NeedsNames {
				outs := map[string]any{}
				for k, v := range outputs[n] {
					outs[k] = v
				}
				needs[n] = map[string]any{"result": GitHubResult(results[n]), "outputs": outs}
			}
			ctx = &ghaexpr.Context{Values: map[string]any{"needs": needs, "matrix": MatrixContext(j.Matrix)}}
		}
		v, err := ghaexpr.EvalString(expr, ctx)
		if err != nil {
			if first == nil {
				first = fmt.Errorf("job %s: name: ${{ %s }}: %w", j.Key, expr, err)
			}
			return ""
		}
		return ghaexpr.ToString(v)
	})
	if first != nil {
		return "", first
	}
	if written := readableName(j.NameTemplate); len(j.DisplayName) > len(written) && strings.HasPrefix(j.DisplayName, written) {
		name += j.DisplayName[len(written):]
	}
	name = strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, name))
	if len(name) > MaxJobNameBytes {
		cut := MaxJobNameBytes
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		name = name[:cut]
	}
	if name == "" {
		name = j.Key
	}
	return name, nil
}
