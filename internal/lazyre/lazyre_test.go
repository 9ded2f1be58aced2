package lazyre

import (
	"strings"
	"testing"
)

// TestCompiledOnFirstUse: New compiles nothing, not even a bad expression; the first use
// compiles, and the methods answer as regexp's do.
func TestCompiledOnFirstUse(t *testing.T) {
	bad := New(`(unclosed`)
	if bad.re != nil {
		t.Fatal("compiled when made")
	}
	r := New(`^([a-z]+)-(\d+)$`)
	if r.re != nil {
		t.Fatal("compiled when made")
	}
	if !r.MatchString("job-12") || r.MatchString("job-x") {
		t.Error("MatchString")
	}
	if r.re == nil {
		t.Error("not compiled after use")
	}
	if got := r.FindStringSubmatch("job-12"); len(got) != 3 || got[1] != "job" || got[2] != "12" {
		t.Errorf("FindStringSubmatch = %q", got)
	}
	words := New(`[a-z]+`)
	if got := words.ReplaceAllStringFunc("ab cd", strings.ToUpper); got != "AB CD" {
		t.Errorf("ReplaceAllStringFunc = %q", got)
	}
	if got := words.ReplaceAllString("ab cd", "x"); got != "x x" {
		t.Errorf("ReplaceAllString = %q", got)
	}
	if got := words.FindAllStringIndex("ab cd", -1); len(got) != 2 || got[1][0] != 3 {
		t.Errorf("FindAllStringIndex = %v", got)
	}
	if got := New(`(\w)(\w)`).FindAllStringSubmatch("ab cd", -1); len(got) != 2 || got[1][2] != "d" {
		t.Errorf("FindAllStringSubmatch = %q", got)
	}
	if words.String() != `[a-z]+` {
		t.Errorf("String = %q", words.String())
	}
	defer func() {
		if recover() == nil {
			t.Error("MustCompileAll did not panic on a bad expression")
		}
	}()
	MustCompileAll()
}
