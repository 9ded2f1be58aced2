package pipeline

import (
	"fmt"
	"strings"

	"github.com/gantry-ci/gantry/internal/ghaexpr"
	"go.yaml.in/yaml/v3"
)

// A job's name: with an operator or a function (${{ matrix.name || matrix.os }}) cannot be
// said in Gantry's language, which puts in references only. As runs-on (gha_runson.go),
// it is evaluated for each instance of the job when the plan is made, by GitHub's rules,
// reading matrix and literals and nothing else.

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
