package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
)

type claimView struct {
	Jobs []struct {
		ID      string `json:"id"`
		RunID   string `json:"run_id"`
		Key     string `json:"key"`
		Attempt int    `json:"attempt"`
		Lease   struct {
			Token          string `json:"token"`
			ExpiresAt      string `json:"expires_at"`
			HeartbeatEvery string `json:"heartbeat_every"`
			CancelGrace    string `json:"cancel_grace"`
		} `json:"lease"`
		OnceDone []int  `json:"once_done"`
		QueuedAt string `json:"queued_at"`
		Spec     struct {
			Steps []struct {
				Run string `json:"run"`
			} `json:"steps"`
		} `json:"spec"`
	} `json:"jobs"`
}

func (b *bundle) post(t *testing.T, path, body string) response {
	t.Helper()
	return b.do(t, http.MethodPost, path, "application/json", body, nil)
}

func (b *bundle) claim(t *testing.T, body string) claimView {
	t.Helper()
	r := b.post(t, "/api/v1/agent/claim", body)
	if r.status != http.StatusOK {
		t.Fatalf("claim: status %d: %s", r.status, r.body)
	}
	var v claimView
	r.decode(t, &v)
	return v
}

const diamond = `{"pipeline": "name: d\njobs:\n  a: {steps: [{run: echo a}]}\n  b: {steps: [{run: echo b}]}\n  c: {needs: [a, b], steps: [{run: echo c}]}\n"}`

