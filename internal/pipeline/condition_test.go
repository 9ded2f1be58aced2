package pipeline

import (
	"encoding/json"
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
