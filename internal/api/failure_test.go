package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/gantry-ci/gantry/internal/logs"
)

type failureView struct {
	Job         string `json:"job"`
	JobID       string `json:"job_id"`
	Step        string `json:"step"`
	StepIndex   int    `json:"step_index"`
	Kind        string `json:"kind"`
	ExitCode    *int   `json:"exit_code"`
	Reason      string `json:"reason"`
	FailedJobs  int    `json:"failed_jobs"`
	CancelledBy string `json:"cancelled_by"`
	Source      string `json:"source"`
	Seq         int64  `json:"seq"`
	Lines       []struct {
		Seq  int64  `json:"seq"`
		Text string `json:"text"`
	} `json:"lines"`
}

type listedRun struct {
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	State   string       `json:"state"`
	Failure *failureView `json:"failure"`
}

type runsPage struct {
	Runs  []listedRun `json:"runs"`
	Total int         `json:"total"`
}

// failJob claims the one job of a new run of project on branch, runs its step "test" to
// exit code 2 after printing two lines, and fails the job.
func (b *bundle) failJob(t *testing.T, project, branch string) (runID, jobID string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"pipeline": "name: f\njobs:\n  unit: {steps: [{name: test, run: \"false\"}]}\n",
		"project": project, "branch": branch, "event": "push"})
	r := b.post(t, "/api/v1/runs", string(body))
	if r.status != http.StatusAccepted {
		t.Fatalf("create run: %d %s", r.status, r.body)
	}
	var created runView
	r.decode(t, &created)
	got := b.claim(t, `{"worker_id": "w", "wait": "0s"}`)
	if len(got.Jobs) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(got.Jobs))
	}
	j := got.Jobs[0]
	lines := []logs.Line{
		{Seq: 1, TS: 1, Stream: logs.System, Text: "step test"},
		{Seq: 2, TS: 2, Stream: logs.Stdout, Text: "--- FAIL: TestSum"},
		{Seq: 3, TS: 3, Stream: logs.Stderr, Text: "sum_test.go:9: want 3, got 4"},
		{Seq: 4, TS: 4, Stream: logs.System, Text: "step test failed with exit code 2"},
	}
	lb, _ := json.Marshal(map[string]any{"token": j.Lease.Token, "lines": lines})
	b.appendLogs(t, j.ID, string(lb))
	path := "/api/v1/agent/jobs/" + j.ID
	for _, call := range []struct{ path, body string }{
		{path + "/start", fmt.Sprintf(`{"token": %q}`, j.Lease.Token)},
		{path + "/steps/0", fmt.Sprintf(`{"token": %q, "status": "running"}`, j.Lease.Token)},
		{path + "/steps/0", fmt.Sprintf(`{"token": %q, "status": "failed", "exit_code": 2}`, j.Lease.Token)},
		{path + "/complete", fmt.Sprintf(`{"token": %q, "status": "failed", "exit_code": 2}`, j.Lease.Token)},
	} {
		if r := b.post(t, call.path, call.body); r.status != http.StatusOK {
			t.Fatalf("POST %s: %d %s", call.path, r.status, r.body)
		}
	}
	return created.ID, j.ID
}

// TestRunFailure: a failed run says which job and step failed, with what exit code and
// which lines, on its own and in the runs list; a cancelled one says who cancelled it.
func TestRunFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runID, jobID := b.failJob(t, "web", "main")

	var run struct {
		Status  string       `json:"status"`
		Failure *failureView `json:"failure"`
	}
	b.get(t, "/api/v1/runs/"+runID).decode(t, &run)
	f := run.Failure
	if run.Status != "failed" || f == nil {
		t.Fatalf("run %s has no failure", runID)
	}
	if f.Job != "unit" || f.JobID != jobID || f.Step != "test" || f.StepIndex != 0 || f.Kind != "exit" ||
		f.ExitCode == nil || *f.ExitCode != 2 || f.Reason != "unit: step test failed with exit code 2" {
		t.Errorf("failure = %+v", f)
	}
	if f.Source != "log" || f.Seq != 2 || len(f.Lines) != 2 || f.Lines[1].Text != "sum_test.go:9: want 3, got 4" {
		t.Errorf("failure lines = %+v from %q at %d, want the step's two lines from line 2", f.Lines, f.Source, f.Seq)
	}

	// The list carries the one-line form, the true state and the total.
	pending := b.createRun(t, "web", "refs/heads/dev")
	var page runsPage
	b.get(t, "/api/v1/runs?project=web").decode(t, &page)
	if page.Total != 2 || len(page.Runs) != 2 {
		t.Fatalf("list = %+v, want 2 runs, total 2", page)
	}
	if r := page.Runs[1]; r.ID != runID || r.State != "failed" || r.Failure == nil ||
		r.Failure.Reason != "unit: step test failed with exit code 2" || r.Failure.FailedJobs != 1 || r.Failure.Lines != nil {
		t.Errorf("listed failed run = %+v", r)
	}
	if r := page.Runs[0]; r.ID != pending.ID || r.State != "queued" || r.Failure != nil {
		t.Errorf("listed pending run = %+v, want state queued and no failure", r)
	}
	// Filters narrow the list and its total, and a page does not change the total.
	b.get(t, "/api/v1/runs?project=web&branch=main&event=push").decode(t, &page)
	if page.Total != 1 || len(page.Runs) != 1 || page.Runs[0].ID != runID {
		t.Errorf("branch and event filter = %+v, want the failed run alone", page)
	}
	b.get(t, "/api/v1/runs?project=web&limit=1").decode(t, &page)
	if page.Total != 2 || len(page.Runs) != 1 {
		t.Errorf("a page of 1 = %d runs, total %d; want 1 of 2", len(page.Runs), page.Total)
	}
	b.get(t, "/api/v1/runs?actor=nobody").decode(t, &page)
	if page.Total != 0 || len(page.Runs) != 0 {
		t.Errorf("unknown actor = %+v, want nothing", page)
	}
	expectError(t, b.get(t, "/api/v1/runs?branch=a%0Ab"), http.StatusBadRequest, "bad_request")

	// Cancelled: by whom the audit log says (anonymous with authentication off).
	if r := b.post(t, "/api/v1/runs/"+pending.ID+"/cancel", ""); r.status != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	b.get(t, "/api/v1/runs/"+pending.ID).decode(t, &run)
	if run.Status != "cancelled" || run.Failure == nil || run.Failure.Kind != "cancelled" || run.Failure.CancelledBy != "anonymous" {
		t.Errorf("cancelled run: %s, failure %+v; want cancelled by anonymous", run.Status, run.Failure)
	}
}