// TestAgentProtocol walks a worker through a whole run: register, claim, start,
// heartbeat, step updates and completion, until the run has succeeded.
func TestAgentProtocol(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.post(t, "/api/v1/agent/register", `{"name": "w1", "labels": ["linux"], "milli_cpu": 4000, "memory": 8589934592, "max_jobs": 4}`)
	if r.status != http.StatusOK {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	var reg struct {
		WorkerID       string `json:"worker_id"`
		HeartbeatEvery string `json:"heartbeat_every"`
	}
	r.decode(t, &reg)
	if reg.WorkerID == "" || reg.HeartbeatEvery != "10s" {
		t.Fatalf("register answer %s", r.body)
	}
	if r := b.get(t, "/api/v1/workers"); r.status != http.StatusOK || !strings.Contains(string(r.body), `"w1"`) {
		t.Fatalf("workers after register: %d %s", r.status, r.body)
	}

	// An odd microsecond, to see that queued_at keeps it.
	b.clock.Advance(1500 * time.Microsecond)
	queuedAt := b.clock.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
	run := b.post(t, "/api/v1/runs", diamond)
	var created runView
	run.decode(t, &created)
	claimBody := fmt.Sprintf(`{"worker_id": %q, "labels": ["linux"], "max": 4, "wait": "0s"}`, reg.WorkerID)
	for round, want := range [][]string{{"a", "b"}, {"c"}} {
		got := b.claim(t, claimBody)
		if len(got.Jobs) != len(want) {
			t.Fatalf("round %d: claimed %d jobs, want %v", round, len(got.Jobs), want)
		}
		for _, j := range got.Jobs {
			if j.Lease.Token == "" || j.Attempt != 1 || len(j.Spec.Steps) != 1 || j.RunID != created.ID || j.Lease.CancelGrace != "10s" {
				t.Fatalf("claimed job %+v", j)
			}
			// Queued at submission (a, b) or when its needs ended (c), with the fake clock
			// standing still.
			if j.QueuedAt != queuedAt {
				t.Fatalf("claimed job %s queued_at %q, want %q", j.Key, j.QueuedAt, queuedAt)
			}
			path := "/api/v1/agent/jobs/" + j.ID
			token := fmt.Sprintf(`{"token": %q}`, j.Lease.Token)
			for _, call := range []struct{ path, body string }{
				{path + "/start", token},
				{path + "/heartbeat", token},
				{path + "/steps/0", fmt.Sprintf(`{"token": %q, "status": "running"}`, j.Lease.Token)},
				{path + "/steps/0", fmt.Sprintf(`{"token": %q, "status": "success", "exit_code": 0}`, j.Lease.Token)},
				{path + "/complete", fmt.Sprintf(`{"token": %q, "status": "success", "exit_code": 0}`, j.Lease.Token)},
			} {
				if r := b.post(t, call.path, call.body); r.status != http.StatusOK {
					t.Fatalf("POST %s: %d %s", call.path, r.status, r.body)
				}
			}
		}
	}
	var done runView
	b.get(t, "/api/v1/runs/"+created.ID).decode(t, &done)
	if done.Status != "success" || done.JobsFinished != 3 {
		t.Errorf("run after the worker finished: %s, %d finished", done.Status, done.JobsFinished)
	}
}

// TestCompleteCarriesSteps sends a job's step reports with its completion instead of on
// their own.
func TestCompleteCarriesSteps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.post(t, "/api/v1/runs", `{"pipeline": "name: s\njobs:\n  a: {steps: [{run: echo a}, {run: echo b}]}\n"}`)
	j := b.claim(t, `{"worker_id": "w", "wait": "0s"}`).Jobs[0]
	path := "/api/v1/agent/jobs/" + j.ID
	if r := b.post(t, path+"/start", fmt.Sprintf(`{"token": %q}`, j.Lease.Token)); r.status != http.StatusOK {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	tooMany := strings.Repeat(`{"index": 0, "status": "running"},`, 1000)
	for _, bad := range []string{
		`[{"index": -1, "status": "running"}]`,
		`[{"index": 0, "status": "finished"}]`,
		`[{"index": 0, "status": "success"}, {"index": 2, "status": "running"}]`,
		"[" + tooMany + `{"index": 0, "status": "running"}]`,
	} {
		r := b.post(t, path+"/complete", fmt.Sprintf(`{"token": %q, "status": "success", "steps": %s}`, j.Lease.Token, bad))
		if r.status != http.StatusBadRequest {
			t.Errorf("complete with steps %.80s: %d %s, want 400", bad, r.status, r.body)
		}
	}
	var job struct {
		Status string `json:"status"`
		Steps  []struct {
			Status   string `json:"status"`
			ExitCode *int   `json:"exit_code"`
		} `json:"steps"`
	}
	b.get(t, "/api/v1/jobs/"+j.ID).decode(t, &job)
	if job.Status != "running" || job.Steps[0].Status != "pending" {
		t.Fatalf("refused completions changed the job: %+v", job)
	}
	r := b.post(t, path+"/complete", fmt.Sprintf(`{"token": %q, "status": "success", "exit_code": 0, "steps": [
		{"index": 0, "status": "running"}, {"index": 0, "status": "success", "exit_code": 0},
		{"index": 1, "status": "running"}, {"index": 1, "status": "success", "exit_code": 0}]}`, j.Lease.Token))
	if r.status != http.StatusOK {
		t.Fatalf("complete with steps: %d %s", r.status, r.body)
	}
	b.get(t, "/api/v1/jobs/"+j.ID).decode(t, &job)
	if job.Status != "success" || len(job.Steps) != 2 {
		t.Fatalf("job after complete: %+v", job)
	}
	for i, st := range job.Steps {
		if st.Status != "success" || st.ExitCode == nil || *st.ExitCode != 0 {
			t.Errorf("step %d after complete: %+v", i, st)
		}
	}
}

// TestCompleteCarriesLog sends a job's last log lines with its completion: they are
// stored before the job ends, after the lines a batch of their own stored, each once
// when a completion is sent again; a completion whose lease is gone stores none.
func TestCompleteCarriesLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var reg struct {
		Features []string `json:"features"`
	}
	b.post(t, "/api/v1/agent/register", `{"name": "w", "labels": ["linux"]}`).decode(t, &reg)
	if !slices.Contains(reg.Features, "complete.logs") {
		t.Fatalf("features %v: no complete.logs", reg.Features)
	}
	b.post(t, "/api/v1/runs", `{"pipeline": "name: s\njobs:\n  a: {steps: [{run: echo a}]}\n  b: {steps: [{run: echo b}]}\n"}`)
	jobs := b.claim(t, `{"worker_id": "w", "max": 2, "wait": "0s"}`).Jobs
	line := func(seq int) string {
		return fmt.Sprintf(`{"seq": %d, "ts": 1700000000000, "stream": "stdout", "text": "line %d"}`, seq, seq)
	}
	j := jobs[0]
	path := "/api/v1/agent/jobs/" + j.ID
	if r := b.post(t, path+"/logs", fmt.Sprintf(`{"token": %q, "lines": [%s, %s]}`, j.Lease.Token, line(1), line(2))); r.status != http.StatusOK {
		t.Fatalf("logs: %d %s", r.status, r.body)
	}
	// The completion starts again at 2, as after a batch whose answer was lost.
	complete := fmt.Sprintf(`{"token": %q, "status": "success", "log": {"lines": [%s, %s, %s]}}`, j.Lease.Token, line(2), line(3), line(4))
	if r := b.post(t, path+"/complete", complete); r.status != http.StatusOK {
		t.Fatalf("complete with lines: %d %s", r.status, r.body)
	}
	// Sent again, as by a worker that did not get the answer: the lease is gone.
	expectError(t, b.post(t, path+"/complete", complete), http.StatusConflict, "lease_lost")
	if r := b.get(t, "/api/v1/jobs/"+j.ID+"/logs"); string(r.body) != "line 1\nline 2\nline 3\nline 4\n" {
		t.Errorf("log after the completion: %q", r.body)
	}

	// A completion with another job's token stores nothing of its lines.
	other := "/api/v1/agent/jobs/" + jobs[1].ID
	expectError(t, b.post(t, other+"/complete", fmt.Sprintf(`{"token": %q, "status": "success", "log": {"lines": [%s]}}`, j.Lease.Token, line(1))),
		http.StatusConflict, "lease_lost")
	if r := b.get(t, "/api/v1/jobs/"+jobs[1].ID+"/logs"); len(r.body) != 0 {
		t.Errorf("log of a job whose completion was refused: %q", r.body)
	}
	// Lines that are not lines refuse the completion, and it changes nothing.
	expectError(t, b.post(t, other+"/complete", fmt.Sprintf(`{"token": %q, "status": "success", "log": {"lines": [{"seq": "x"}]}}`, jobs[1].Lease.Token)),
		http.StatusBadRequest, "bad_request")
	var job struct {
		Status string `json:"status"`
	}
	b.get(t, "/api/v1/jobs/"+jobs[1].ID).decode(t, &job)
	if job.Status == "success" {
		t.Errorf("a completion refused for its lines completed the job")
	}
}

func TestAgentLeaseLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.post(t, "/api/v1/runs", diamond)
	got := b.claim(t, `{"worker_id": "w", "wait": "0s"}`)
	j := got.Jobs[0]
	path := "/api/v1/agent/jobs/" + j.ID
	expectError(t, b.post(t, path+"/heartbeat", `{"token": "not-the-token"}`), http.StatusConflict, "lease_lost")
	complete := fmt.Sprintf(`{"token": %q, "status": "failed", "exit_code": 3}`, j.Lease.Token)
	if r := b.post(t, path+"/complete", complete); r.status != http.StatusOK {
		t.Fatalf("complete: %d %s", r.status, r.body)
	}
	expectError(t, b.post(t, path+"/complete", complete), http.StatusConflict, "lease_lost")
	expectError(t, b.post(t, path+"/start", fmt.Sprintf(`{"token": %q}`, j.Lease.Token)), http.StatusConflict, "lease_lost")
}

func TestAgentHeartbeatReportsCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var created runView
	b.post(t, "/api/v1/runs", diamond).decode(t, &created)
	j := b.claim(t, `{"worker_id": "w", "wait": "0s"}`).Jobs[0]
	if r := b.post(t, "/api/v1/runs/"+created.ID+"/cancel", ""); r.status != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	r := b.post(t, "/api/v1/agent/jobs/"+j.ID+"/heartbeat", fmt.Sprintf(`{"token": %q}`, j.Lease.Token))
	var hb struct {
		CancelRequested bool `json:"cancel_requested"`
	}
	r.decode(t, &hb)
	if r.status != http.StatusOK || !hb.CancelRequested {
		t.Errorf("heartbeat after cancel: %d %s; want cancel_requested", r.status, r.body)
	}
}

