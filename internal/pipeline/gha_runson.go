package pipeline

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gantry-ci/gantry/internal/ghaexpr"
)

// A runs-on expression with an operator or a function (${{ matrix.os || 'ubuntu-latest' }},
// ${{ matrix.arch == 'i386' && 'ubuntu-22.04' || 'ubuntu-24.04' }}) cannot be said in
// Gantry's language, which puts in references only. Its value is known once the matrix
// is, so it is evaluated for each instance when the plan is made, by GitHub's rules
// (internal/ghaexpr), reading matrix and literals and nothing else. Until then the
// translation holds a placeholder label in its place.

// ghaLabelExpr is a runs-on label to evaluate per instance.
type ghaLabelExpr struct {
	src  string // the label as written, with its ${{ }}
	node *yaml.Node
	path string
}

// runsOnPlaceholder is the label the translation holds for the n-th evaluated label of a
// job's runs-on.
func runsOnPlaceholder(n int) string { return fmt.Sprintf("gha-runs-on-%d", n) }

// runsOnEvaluated reports whether the ${{ }} of a runs-on label must be evaluated per
// instance, because one has an operator or a function other than format(); then it checks
// that they read only matrix, reporting what else they read. A label of references
// (${{ matrix.os }}) is put in by the compiler, as any text is.
func (t *ghaTranslator) runsOnEvaluated(s string, at *yaml.Node, p string) (evaluate, ok bool) {
	type expr struct {
		n      ghaNode
		offset int
	}
	var exprs []expr
	ok = true
	for rest := s; ; {
		start := strings.Index(rest, "${{")
		if start < 0 {
			break
		}
		offset := len(s) - len(rest) + start
		end := strings.Index(rest[start:], "}}")
		if end < 0 {
			return false, true // text() reports it
		}
		inner := rest[start+3 : start+end]
		rest = rest[start+end+2:]
		n, err := parseGHA(inner)
		if err != nil {
			return false, true // text() reports it
		}
		if _, err := ghaexpr.Parse(inner); err != nil {
			t.textError(s, at, p, offset+3, err.Error())
			return false, false
		}
		exprs = append(exprs, expr{n, offset + 3})
		if !refsOnly(n) {
			evaluate = true
		}
	}
	if !evaluate {
		return false, true
	}
	for _, e := range exprs {
		eachGHANode(e.n, func(n ghaNode) {
			switch n := n.(type) {
			case *ghaRef:
				if n.head != "matrix" {
					t.textError(s, at, p, e.offset+n.at, fmt.Sprintf("runs-on is decided for each instance of the matrix when the plan is made, so an expression with operators or functions there may read matrix and literals only, not %s", n.name()))
					ok = false
				}
			case *ghaCall:
				switch strings.ToLower(n.name) {
				case "hashfiles", "success", "failure", "always", "cancelled":
					t.textError(s, at, p, e.offset+n.at, fmt.Sprintf("%s() has no meaning in runs-on", n.name))
					ok = false
				}
			}
		})
	}
	return true, ok
}

// refsOnly reports an expression the compiler can put in as text: a reference, a
// literal, or format() of those.
func refsOnly(n ghaNode) bool {
	switch n := n.(type) {
	case *ghaLit, *ghaRef:
		return true
	case *ghaParen:
		return refsOnly(n.x)
	case *ghaCall:
		if !strings.EqualFold(n.name, "format") {
			return false
		}
		for _, a := range n.args {
			if !refsOnly(a) {
				return false
			}
		}
		return true
	}
	return false
}

// eachGHANode calls fn for n and every node under it.
func eachGHANode(n ghaNode, fn func(ghaNode)) {
	fn(n)
	switch n := n.(type) {
	case *ghaParen:
		eachGHANode(n.x, fn)
	case *ghaUnary:
		eachGHANode(n.x, fn)
	case *ghaBinary:
		eachGHANode(n.l, fn)
		eachGHANode(n.r, fn)
	case *ghaCall:
		for _, a := range n.args {
			eachGHANode(a, fn)
		}
	}
}

// evalRunsOn evaluates a runs-on label for one instance of its job: the labels it comes
// to (a list gives several), as GitHub names them. A mistake is reported at the label.
func (t *ghaTranslator) evalRunsOn(e ghaLabelExpr, job *Job) []string {
	ctx := &ghaexpr.Context{Values: map[string]any{"matrix": MatrixContext(job.Matrix)}}
	var out []string
	src := strings.TrimSpace(e.src)
	inner := strings.TrimSuffix(strings.TrimPrefix(src, "${{"), "}}")
	var err error
	if strings.HasPrefix(src, "${{") && strings.HasSuffix(src, "}}") && !strings.Contains(inner, "${{") {
		var v any
		v, err = ghaexpr.EvalString(inner, ctx)
		switch v := v.(type) {
		case string:
			out = []string{v}
		case []any:
			for _, x := range v {
				s, ok := x.(string)
				if !ok {
					err = fmt.Errorf("a list of labels holds %s", ghaexpr.ToString(x))
					break
				}
				out = append(out, s)
			}
		case nil:
		default:
			if err == nil {
				err = fmt.Errorf("it comes to %s, not a label or a list of labels", ghaexpr.ToString(v))
			}
		}
	} else {
		var s string
		s, err = ghaexpr.Interpolate(e.src, ctx)
		out = []string{s}
	}
	if err != nil {
		t.d.add(ErrExpression, e.node, e.path, "runs-on of job %s: %v", job.Key, err)
		return nil
	}
	var labels []string
	for _, l := range out {
		l = strings.TrimSpace(l)
		if !labelPattern.MatchString(l) {
			t.d.add(ErrInvalid, e.node, e.path, "runs-on of job %s comes to the label %q: use letters, digits and . _ : / = -", job.Key, l)
			continue
		}
		labels = append(labels, l)
	}
	if len(out) == 0 {
		t.d.add(ErrInvalid, e.node, e.path, "runs-on of job %s comes to no label", job.Key)
	}
	return labels
}
