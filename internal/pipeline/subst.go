package pipeline

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

var refPattern = regexp.MustCompile(`^(matrix|env|secrets)\.([A-Za-z_][A-Za-z0-9_-]*)$`)

// substitute replaces every ${{ matrix.NAME }} and ${{ env.NAME }} in t. Anything else
// inside ${{ }} is an error: these are resolved when the plan is made, and a reference that
// cannot be resolved then would otherwise reach a shell as literal text.
func (d *decoder) substitute(t text, matrix []MatrixValue, env map[string]string) string {
	return d.substituteRefs(t, matrix, env, false)
}

// substituteEnv is substitute for an env value, where ${{ secrets.NAME }} may also stand:
// it is kept as a reference, written canonically, and resolved only by the worker that
// claims the job, so no secret's value is ever part of a plan.
func (d *decoder) substituteEnv(t text, matrix []MatrixValue, env map[string]string) string {
	return d.substituteRefs(t, matrix, env, true)
}

func (d *decoder) substituteRefs(t text, matrix []MatrixValue, env map[string]string, secrets bool) string {
	s := t.v
	if !strings.Contains(s, "${{") {
		return s
	}
	var b strings.Builder
	for {
		start := strings.Index(s, "${{")
		if start < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:start])
		offset := len(t.v) - len(s) + start
		end := strings.Index(s[start:], "}}")
		if end < 0 {
			d.addAt(ErrInvalid, t, offset, "${{ is not closed with }}")
			return t.v
		}
		inner := strings.TrimSpace(s[start+3 : start+end])
		m := refPattern.FindStringSubmatch(inner)
		switch {
		case m == nil:
			d.addAt(ErrUnknownReference, t, offset, "${{ %s }} is not a reference Gantry can resolve; use ${{ matrix.<axis> }} or ${{ env.<NAME> }}", inner)
		case m[1] == "matrix":
			v, ok := lookupMatrix(matrix, m[2])
			if !ok {
				d.addAt(ErrUnknownReference, t, offset, "%s", missingMatrixMessage(m[2], matrix))
			}
			b.WriteString(v)
		case m[1] == "secrets":
			switch {
			case !secrets:
				d.addAt(ErrUnknownReference, t, offset, "${{ secrets.%s }} may only stand in an env value; set it in env and read it in the step as $%s", m[2], m[2])
			case !ValidSecretName(m[2]):
				d.addAt(ErrInvalid, t, offset, "secrets.%s: a secret's name is upper case letters, digits and _, not starting with a digit", m[2])
			}
			b.WriteString(SecretRef(m[2]))
		default:
			v, ok := env[m[2]]
			if !ok {
				d.addAt(ErrUnknownReference, t, offset, "env.%s is not set here%s", m[2], suggest(m[2], sortedKeys(env)))
			}
			if !secrets && len(SecretRefs(v)) > 0 {
				d.addAt(ErrInvalid, t, offset, "env.%s holds a secret, which is resolved only when the job runs; read it in the step as $%s", m[2], m[2])
				v = ""
			}
			b.WriteString(v)
		}
		s = s[start+end+2:]
	}
	return b.String()
}

func lookupMatrix(matrix []MatrixValue, name string) (string, bool) {
	for _, m := range matrix {
		if m.Name == name {
			return m.Value, true
		}
	}
	return "", false
}

func missingMatrixMessage(name string, matrix []MatrixValue) string {
	if len(matrix) == 0 {
		return "matrix." + name + " is used, but this job has no matrix"
	}
	names := make([]string, len(matrix))
	for i, m := range matrix {
		names[i] = m.Name
	}
	return "matrix." + name + " is not an axis of this job (axes: " + strings.Join(names, ", ") + ")" + suggest(name, names)
}

// addAt reports an error at a byte offset inside a scalar. The column is exact for scalars
// written on one line; for block scalars the scalar's own position is used.
func (d *decoder) addAt(kind ErrorKind, t text, offset int, format string, args ...any) {
	d.add(kind, t.node, t.path, format, args...)
	e := d.errs[len(d.errs)-1]
	e.Line, e.Column = positionIn(t.node, t.v, offset)
}

func positionIn(n *yaml.Node, value string, offset int) (line, col int) {
	if n == nil {
		return 0, 0
	}
	line, col = n.Line, n.Column
	if strings.Contains(value, "\n") || offset < 0 || offset > len(value) {
		return line, col
	}
	switch n.Style {
	case 0:
	case yaml.DoubleQuotedStyle, yaml.SingleQuotedStyle:
		col++
	default:
		return line, col
	}
	return line, col + utf8.RuneCountInString(value[:offset])
}
