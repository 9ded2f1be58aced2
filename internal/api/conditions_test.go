package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

// conditionJob is a job as the API shows it, with the fields about whether it ran; raw
// keeps the JSON object to tell an omitted field from an empty one.
type conditionJob struct {
	ID     string `json:"id"`
	Key    string `json:"key"`
	Status string `json:"status"`
	Reason string `json:"reason"`
	raw    map[string]json.RawMessage
}

type conditionRun struct {
	ID           string         `json:"id"`
	Status       string         `json:"status"`
	JobsTotal    int            `json:"jobs_total"`
	JobsFinished int            `json:"jobs_finished"`
	Jobs         []conditionJob `json:"jobs"`
}

func decodeConditionRun(t *testing.T, r response) (conditionRun, map[string]conditionJob) {
	t.Helper()
	var run conditionRun
	r.decode(t, &run)
	var raw struct {
		Jobs []map[string]json.RawMessage `json:"jobs"`
	}
	r.decode(t, &raw)
	byKey := map[string]conditionJob{}
	for i, j := range run.Jobs {
		j.raw = raw.Jobs[i]
		byKey[j.Key] = j
	}
	return run, byKey
}

// TestRootJobConditions submits runs whose jobs without needs carry if: conditions over
// each name a condition reads, and checks the answer, the run and the job views: a false
// condition skips the job at once, with its reason, and its dependents with theirs.
func TestRootJobConditions(t *testing.T) {
	t.Parallel()
	const pipeline = `name: gated
jobs:
  build:
    steps: [{run: make}]
  gated:
    if: %s
    steps: [{run: ./deploy.sh}]
  after:
    needs: [gated]
    steps: [{run: ./announce.sh}]
`
	tests := []struct {
		name     string
		cond     string
		envelope map[string]any
		skip     string // the gated job's reason; empty when it is queued
	}{
		{"branch from ref, false", `branch == "main"`, map[string]any{"ref": "refs/heads/dev"}, `if: branch == "main" was false`},
		{"branch from ref, true", `branch == "main"`, map[string]any{"ref": "refs/heads/main"}, ""},
		{"branch given", `branch == "main"`, map[string]any{"branch": "main"}, ""},
		{"event default api", `event == "push"`, map[string]any{}, `if: event == "push" was false`},
		{"event given", `event == "push"`, map[string]any{"event": "push"}, ""},
		{"sha false", `sha startsWith "abc"`, map[string]any{"sha": "0123456"}, `if: sha startsWith "abc" was false`},
		{"sha true", `sha startsWith "abc"`, map[string]any{"sha": "abc1234"}, ""},
		{"run env set", `env.DEPLOY == "yes"`, map[string]any{"env": map[string]string{"DEPLOY": "yes"}}, ""},
		{"run env unset", `env.DEPLOY == "yes"`, map[string]any{}, `if: env.DEPLOY == "yes" was false`},
		{"literal false", `"false"`, map[string]any{}, "if: false was false"},
	}
	b := setup(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cond, _ := json.Marshal(tt.cond)
			if tt.cond[0] == '"' {
				cond = []byte(tt.cond)
			}
			tt.envelope["pipeline"] = fmt.Sprintf(pipeline, string(cond))
			r := b.do(t, http.MethodPost, "/api/v1/runs", "application/json", mustJSON(t, tt.envelope), nil)
			if r.status != http.StatusAccepted {
				t.Fatalf("create run: status %d: %s", r.status, r.body)
			}
			created, jobs := decodeConditionRun(t, r)
			check := func(where string, jobs map[string]conditionJob) {
				t.Helper()
				wantJob(t, where, jobs["build"], "queued", "")
				if tt.skip == "" {
					wantJob(t, where, jobs["gated"], "queued", "")
					wantJob(t, where, jobs["after"], "pending", "")
					return
				}
				wantJob(t, where, jobs["gated"], "skipped", tt.skip)
				wantJob(t, where, jobs["after"], "skipped", "a job it needs (gated) was skipped")
			}
			check("POST answer", jobs)
			_, jobs = decodeConditionRun(t, b.get(t, "/api/v1/runs/"+created.ID))
			check("GET run", jobs)
			var one conditionJob
			r = b.get(t, "/api/v1/jobs/"+jobs["gated"].ID)
			r.decode(t, &one)
			r.decode(t, &one.raw)
			one.Key = "gated"
			if tt.skip != "" {
				wantJob(t, "GET job", one, "skipped", tt.skip)
			} else {
				wantJob(t, "GET job", one, "queued", "")
			}
		})
	}
}

// TestRootJobConditionsEndRun checks that a run none of whose jobs runs has ended, as a
// success, in the very answer to its submission.
func TestRootJobConditionsEndRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := mustJSON(t, map[string]any{"ref": "refs/heads/feature", "pipeline": `name: nothing
jobs:
  deploy:
    if: branch == "main"
    steps: [{run: ./deploy.sh}]
  announce:
    needs: [deploy]
    if: always()
    steps: [{run: ./announce.sh}]
  notify:
    needs: [announce]
    steps: [{run: ./notify.sh}]
`})
	r := b.do(t, http.MethodPost, "/api/v1/runs", "application/json", body, nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("create run: status %d: %s", r.status, r.body)
	}
	run, jobs := decodeConditionRun(t, r)
	// always() still runs after a skipped need: only deploy is skipped.
	wantJob(t, "POST answer", jobs["deploy"], "skipped", `if: branch == "main" was false`)
	wantJob(t, "POST answer", jobs["announce"], "queued", "")
	wantJob(t, "POST answer", jobs["notify"], "pending", "")
	if run.Status != "pending" || run.JobsFinished != 1 {
		t.Errorf("run is %s with %d jobs finished, want pending with 1", run.Status, run.JobsFinished)
	}

	r = b.do(t, http.MethodPost, "/api/v1/runs", "application/json", mustJSON(t, map[string]any{"ref": "refs/heads/feature",
		"pipeline": "name: nothing\njobs:\n  deploy:\n    if: branch == \"main\"\n    steps: [{run: x}]\n  after:\n    needs: [deploy]\n    steps: [{run: x}]\n"}), nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("create run: status %d: %s", r.status, r.body)
	}
	run, jobs = decodeConditionRun(t, r)
	wantJob(t, "POST answer", jobs["after"], "skipped", "a job it needs (deploy) was skipped")
	if run.Status != "success" || run.JobsFinished != run.JobsTotal {
		t.Errorf("run is %s with %d of %d jobs finished, want success with all", run.Status, run.JobsFinished, run.JobsTotal)
	}
	var got conditionRun
	b.get(t, "/api/v1/runs/"+run.ID).decode(t, &got)
	if got.Status != "success" {
		t.Errorf("GET run: status %s, want success", got.Status)
	}
}

func wantJob(t *testing.T, where string, j conditionJob, status, reason string) {
	t.Helper()
	if j.ID == "" {
		t.Errorf("%s: job %q missing", where, j.Key)
		return
	}
	if j.Status != status || j.Reason != reason {
		t.Errorf("%s: job %q is %s (reason %q), want %s (reason %q)", where, j.Key, j.Status, j.Reason, status, reason)
	}
	if _, ok := j.raw["reason"]; reason == "" && ok {
		t.Errorf("%s: job %q has a reason field though it has no reason: %s", where, j.Key, j.raw["reason"])
	}
}
