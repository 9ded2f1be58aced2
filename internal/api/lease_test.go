package api_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store"
)

// holdClaims holds the answer of every claim by the worker "lost" once the store has
// claimed its jobs, until the claim's request ends: a worker that goes away in the
// instant between its jobs being claimed and the answer being written.
type holdClaims struct {
	store.Store
	claimed chan []*store.Claim
}

func (h *holdClaims) Claim(ctx context.Context, p store.ClaimParams) ([]*store.Claim, error) {
	cs, err := h.Store.Claim(ctx, p)
	if err == nil && len(cs) > 0 && p.WorkerID == "lost" {
		h.claimed <- cs
		<-ctx.Done()
	}
	return cs, err
}

// signalWait tells when a claim found no job: it goes on to wait for one, its wait
// counted from when it was received.
type signalWait struct {
	store.Store
	waiting chan struct{}
}

func (s *signalWait) Claim(ctx context.Context, p store.ClaimParams) ([]*store.Claim, error) {
	cs, err := s.Store.Claim(ctx, p)
	if err == nil && len(cs) == 0 {
		select {
		case s.waiting <- struct{}{}:
		default:
		}
	}
	return cs, err
}

// apiTime is how the API writes timestamps.
const apiTime = "2006-01-02T15:04:05.000Z07:00"

const oneJob = `{"pipeline": "name: one\njobs:\n  a: {steps: [{run: 'true'}]}\n"}`

