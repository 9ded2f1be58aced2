package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestConditionEval(t *testing.T) {
	t.Parallel()
	src := `
env: {DEPLOY: "yes"}
jobs:
  build: {steps: [{run: x}]}
  test: {matrix: {go: ["1.26"]}, steps: [{run: x}]}
  job:
    matrix: {region: [eu]}
    needs: [build, test]
    if: %s
    steps: [{run: x}]
`
	ok := map[string]string{"build": ResultSuccess, "test": ResultSuccess}
	failed := map[string]string{"build": ResultFailed, "test": ResultSuccess}
	skipped := map[string]string{"build": ResultSkipped, "test": ResultSuccess}
	tests := []struct {
		cond string
		in   ConditionInput
		want bool
	}{
		{"", ConditionInput{Needs: ok}, true},
		{"", ConditionInput{Needs: failed, UpstreamFailed: true}, false},
		{"", ConditionInput{Needs: skipped}, false},
		{"", ConditionInput{Needs: ok, Cancelled: true}, false},
		{`branch == "main"`, ConditionInput{Branch: "main", Needs: ok}, true},
		{`branch == "main"`, ConditionInput{Branch: "dev", Needs: ok}, false},
		// No status function: success() is implied, so a failure upstream skips the job.
		{`branch == "main"`, ConditionInput{Branch: "main", Needs: failed, UpstreamFailed: true}, false},
		{`success() && branch == "main"`, ConditionInput{Branch: "main", Needs: ok}, true},
		{`failure()`, ConditionInput{Needs: failed, UpstreamFailed: true}, true},
		{`failure()`, ConditionInput{Needs: ok}, false},
		{`always()`, ConditionInput{Needs: failed, UpstreamFailed: true, Cancelled: true}, true},
		{`cancelled()`, ConditionInput{Needs: ok, Cancelled: true}, true},
		{`always() && needs.build.result == "failed"`, ConditionInput{Needs: failed, UpstreamFailed: true}, true},
		{`always() && needs.build.result == "failed"`, ConditionInput{Needs: ok}, false},
		{`needs.test.result == "success" && matrix.region == "eu"`, ConditionInput{Needs: ok}, true},
		{`env.DEPLOY == "yes" && event in ["push", "tag"]`, ConditionInput{Event: "tag", Needs: ok}, true},
		{`sha startsWith "abc"`, ConditionInput{SHA: "abcdef", Needs: ok}, true},
		{`event == "pull_request" || always()`, ConditionInput{Needs: skipped}, true},
	}
	for _, tt := range tests {
		t.Run(tt.cond, func(t *testing.T) {
			t.Parallel()
			cond := "success()"
			if tt.cond != "" {
				cond = "'" + tt.cond + "'"
			}
			p := mustCompile(t, fmtSrc(src, cond))
			job := p.Job("job (region=eu)")
			got, err := job.ShouldRun(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("ShouldRun(%+v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func fmtSrc(src, cond string) string {
	out := []byte{}
	for i := 0; i < len(src); i++ {
		if src[i] == '%' && i+1 < len(src) && src[i+1] == 's' {
			out = append(out, cond...)
			i++
			continue
		}
		out = append(out, src[i])
	}
	return string(out)
}

func TestJobWithoutConditionRunsOnSuccess(t *testing.T) {
	t.Parallel()
	j := mustCompile(t, "jobs:\n  a: {steps: [{run: x}]}\n  b: {needs: [a], steps: [{run: x}]}").Job("b")
	if j.If != nil {
		t.Fatalf("If = %v, want nil", j.If)
	}
	for _, tt := range []struct {
		result string
		want   bool
	}{{ResultSuccess, true}, {ResultFailed, false}, {ResultSkipped, false}, {ResultCancelled, false}} {
		got, err := j.ShouldRun(ConditionInput{Needs: map[string]string{"a": tt.result}, UpstreamFailed: tt.result == ResultFailed})
		if err != nil || got != tt.want {
			t.Errorf("need %s: ShouldRun = %v, %v; want %v", tt.result, got, err, tt.want)
		}
	}
}

func TestConditionJSONRoundTrip(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, "jobs:\n  a: {steps: [{run: x}]}\n  b: {needs: [a], if: 'failure() || branch == \"x\"', steps: [{run: x}]}")
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back Plan
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	j := back.Job("b")
	if j.If == nil || j.If.Source != `failure() || branch == "x"` {
		t.Fatalf("If after round trip = %+v", j.If)
	}
	got, err := j.ShouldRun(ConditionInput{Branch: "x", Needs: map[string]string{"a": ResultSuccess}})
	if err != nil || !got {
		t.Errorf("round-tripped condition: %v, %v; want true", got, err)
	}
	if err := json.Unmarshal([]byte(`{"if": "1 +"}`), &Job{}); err == nil {
		t.Error("a broken condition in JSON was accepted")
	}
}

func TestCombineResults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   []string
		want string
	}{
		{nil, ResultSkipped},
		{[]string{ResultSuccess, ResultSuccess}, ResultSuccess},
		{[]string{ResultSuccess, ResultSkipped}, ResultSuccess},
		{[]string{ResultSkipped, ResultSkipped}, ResultSkipped},
		{[]string{ResultSuccess, ResultCancelled}, ResultCancelled},
		{[]string{ResultCancelled, ResultFailed}, ResultFailed},
	}
	for _, tt := range tests {
		if got := CombineResults(tt.in); got != tt.want {
			t.Errorf("CombineResults(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	src := `
env: {LEVEL: pipeline}
jobs:
  build: {steps: [{run: x}]}
  lint: {steps: [{run: x}]}
  job:
    matrix: {region: [eu]}
    needs: %s
    if: %s
    env: {OWN: job, ONLYJOB: job}
    steps: [{run: x}]
`
	ok := map[string]string{"build": ResultSuccess, "lint": ResultSuccess}
	tests := []struct {
		name, needs, cond string
		in                ConditionInput
		want              Decision
	}{
		{"root default", "[]", "", ConditionInput{}, Decision{Run: true}},
		{"root false", "[]", `"false"`, ConditionInput{}, Decision{Reason: "if: false was false"}},
		{"root branch true", "[]", `'branch == "main"'`, ConditionInput{Branch: "main"}, Decision{Run: true}},
		{"root branch false", "[]", `'branch == "main"'`, ConditionInput{Branch: "dev"}, Decision{Reason: `if: branch == "main" was false`}},
		{"root event", "[]", `'event == "push"'`, ConditionInput{Event: "push"}, Decision{Run: true}},
		{"root sha", "[]", `'sha startsWith "abc"'`, ConditionInput{SHA: "abd"}, Decision{Reason: `if: sha startsWith "abc" was false`}},
		{"root matrix", "[]", `'matrix.region == "eu"'`, ConditionInput{}, Decision{Run: true}},
		// The run's env is seen, over the job's own (gantry submit --env overrides the
		// file): a name only the run sets is allowed.
		{"root run env", "[]", `'env.DEPLOY == "yes"'`, ConditionInput{Env: map[string]string{"DEPLOY": "yes"}}, Decision{Run: true}},
		{"root run env unset", "[]", `'env.DEPLOY == "yes"'`, ConditionInput{}, Decision{Reason: `if: env.DEPLOY == "yes" was false`}},
		{"run env over job env", "[]", `'env.OWN == "run" && env.LEVEL == "run" && env.ONLYJOB == "job"'`,
			ConditionInput{Env: map[string]string{"OWN": "run", "LEVEL": "run"}}, Decision{Run: true}},
		{"root cancelled", "[]", "always()", ConditionInput{Cancelled: true}, Decision{Reason: "the run was cancelled"}},
		{"need failed", "[build, lint]", "", ConditionInput{Needs: map[string]string{"build": ResultFailed, "lint": ResultSkipped}, UpstreamFailed: true},
			Decision{Reason: "a job it needs (build) failed"}},
		{"needs skipped", "[build, lint]", `'branch == "main"'`, ConditionInput{Branch: "main", Needs: map[string]string{"build": ResultSkipped, "lint": ResultSkipped}},
			Decision{Reason: "jobs it needs (build, lint) were skipped"}},
		{"need cancelled", "[build]", "", ConditionInput{Needs: map[string]string{"build": ResultCancelled}}, Decision{Reason: "a job it needs (build) was cancelled"}},
		{"failed further up", "[build]", "", ConditionInput{Needs: map[string]string{"build": ResultSuccess}, UpstreamFailed: true},
			Decision{Reason: "a job before it failed"}},
		{"always despite skip", "[build]", "always()", ConditionInput{Needs: map[string]string{"build": ResultSkipped}}, Decision{Run: true}},
		{"explicit status false", "[build, lint]", `'success() && branch == "main"'`, ConditionInput{Branch: "dev", Needs: ok},
			Decision{Reason: `if: success() && branch == "main" was false`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cond := tt.cond
			if cond == "" {
				cond = "success()"
			}
			text := fmt.Sprintf(src, tt.needs, cond)
			if tt.cond == "" {
				text = strings.Replace(text, "    if: success()\n", "", 1)
			}
			job := mustCompile(t, text).Job("job (region=eu)")
			if got := job.Decide(tt.in); got != tt.want {
				t.Errorf("Decide(%+v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestConditionTriggerNamesAndFunctions(t *testing.T) {
	t.Parallel()
	src := `
on:
  push: {}
  dispatch:
    inputs:
      deploy: {type: boolean}
      count: {type: number, default: "2"}
      target: {type: string}
jobs:
  job:
    if: %s
    steps: [{run: x}]
`
	tag := ConditionInput{Ref: "refs/tags/v1.2.0", Tag: "v1.2.0", Event: "tag", SHA: "abc123", Repository: "acme/app"}
	branch := ConditionInput{Ref: "refs/heads/main", Branch: "main", Event: "push", SHA: "abc123"}
	pr := ConditionInput{Ref: "refs/pull/7/head", Branch: "feature", Event: "pull_request", PRNumber: 7, Fork: true}
	dispatch := ConditionInput{Event: "dispatch", Inputs: map[string]string{"deploy": "true", "count": "3", "target": "Prod-EU"}}
	wfRun := ConditionInput{Event: "workflow_run", WorkflowRun: WorkflowRunValues{ID: "01a2", Name: "build", Number: 42, Action: "completed",
		Conclusion: "success", Branch: "main", SHA: "abc"}}
	tests := []struct {
		cond string
		in   ConditionInput
		want bool
	}{
		{`startsWith(ref, 'refs/tags/')`, tag, true},
		{`startsWith(ref, 'refs/tags/')`, branch, false},
		{`ref == "refs/heads/main"`, branch, true},
		{`tag == "v1.2.0"`, tag, true},
		{`tag == ""`, branch, true},
		{`event == "tag"`, tag, true},
		{`repository == "acme/app"`, tag, true},
		{`endsWith(tag, '.0')`, tag, true},
		{`endsWith(tag, '.1')`, tag, false},
		// Case-insensitive, as GitHub's functions are.
		{`startsWith(ref, 'REFS/TAGS/')`, tag, true},
		{`contains(inputs.target, 'prod')`, dispatch, true},
		{`contains(inputs.target, 'us')`, dispatch, false},
		{`contains(['push', 'TAG'], event)`, tag, true},
		{`contains(['push'], event)`, tag, false},
		{`contains([1, 3], inputs.count)`, dispatch, true},
		// The infix operators stay expr-lang's: case-sensitive.
		{`ref startsWith 'refs/tags/'`, tag, true},
		{`ref startsWith 'REFS/'`, tag, false},
		{`inputs.target contains ('Prod')`, dispatch, true},
		{`!startsWith(ref, 'refs/tags/') && (contains(ref, 'main'))`, branch, true},
		{`pr.number == 7 && pr.fork`, pr, true},
		{`pr.number == 0 && !pr.fork`, branch, true},
		{`event == "workflow_run" && workflow_run.conclusion == "success" && workflow_run.name == "build"`, wfRun, true},
		{`workflow_run.number == 42 && workflow_run.branch == "main" && workflow_run.action == "completed"`, wfRun, true},
		{`workflow_run.conclusion == "success"`, branch, false},
		{`inputs.deploy == true`, dispatch, true},
		{`inputs.deploy == true`, ConditionInput{Event: "dispatch", Inputs: map[string]string{"deploy": "false"}}, false},
		// A boolean nobody gave is false; a string nobody gave is "".
		{`inputs.deploy == false && inputs.target == ""`, branch, true},
		{`inputs.count > 2`, dispatch, true},
		{`inputs.count > 2`, ConditionInput{Inputs: map[string]string{"count": "2"}}, false},
		{`inputs.target == "Prod-EU"`, dispatch, true},
		{`let p = 'refs/'; startsWith(ref, p)`, tag, true},
	}
	for _, tt := range tests {
		t.Run(tt.cond, func(t *testing.T) {
			t.Parallel()
			p := mustCompile(t, fmtSrc(src, "\""+strings.ReplaceAll(tt.cond, `"`, `\"`)+"\""))
			job := p.Job("job")
			// Through JSON, as the store keeps the job: the inputs' types must survive.
			b, err := json.Marshal(job)
			if err != nil {
				t.Fatal(err)
			}
			var back Job
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			for _, j := range []*Job{job, &back} {
				got, err := j.ShouldRun(tt.in)
				if err != nil {
					t.Fatal(err)
				}
				if got != tt.want {
					t.Errorf("ShouldRun(%+v) = %v, want %v", tt.in, got, tt.want)
				}
			}
		})
	}
}

