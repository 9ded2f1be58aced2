package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// waitingRun is a run as GET /api/v1/runs/{id} shows it, with why each job waits.
type waitingRun struct {
	ID   string       `json:"id"`
	Jobs []waitingJob `json:"jobs"`
}

type waitingJob struct {
	ID      string `json:"id"`
	Key     string `json:"key"`
	Status  string `json:"status"`
	Waiting *struct {
		Code    string   `json:"code"`
		Message string   `json:"message"`
		Labels  []string `json:"labels"`
	} `json:"waiting"`
}

func (b *bundle) waitingRun(t *testing.T, id string) map[string]waitingJob {
	t.Helper()
	r := b.get(t, "/api/v1/runs/"+id)
	if r.status != http.StatusOK {
		t.Fatalf("get run: %d %s", r.status, r.body)
	}
	var v waitingRun
	r.decode(t, &v)
	out := map[string]waitingJob{}
	for _, j := range v.Jobs {
		out[j.Key] = j
	}
	return out
}

func (b *bundle) submit(t *testing.T, yaml string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"pipeline": yaml})
	r := b.post(t, "/api/v1/runs", string(body))
	if r.status != http.StatusAccepted {
		t.Fatalf("create run: %d %s", r.status, r.body)
	}
	var v waitingRun
	r.decode(t, &v)
	return v.ID
}

func wantWaiting(t *testing.T, j waitingJob, code string, parts ...string) {
	t.Helper()
	if j.Waiting == nil || j.Waiting.Code != code {
		t.Errorf("job %s (%s): waiting %+v, want code %s", j.Key, j.Status, j.Waiting, code)
		return
	}
	for _, p := range parts {
		if !strings.Contains(j.Waiting.Message, p) {
			t.Errorf("job %s: waiting message %q does not say %q", j.Key, j.Waiting.Message, p)
		}
	}
}

