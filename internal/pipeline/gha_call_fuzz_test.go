package pipeline

import (
	"errors"
	"strings"
	"testing"
)

// FuzzCallExpressions feeds arbitrary expressions and texts to the rewrite of a called
// workflow's expressions: it must not panic, must leave text without references alone,
// and must answer an error at an offset inside what it was given.
func FuzzCallExpressions(f *testing.F) {
	for _, s := range []string{
		"inputs.version", "${{ inputs.a }}-${{ needs.b.outputs['c-d'] }}", "success() && inputs['x']",
		"needs.*.result", "fromJSON(inputs.m)[0]", "a.b[", "'unclosed", "${{ '}}' }}", "jobs.j.outputs.x || 'y'",
		"!cancelled() && (needs.a.result == 'failure' || failure())", "${{", "x.", "[*]", "inputs.", "f(", "secrets.T",
	} {
		f.Add(s)
	}
	rw := &ghaCallRewrite{prefix: "c-", jobs: map[string]string{"b": "b", "j": "j"}, inputs: map[string]string{"a": "'x'", "version": "(needs.v.outputs.v)", "m": "'[1]'", "x": "true"},
		secrets: map[string]string{"t": "secrets.PROD"}, file: "w.yml"}
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []bool{false, true} {
			got, err := rewriteExpr(s, rw.expr(out))
			if err != nil && (err.offset < 0 || err.offset > len(s)) {
				t.Fatalf("rewriteExpr(%q): offset %d out of range", s, err.offset)
			}
			if err == nil && !strings.ContainsAny(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_") && got != s {
				t.Fatalf("rewriteExpr(%q) = %q: changed text with no name in it", s, got)
			}
			if _, err := rewriteTemplate(s, rw.expr(out)); err != nil && (err.offset < 0 || err.offset > len(s)) {
				t.Fatalf("rewriteTemplate(%q): offset %d out of range", s, err.offset)
			}
		}
		_, _ = rewriteExpr(s, exprRewrite{ref: keepRef, status: statusOf([]string{"a", "b-c"})})
		_ = templateExpr(gStr(s, nil))
		_ = callsStatus(s)
	})
}

// FuzzCallCompile compiles arbitrary workflows that call arbitrary reusable workflows:
// no panic, and an answer that is a plan or well-formed errors, each in a file the
// compile read.
func FuzzCallCompile(f *testing.F) {
	f.Add("on: push\njobs:\n  a:\n    uses: ./.github/workflows/w.yml\n    with: {x: '${{ github.sha }}'}\n  b: {needs: a, runs-on: x, steps: [{run: 'echo ${{ needs.a.outputs.o }}'}]}\n",
		"on:\n  workflow_call:\n    inputs: {x: {type: string}}\n    outputs: {o: {value: '${{ jobs.j.outputs.o }}'}}\njobs:\n  j: {runs-on: x, outputs: {o: '${{ inputs.x }}'}, steps: [{run: a}]}\n")
	f.Add("on: push\njobs:\n  a:\n    strategy: {matrix: {v: [1, '${{ needs.z.outputs.v }}'], include: [{v: 3}]}}\n    uses: ./.github/workflows/w.yml\n    if: always()\n",
		"on: workflow_call\njobs:\n  j: {runs-on: x, if: failure(), steps: [{run: a}]}\n  k: {uses: ./.github/workflows/w.yml}\n")
	f.Fuzz(func(t *testing.T, top, called string) {
		wf := &fakeWorkflows{local: map[string]string{".github/workflows/w.yml": called}, notRead: true}
		p, err := Compile([]byte(top), Options{Path: ".github/workflows/ci.yml", Workflows: wf, Limits: Limits{MaxJobs: 300, MaxNodes: 200_000}})
		if err == nil {
			if p == nil || len(p.Jobs) == 0 || len(p.Jobs) > 300 {
				t.Fatalf("plan of %d jobs", len(p.Jobs))
			}
			return
		}
		var errs Errors
		if !errors.As(err, &errs) || len(errs) == 0 {
			t.Fatalf("error is not a non-empty Errors: %#v", err)
		}
		for _, e := range errs {
			if e.Kind == "" || e.Message == "" || e.Line < 0 || e.Column < 0 {
				t.Fatalf("malformed error %#v", e)
			}
			if e.File != "" && e.File != ".github/workflows/w.yml" {
				t.Fatalf("error in a file that was not read: %#v", e)
			}
		}
	})
}