func TestConditionCompileErrors(t *testing.T) {
	t.Parallel()
	const withInputs = "on:\n  dispatch:\n    inputs:\n      deploy: {type: boolean}\n      target: {type: string}\njobs:\n  a:\n    if: %s\n    steps: [{run: x}]\n"
	const plain = "jobs:\n  a:\n    if: %s\n    steps: [{run: x}]\n"
	tests := []struct {
		name, src, cond string
		kind            ErrorKind
		want            []string
	}{
		{"unknown name suggests", plain, `'refx == "x"'`, ErrExpression, []string{"unknown name refx", `did you mean "ref"`}},
		{"unknown function suggests", plain, `"startWith(ref, 'v')"`, ErrExpression, []string{"unknown name startWith", `did you mean "startsWith"`}},
		{"undeclared input", withInputs, `"inputs.deplyo == true"`, ErrUnknownReference, []string{`declares no input "deplyo"`, "deploy, target", `did you mean "deploy"`}},
		{"pr field", plain, `"pr.numbr == 1"`, ErrUnknownReference, []string{`pr has no field "numbr"`, `did you mean "number"`}},
		{"workflow_run field", plain, `"workflow_run.conclsion == 'success'"`, ErrUnknownReference, []string{`workflow_run has no field "conclsion"`, `did you mean "conclusion"`}},
		{"too few arguments", plain, `"startsWith(ref)"`, ErrExpression, []string{"startsWith"}},
		{"input by expression", withInputs, `"inputs[ref]"`, ErrExpression, []string{"inputs must be indexed by a name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Compile([]byte(fmtSrc(tt.src, tt.cond)), Options{})
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("Compile: %v, want errors", err)
			}
			e := errs[0]
			if e.Kind != tt.kind || e.Path != "jobs.a.if" {
				t.Errorf("error %+v, want kind %s at jobs.a.if", e, tt.kind)
			}
			for _, w := range tt.want {
				if !strings.Contains(e.Message, w) {
					t.Errorf("message %q does not say %q", e.Message, w)
				}
			}
			if strings.Contains(e.Message, "StartsWith") {
				t.Errorf("message %q names the internal function", e.Message)
			}
		})
	}
	// Without on: dispatch inputs, any inputs.X is allowed and reads as "".
	p := mustCompile(t, fmtSrc(plain, `'inputs.anything == ""'`))
	if ok, err := p.Job("a").ShouldRun(ConditionInput{}); err != nil || !ok {
		t.Errorf("inputs.anything without declared inputs: %v, %v; want true", ok, err)
	}
}
