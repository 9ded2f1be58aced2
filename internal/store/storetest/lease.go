package storetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var leaseTests = []test{
	{"HeartbeatExtends", testHeartbeat},
	{"StartJob", testStartJob},
	{"LeaseAttempt", testLeaseAttempt},
	{"Fencing", testFencing},
	{"ReleaseClaims", func(t *testing.T, h Harness) {
		for _, tc := range releaseTests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.fn(t, h)
			})
		}
	}},
}

// testLeaseAttempt: the current lease names its attempt, on a retry too; an unknown job is
// not found.
func testLeaseAttempt(t *testing.T, h Harness) {
	s, b := setup(t, h)
	b.create(`
name: attempts
jobs:
  a:
    retry: { max_attempts: 2, backoff: 1s, on: [failure] }
    steps: [ { run: make } ]
`)
	c := b.claimOne()
	if n, err := s.LeaseAttempt(b.ctx, ref(c)); err != nil || n != 1 {
		t.Fatalf("LeaseAttempt of a fresh claim = %d, %v; want 1", n, err)
	}
	if err := s.StartJob(b.ctx, ref(c)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.LeaseAttempt(b.ctx, ref(c)); err != nil || n != 1 {
		t.Fatalf("LeaseAttempt of a running job = %d, %v; want 1", n, err)
	}
	b.complete(c, store.JobFailed)
	b.clk.Advance(2 * time.Second)
	if n := b.promote(); n != 1 {
		t.Fatalf("promoted %d jobs, want 1", n)
	}
	c2 := b.claimOne()
	if n, err := s.LeaseAttempt(b.ctx, ref(c2)); err != nil || n != 2 {
		t.Errorf("LeaseAttempt of the retry = %d, %v; want 2", n, err)
	}
	_, err := s.LeaseAttempt(b.ctx, store.LeaseRef{JobID: store.NewID(), Token: "x"})
	wantErr(t, "LeaseAttempt of an unknown job", err, store.ErrNotFound)
}

var reapTests = []test{
	{"RetriesLostAttempts", testReapRetriesLost},
	{"FreeRedeliveries", testReapFreeRedeliveries},
	{"HeartbeatPreventsReaping", testReapHeartbeatPrevents},
	{"ConcurrentReapers", testReapConcurrent},
}

var timeoutTests = []test{
	{"RevokeTimedOut", testRevokeTimedOut},
}

func testHeartbeat(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(singleJob)
	c := b.claimOne()
	b.clk.Advance(30 * time.Second)

	res, err := b.s.Heartbeat(b.ctx, store.HeartbeatParams{LeaseRef: ref(c), TTL: leaseTTL})
	if err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	wantTime(t, "Heartbeat ExpiresAt", res.ExpiresAt, b.clk.Now().Add(leaseTTL))
	if res.CancelRequested {
		t.Errorf("Heartbeat says cancel requested for a job nobody cancelled")
	}
	j := b.wantJobStatus(c.Job.ID, store.JobAssigned)
	wantTime(t, "LeaseExpiresAt after heartbeat", j.LeaseExpiresAt, b.clk.Now().Add(leaseTTL))
	if j.Attempt != 1 || j.LeaseToken != c.Lease.Token {
		t.Errorf("heartbeat changed the attempt or token: %s", jobState(j))
	}
	wantTime(t, "Deadline after heartbeat", j.Deadline, c.Job.Deadline)

	// The TTL is the caller's, each time.
	if err := b.s.StartJob(b.ctx, ref(c)); err != nil {
		t.Fatalf("StartJob: %v", err)
	}
	b.clk.Advance(10 * time.Second)
	res, err = b.s.Heartbeat(b.ctx, store.HeartbeatParams{LeaseRef: ref(c), TTL: 2 * time.Minute})
	if err != nil {
		t.Fatalf("Heartbeat on a running job: %v", err)
	}
	wantTime(t, "ExpiresAt with a 2m TTL", res.ExpiresAt, b.clk.Now().Add(2*time.Minute))
	j = b.wantJobStatus(c.Job.ID, store.JobRunning)
	wantTime(t, "LeaseExpiresAt with a 2m TTL", j.LeaseExpiresAt, b.clk.Now().Add(2*time.Minute))
}

func testStartJob(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(singleJob)
	c := b.claimOne()
	b.clk.Advance(time.Second)
	if err := b.s.StartJob(b.ctx, ref(c)); err != nil {
		t.Fatalf("StartJob: %v", err)
	}
	j := b.wantJobStatus(c.Job.ID, store.JobRunning)
	if j.LeaseToken != c.Lease.Token || j.Attempt != 1 || j.WorkerID != defaultWorker {
		t.Errorf("StartJob changed the lease: %s", jobState(j))
	}
	if r := b.getRun(run.ID); r.Status != store.RunRunning {
		t.Errorf("run status = %s, want running", r.Status)
	}
	// The lease still works for the rest of the attempt.
	b.complete(c, store.JobSuccess)
	b.wantRunDone(run.ID, store.RunSuccess)
}

// fencedJob is claimed first (high lane) ahead of its sibling; it retries failures and
// lost attempts so that every way of losing a lease can be set up.
const fencedJob = `
name: fenced
jobs:
  guarded:
    priority: high
    retry: { max_attempts: 5, backoff: 1s, max_backoff: 1s, on: [failure, lost] }
    steps:
      - { name: one, run: "true" }
      - { name: two, run: "true" }
  sibling:
    steps:
      - run: "true"
`

// fencedOps are the calls that carry a lease token.
var fencedOps = []struct {
	name string
	call func(b *bundle, r store.LeaseRef) error
}{
	{"Heartbeat", func(b *bundle, r store.LeaseRef) error {
		_, err := b.s.Heartbeat(b.ctx, store.HeartbeatParams{LeaseRef: r, TTL: leaseTTL})
		return err
	}},
	{"StartJob", func(b *bundle, r store.LeaseRef) error {
		return b.s.StartJob(b.ctx, r)
	}},
	{"UpdateStep", func(b *bundle, r store.LeaseRef) error {
		return b.s.UpdateStep(b.ctx, store.UpdateStepParams{LeaseRef: r, StepUpdate: store.StepUpdate{Index: 0, Status: store.StepRunning}})
	}},
	{"CompleteJob", func(b *bundle, r store.LeaseRef) error {
		_, err := b.s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: r, Status: store.JobSuccess, ExitCode: intPtr(0)})
		return err
	}},
	{"CompleteJobFailed", func(b *bundle, r store.LeaseRef) error {
		_, err := b.s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: r, Status: store.JobFailed, FailureKind: store.FailureExit, ExitCode: intPtr(2)})
		return err
	}},
	{"LeaseAttempt", func(b *bundle, r store.LeaseRef) error {
		_, err := b.s.LeaseAttempt(b.ctx, r)
		return err
	}},
	{"PutArtifact", func(b *bundle, r store.LeaseRef) error {
		_, err := b.s.PutArtifact(b.ctx, r, &store.Artifact{JobID: r.JobID, Name: "out/app", SHA256: sha256Hex("app"), Size: 3})
		return err
	}},
}

