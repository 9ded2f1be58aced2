package pipeline

import (
	"strings"
	"testing"
)

// TestExpressionMessages: a mistake in an if: reads like Gantry's other errors, in the
// user's words, never in expr-lang's token and Go type names.
func TestExpressionMessages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src, want string
		offset    int
	}{
		{`&& branch`, `unexpected "&&"`, 0},
		{`branch == "a" || && x`, `unexpected "&&"`, 17},
		{`branch)`, `unexpected ")"`, 6},
		{`branch = 'main'`, `unexpected "="`, 7},
		{`branch == 'a' 'b'`, `unexpected string "b"`, 14},
		{`branch == 'a' main`, `unexpected name main`, 14},
		{`branch ==`, `the expression ends too early`, 8},
		{`(branch`, `the expression ends too early`, 6},
		{`'abc`, `a string is not closed with its quote`, 4},
		{`needs.b.outputs`, `an if: must be true or false, and this gives a mapping`, 0},
		{`branch`, `an if: must be true or false, and this gives text`, 0},
		{`branch + 1`, `mismatched types text and a number`, 7},
		{`branch.x`, `text has no field x`, 7},
		{`branch @ 2`, `unexpected character "@"`, 7},
	}
	for _, tt := range tests {
		_, err := compileCondition(tt.src, &condScope{needs: []string{"b"}})
		if err == nil {
			t.Errorf("%s: compiled, want %q", tt.src, tt.want)
			continue
		}
		if !strings.Contains(err.msg, tt.want) || err.offset != tt.offset {
			t.Errorf("%s: %q at %d, want %q at %d", tt.src, err.msg, err.offset, tt.want, tt.offset)
		}
		for _, leak := range []string{"token", "Operator(", "Bracket(", "EOF", "map[", "string and", "bool"} {
			if strings.Contains(err.msg, leak) {
				t.Errorf("%s: %q speaks expr-lang's words (%s)", tt.src, err.msg, leak)
			}
		}
	}
}

// TestExpressionMessageInValidate: the message reaches the definition's error with the
// if:'s path and the column of the offending token.
func TestExpressionMessageInValidate(t *testing.T) {
	t.Parallel()
	_, err := Compile([]byte("jobs:\n  a:\n    if: branch == \"main\" && && event\n    steps: [{run: x}]\n"), Options{})
	errs, ok := err.(Errors)
	if !ok || len(errs) != 1 {
		t.Fatalf("got %v, want one error", err)
	}
	if e := errs[0]; e.Path != "jobs.a.if" || e.Line != 3 || e.Column != 29 || e.Message != `unexpected "&&"` {
		t.Errorf("got %s, want 3:29: jobs.a.if: unexpected \"&&\"", e)
	}
}
