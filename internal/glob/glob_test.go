package glob

import (
	"errors"
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern string
		yes     []string
		no      []string
	}{
		{"main", []string{"main"}, []string{"mai", "main2", "x/main", ""}},
		{"release/*", []string{"release/1.0", "release/"}, []string{"release/1.0/hotfix", "release", "releases/1"}},
		{"release/**", []string{"release/1.0", "release/1.0/hotfix"}, []string{"release", "rel/1"}},
		{"feature/*-alpha", []string{"feature/x-alpha", "feature/-alpha"}, []string{"feature/x/y-alpha", "feature/x-beta"}},
		{"*", []string{"main", "x", ""}, []string{"a/b"}},
		{"**", []string{"", "a", "a/b/c"}, nil},
		{"docs/**", []string{"docs/a.md", "docs/x/y/z.md"}, []string{"docs", "src/docs/a.md"}},
		{"**/README.md", []string{"README.md", "a/README.md", "a/b/README.md"}, []string{"README.mdx", "aREADME.md"}},
		{"a/**/b", []string{"a/b", "a/x/b", "a/x/y/b"}, []string{"ab", "a/xb"}},
		{"**.js", []string{"a.js", "src/x/a.js"}, []string{"a.jsx"}},
		{"*.jsx?", []string{"a.js", "a.jsx"}, []string{"a.jsxx", "src/a.js", "a.j"}},
		{"v1.+", []string{"v1.", "v1..."}, []string{"v1", "v1.x"}},
		{"v[0-9]+", []string{"v1", "v42"}, []string{"v", "vx", "v1a"}},
		{"v[0-9]?", []string{"v", "v7"}, []string{"v77"}},
		{"[CB]at", []string{"Cat", "Bat"}, []string{"cat", "at", "CBat"}},
		{"[1-2]00", []string{"100", "200"}, []string{"300", "00"}},
		{"[0-9a-z]", []string{"0", "q"}, []string{"Q", "-"}},
		{"[a-]", []string{"a", "-"}, []string{"b"}},
		{`\*`, []string{"*"}, []string{"x"}},
		{`\?\+\[\]\\\!`, []string{`?+[]\!`}, []string{"x"}},
		{"a.b", []string{"a.b"}, []string{"axb"}},
		{"(x)|y", []string{"(x)|y"}, []string{"x", "y"}},
		{"ünï/*", []string{"ünï/ç"}, []string{"uni/c"}},
		{"ü?", []string{"", "ü"}, []string{"üü"}},
		{"dir/*\n", []string{"dir/a\n"}, []string{"dir/a"}},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			t.Parallel()
			p, err := Compile(tt.pattern)
			if err != nil {
				t.Fatalf("Compile(%q): %v", tt.pattern, err)
			}
			if p.String() != tt.pattern {
				t.Errorf("String() = %q, want %q", p.String(), tt.pattern)
			}
			for _, s := range tt.yes {
				if !p.Match(s) {
					t.Errorf("%q does not match %q, want a match", tt.pattern, s)
				}
			}
			for _, s := range tt.no {
				if p.Match(s) {
					t.Errorf("%q matches %q, want no match", tt.pattern, s)
				}
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern string
		offset  int
		msg     string
	}{
		{"", 0, "empty pattern"},
		{"release/[", 8, "[ without a matching ]"},
		{"a]", 1, "] without a matching ["},
		{"[]", 0, "lists no character"},
		{"?x", 0, "? must follow a character"},
		{"*+", 1, "+ must follow a character"},
		{"**/?", 3, "? must follow"},
		{"a??", 2, "? must follow"},
		{`x\`, 1, `trailing \`},
		{`[x\`, 2, `trailing \`},
		{"[z-a]", 1, "bad range z-a"},
		{"[a-Z]", 1, "bad range a-Z"},
		{"[!-9]", 1, "bad range !-9"},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			t.Parallel()
			_, err := Compile(tt.pattern)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Compile(%q) error = %v, want a *SyntaxError", tt.pattern, err)
			}
			if se.Offset != tt.offset || !strings.Contains(se.Msg, tt.msg) || se.Pattern != tt.pattern {
				t.Errorf("Compile(%q) = %+v, want offset %d and a message containing %q", tt.pattern, se, tt.offset, tt.msg)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Error() = %q lacks %q", err.Error(), tt.msg)
			}
		})
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		patterns []string
		yes, no  []string
	}{
		{"plain", []string{"main", "release/*"}, []string{"main", "release/2"}, []string{"dev"}},
		{"negation after positive excludes", []string{"release/**", "!release/**-alpha"}, []string{"release/1"}, []string{"release/1-alpha"}},
		{"later positive includes again", []string{"release/**", "!release/**-alpha", "release/special-alpha"}, []string{"release/special-alpha"}, []string{"release/x-alpha"}},
		{"negation first then positive wins", []string{"!main", "*"}, []string{"main", "dev"}, nil},
		{"empty list matches nothing", nil, nil, []string{"main", ""}},
		{"escaped bang is a literal", []string{`\!x`}, []string{"!x"}, []string{"x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l, err := CompileList(tt.patterns)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.yes {
				if !l.Match(s) {
					t.Errorf("%q does not include %q", tt.patterns, s)
				}
			}
			for _, s := range tt.no {
				if l.Match(s) {
					t.Errorf("%q includes %q", tt.patterns, s)
				}
			}
		})
	}
}

func TestCompileListErrors(t *testing.T) {
	t.Parallel()
	_, err := CompileList([]string{"main", "!rel/[", "x"})
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("error = %v, want a *SyntaxError", err)
	}
	if se.Pattern != "!rel/[" || se.Offset != 5 {
		t.Errorf("error = %+v, want pattern !rel/[ at offset 5 (the ! counted)", se)
	}
	if _, err := CompileList([]string{"!"}); err == nil {
		t.Error("a bare ! compiled; want an error (it negates nothing)")
	}
}

func TestHasPositive(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		patterns []string
		want     bool
	}{
		{[]string{"!a", "!b"}, false},
		{[]string{"!a", "b"}, true},
		{[]string{`\!a`}, true},
		{nil, false},
	} {
		l, err := CompileList(tt.patterns)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.HasPositive(); got != tt.want {
			t.Errorf("HasPositive(%q) = %v, want %v", tt.patterns, got, tt.want)
		}
	}
}