// testFencing checks every leased call against every way a token stops being the job's
// current one: each is refused with ErrLeaseLost and changes nothing.
func testFencing(t *testing.T, h Harness) {
	scenarios := []struct {
		name string
		// prepare sets the job up and returns the guarded job's id and the token to try.
		prepare func(b *bundle, runID uuid.UUID) store.LeaseRef
	}{
		{"wrong token", func(b *bundle, runID uuid.UUID) store.LeaseRef {
			c := b.claimOne()
			return store.LeaseRef{JobID: c.Job.ID, Token: c.Lease.Token + "x"}
		}},
		{"empty token", func(b *bundle, runID uuid.UUID) store.LeaseRef {
			c := b.claimOne()
			return store.LeaseRef{JobID: c.Job.ID}
		}},
		{"token of another job", func(b *bundle, runID uuid.UUID) store.LeaseRef {
			c := b.claimOne()
			other := b.claimOne()
			return store.LeaseRef{JobID: c.Job.ID, Token: other.Lease.Token}
		}},
		{"queued job never claimed", func(b *bundle, runID uuid.UUID) store.LeaseRef {
			return store.LeaseRef{JobID: b.jobsByKey(runID)["guarded"].ID, Token: "made-up"}
		}},
		{"old token after reap", func(b *bundle, runID uuid.UUID) store.LeaseRef {
			c := b.claimOne()
			b.clk.Advance(leaseTTL + time.Second)
			if n := b.reap(); n != 1 {
				b.t.Fatalf("reaped %d jobs, want 1", n)
			}
			return ref(c)
		}},
		{"old token after reap and re-claim", func(b *bundle, runID uuid.UUID) store.LeaseRef {
			c := b.claimOne()
			if err := b.s.StartJob(b.ctx, ref(c)); err != nil {
				b.t.Fatalf("StartJob: %v", err)
			}
			b.clk.Advance(leaseTTL + time.Second)
			if n := b.reap(); n != 1 {
				b.t.Fatalf("reaped %d jobs, want 1", n)
			}
			if again := b.claimOne(); again.Job.ID != c.Job.ID {
				b.t.Fatalf("re-claimed %q, want guarded", again.Job.Key)
			}
			return ref(c)
		}},
		{"old token after a retry's re-claim", func(b *bundle, runID uuid.UUID) store.LeaseRef {
			c := b.claimOne()
			b.complete(c, store.JobFailed)
			b.clk.Advance(2 * time.Second)
			if n := b.promote(); n != 1 {
				b.t.Fatalf("promoted %d jobs, want 1", n)
			}
			if again := b.claimOne(); again.Job.ID != c.Job.ID {
				b.t.Fatalf("re-claimed %q, want guarded", again.Job.Key)
			}
			return ref(c)
		}},
		{"old token after the job finished", func(b *bundle, runID uuid.UUID) store.LeaseRef {
			c := b.claimOne()
			b.complete(c, store.JobSuccess)
			return ref(c)
		}},
	}
	// One database per scenario: every call is refused and changes nothing, so the calls
	// can take turns on the same job.
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			_, b := setup(t, h)
			run, _ := b.create(fencedJob)
			r := sc.prepare(b, run.ID)
			for _, op := range fencedOps {
				t.Run(op.name, func(t *testing.T) {
					b := b.with(t)
					before := jobState(b.getJob(r.JobID))
					beforeSteps := stepsState(b.listSteps(r.JobID))
					beforeArts := b.countArtifacts(r.JobID)
					beforeRun := b.getRun(run.ID)
					b.clk.Advance(time.Second) // so that a wrongly accepted heartbeat would show

					err := op.call(b, r)
					if sc.name == "old token after the job finished" {
						wantErr(t, op.name, err, store.ErrLeaseLost, store.ErrConflict)
					} else {
						wantErr(t, op.name, err, store.ErrLeaseLost)
					}

					after := b.getJob(r.JobID)
					if got := jobState(after); got != before {
						t.Errorf("%s with a stale token changed the job:\nbefore %s\nafter  %s", op.name, before, got)
					}
					if got := stepsState(b.listSteps(r.JobID)); got != beforeSteps {
						t.Errorf("%s with a stale token changed the steps:\nbefore %s\nafter  %s", op.name, beforeSteps, got)
					}
					if n := b.countArtifacts(r.JobID); n != beforeArts {
						t.Errorf("%s with a stale token: the job has %d artifacts, had %d", op.name, n, beforeArts)
					}
					if r2 := b.getRun(run.ID); r2.Status != beforeRun.Status || r2.JobsFinished != beforeRun.JobsFinished {
						t.Errorf("run went from %s (%d finished) to %s (%d finished)", beforeRun.Status, beforeRun.JobsFinished, r2.Status, r2.JobsFinished)
					}
					// Whoever holds the lease now still holds it.
					if after.Status.Leased() {
						cur := store.LeaseRef{JobID: after.ID, Token: after.LeaseToken}
						if _, err := b.s.Heartbeat(b.ctx, store.HeartbeatParams{LeaseRef: cur, TTL: leaseTTL}); err != nil {
							t.Errorf("the current holder's heartbeat after a refused stale call: %v", err)
						}
					}
				})
			}
		})
	}
}