// TestClaimAnswerLost: a worker's claim request ends after its job was claimed and
// before the answer was written. The job is queued again at once, its lease cleared and
// its attempt not counted, and another worker claims it as attempt 1, long before the
// lease's hour would have run out.
func TestClaimAnswerLost(t *testing.T) {
	t.Parallel()
	hold := &holdClaims{claimed: make(chan []*store.Claim, 1)}
	b := setupWith(t, func(cfg *api.Config) {
		hold.Store = cfg.Store
		cfg.Store = hold
		cfg.LeaseTTL = time.Hour
	})
	if r := b.post(t, "/api/v1/runs", oneJob); r.status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ended := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url+"/api/v1/agent/claim",
			bytes.NewReader([]byte(`{"worker_id": "lost", "wait": "30s"}`)))
		if err != nil {
			ended <- err
			return
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = res.Body.Close()
			err = errors.New("the claim was answered " + res.Status)
		}
		ended <- err
	}()
	var claimed []*store.Claim
	select {
	case claimed = <-hold.claimed:
	case err := <-ended:
		t.Fatalf("the claim ended before its job was claimed: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the job was not claimed within 30s")
	}
	cancel()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("claim request: %v, want it cancelled", err)
	}
	id := claimed[0].Job.ID
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := b.store.GetJob(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status == store.JobQueued {
			if j.Attempt != 0 || j.LeaseToken != "" || j.WorkerID != "" {
				t.Errorf("handed back job: attempt %d, token %q, worker %q; want attempt 0 and no lease", j.Attempt, j.LeaseToken, j.WorkerID)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job still %s (worker %q) 10s after its claim's request ended; want it queued again at once", j.Status, j.WorkerID)
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
	v := b.claim(t, `{"worker_id": "other", "wait": "0s"}`)
	if len(v.Jobs) != 1 || v.Jobs[0].ID != id.String() || v.Jobs[0].Attempt != 1 || v.Jobs[0].Lease.Token == claimed[0].Lease.Token {
		t.Fatalf("the next worker's claim: %+v; want job %s as attempt 1 with a new lease", v.Jobs, id)
	}
}

// TestLeaseTimings: the claim and heartbeat answers tell the worker how long its lease
// lasts from when the coordinator received the request (ttl_ms: the TTL, plus the time a
// claim waited for its job), and when it expires, without the reap grace; the store keeps
// the lease for the grace longer, so the job is taken back only after the worker stopped.
func TestLeaseTimings(t *testing.T) {
	t.Parallel()
	const ttl, grace = 40 * time.Second, 7 * time.Second
	waiting := &signalWait{waiting: make(chan struct{}, 1)}
	b := setupWith(t, func(cfg *api.Config) {
		waiting.Store = cfg.Store
		cfg.Store, cfg.LeaseTTL, cfg.ReapGrace = waiting, ttl, grace
	})
	type lease struct {
		Token     string `json:"token"`
		ExpiresAt string `json:"expires_at"`
		TTL       string `json:"ttl"`
		TTLMillis int64  `json:"ttl_ms"`
	}
	got := make(chan response, 1)
	go func() { got <- b.post(t, "/api/v1/agent/claim", `{"worker_id": "w", "wait": "30s"}`) }()
	// The claim waits for a job while 3s pass on the coordinator's clock.
	select {
	case <-waiting.waiting:
	case <-time.After(30 * time.Second):
		t.Fatal("the claim did not wait for a job within 30s")
	}
	b.clock.Advance(3 * time.Second)
	if r := b.post(t, "/api/v1/runs", oneJob); r.status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	r := <-got
	var v struct {
		Jobs []struct {
			ID    string `json:"id"`
			Lease lease  `json:"lease"`
		} `json:"jobs"`
	}
	r.decode(t, &v)
	if len(v.Jobs) != 1 {
		t.Fatalf("claim: %s", r.body)
	}
	l := v.Jobs[0].Lease
	now := b.clock.Now()
	if l.TTL != "40s" || l.TTLMillis != (ttl+3*time.Second).Milliseconds() || l.ExpiresAt != now.Add(ttl).UTC().Format(apiTime) {
		t.Errorf("claimed lease %+v; want ttl 40s, ttl_ms 43000 (the TTL and the 3s the claim waited), expires_at %s", l, now.Add(ttl).UTC().Format(apiTime))
	}
	j, err := b.store.GetJob(t.Context(), mustUUID(t, v.Jobs[0].ID))
	if err != nil {
		t.Fatal(err)
	}
	if !j.LeaseExpiresAt.Equal(now.Add(ttl + grace)) {
		t.Errorf("stored lease expires %s after the claim, want the TTL and the reap grace, %s", j.LeaseExpiresAt.Sub(now), ttl+grace)
	}

	b.clock.Advance(10 * time.Second)
	r = b.post(t, "/api/v1/agent/jobs/"+v.Jobs[0].ID+"/heartbeat", `{"token": "`+l.Token+`"}`)
	var hb lease
	r.decode(t, &hb)
	now = b.clock.Now()
	if hb.TTLMillis != ttl.Milliseconds() || hb.ExpiresAt != now.Add(ttl).UTC().Format(apiTime) {
		t.Errorf("heartbeat answer %s; want ttl_ms %d and expires_at %s", r.body, ttl.Milliseconds(), now.Add(ttl).UTC().Format(apiTime))
	}
	if j, err = b.store.GetJob(t.Context(), j.ID); err != nil {
		t.Fatal(err)
	}
	if !j.LeaseExpiresAt.Equal(now.Add(ttl + grace)) {
		t.Errorf("stored lease expires %s after the heartbeat, want %s", j.LeaseExpiresAt.Sub(now), ttl+grace)
	}
}

// TestClaimWaitHalfTTL: a claim is held open at most half the lease TTL, whatever wait it
// asks for, so that a claim whose worker was cut off ends before that worker's jobs come
// back to the queue.
func TestClaimWaitHalfTTL(t *testing.T) {
	t.Parallel()
	waiting := &signalWait{waiting: make(chan struct{}, 1)}
	b := setupWith(t, func(cfg *api.Config) {
		waiting.Store = cfg.Store
		cfg.Store, cfg.LeaseTTL = waiting, 4*time.Second
	})
	got := make(chan claimView, 1)
	go func() { got <- b.claim(t, `{"worker_id": "w", "wait": "30s"}`) }()
	// The claim's timer is set before it first looks for a job, so once it has found none
	// the clock can be moved: to just short of half the TTL, where it must still wait, then
	// to half the TTL, where it must end. Without the cap it would wait for the 30s it asked
	// for, which this clock never reaches.
	select {
	case <-waiting.waiting:
	case <-time.After(30 * time.Second):
		t.Fatal("the claim did not wait for a job within 30s")
	}
	b.clock.Advance(1900 * time.Millisecond)
	select {
	case v := <-got:
		t.Fatalf("the claim ended before half the TTL had passed: %+v", v)
	case <-time.After(100 * time.Millisecond):
	}
	b.clock.Advance(100 * time.Millisecond)
	select {
	case v := <-got:
		if len(v.Jobs) != 0 {
			t.Fatalf("claim on an empty queue returned %d jobs", len(v.Jobs))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the claim did not end at half the 4s TTL")
	}
}
