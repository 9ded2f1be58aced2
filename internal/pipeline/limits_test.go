package pipeline

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestLimits(t *testing.T) {
	t.Parallel()
	bigMatrix := "jobs:\n  t:\n    matrix: {a: [" + seq(101) + "], b: [" + seq(100) + "]}\n    steps: [{run: x}]\n"
	var many strings.Builder
	many.WriteString("jobs:\n")
	for i := 0; i < 3; i++ {
		fmt.Fprintf(&many, "  j%d:\n    matrix: {n: [%s]}\n    steps: [{run: x}]\n", i, seq(5))
	}
	deep := "x-deep: " + strings.Repeat("[", 200) + strings.Repeat("]", 200) + "\njobs: {a: {steps: [{run: x}]}}"

	// Each level merges the one below ten times: 10^8 keys if expanded naively.
	var merge strings.Builder
	merge.WriteString("x-l0: &l0 {timeout: 1m}\n")
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&merge, "x-l%d: &l%d {<<: [%s]}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", "))
	}
	merge.WriteString("jobs:\n  a:\n    <<: *l8\n    steps: [{run: x}]\n")

	tests := []struct {
		name   string
		src    string
		limits Limits
		path   string
		msg    string
	}{
		{"document size", "name: " + strings.Repeat("x", 200) + "\njobs: {a: {steps: [{run: x}]}}", Limits{MaxBytes: 100}, "", "the limit is 100 bytes"},
		{"default document size", "name: x\njobs: {a: {steps: [{run: x}]}}\n" + strings.Repeat("# padding\n", 110_000), Limits{}, "", "the limit is 1 MiB"},
		{"matrix over the job limit", bigMatrix, Limits{}, "jobs.t.matrix", "limit of 10000 jobs"},
		{"jobs over the limit across matrices", many.String(), Limits{MaxJobs: 12}, "jobs.j2.matrix", "limit of 12 jobs"},
		{"nesting", deep, Limits{}, "", "deeper than 64 levels"},
		{"merge key expansion", merge.String(), Limits{}, "", "more than 1000000 nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Compile([]byte(tt.src), Options{Limits: tt.limits})
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Compile = %v, want Errors", err)
			}
			for _, e := range errs {
				if e.Kind == ErrLimit && strings.Contains(e.Message, tt.msg) && (tt.path == "" || e.Path == tt.path) {
					return
				}
			}
			t.Errorf("no limit error %q at %q in:\n%v", tt.msg, tt.path, errs)
		})
	}
}

// TestAliasBombIsNotExpanded: the schema never walks into a value of the wrong shape, so a
// bomb aimed at a list of labels costs one error per element of the outer list.
func TestAliasBombIsNotExpanded(t *testing.T) {
	t.Parallel()
	var bomb strings.Builder
	bomb.WriteString("x-a: &a [\"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\"]\n")
	prev := "a"
	for _, name := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		fmt.Fprintf(&bomb, "x-%s: &%s [%s]\n", name, name, strings.TrimSuffix(strings.Repeat("*"+prev+", ", 9), ", "))
		prev = name
	}
	bomb.WriteString("jobs:\n  a:\n    runs_on: *i\n    steps: [{run: x}]\n")
	errs := compileErrs(t, bomb.String())
	if len(errs) != 9 {
		t.Fatalf("got %d errors, want one per element of the outer list:\n%v", len(errs), errs)
	}
	for _, e := range errs {
		if e.Kind != ErrType || e.Line != 9 {
			t.Errorf("error %v: want a type error on line 9, at the alias inside *i", e)
		}
	}
}

func TestAtTheJobLimit(t *testing.T) {
	t.Parallel()
	src := "jobs:\n  t:\n    matrix: {a: [" + seq(50) + "], b: [" + seq(100) + "]}\n    steps: [{run: \"echo ${{ matrix.a }}\"}]\n  after:\n    needs: [t]\n    steps: [{run: x}]\n"
	p, err := Compile([]byte(src), Options{Limits: Limits{MaxJobs: 5001}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Jobs) != 5001 || len(p.Job("after").Needs) != 5000 {
		t.Errorf("planned %d jobs, after needs %d", len(p.Jobs), len(p.Job("after").Needs))
	}
}

func seq(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprint(i)
	}
	return strings.Join(parts, ", ")
}
