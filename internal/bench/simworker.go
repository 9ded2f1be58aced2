package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// simWorker is a worker that speaks the real protocol over HTTP but runs nothing: it
// claims jobs started (as a real worker does), holds each (heartbeating, its one step
// reported running) as long as it is told, and reports it complete with its step's
// success, as a real worker does for a job whose step ends within a round trip. It stands in for
// a real worker wherever the scenario measures orchestration, not processes.
type simWorker struct {
	c      *client
	name   string
	labels []string
	slots  int
	// hold is how long each job runs; release, when not nil, holds every job until it
	// is closed as well.
	hold    time.Duration
	release <-chan struct{}
	stats   *simStats

	id             string
	heartbeatEvery time.Duration
	// completeClaim says the coordinator takes a claim with a completion (feature
	// complete.claim): a job's slot is claimed for again by the request that completes
	// the job, one request fewer per job.
	completeClaim bool
}

// simStats is what a pool of simulated workers observed.
type simStats struct {
	// ownClaims makes the workers claim in requests of their own even where the
	// coordinator takes a claim with a completion, so that claim times a claim alone
	// (set before the pool starts).
	ownClaims  bool
	dispatch   samples // job queued -> claim answer in the worker's hands
	claim      samples // round trip of a claim that came back with a job
	heartbeat  samples // heartbeat round trips
	claimed    atomic.Int64
	completed  atomic.Int64
	leaseLost  atomic.Int64
	errs       atomic.Int64
	firstErr   atomic.Pointer[error]
	onComplete func()
	// onClaim, when set, is told of each job claimed: its run and when the claim answer
	// arrived.
	onClaim func(runID string, at time.Time)
}

func (s *simStats) fail(err error) {
	s.errs.Add(1)
	s.firstErr.CompareAndSwap(nil, &err)
}

// err returns the first error the workers met, if any.
func (s *simStats) err() error {
	if p := s.firstErr.Load(); p != nil {
		return fmt.Errorf("%d worker errors, the first: %w", s.errs.Load(), *p)
	}
	return nil
}

