package glob

import (
	"errors"
	"path"
	"strings"
	"testing"
)

// FuzzMatch compiles arbitrary patterns and matches them against arbitrary names. Besides
// never panicking, it checks properties that must hold whatever the pattern:
//   - a rejected pattern comes with a *SyntaxError whose offset lies inside it;
//   - a pattern with no special character matches exactly itself;
//   - a pattern that compiles matches the name it was written as once its special
//     characters are escaped;
//   - for patterns using only literals, *, and ? on literals, the answer agrees with
//     path.Match where the two syntaxes mean the same thing (a single * within one segment).
func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"main", "main"},
		{"release/*", "release/1.0"},
		{"release/**", "release/1/2"},
		{"**/README.md", "README.md"},
		{"*.jsx?", "a.js"},
		{"v[0-9]+", "v12"},
		{"[CB]at", "Bat"},
		{`\*x`, "*x"},
		{"[a-", "a"},
		{"?", ""},
		{"a/**/b", "a/b"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		p, err := Compile(pattern)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Compile(%q) error %T %v, want *SyntaxError", pattern, err, err)
			}
			if se.Offset < 0 || (pattern != "" && se.Offset >= len(pattern)) {
				t.Fatalf("Compile(%q) error offset %d outside the pattern", pattern, se.Offset)
			}
			return
		}
		got := p.Match(name)
		if !strings.ContainsAny(pattern, `*?+[]\`) {
			if got != (pattern == name) {
				t.Fatalf("literal %q: Match(%q) = %v", pattern, name, got)
			}
		}
		if pattern != "" {
			lit, err := Compile(escape(pattern))
			if err != nil {
				t.Fatalf("escaped %q does not compile: %v", pattern, err)
			}
			if !lit.Match(pattern) {
				t.Fatalf("escaped %q does not match itself", pattern)
			}
		}
		// path.Match's * is GitHub's * (no /); compare on patterns that use nothing else.
		if !strings.ContainsAny(pattern, `?+[]\`) && !strings.Contains(pattern, "**") {
			want, perr := path.Match(pattern, name)
			if perr == nil && want != got {
				t.Fatalf("Match(%q, %q) = %v, path.Match says %v", pattern, name, got, want)
			}
		}
	})
}

func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?+[]\!`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