// TestWaitingNoWorker: a job whose labels no live worker carries says so, naming the
// label, on the run and on the job; the job that needs it says what it waits for.
func TestWaitingNoWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if r := b.post(t, "/api/v1/agent/register", `{"name": "linux-1", "labels": ["linux", "amd64"]}`); r.status != http.StatusOK {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	id := b.submit(t, "name: w\njobs:\n  build: {runs_on: [windows-latest], steps: [{run: make}]}\n"+
		"  big: {runs_on: [linux], resources: {cpu: 64, memory: 512Gi}, steps: [{run: make}]}\n"+
		"  deploy: {needs: [build, big], steps: [{run: make}]}\n"+
		"  any: {runs_on: [linux], steps: [{run: make}]}\n")
	jobs := b.waitingRun(t, id)
	wantWaiting(t, jobs["build"], "no_worker", "no worker has labels [windows-latest]")
	if w := jobs["build"].Waiting; w == nil || len(w.Labels) != 1 || w.Labels[0] != "windows-latest" {
		t.Errorf("build's waiting names labels %+v, want [windows-latest]", w)
	}
	// A worker that registered without saying its capacity may take any size.
	wantWaiting(t, jobs["big"], "backlog")
	wantWaiting(t, jobs["deploy"], "needs", "waiting for build, big")
	wantWaiting(t, jobs["any"], "backlog")

	var one struct {
		waitingJob
		RunID string `json:"run_id"`
	}
	b.get(t, "/api/v1/jobs/"+jobs["build"].ID).decode(t, &one)
	wantWaiting(t, one.waitingJob, "no_worker", "windows-latest")
	b.get(t, "/api/v1/jobs/"+jobs["deploy"].ID).decode(t, &one)
	wantWaiting(t, one.waitingJob, "needs", "waiting for build, big")

	// A worker that says its size is too small for big; one that went quiet counts for
	// nothing.
	if r := b.post(t, "/api/v1/agent/register", `{"name": "small", "labels": ["linux"], "milli_cpu": 8000, "memory": 17179869184}`); r.status != http.StatusOK {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	b.clock.Advance(time.Hour)
	if r := b.post(t, "/api/v1/agent/register", `{"name": "small-2", "labels": ["linux"], "milli_cpu": 8000, "memory": 17179869184}`); r.status != http.StatusOK {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	jobs = b.waitingRun(t, id)
	wantWaiting(t, jobs["big"], "no_worker", "no worker has 64 CPUs and 512Gi memory")
	wantWaiting(t, jobs["any"], "backlog")

	// A job a worker holds does not wait.
	c := b.claim(t, `{"worker_id": "w", "labels": ["linux"], "free_milli_cpu": 8000, "free_memory": 17179869184, "wait": "0s"}`)
	if len(c.Jobs) != 1 || c.Jobs[0].Key != "any" {
		t.Fatalf("claimed %+v, want any", c.Jobs)
	}
	if j := b.waitingRun(t, id)["any"]; j.Waiting != nil {
		t.Errorf("a claimed job waits: %+v", j.Waiting)
	}
}

// TestWaitingConcurrency: a job behind its concurrency group names the run and job that
// hold the group.
func TestWaitingConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if r := b.post(t, "/api/v1/agent/register", `{"name": "w"}`); r.status != http.StatusOK {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	const deploy = "name: d\njobs:\n  deploy: {concurrency: {group: production}, steps: [{run: ./deploy}]}\n"
	first := b.submit(t, deploy)
	if c := b.claim(t, `{"worker_id": "w", "wait": "0s"}`); len(c.Jobs) != 1 || c.Jobs[0].RunID != first {
		t.Fatalf("claimed %+v, want the first run's deploy", c.Jobs)
	}
	second := b.submit(t, deploy)
	jobs := b.waitingRun(t, second)
	wantWaiting(t, jobs["deploy"], "concurrency", "concurrency group production is held by run "+first+" (job deploy)")
	if j := b.waitingRun(t, first)["deploy"]; j.Waiting != nil {
		t.Errorf("the holder waits: %+v", j.Waiting)
	}
}

// TestWaitingRetry: a job between attempts says when the next one comes.
func TestWaitingRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.submit(t, "name: r\njobs:\n  flaky: {retry: {max_attempts: 3, backoff: 30s}, steps: [{run: x}]}\n")
	j := b.claim(t, `{"worker_id": "w", "wait": "0s"}`).Jobs[0]
	if r := b.post(t, "/api/v1/agent/jobs/"+j.ID+"/complete", fmt.Sprintf(`{"token": %q, "status": "failed", "exit_code": 1}`, j.Lease.Token)); r.status != http.StatusOK {
		t.Fatalf("complete: %d %s", r.status, r.body)
	}
	got := b.waitingRun(t, id)["flaky"]
	if got.Status != "retrying" {
		t.Fatalf("flaky is %s, want retrying", got.Status)
	}
	wantWaiting(t, got, "retry", "retry in ", "(attempt 2 of 3)")
}

// TestWaitingOverWebSocket: the dashboard's run topic carries why each job waits too.
func TestWaitingOverWebSocket(t *testing.T) {
	t.Parallel()
	b := setupWS(t, "files", false)
	if r := b.post(t, "/api/v1/agent/register", `{"name": "linux-1", "labels": ["linux"]}`); r.status != http.StatusOK {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	id := b.submit(t, "name: w\njobs:\n  build: {runs_on: [windows-latest], steps: [{run: make}]}\n")
	c, _, err := websocket.Dial(t.Context(), wsURL(b.bundle, ""), nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	sub, _ := json.Marshal(map[string]any{"type": "subscribe", "id": "r", "topic": "run", "run_id": id})
	if err := c.Write(t.Context(), websocket.MessageText, sub); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("no run message: %v", err)
		}
		var m struct {
			Type string       `json:"type"`
			Jobs []waitingJob `json:"jobs"`
		}
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("decode %s: %v", data, err)
		}
		if m.Type != "run" {
			continue
		}
		if len(m.Jobs) != 1 {
			t.Fatalf("run message with jobs %+v", m.Jobs)
		}
		wantWaiting(t, m.Jobs[0], "no_worker", "no worker has labels [windows-latest]")
		return
	}
}
