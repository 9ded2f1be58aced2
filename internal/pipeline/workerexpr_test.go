package pipeline

import (
	"slices"
	"strings"
	"testing"
)

// What Gantry's references cannot say is kept for the worker where GitHub evaluates it
// when the step runs; the job then asks for the secrets those expressions read, as
// optional ones, and for its needs' outputs when one reads them.
func TestWorkerExprs(t *testing.T) {
	wf := `on: push
jobs:
  a:
    runs-on: ubuntu-latest
    outputs:
      o: ${{ steps.s.outputs.v == 'x' && 'yes' || 'no' }}
    steps:
      - id: s
        run: echo "v=x" >> "$GITHUB_OUTPUT"
  b:
    needs: a
    runs-on: ubuntu-latest
    env:
      TOKEN: ${{ secrets.GITHUB_TOKEN }}
    steps:
      - name: ${{ github.event_name == 'push' && 'pushed' || 'other' }}
        run: echo "${{ toJSON(github.event.head_commit) }} ${{ needs.a.outputs.o || 'none' }}"
      - uses: o/r@v1
        with:
          token: ${{ github.token }}
          who: ${{ secrets.DEPLOY_KEY || secrets['fallback_key'] }}
`
	p, err := Compile([]byte(wf), Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := p.Job("a"), p.Job("b")
	if want := WorkerExpr("steps.s.outputs.v == 'x' && 'yes' || 'no'"); a.Outputs["o"] != want {
		t.Errorf("a's output o = %q, want %q", a.Outputs["o"], want)
	}
	st := b.Steps[0]
	if st.Name != WorkerExpr("github.event_name == 'push' && 'pushed' || 'other'") {
		t.Errorf("name = %q", st.Name)
	}
	if !strings.HasPrefix(st.Run, "echo \"${{ gha:") || !HasWorkerExprs(st.Run) {
		t.Errorf("run = %q", st.Run)
	}
	if !b.ReadsNeeds {
		t.Error("b reads needs.a.outputs in an expression but does not say so: the coordinator would not send them")
	}
	if got, want := b.OptionalSecrets(), []string{"DEPLOY_KEY", "FALLBACK_KEY", "GITHUB_TOKEN"}; !slices.Equal(got, want) {
		t.Errorf("optional secrets %v, want %v", got, want)
	}
	if len(b.Secrets()) != 0 {
		t.Errorf("required secrets %v, want none", b.Secrets())
	}
	got, err := ExpandWorkerExprs(st.Run, func(expr string) (string, error) { return "<" + expr + ">", nil })
	if err != nil || got != "echo \"<toJSON(github.event.head_commit)> <needs.a.outputs.o || 'none'>\"" {
		t.Errorf("ExpandWorkerExprs = %q, %v", got, err)
	}

	for _, c := range []struct{ wf, msg string }{
		{"on: push\njobs:\n  a:\n    runs-on: x\n    steps:\n      - run: echo ${{ github.retention_days }}\n", "github.retention_days has no counterpart"},
		{"on: push\njobs:\n  a:\n    runs-on: x\n    if: github.run_number > 1\n    steps:\n      - run: echo\n", "github.run_number is known only when a step runs; it may stand in a step's run, name, env, with: and if:, not in a job's if:"},
		{"on: push\njobs:\n  a:\n    runs-on: x\n    concurrency: pr-${{ job.status }}\n    steps:\n      - run: echo\n", "job is not known when a run is created"},
		{"on: push\njobs:\n  a:\n    runs-on: x\n    steps:\n      - run: echo ${{ nope(1) }}\n", "nope"},
		{"on: push\njobs:\n  a:\n    runs-on: x\n    steps:\n      - run: echo ${{ 1 == }}\n", ""},
		// Gantry's own language does not take them from an author.
		{"jobs:\n  a:\n    steps:\n      - name: x\n        run: echo ${{ gha:!! }}\n", "not an expression Gantry kept"},
	} {
		if _, err := Compile([]byte(c.wf), Options{}); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Compile(%q) = %v, want an error with %q", c.wf, err, c.msg)
		}
	}

	// A pull request's branches and a configuration variable are the worker's to read.
	pr, err := Compile([]byte("on: pull_request\njobs:\n  a:\n    runs-on: x\n    steps:\n"+
		"      - run: echo ${{ github.base_ref }} ${{ github.head_ref }} ${{ vars.GREETING }}\n"+
		"        env: {BASE: '${{ github.base_ref }}'}\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	st = pr.Job("a").Steps[0]
	got, err = ExpandWorkerExprs(st.Run+" "+st.Env["BASE"], func(expr string) (string, error) { return "<" + expr + ">", nil })
	if err != nil || got != "echo <github.base_ref> <github.head_ref> <vars.GREETING> <github.base_ref>" {
		t.Errorf("ExpandWorkerExprs = %q, %v", got, err)
	}
}

// TestRunValuesExpandOnce: what RunValues.Expand puts in is text: a step's output, a
// secret or an expression's value that reads like a reference, or makes one with the
// text around it, is never read again.
func TestRunValuesExpandOnce(t *testing.T) {
	t.Parallel()
	marker := WorkerExpr("secrets.TOKEN")
	evalled := 0
	vals := RunValues{
		Steps: map[string]StepState{"one": {Outcome: ResultSuccess, Conclusion: ResultSuccess, Outputs: map[string]string{
			"v": marker, "tail": marker[1:], "steps": "${{ steps.one.outputs.v }}", "secret": SecretRef("TOKEN"),
		}}},
		Secrets: map[string]string{"TOKEN": "s3cret", "SELF": marker},
		Eval: func(expr string) (string, error) {
			evalled++
			switch expr {
			case "secrets.TOKEN":
				return "s3cret", nil
			case "github.event.title":
				return "${{ steps.one.outputs.secret }} " + SecretRef("TOKEN") + " " + WorkerExpr("secrets.TOKEN"), nil
			}
			return "<" + expr + ">", nil
		},
	}
	for in, want := range map[string]string{
		"a ${{ steps.one.outputs.v }} b":          "a " + marker + " b",
		"$${{ steps.one.outputs.tail }}":          "$" + marker[1:],
		"${{ steps.one.outputs.steps }}":          "${{ steps.one.outputs.v }}",
		"${{ steps.one.outputs.secret }}":         SecretRef("TOKEN"),
		SecretRef("SELF"):                         marker,
		WorkerExpr("github.event.title"):          "${{ steps.one.outputs.secret }} " + SecretRef("TOKEN") + " " + marker,
		"${{ steps.one.outcome }}/" + marker:      "success/s3cret",
		"${{ steps.none.outputs.v }}":             "",
		"no refs: ${{ matrix.os }} ${{ gha:!! }}": "no refs: ${{ matrix.os }} ${{ gha:!! }}",
	} {
		got, err := vals.Expand(in)
		if err != nil || got != want {
			t.Errorf("Expand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if evalled != 2 {
		t.Errorf("%d expressions evaluated, want 2 (only those the text itself kept)", evalled)
	}
	// Without secrets or an evaluator, their references stay as written.
	got, err := RunValues{}.Expand(SecretRef("TOKEN") + marker + "${{ steps.one.outputs.v }}")
	if want := SecretRef("TOKEN") + marker; err != nil || got != want {
		t.Errorf("RunValues{}.Expand = %q, %v; want %q", got, err, want)
	}
}

// TestCheckStepOutputs: a step's output may hold ${{ (it is put in as text); a job's may
// not (its dependants' text is filled in before anything else reads it).
func TestCheckStepOutputs(t *testing.T) {
	t.Parallel()
	outs := map[string]string{"v": WorkerExpr("secrets.TOKEN")}
	if err := CheckStepOutputs(outs); err != nil {
		t.Errorf("CheckStepOutputs: %v", err)
	}
	if err := CheckOutputs(outs); err == nil {
		t.Error("CheckOutputs accepts an output holding ${{")
	}
	if err := CheckStepOutputs(map[string]string{"1bad": "x"}); err == nil {
		t.Error("CheckStepOutputs accepts a bad name")
	}
}