type claimAnswer struct {
	Jobs []claimedJob `json:"jobs"`
	// Error says why the claim a completion carried was not made.
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

type claimedJob struct {
	ID       string `json:"id"`
	RunID    string `json:"run_id"`
	QueuedAt string `json:"queued_at"`
	Lease    struct {
		Token          string `json:"token"`
		HeartbeatEvery string `json:"heartbeat_every"`
	} `json:"lease"`
}

// run registers the worker and claims and runs jobs until ctx ends.
func (w *simWorker) run(ctx context.Context) error {
	var reg struct {
		WorkerID       string   `json:"worker_id"`
		HeartbeatEvery string   `json:"heartbeat_every"`
		Features       []string `json:"features"`
	}
	if err := w.c.post(ctx, "/api/v1/agent/register", map[string]any{
		"name": w.name, "labels": w.labels, "max_jobs": w.slots, "version": "bench",
	}, &reg); err != nil {
		return fmt.Errorf("register %s: %w", w.name, err)
	}
	w.id = reg.WorkerID
	w.heartbeatEvery, _ = time.ParseDuration(reg.HeartbeatEvery)
	// A worker of one slot claims with each completion; one of many would hold a claim
	// open per busy slot, more than the coordinator lets a worker hold.
	w.completeClaim = w.slots == 1 && !w.stats.ownClaims && slices.Contains(reg.Features, "complete.claim")
	slots := make(chan struct{}, w.slots)
	var jobs sync.WaitGroup
	defer jobs.Wait()
	for {
		// Wait for one free slot, then take every other free one.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		n := 1
	take:
		for n < min(w.slots, 64) {
			select {
			case slots <- struct{}{}:
				n++
			default:
				break take
			}
		}
		var ans claimAnswer
		sent := time.Now()
		err := w.c.post(ctx, "/api/v1/agent/claim", w.claimBody(n), &ans)
		got := time.Now()
		if err != nil {
			for range n {
				<-slots
			}
			if ctx.Err() != nil {
				return nil
			}
			w.stats.fail(fmt.Errorf("claim: %w", err))
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		w.took(ans.Jobs, sent, got)
		for _, j := range ans.Jobs {
			jobs.Add(1)
			go func() {
				defer jobs.Done()
				defer func() { <-slots }()
				w.runJobs(ctx, j)
			}()
		}
		for range n - len(ans.Jobs) {
			<-slots
		}
	}
}

// claimBody is a claim for n jobs.
func (w *simWorker) claimBody(n int) map[string]any {
	return map[string]any{"worker_id": w.id, "labels": w.labels, "max": n, "wait": "30s", "start": true}
}

// took records the jobs a claim sent at sent answered at got.
func (w *simWorker) took(jobs []claimedJob, sent, got time.Time) {
	if len(jobs) > 0 {
		w.stats.claim.add(got.Sub(sent))
	}
	for _, j := range jobs {
		if q, err := time.Parse(time.RFC3339Nano, j.QueuedAt); err == nil {
			w.stats.dispatch.add(got.Sub(q))
		}
		w.stats.claimed.Add(1)
		if w.stats.onClaim != nil {
			w.stats.onClaim(j.RunID, got)
		}
	}
}

// runJobs runs j in its slot and then, while the completions claim again for the slot,
// each job they bring.
func (w *simWorker) runJobs(ctx context.Context, j claimedJob) {
	for {
		next, ok := w.runJob(ctx, j.ID, j.Lease.Token, duration(j.Lease.HeartbeatEvery))
		if !ok {
			return
		}
		j = next
	}
}

func duration(s string) time.Duration {
	d, _ := time.ParseDuration(s)
	return d
}

// runJob reports one job through its life, as a worker whose step succeeds would. When
// the completion carried a claim that brought a job, it returns that job and true.
func (w *simWorker) runJob(ctx context.Context, id, token string, every time.Duration) (claimedJob, bool) {
	path := "/api/v1/agent/jobs/" + id
	failed := func(what string, err error) {
		var ae *apiError
		if errors.As(err, &ae) && ae.Status == 409 {
			w.stats.leaseLost.Add(1)
		} else if ctx.Err() == nil {
			w.stats.fail(fmt.Errorf("job %s %s: %w", id, what, err))
		}
	}
	report := func(what string, body map[string]any) bool {
		body["token"] = token
		err := w.c.post(ctx, path+what, body, nil)
		if err != nil {
			failed(what, err)
		}
		return err == nil
	}
	steps := []map[string]any{{"index": 0, "status": "success", "exit_code": 0}}
	if w.hold > 0 || w.release != nil {
		if !report("/steps/0", map[string]any{"status": "running"}) || !w.holdJob(ctx, path, token, every) {
			return claimedJob{}, false
		}
	} else {
		steps = append([]map[string]any{{"index": 0, "status": "running"}}, steps...)
	}
	// no_tests as Gantry's worker says it for a job whose spec names no test reports:
	// the project's quarantine rule has nothing to count.
	body := map[string]any{"status": "success", "exit_code": 0, "steps": steps, "no_tests": true}
	if !w.completeClaim {
		if !report("/complete", body) {
			return claimedJob{}, false
		}
		w.completed()
		return claimedJob{}, false
	}
	body["token"], body["claim"] = token, w.claimBody(1)
	var ans claimAnswer
	sent := time.Now()
	err := w.c.postLines(ctx, path+"/complete", body, func() { w.completed() }, &ans)
	got := time.Now()
	if err != nil {
		failed("/complete", err)
		return claimedJob{}, false
	}
	if ans.Error != nil {
		// The job is complete; the slot is claimed for again as without the feature.
		return claimedJob{}, false
	}
	w.took(ans.Jobs, sent, got)
	if len(ans.Jobs) == 0 {
		return claimedJob{}, false
	}
	return ans.Jobs[0], true
}

func (w *simWorker) completed() {
	w.stats.completed.Add(1)
	if w.stats.onComplete != nil {
		w.stats.onComplete()
	}
}

// holdJob keeps the job running for w.hold and until w.release closes, heartbeating
// every every. It returns false when the job must not be completed.
func (w *simWorker) holdJob(ctx context.Context, path, token string, every time.Duration) bool {
	if w.hold <= 0 && w.release == nil {
		return true
	}
	if every <= 0 {
		every = w.heartbeatEvery
	}
	var holdUntil <-chan time.Time
	if w.hold > 0 {
		holdUntil = time.After(w.hold)
	}
	release := w.release
	beat := time.NewTicker(every)
	defer beat.Stop()
	for holdUntil != nil || release != nil {
		select {
		case <-ctx.Done():
			return false
		case <-holdUntil:
			holdUntil = nil
		case <-release:
			release = nil
		case <-beat.C:
			began := time.Now()
			err := w.c.post(ctx, path+"/heartbeat", map[string]any{"token": token}, nil)
			if err != nil {
				var ae *apiError
				if errors.As(err, &ae) && ae.Status == 409 {
					w.stats.leaseLost.Add(1)
					return false
				}
				if ctx.Err() == nil {
					w.stats.fail(fmt.Errorf("heartbeat: %w", err))
				}
				continue
			}
			w.stats.heartbeat.add(time.Since(began))
		}
	}
	return true
}

// pool starts n simulated workers of slots slots each and returns a function that stops
// them and waits for them.
func startPool(ctx context.Context, base, name string, n, slots int, labels []string, hold time.Duration,
	release <-chan struct{}, stats *simStats) func() {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range n {
		// A worker of many slots shares a few connections, as a process would: ten
		// thousand jobs each on its own connection would exhaust the coordinator's
		// file descriptors.
		w := &simWorker{c: newClient(base, min(2*slots+4, 32)), name: fmt.Sprintf("%s-%d", name, i), labels: labels,
			slots: slots, hold: hold, release: release, stats: stats}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.run(ctx); err != nil {
				stats.fail(err)
			}
		}()
	}
	return func() {
		cancel()
		wg.Wait()
	}
}