// retryLostYAML retries lost attempts up to three attempts; "after" shows how its end
// reaches the DAG.
const retryLostYAML = `
name: reap
jobs:
  work:
    retry: { max_attempts: 3, on: [lost] }
    steps:
      - run: "true"
  after:
    needs: [work]
    steps:
      - run: "true"
`

// loseAttempt is one way an attempt is lost: its lease lapses and the reaper takes it
// back, or its worker reports its environment gone (a pod evicted) with failure kind
// lost. Both follow one rule.
type loseAttempt struct {
	name string
	lose func(t *testing.T, b *bundle, c *store.Claim)
}

var loseAttempts = []loseAttempt{
	{"lease expired", func(t *testing.T, b *bundle, c *store.Claim) {
		t.Helper()
		b.clk.Advance(leaseTTL - time.Second)
		if n := b.reap(); n != 0 {
			t.Fatalf("reaped %d jobs before the lease expired", n)
		}
		b.clk.Advance(2 * time.Second)
		if n := b.reap(); n != 1 {
			t.Fatalf("reaped %d jobs after the lease expired, want 1", n)
		}
		if n := b.reap(); n != 0 {
			t.Fatalf("a second reap changed %d jobs, want 0", n)
		}
	}},
	{"worker reports lost", func(t *testing.T, b *bundle, c *store.Claim) {
		t.Helper()
		b.clk.Advance(time.Second)
		j, err := b.s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: ref(c), Status: store.JobFailed, FailureKind: store.FailureLost})
		if err != nil {
			t.Fatalf("CompleteJob failed as lost: %v", err)
		}
		if got := b.getJob(c.Job.ID); got.Status != j.Status || got.Redeliveries != j.Redeliveries {
			t.Fatalf("CompleteJob answered %s, the job is %s", jobState(j), jobState(got))
		}
		if n := b.reap(); n != 0 {
			t.Fatalf("the reaper changed %d jobs after the worker reported lost, want 0", n)
		}
	}},
}