// TestAgentLongPoll: a waiting claim is answered by the store's signal when a run is
// submitted, and with no jobs when its wait runs out.
func TestAgentLongPoll(t *testing.T) {
	t.Parallel()
	b := setup(t)
	answered := make(chan claimView, 1)
	go func() { answered <- b.claim(t, `{"worker_id": "w", "wait": "50s"}`) }()
	// Submit until the waiting claim takes a job: a submit that lands before the claim
	// starts waiting is claimed by it at once, one that lands after wakes it.
	deadline := time.After(20 * time.Second)
	var got claimView
wait:
	for {
		b.post(t, "/api/v1/runs", diamond)
		select {
		case got = <-answered:
			break wait
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatal("the waiting claim was not woken by a submitted run")
		}
	}
	if len(got.Jobs) != 1 {
		t.Fatalf("woken claim returned %d jobs, want 1", len(got.Jobs))
	}

	idle := setup(t)
	empty := make(chan claimView, 1)
	go func() { empty <- idle.claim(t, `{"worker_id": "w", "wait": "30s"}`) }()
	deadline = time.After(20 * time.Second)
	for {
		idle.clock.Advance(31 * time.Second)
		select {
		case got := <-empty:
			if len(got.Jobs) != 0 {
				t.Fatalf("claim on an empty queue returned %d jobs", len(got.Jobs))
			}
			return
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatal("the claim did not end when its wait ran out")
		}
	}
}

func TestAgentBadRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"register without name", "/api/v1/agent/register", `{}`, 400, "bad_request"},
		{"register unknown field", "/api/v1/agent/register", `{"name": "w", "colour": "red"}`, 400, "bad_request"},
		{"register trailing data", "/api/v1/agent/register", `{"name": "w"} {}`, 400, "bad_request"},
		{"claim without worker", "/api/v1/agent/claim", `{}`, 400, "bad_request"},
		{"claim wait too long", "/api/v1/agent/claim", `{"worker_id": "w", "wait": "5m"}`, 400, "bad_request"},
		{"claim too many", "/api/v1/agent/claim", `{"worker_id": "w", "max": 1000}`, 400, "bad_request"},
		{"claim not JSON", "/api/v1/agent/claim", `worker_id=w`, 400, "bad_request"},
		{"heartbeat malformed id", "/api/v1/agent/jobs/nope/heartbeat", `{"token": "t"}`, 400, "bad_request"},
		{"heartbeat without token", "/api/v1/agent/jobs/01970000-0000-7000-8000-000000000000/heartbeat", `{}`, 400, "bad_request"},
		{"heartbeat unknown job", "/api/v1/agent/jobs/01970000-0000-7000-8000-000000000000/heartbeat", `{"token": "t"}`, 404, "not_found"},
		{"step index not a number", "/api/v1/agent/jobs/01970000-0000-7000-8000-000000000000/steps/x", `{"token": "t", "status": "running"}`, 400, "bad_request"},
		{"complete with a bad status", "/api/v1/agent/jobs/01970000-0000-7000-8000-000000000000/complete", `{"token": "t", "status": "done"}`, 400, "bad_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expectError(t, b.post(t, tt.path, tt.body), tt.status, tt.code)
		})
	}
}

