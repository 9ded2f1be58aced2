package pipeline

import (
	"encoding/json"
	"strings"
	"testing"
)

// A workflow's if: that Gantry's language cannot say is decided as GitHub decides it:
// over the event's webhook payload (or what Gantry knows of an event no webhook sent),
// with GitHub's names for events and results, and success() added when it calls no
// status function. Its reason quotes it as the workflow wrote it.
func TestGitHubConditions(t *testing.T) {
	wf := `on: [push, pull_request]
jobs:
  a:
    runs-on: x
    steps: [{run: x}]
  b:
    needs: a
    runs-on: x
    if: github.event.pull_request.draft == false && github.repository_owner == 'acme' && github.event_name == 'pull_request'
    steps: [{run: x}]
  c:
    needs: a
    runs-on: x
    if: always() && contains(fromJSON('["failure", "cancelled"]'), needs.a.result) && github.actor != 'bot'
    steps: [{run: x}]
`
	p, err := Compile([]byte(wf), Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, c := p.Job("b"), p.Job("c")
	if b.If == nil || !strings.HasPrefix(b.If.Source, ghaCondPrefix) {
		t.Fatalf("b's if = %+v, want it kept as GitHub wrote it", b.If)
	}
	// The condition survives the plan's trip through JSON.
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var back Job
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	pr := func(draft bool) ConditionInput {
		payload := `{"pull_request": {"draft": ` + map[bool]string{true: "true", false: "false"}[draft] + `, "number": 7}}`
		return ConditionInput{Repository: "acme/app", Event: "pull_request", PRNumber: 7, Payload: json.RawMessage(payload),
			Needs: map[string]string{"a": ResultSuccess}}
	}
	if d := back.Decide(pr(false)); !d.Run {
		t.Errorf("a ready pull request: %+v, want the job to run", d)
	}
	d := back.Decide(pr(true))
	if d.Run || !strings.Contains(d.Reason, "if: github.event.pull_request.draft == false") {
		t.Errorf("a draft: %+v, want it skipped, quoting the if: as written", d)
	}
	in := pr(false)
	in.Repository = "other/app"
	if d := back.Decide(in); d.Run {
		t.Errorf("another owner's repository: %+v, want skipped", d)
	}
	in = pr(false)
	in.Needs["a"], in.UpstreamFailed = ResultFailed, true
	if d := back.Decide(in); d.Run || !strings.Contains(d.Reason, "a job it needs (a) failed") {
		t.Errorf("after a failed need: %+v, want skipped for it, as success() is implied", d)
	}
	if d := c.Decide(in); !d.Run {
		t.Errorf("c after a failed need: %+v, want it run (needs.a.result is 'failure' on GitHub)", d)
	}
	in.Actor = "bot"
	if d := c.Decide(in); d.Run {
		t.Errorf("c started by bot: %+v, want skipped", d)
	}
	// Without a payload, github.event is what Gantry knows of the event.
	ev := ConditionInput{Repository: "acme/app", Event: "pull_request", PRNumber: 7, SHA: "abc", BaseRef: "main", HeadRef: "feature"}.eventPayload()
	if got, _ := json.Marshal(ev); !strings.Contains(string(got), `"pull_request":{"base":{"ref":"main"},"head":{"ref":"feature","sha":"abc"},"number":7}`) {
		t.Errorf("the event of a run without a payload: %s", got)
	}
}

// TestGitHubPullRequestRefs: github.base_ref and github.head_ref are the pull request's
// branches, and "" for any other event, which GitHub's loose == takes for null (a
// workflow's test for "not a pull request").
func TestGitHubPullRequestRefs(t *testing.T) {
	wf := `on: [push, pull_request]
jobs:
  into-main:
    runs-on: x
    if: github.base_ref == 'main' && startsWith(github.head_ref, 'feature/')
    steps: [{run: x}]
  not-a-pr:
    runs-on: x
    if: github.base_ref == null
    steps: [{run: x}]
`
	p, err := Compile([]byte(wf), Options{})
	if err != nil {
		t.Fatal(err)
	}
	pr := ConditionInput{Event: "pull_request", PRNumber: 3, BaseRef: "main", HeadRef: "feature/x"}
	push := ConditionInput{Event: "push", Ref: "refs/heads/main", Branch: "main"}
	for _, c := range []struct {
		job  string
		in   ConditionInput
		want bool
	}{
		{"into-main", pr, true},
		{"into-main", ConditionInput{Event: "pull_request", PRNumber: 3, BaseRef: "release", HeadRef: "feature/x"}, false},
		{"into-main", push, false},
		{"not-a-pr", pr, false},
		{"not-a-pr", push, true},
	} {
		if d := p.Job(c.job).Decide(c.in); d.Run != c.want || d.Err != nil {
			t.Errorf("%s for %+v: %+v, want run=%v", c.job, c.in, d, c.want)
		}
	}
}