func testReapRetriesLost(t *testing.T, h Harness) {
	for _, way := range loseAttempts {
		t.Run(way.name, func(t *testing.T) {
			t.Parallel()
			_, b := setup(t, h)
			run, _ := b.create(retryLostYAML)
			for attempt := 1; attempt <= 3; attempt++ {
				c := b.claimOne()
				if c.Job.Key != "work" || c.Job.Attempt != attempt || c.Job.Redeliveries != 0 {
					t.Fatalf("claim %d: %q %s; want work at attempt %d, no redeliveries", attempt, c.Job.Key, jobState(c.Job), attempt)
				}
				if attempt == 2 { // running jobs are lost as well as assigned ones
					if err := b.s.StartJob(b.ctx, ref(c)); err != nil {
						t.Fatalf("StartJob: %v", err)
					}
				}
				way.lose(t, b, c)
				j := b.getJob(c.Job.ID)
				if attempt < 3 {
					if j.Status != store.JobQueued || j.Attempt != attempt || j.Redeliveries != 0 || j.LeaseToken != "" {
						t.Fatalf("after losing attempt %d: %s; want queued, attempt %d, no redelivery, no token", attempt, jobState(j), attempt)
					}
					continue
				}
				if j.Status != store.JobFailed || j.FailureKind != store.FailureLost || j.LeaseToken != "" {
					t.Fatalf("after losing the last attempt: %s; want failed, kind lost, no token", jobState(j))
				}
				wantTime(t, "FinishedAt", j.FinishedAt, b.clk.Now())
			}
			b.expectNoClaim(store.ClaimParams{Max: 8})
			b.wantJobStatus(b.jobsByKey(run.ID)["after"].ID, store.JobSkipped)
			b.wantRunDone(run.ID, store.RunFailed)
		})
	}
}