// TestRetry: a run whose job failed is retried over HTTP, and the retried job's next
// attempt finishes it.
func TestRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var created runView
	b.post(t, "/api/v1/runs", `{"pipeline": "name: r\njobs:\n  a: {steps: [{run: x}]}\n  b: {needs: [a], steps: [{run: y}]}\n"}`).decode(t, &created)
	expectError(t, b.post(t, "/api/v1/runs/"+created.ID+"/retry", ""), http.StatusConflict, "conflict")
	j := b.claim(t, `{"worker_id": "w", "wait": "0s"}`).Jobs[0]
	b.post(t, "/api/v1/agent/jobs/"+j.ID+"/complete", fmt.Sprintf(`{"token": %q, "status": "failed", "exit_code": 1}`, j.Lease.Token))
	var failed runView
	b.get(t, "/api/v1/runs/"+created.ID).decode(t, &failed)
	if failed.Status != "failed" {
		t.Fatalf("run after its first job failed: %s", failed.Status)
	}
	r := b.post(t, "/api/v1/runs/"+created.ID+"/retry", "")
	var reopened runView
	r.decode(t, &reopened)
	if r.status != http.StatusAccepted || reopened.Status != "running" {
		t.Fatalf("retry run: %d %s", r.status, r.body)
	}
	again := b.claim(t, `{"worker_id": "w", "wait": "0s"}`).Jobs
	if len(again) != 1 || again[0].ID != j.ID || again[0].Attempt != 2 {
		t.Fatalf("after retry claimed %+v; want job a, attempt 2", again)
	}
	expectError(t, b.post(t, "/api/v1/jobs/"+j.ID+"/retry", ""), http.StatusConflict, "conflict")
	expectError(t, b.post(t, "/api/v1/jobs/nope/retry", ""), http.StatusBadRequest, "bad_request")
}

func TestStats(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.post(t, "/api/v1/agent/register", `{"id": "w1", "name": "w1"}`)
	b.post(t, "/api/v1/agent/register", `{"id": "w2", "name": "w2"}`)
	b.post(t, "/api/v1/runs", diamond)
	b.clock.Advance(40 * time.Second) // w1 and w2 are now three heartbeats late
	b.post(t, "/api/v1/agent/register", `{"id": "w2", "name": "w2"}`)
	b.claim(t, `{"worker_id": "w2", "wait": "0s"}`)
	r := b.get(t, "/api/v1/stats")
	var s struct {
		Queued []struct {
			Priority string   `json:"priority"`
			Labels   []string `json:"labels"`
			Jobs     int      `json:"jobs"`
		} `json:"queued"`
		QueuedTotal int            `json:"queued_total"`
		Assigned    int            `json:"assigned"`
		OldestWait  float64        `json:"oldest_queued_wait_seconds"`
		Workers     map[string]int `json:"workers"`
	}
	r.decode(t, &s)
	if r.status != http.StatusOK || s.QueuedTotal != 1 || s.Assigned != 1 || len(s.Queued) != 1 || s.Queued[0].Priority != "normal" {
		t.Fatalf("stats: %d %s", r.status, r.body)
	}
	if s.OldestWait != 40 {
		t.Errorf("oldest queued wait = %v s, want 40", s.OldestWait)
	}
	if s.Workers["offline"] != 1 || s.Workers["idle"] != 1 {
		t.Errorf("workers by state = %v, want one idle and one offline", s.Workers)
	}
}

// TestControlMarksWorkersSeen: a worker's control requests keep it from counting as
// offline and carry its state; a bad state is refused.
func TestControlMarksWorkersSeen(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.post(t, "/api/v1/agent/register", `{"id": "w1", "name": "w1"}`)
	workers := func() map[string]int {
		t.Helper()
		var s struct{ Workers map[string]int }
		b.get(t, "/api/v1/stats").decode(t, &s)
		return s.Workers
	}
	for range 4 {
		b.clock.Advance(15 * time.Second)
		if r := b.post(t, "/api/v1/agent/control", `{"worker_id": "w1", "wait": "0s", "state": "busy"}`); r.status != http.StatusOK {
			t.Fatalf("control: %d %s", r.status, r.body)
		}
	}
	if got := workers(); got["busy"] != 1 || len(got) != 1 {
		t.Errorf("workers by state after a minute of control requests = %v, want one busy", got)
	}
	// A state change is marked at once, even within a heartbeat interval.
	b.post(t, "/api/v1/agent/control", `{"worker_id": "w1", "wait": "0s", "state": "draining"}`)
	if got := workers(); got["draining"] != 1 {
		t.Errorf("workers by state after draining = %v, want one draining", got)
	}
	b.clock.Advance(40 * time.Second)
	if got := workers(); got["offline"] != 1 {
		t.Errorf("workers by state 40 s after the last request = %v, want one offline", got)
	}
	expectError(t, b.post(t, "/api/v1/agent/control", `{"worker_id": "w1", "wait": "0s", "state": "asleep"}`), http.StatusBadRequest, "bad_request")
}

