package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// completeAndClaim posts a completion carrying a claim and returns the answer's two
// lines: the completion's and the claim's.
func (b *bundle) completeAndClaim(t *testing.T, jobID, body string) (struct {
	Status string `json:"status"`
}, struct {
	claimView
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}) {
	t.Helper()
	r := b.post(t, "/api/v1/agent/jobs/"+jobID+"/complete", body)
	if r.status != http.StatusOK {
		t.Fatalf("complete with a claim: %d %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("Content-Type = %q, want application/x-ndjson", ct)
	}
	var done struct {
		Status string `json:"status"`
	}
	var claimed struct {
		claimView
		Error *struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	if err := dec.Decode(&done); err != nil {
		t.Fatalf("decode the completion's line of %s: %v", r.body, err)
	}
	if err := dec.Decode(&claimed); err != nil {
		t.Fatalf("decode the claim's line of %s: %v", r.body, err)
	}
	if dec.More() {
		t.Fatalf("more than two lines: %s", r.body)
	}
	return done, claimed
}

// TestCompleteCarriesClaim has a worker claim its next job with the completion of the
// last: the job is complete before the claim is made, the claim is what the claim
// endpoint would answer, and a bad claim refuses the whole completion.
func TestCompleteCarriesClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var reg struct {
		WorkerID string   `json:"worker_id"`
		Features []string `json:"features"`
	}
	b.post(t, "/api/v1/agent/register", `{"name": "w1"}`).decode(t, &reg)
	found := false
	for _, f := range reg.Features {
		found = found || f == "complete.claim"
	}
	if !found {
		t.Fatalf("register features %v lack complete.claim", reg.Features)
	}
	var created runView
	b.post(t, "/api/v1/runs", diamond).decode(t, &created)
	first := b.claim(t, fmt.Sprintf(`{"worker_id": %q, "max": 2, "wait": "0s", "start": true}`, reg.WorkerID))
	if len(first.Jobs) != 2 {
		t.Fatalf("claimed %d jobs, want a and b", len(first.Jobs))
	}
	a, bj := first.Jobs[0], first.Jobs[1]
	claim := fmt.Sprintf(`{"worker_id": %q, "wait": "0s", "start": true}`, reg.WorkerID)

	// A claim the claim endpoint would refuse refuses the completion, which changes
	// nothing.
	for _, bad := range []string{
		`{"wait": "0s"}`,
		fmt.Sprintf(`{"worker_id": %q, "max": 65}`, reg.WorkerID),
		fmt.Sprintf(`{"worker_id": %q, "wait": "2h"}`, reg.WorkerID),
		fmt.Sprintf(`{"worker_id": %q, "colour": "red"}`, reg.WorkerID),
	} {
		r := b.post(t, "/api/v1/agent/jobs/"+a.ID+"/complete",
			fmt.Sprintf(`{"token": %q, "status": "success", "claim": %s}`, a.Lease.Token, bad))
		expectError(t, r, http.StatusBadRequest, "bad_request")
	}
	var job struct {
		Status string `json:"status"`
	}
	b.get(t, "/api/v1/jobs/"+a.ID).decode(t, &job)
	if job.Status != "running" {
		t.Fatalf("job after refused completions: %s, want running", job.Status)
	}

	// c needs a and b: completing a leaves nothing to claim, completing b queues c, and
	// the claim b's completion carries takes it.
	done, claimed := b.completeAndClaim(t, a.ID, fmt.Sprintf(`{"token": %q, "status": "success", "claim": %s}`, a.Lease.Token, claim))
	if done.Status != "success" || len(claimed.Jobs) != 0 || claimed.Error != nil {
		t.Fatalf("complete a: %+v, claimed %+v", done, claimed)
	}
	done, claimed = b.completeAndClaim(t, bj.ID, fmt.Sprintf(`{"token": %q, "status": "success", "claim": %s}`, bj.Lease.Token, claim))
	if done.Status != "success" || len(claimed.Jobs) != 1 || claimed.Error != nil {
		t.Fatalf("complete b: %+v, claimed %+v", done, claimed)
	}
	c := claimed.Jobs[0]
	if c.Key != "c" || c.Lease.Token == "" || c.Attempt != 1 || c.RunID != created.ID {
		t.Fatalf("claimed with b's completion: %+v", c)
	}
	b.get(t, "/api/v1/jobs/"+c.ID).decode(t, &job)
	if job.Status != "running" {
		t.Fatalf("job claimed with start: %s, want running", job.Status)
	}

	// A completion the store refuses makes no claim: its answer is the usual error.
	expectError(t, b.post(t, "/api/v1/agent/jobs/"+a.ID+"/complete",
		fmt.Sprintf(`{"token": %q, "status": "success", "claim": %s}`, a.Lease.Token, claim)), http.StatusConflict, "lease_lost")

	// A claim that waits is answered when a job is queued; the completion's line comes
	// before, while the claim waits.
	type answer struct {
		err     error
		claimed claimView
	}
	firstLine := make(chan string, 1)
	got := make(chan answer, 1)
	go func() {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.url+"/api/v1/agent/jobs/"+c.ID+"/complete",
			bytes.NewReader(fmt.Appendf(nil, `{"token": %q, "status": "success", "claim": {"worker_id": %q, "wait": "30s"}}`,
				c.Lease.Token, reg.WorkerID)))
		if err != nil {
			got <- answer{err: err}
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			got <- answer{err: fmt.Errorf("status %d", resp.StatusCode)}
			return
		}
		dec := json.NewDecoder(resp.Body)
		var done struct {
			Status string `json:"status"`
		}
		if err := dec.Decode(&done); err != nil {
			got <- answer{err: fmt.Errorf("completion line: %w", err)}
			return
		}
		firstLine <- done.Status
		var a answer
		a.err = dec.Decode(&a.claimed)
		got <- a
	}()
	select {
	case st := <-firstLine:
		if st != "success" {
			t.Fatalf("completion line while the claim waits: %s", st)
		}
	case a := <-got:
		t.Fatalf("complete c with a waiting claim: %v", a.err)
	case <-time.After(30 * time.Second):
		t.Fatal("no completion line while the claim waits")
	}
	var next runView
	b.post(t, "/api/v1/runs", `{"pipeline": "name: n\njobs:\n  d: {steps: [{run: echo d}]}\n"}`).decode(t, &next)
	ans := <-got
	if ans.err != nil || len(ans.claimed.Jobs) != 1 || ans.claimed.Jobs[0].RunID != next.ID {
		t.Fatalf("claim line: %+v %v", ans.claimed, ans.err)
	}
	var finished runView
	b.get(t, "/api/v1/runs/"+created.ID).decode(t, &finished)
	if finished.Status != "success" {
		t.Errorf("run after every job completed: %s", finished.Status)
	}
}