// testReapFreeRedeliveries: a policy that does not retry lost attempts, the default one
// included, still gets a lost attempt (a worker crash, or a pod evicted under its
// worker) redelivered, three times, without it counting against max_attempts.
func testReapFreeRedeliveries(t *testing.T, h Harness) {
	for _, way := range loseAttempts {
		for _, tc := range []struct{ name, retry string }{
			{"policy without lost", "    retry: { max_attempts: 1, on: [failure] }\n"},
			{"default policy", ""},
		} {
			t.Run(way.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				_, b := setup(t, h)
				run, _ := b.create("name: redeliver\njobs:\n  work:\n" + tc.retry + "    steps:\n      - run: \"true\"\n")
				for attempt := 1; attempt <= 4; attempt++ {
					c := b.claimOne()
					if c.Job.Attempt != attempt || c.Job.Redeliveries != attempt-1 || c.Job.MaxAttempts != 1 {
						t.Fatalf("claim %d: %s max attempts %d; want attempt %d, %d redeliveries, max attempts 1",
							attempt, jobState(c.Job), c.Job.MaxAttempts, attempt, attempt-1)
					}
					way.lose(t, b, c)
					j := b.getJob(c.Job.ID)
					if attempt <= 3 {
						if j.Status != store.JobQueued || j.Redeliveries != attempt {
							t.Fatalf("after losing attempt %d: %s; want queued with %d redeliveries", attempt, jobState(j), attempt)
						}
						continue
					}
					if j.Status != store.JobFailed || j.FailureKind != store.FailureLost || j.Redeliveries != 3 {
						t.Fatalf("after the fourth lost attempt: %s; want failed, kind lost, 3 redeliveries", jobState(j))
					}
				}
				b.wantRunDone(run.ID, store.RunFailed)
			})
		}
	}
}

func testReapHeartbeatPrevents(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(singleJob)
	c := b.claimOne()
	for range 4 { // two minutes in all, well past the TTL, with a heartbeat every 30s
		b.clk.Advance(30 * time.Second)
		if _, err := b.s.Heartbeat(b.ctx, store.HeartbeatParams{LeaseRef: ref(c), TTL: leaseTTL}); err != nil {
			t.Fatalf("Heartbeat: %v", err)
		}
		if n := b.reap(); n != 0 {
			t.Fatalf("reaped %d jobs whose lease was renewed in time", n)
		}
	}
	b.wantJobStatus(c.Job.ID, store.JobAssigned)
	b.clk.Advance(leaseTTL + time.Second)
	if n := b.reap(); n != 1 {
		t.Fatalf("reaped %d jobs after heartbeats stopped, want 1", n)
	}
}

func testReapConcurrent(t *testing.T, h Harness) {
	s, b := setup(t, h)
	run, _ := b.create(`
name: many
jobs:
  work:
    matrix: { n: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20] }
    retry: { max_attempts: 2, on: [lost] }
    steps:
      - run: "true"
`)
	if n := len(b.claimAll()); n != 20 {
		t.Fatalf("claimed %d jobs, want 20", n)
	}
	b.clk.Advance(leaseTTL + time.Second)
	var total atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			<-start
			n, err := s.ReapExpiredLeases(b.ctx)
			if err != nil {
				t.Errorf("ReapExpiredLeases: %v", err)
			}
			total.Add(int64(n))
		})
	}
	close(start)
	wg.Wait()
	if total.Load() != 20 {
		t.Errorf("4 concurrent reapers changed %d jobs in all, want 20", total.Load())
	}
	for _, j := range b.listJobs(run.ID) {
		if j.Status != store.JobQueued || j.Attempt != 1 {
			t.Errorf("job %q after concurrent reaping: %s; want queued at attempt 1", j.Key, jobState(j))
		}
	}
	cs := b.claimAll()
	if len(cs) != 20 {
		t.Fatalf("re-claimed %d jobs, want 20", len(cs))
	}
	for _, c := range cs {
		if c.Job.Attempt != 2 {
			t.Errorf("re-claimed job %q at attempt %d, want 2", c.Job.Key, c.Job.Attempt)
		}
	}
}

