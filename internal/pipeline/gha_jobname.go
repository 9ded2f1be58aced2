package pipeline

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gantry-ci/gantry/internal/ghaexpr"
)

// A job's name: with an operator or a function (${{ matrix.name || matrix.os }}) cannot be
// said in Gantry's language, which puts in references only. As runs-on (gha_runson.go),
// it is evaluated for each instance of the job when the plan is made, by GitHub's rules,
// reading matrix and literals and nothing else. A name that reads needs is evaluated
// when the job is claimed instead (claimName).

// jobNameEvaluated says whether a job's name must be evaluated per instance, reporting
// what such a name may not read; ok is false when it reported something.
func (t *ghaTranslator) jobNameEvaluated(s string, at *yaml.Node, p string) (evaluate, ok bool) {
	ok = true
	for rest := s; ; {
		start := strings.Index(rest, "${{")
		if start < 0 {
			return evaluate, ok
		}
		offset := len(s) - len(rest) + start
		end := strings.Index(rest[start:], "}}")
		if end < 0 {
			return false, true // text() reports it
		}
		inner := rest[start+3 : start+end]
		rest = rest[start+end+2:]
		if n, err := parseGHA(inner); err == nil && refsOnly(n) {
			continue
		}
		n, err := ghaexpr.Parse(inner)
		if err != nil {
			return false, true // text() reports it
		}
		evaluate = true
		for _, r := range ghaexpr.Refs(n) {
			if !strings.EqualFold(r.Context, "matrix") {
				t.textError(s, at, p, offset+3+r.At, fmt.Sprintf("a job's name is decided for each instance of the matrix when the plan is made, so an expression with operators or functions there may read matrix and literals only, not %s", r.Context))
				ok = false
			}
		}
	}
}

// nameByExpressions gives each instance of a job whose name: is evaluated its name.
func (t *ghaTranslator) nameByExpressions(p *Plan) {
	for _, job := range p.Jobs {
		e, ok := t.exprNames[job.Name]
		if !ok {
			continue
		}
		ctx := &ghaexpr.Context{Values: map[string]any{"matrix": MatrixContext(job.Matrix)}}
		name, err := ghaexpr.Interpolate(e.src, ctx)
		if err != nil {
			t.textError(e.src, e.node, e.path, 0, fmt.Sprintf("for %s: %v", job.Key, err))
			continue
		}
		job.DisplayName = strings.TrimSpace(name)
	}
}

// claimName translates a job's name: that reads needs, which GitHub evaluates when the
// job starts: each ${{ }} of it but a reference known when the plan is made is kept as
// written (WorkerExpr) for the coordinator to evaluate when it hands the job out
// (Job.ClaimedName), where it may read needs, matrix and literals. atClaim is false for a name that reads no needs, or whose ${{ }} do not
// parse (text() reports those).
func (t *ghaTranslator) claimName(s string, at *yaml.Node, p string, j *ghaJob) (name string, atClaim bool) {
	type part struct {
		start, end int
		inner      string
		refs       []ghaexpr.Ref
	}
	var parts []part
	for from := 0; ; {
		start := strings.Index(s[from:], "${{")
		if start < 0 {
			break
		}
		start += from
		end := strings.Index(s[start:], "}}")
		if end < 0 {
			return "", false
		}
		end += start + 2
		inner := s[start+3 : end-2]
		n, err := ghaexpr.Parse(inner)
		if err != nil {
			return "", false
		}
		refs := ghaexpr.Refs(n)
		atClaim = atClaim || slices.ContainsFunc(refs, func(r ghaexpr.Ref) bool { return strings.EqualFold(r.Context, "needs") })
		parts = append(parts, part{start, end, inner, refs})
		from = end
	}
	if !atClaim {
		return "", false
	}
	var b strings.Builder
	last := 0
	for _, pt := range parts {
		b.WriteString(s[last:pt.start])
		last = pt.end
		readsNeeds := slices.ContainsFunc(pt.refs, func(r ghaexpr.Ref) bool { return strings.EqualFold(r.Context, "needs") })
		if n, err := parseGHA(pt.inner); !readsNeeds && err == nil && refsOnly(n) {
			// A reference known when the plan is made (matrix.os) is put in then, so
			// the name shows it until the claim.
			v, err := t.interp(n, j, nil, ghaPlanTime)
			if err != nil {
				t.textError(s, at, p, pt.start+3+err.offset, err.msg)
			}
			b.WriteString(v)
			continue
		}
		good := true
		for _, r := range pt.refs {
			switch strings.ToLower(r.Context) {
			case "matrix":
			case "needs":
				if len(r.Path) > 0 && r.Path[0] != "*" && !slices.Contains(j.needs, r.Path[0]) {
					t.textError(s, at, p, pt.start+3+r.At, fmt.Sprintf("the name reads needs.%s, but job %s does not need %s%s", r.Path[0], j.id, r.Path[0], suggest(r.Path[0], j.needs)))
					good = false
				}
			default:
				t.textError(s, at, p, pt.start+3+r.At, claimNameMessage(r.Context))
				good = false
			}
		}
		if good {
			b.WriteString(WorkerExpr(strings.TrimSpace(pt.inner)))
		}
	}
	b.WriteString(s[last:])
	return b.String(), true
}
