package ghaexpr

import (
	"errors"
	"strings"
	"testing"
)

// TestParseGrouping checks precedence and associativity through String, which puts every
// operation in parentheses.
func TestParseGrouping(t *testing.T) {
	t.Parallel()
	tests := []struct{ src, want string }{
		{"a || b && c", "(a || (b && c))"},
		{"a && b || c", "((a && b) || c)"},
		{"a || b || c", "(a || b || c)"},
		{"a && b && c || d", "((a && b && c) || d)"},
		{"(a || b) && c", "((a || b) && c)"},
		{"a == b && c != d", "((a == b) && (c != d))"},
		{"a == b < c", "(a == (b < c))"},
		{"a < b == c >= d", "((a < b) == (c >= d))"},
		{"a == b == c", "((a == b) == c)"},
		{"a < b <= c", "((a < b) <= c)"},
		{"a > b >= c", "((a > b) >= c)"},
		{"!a == b", "(!a == b)"},
		{"!(a == b)", "!(a == b)"},
		{"!!a", "!!a"},
		{"!a.b[0]", "!a.b[0]"},
		{"a.b.c", "a.b.c"},
		{"a['b'].c", "a['b'].c"},
		{"a[b.c]", "a[b.c]"},
		{"a[b == c]", "a[(b == c)]"},
		{"a.*.b", "a.*.b"},
		{"a[*].b", "a[*].b"},
		{"a . b", "a.b"},
		{"(a).b", "a.b"},
		{"(a || b).c", "(a || b).c"},
		{"('a')[0]", "('a')[0]"},
		{"(!a).b", "(!a).b"},
		{"!a.b", "!a.b"},
		{"fromJSON(x).y[0]", "fromJSON(x).y[0]"},
		{"contains( a , b )", "contains(a, b)"},
		{"success()", "success()"},
		{"format('{0}', a || b, c)", "format('{0}', (a || b), c)"},
		{"'it''s'", "'it''s'"},
		{"1.50", "1.5"},
		{"0x10", "16"},
		{"1e21", "1E+21"},
		{"-Infinity", "-Infinity"},
		{"a==-1", "(a == -1)"},
		{"a==.5", "(a == 0.5)"},
		{"a.true.null.NaN", "a.true.null.NaN"},
		{"steps.my-step.outputs.x-y", "steps.my-step.outputs.x-y"},
		{"\tgithub\n.sha\r\n", "github.sha"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			n, err := Parse(tt.src)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.src, err)
			}
			if got := n.String(); got != tt.want {
				t.Errorf("Parse(%q).String() = %q, want %q", tt.src, got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src  string
		kind ErrorKind
		msg  string // Error() without the expression it quotes
		pos  int    // 1-based
	}{
		{"", ErrSyntax, "An expression was expected", 1},
		{"   ", ErrSyntax, "An expression was expected", 1},
		{"a = b", ErrSyntax, "Unexpected symbol: '='", 3},
		{"a & b", ErrSyntax, "Unexpected symbol: '&'", 3},
		{"a | b", ErrSyntax, "Unexpected symbol: '|'", 3},
		{"a b", ErrSyntax, "Unexpected symbol: 'b'", 3},
		{"1 +", ErrSyntax, "Unexpected symbol: '+'", 3},
		{"a+b", ErrSyntax, "Unexpected symbol: 'a+b'", 1},
		{"1.2.3", ErrSyntax, "Unexpected symbol: '1.2.3'", 1},
		{"12abc", ErrSyntax, "Unexpected symbol: '12abc'", 1},
		{"0X10", ErrSyntax, "Unexpected symbol: '0X10'", 1},
		{"github.", ErrSyntax, "Unexpected end of expression: '.'", 7},
		{"(a", ErrSyntax, "Unexpected end of expression: 'a'", 2},
		{"a ==", ErrSyntax, "Unexpected end of expression: '=='", 3},
		{"!", ErrSyntax, "Unexpected end of expression: '!'", 1},
		{"a[1", ErrSyntax, "Unexpected end of expression: '1'", 3},
		{"contains(a,", ErrSyntax, "Unexpected end of expression: ','", 11},
		{"a)", ErrSyntax, "Unexpected symbol: ')'", 2},
		{"a]", ErrSyntax, "Unexpected symbol: ']'", 2},
		{"a[]", ErrSyntax, "Unexpected symbol: ']'", 3},
		{"a[*", ErrSyntax, "Unexpected end of expression: '*'", 3},
		{"*", ErrSyntax, "Unexpected symbol: '*'", 1},
		{"a.0", ErrSyntax, "Unexpected symbol: '0'", 3},
		{"a.'b'", ErrSyntax, "Unexpected symbol: ''b''", 3},
		{"'a'.b", ErrSyntax, "Unexpected symbol: '.'", 4},
		{"'a'[0]", ErrSyntax, "Unexpected symbol: '['", 4},
		{"1[0]", ErrSyntax, "Unexpected symbol: '['", 2},
		{"true()", ErrSyntax, "Unexpected symbol: '('", 5},
		{"a.b()", ErrSyntax, "Unexpected symbol: '('", 4},
		{"a ! b", ErrSyntax, "Unexpected symbol: '!'", 3},
		{"(a b)", ErrSyntax, "Unexpected symbol: 'b'", 4},
		{"a,b", ErrSyntax, "Unexpected symbol: ','", 2},
		{"contains(1,)", ErrSyntax, "Unexpected symbol: ')'", 12},
		{"contains(,1)", ErrSyntax, "Unexpected symbol: ','", 10},
		{"'abc", ErrSyntax, "Unexpected symbol: ''abc'", 1},
		{"a == 'it''s", ErrSyntax, "Unexpected symbol: ''it''s'", 6},
		{`"a"`, ErrSyntax, `Unexpected symbol: '"a"'. Strings are written in single quotes`, 1},
		{"a == é", ErrSyntax, "Unexpected symbol: 'é'", 6},
		{"$x", ErrSyntax, "Unexpected symbol: '$x'", 1},
		{"foo(1)", ErrSyntax, "Unrecognized function: 'foo'", 1},
		{"a || github(1)", ErrSyntax, "Unrecognized function: 'github'", 6},
		{"contains('a')", ErrSyntax, "Too few parameters supplied: 'contains'", 1},
		{"startsWith('a', 'b', 'c')", ErrSyntax, "Too many parameters supplied: 'startsWith'", 1},
		{"success(1)", ErrSyntax, "Too many parameters supplied: 'success'", 1},
		{"format()", ErrSyntax, "Too few parameters supplied: 'format'", 1},
		{"join()", ErrSyntax, "Too few parameters supplied: 'join'", 1},
		{"join(a, b, c)", ErrSyntax, "Too many parameters supplied: 'join'", 1},
		{"toJSON(a, b)", ErrSyntax, "Too many parameters supplied: 'toJSON'", 1},
		{"fromJSON()", ErrSyntax, "Too few parameters supplied: 'fromJSON'", 1},
		{"hashFiles()", ErrSyntax, "Too few parameters supplied: 'hashFiles'", 1},
		{strings.Repeat("(", 51) + "a" + strings.Repeat(")", 51), ErrLimit, "Exceeded max expression depth 50", 51},
		{strings.Repeat("!", 60) + "a", ErrLimit, "Exceeded max expression depth 50", 51},
		{"a" + strings.Repeat(" == a", 50), ErrLimit, "Exceeded max expression depth 50", 1},
		{"a" + strings.Repeat("[a", 50) + strings.Repeat("]", 50), ErrLimit, "Exceeded max expression depth 50", 101},
		{strings.Repeat("a", MaxLength+1), ErrLimit, "Exceeded max expression length 21000", 1},
	}
	for _, tt := range tests {
		name := tt.src
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			n, err := Parse(tt.src)
			if err == nil {
				t.Fatalf("Parse(%q) = %s, want an error", tt.src, n)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not *Error", err)
			}
			if !errors.Is(err, tt.kind) {
				t.Errorf("error kind %s, want %s", e.Kind, tt.kind)
			}
			if e.Msg != tt.msg {
				t.Errorf("message %q, want %q", e.Msg, tt.msg)
			}
			if e.Offset+1 != tt.pos {
				t.Errorf("position %d, want %d", e.Offset+1, tt.pos)
			}
			if e.Expr != tt.src {
				t.Errorf("Expr %q, want the source", e.Expr)
			}
		})
	}
}

func TestParseErrorText(t *testing.T) {
	t.Parallel()
	_, err := Parse("github.sha = 'x'")
	want := "Unexpected symbol: '='. Located at position 12 within expression: github.sha = 'x'"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

// TestParseDepthAllowed checks expressions at GitHub's limits still parse: a property
// chain and nesting just inside the depth limit.
func TestParseDepthAllowed(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		"a" + strings.Repeat(".b", 49),
		strings.Repeat("!", 49) + "a",
		strings.Repeat("(", 49) + "a" + strings.Repeat(")", 49),
		"a" + strings.Repeat(" || a", 1000), // a run of || is one level
		strings.Repeat("a", MaxLength),
	} {
		if _, err := Parse(src); err != nil {
			t.Errorf("Parse(%.40q...): %v", src, err)
		}
	}
}