// TestClaimsPerWorkerBounded: a worker holding the maximum of open claims gets 429 for
// another, and its slots come back when the waits end.
func TestClaimsPerWorkerBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const waiting = 4
	done := make(chan response, waiting)
	for range waiting {
		go func() {
			for {
				// A probe below may hold a slot for a moment; a waiter refused then asks
				// again.
				r := b.post(t, "/api/v1/agent/claim", `{"worker_id": "w", "wait": "30s"}`)
				if r.status != http.StatusTooManyRequests {
					done <- r
					return
				}
			}
		}()
	}
	deadline := time.After(20 * time.Second)
	for {
		r := b.post(t, "/api/v1/agent/claim", `{"worker_id": "w", "wait": "0s"}`)
		if r.status == http.StatusTooManyRequests {
			expectError(t, r, http.StatusTooManyRequests, "too_many_requests")
			break
		}
		if r.status != http.StatusOK {
			t.Fatalf("claim: %d %s", r.status, r.body)
		}
		select {
		case <-deadline:
			t.Fatal("a fifth open claim of one worker was never refused")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if r := b.post(t, "/api/v1/agent/claim", `{"worker_id": "other", "wait": "0s"}`); r.status != http.StatusOK {
		t.Errorf("another worker's claim: %d %s", r.status, r.body)
	}
	for n := 0; n < waiting; {
		b.clock.Advance(31 * time.Second)
		select {
		case r := <-done:
			if r.status != http.StatusOK {
				t.Errorf("waiting claim ended with %d", r.status)
			}
			n++
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatal("waiting claims did not end")
		}
	}
	if r := b.post(t, "/api/v1/agent/claim", `{"worker_id": "w", "wait": "0s"}`); r.status != http.StatusOK {
		t.Errorf("claim after the waits ended: %d %s", r.status, r.body)
	}
}

// TestControlChannel: a worker's open control request answers at once when a job it
// holds is cancelled.
func TestControlChannel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var created runView
	b.post(t, "/api/v1/runs", diamond).decode(t, &created)
	j := b.claim(t, `{"worker_id": "w", "wait": "0s"}`).Jobs[0]
	if r := b.post(t, "/api/v1/agent/control", `{"worker_id": "w", "wait": "0s"}`); r.status != http.StatusOK || !strings.Contains(string(r.body), `"cancel":[]`) {
		t.Fatalf("control before a cancel: %d %s", r.status, r.body)
	}
	answered := make(chan response, 1)
	go func() { answered <- b.post(t, "/api/v1/agent/control", `{"worker_id": "w", "wait": "50s"}`) }()
	if r := b.post(t, "/api/v1/runs/"+created.ID+"/cancel", ""); r.status != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	select {
	case r := <-answered:
		var got struct {
			Cancel []string `json:"cancel"`
		}
		r.decode(t, &got)
		if len(got.Cancel) != 1 || got.Cancel[0] != j.ID {
			t.Errorf("control answered %s; want the claimed job %s", r.body, j.ID)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the control request did not answer after the run was cancelled")
	}
	expectError(t, b.post(t, "/api/v1/agent/control", `{}`), http.StatusBadRequest, "bad_request")
}

func TestClaimCancelGrace(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) { c.CancelGrace = 20 * time.Second })
	b.post(t, "/api/v1/runs", `{"pipeline": "jobs:\n  own: {cancel_grace: 1m, steps: [{run: x}]}\n  default: {steps: [{run: x}]}\n"}`)
	got := map[string]string{}
	for _, j := range b.claim(t, `{"worker_id": "w", "wait": "0s", "max": 2}`).Jobs {
		got[j.Key] = j.Lease.CancelGrace
	}
	if got["own"] != "1m0s" || got["default"] != "20s" {
		t.Errorf("cancel grace by job = %v; want the job's own 1m0s, else the server's 20s", got)
	}
}