func testRevokeTimedOut(t *testing.T, h Harness) {
	tests := []struct {
		name  string
		retry string
		start bool
		// retried: the timeout leaves the job retrying rather than failed.
		retried bool
	}{
		{"not retried, running", "{ max_attempts: 3, on: [failure] }", true, false},
		{"not retried, assigned", "{ max_attempts: 3, on: [lost] }", false, false},
		{"retried", "{ max_attempts: 2, backoff: 10s, max_backoff: 10s, on: [timeout] }", true, true},
		{"attempts spent", "{ max_attempts: 1, on: [timeout] }", true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, b := setup(t, h)
			run, _ := b.create(fmt.Sprintf(`
name: slow
jobs:
  slow:
    timeout: 5m
    retry: %s
    steps:
      - run: sleep 600
  after:
    needs: [slow]
    steps:
      - run: "true"
`, tc.retry))
			// A long lease: only the hard deadline may end this attempt.
			cs := b.claim(store.ClaimParams{LeaseTTL: time.Hour})
			if len(cs) != 1 {
				t.Fatalf("claimed %d jobs, want 1", len(cs))
			}
			c := cs[0]
			if tc.start {
				if err := b.s.StartJob(b.ctx, ref(c)); err != nil {
					t.Fatalf("StartJob: %v", err)
				}
			}
			b.clk.Advance(5 * time.Minute)
			if n := b.revoke(); n != 0 {
				t.Fatalf("revoked %d jobs at the timeout, before the grace ran out", n)
			}
			b.clk.Advance(timeoutGrace + time.Second)
			if n := b.reap(); n != 0 {
				t.Fatalf("reaped %d jobs whose lease has not expired", n)
			}
			if n := b.revoke(); n != 1 {
				t.Fatalf("revoked %d jobs past the deadline, want 1", n)
			}
			if n := b.revoke(); n != 0 {
				t.Fatalf("a second revoke changed %d jobs, want 0", n)
			}
			_, err := b.s.Heartbeat(b.ctx, store.HeartbeatParams{LeaseRef: ref(c), TTL: leaseTTL})
			wantErr(t, "Heartbeat after revocation", err, store.ErrLeaseLost)

			j := b.getJob(c.Job.ID)
			if j.LeaseToken != "" {
				t.Errorf("revoked job keeps lease token %q", j.LeaseToken)
			}
			if !tc.retried {
				if j.Status != store.JobFailed || j.FailureKind != store.FailureTimeout {
					t.Fatalf("after the deadline: %s; want failed, kind timeout", jobState(j))
				}
				b.wantJobStatus(b.jobsByKey(run.ID)["after"].ID, store.JobSkipped)
				b.wantRunDone(run.ID, store.RunFailed)
				return
			}
			if j.Status != store.JobRetrying {
				t.Fatalf("after the deadline: %s; want retrying", jobState(j))
			}
			wantWithin(t, "RetryAfter", j.RetryAfter, b.clk.Now(), 10*time.Second)
			b.clk.Advance(10*time.Second + time.Millisecond)
			if n := b.promote(); n != 1 {
				t.Fatalf("promoted %d jobs, want 1", n)
			}
			again := b.claimOne()
			if again.Job.ID != c.Job.ID || again.Job.Attempt != 2 {
				t.Fatalf("re-claimed %q at attempt %d, want slow at attempt 2", again.Job.Key, again.Job.Attempt)
			}
		})
	}
}

// wantWithin checks that got lies in [from, from+span], within the stored precision.
func wantWithin(t testing.TB, what string, got, from time.Time, span time.Duration) {
	t.Helper()
	if got.Before(from.Add(-timeTolerance)) || got.After(from.Add(span+timeTolerance)) {
		t.Errorf("%s = %v, want within [%v, %v]", what, got, from, from.Add(span))
	}
}
