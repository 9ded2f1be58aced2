package ghaexpr

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary text to Parse. Besides never panicking, every answer must be
// well formed: an *Error with a kind, a message and an offset inside the text, or a Node
// whose String parses back to the same String. Whatever parses is also evaluated, and the
// text interpolated, neither of which may panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"github.sha",
		"github.event.issue.labels.*.name",
		"a || b && !c == d < e",
		"contains(github.event.issue.labels.*.name, 'bug') && startsWith(github.ref, 'refs/tags/')",
		"format('{0} {{x}} {1}', matrix.os, toJSON(matrix))",
		"fromJSON('{\"a\": [1, 2]}').a[1] >= 0x10",
		"steps['build-1'].outputs.x || 'default'",
		"hashFiles('**/go.sum', '**/go.mod')",
		"success() || failure() || cancelled() || always()",
		"join(matrix.n.*, ', ')",
		"(a).b[*].c['d'][0]",
		"-1.5e-3 != .5 && NaN != Infinity && -Infinity < 0o17",
		"'it''s' == \"no\"",
		"${{ x }}",
		"((((",
		"('')[0]",
		"(!a).b",
		"a[",
		"é ÿ",
		"\x00\xff",
	} {
		f.Add(s)
	}
	c := testContext()
	c.HashFiles = func(p []string) (string, error) { return strings.Join(p, ","), nil }
	f.Fuzz(func(t *testing.T, src string) {
		n, err := Parse(src)
		if err != nil {
			if n != nil {
				t.Fatal("a Node returned with an error")
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not *Error", err)
			}
			if e.Kind == "" || e.Msg == "" || e.Offset < 0 || e.Offset > len(src) {
				t.Fatalf("malformed error %#v", e)
			}
		} else {
			printed := n.String()
			again, err := Parse(printed)
			if err != nil {
				t.Fatalf("Parse(%q) is %q, which does not parse: %v", src, printed, err)
			}
			if again.String() != printed {
				t.Fatalf("Parse(%q) is %q, which parses as %q", src, printed, again.String())
			}
			if _, err := Eval(n, c); err != nil {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("Eval error %T is not *Error", err)
				}
			}
			if _, err := Condition(src, c); err != nil && !errors.As(err, new(*Error)) {
				t.Fatalf("Condition error %T does not wrap *Error", err)
			}
		}
		if _, err := Interpolate(src, c); err != nil && !errors.As(err, new(*Error)) {
			t.Fatalf("Interpolate error %T does not wrap *Error", err)
		}
	})
}
