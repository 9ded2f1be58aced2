package storetest

import (
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
)

// releaseTests cover ReleaseClaims: the claims whose answer never reached the worker.
var releaseTests = []test{
	{"Requeues", testReleaseRequeues},
	{"KeepsQueuePlace", testReleaseKeepsPlace},
	{"AttemptNotCounted", testReleaseAttemptNotCounted},
	{"OnlyCurrentLease", testReleaseOnlyCurrent},
	{"Cancelled", testReleaseCancelled},
}

// testReleaseRequeues: a released claim is queued again at once, without its lease or
// its attempt, and the next claim (by another worker) gets it as attempt 1; the released
// token is lost. A claim that started its job is released the same way.
func testReleaseRequeues(t *testing.T, h Harness) {
	for _, start := range []bool{false, true} {
		_, b := setup(t, h)
		run, _ := b.create(singleJob)
		c := b.claim(store.ClaimParams{Max: 1, Start: start})[0]
		n, err := b.s.ReleaseClaims(b.ctx, []store.LeaseRef{ref(c)})
		if err != nil || n != 1 {
			t.Fatalf("start=%v: ReleaseClaims = %d, %v; want 1", start, n, err)
		}
		j := b.wantJobStatus(c.Job.ID, store.JobQueued)
		if j.Attempt != 0 || j.LeaseToken != "" || j.WorkerID != "" || !j.LeaseExpiresAt.IsZero() || !j.Deadline.IsZero() {
			t.Errorf("start=%v: released job: %s; want attempt 0 and no lease", start, jobState(j))
		}
		_, err = b.s.Heartbeat(b.ctx, store.HeartbeatParams{LeaseRef: ref(c), TTL: leaseTTL})
		wantErr(t, "Heartbeat with a released token", err, store.ErrLeaseLost)

		cs := b.claim(store.ClaimParams{WorkerID: "worker-2", Max: 1})
		if len(cs) != 1 || cs[0].Job.ID != c.Job.ID || cs[0].Job.Attempt != 1 || cs[0].Lease.Token == c.Lease.Token {
			t.Fatalf("start=%v: the claim after the release got %d jobs; want the released job as attempt 1 with a new token", start, len(cs))
		}
		b.complete(cs[0], store.JobSuccess)
		b.wantRunDone(run.ID, store.RunSuccess)
	}
}

// testReleaseKeepsPlace: a released job goes back to where it was in the queue, ahead
// of a job queued after it.
func testReleaseKeepsPlace(t *testing.T, h Harness) {
	_, b := setup(t, h)
	_, first := b.create(singleJob)
	b.clk.Advance(time.Second)
	b.create(singleJob)
	c := b.claimOne()
	if c.Job.ID != first[0].ID {
		t.Fatalf("claimed %s first, want the older job %s", c.Job.ID, first[0].ID)
	}
	if n, err := b.s.ReleaseClaims(b.ctx, []store.LeaseRef{ref(c)}); err != nil || n != 1 {
		t.Fatalf("ReleaseClaims = %d, %v; want 1", n, err)
	}
	if again := b.claimOne(); again.Job.ID != first[0].ID {
		t.Errorf("after the release the claim got %s, want the older job %s again", again.Job.ID, first[0].ID)
	}
}

// testReleaseAttemptNotCounted: the released attempt does not count against
// max_attempts: with two attempts allowed, a failure, a released claim and a second
// failure end the job, with attempt 2, and the steps name the attempt that ran.
func testReleaseAttemptNotCounted(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(`
name: counted
jobs:
  a:
    retry: { max_attempts: 3, backoff: 1s, max_backoff: 1s, on: [failure] }
    steps: [ { run: make } ]
`)
	c1 := b.claimOne()
	b.complete(c1, store.JobFailed)
	b.clk.Advance(2 * time.Second)
	if n := b.promote(); n != 1 {
		t.Fatalf("promoted %d jobs, want 1", n)
	}
	c2 := b.claimOne()
	if c2.Job.Attempt != 2 {
		t.Fatalf("second claim is attempt %d, want 2", c2.Job.Attempt)
	}
	if n, err := b.s.ReleaseClaims(b.ctx, []store.LeaseRef{ref(c2)}); err != nil || n != 1 {
		t.Fatalf("ReleaseClaims = %d, %v; want 1", n, err)
	}
	if j := b.wantJobStatus(c2.Job.ID, store.JobQueued); j.Attempt != 1 {
		t.Errorf("released job at attempt %d, want 1", j.Attempt)
	}
	for _, st := range b.listSteps(c2.Job.ID) {
		if st.Attempt != 1 {
			t.Errorf("step %d names attempt %d after the release, want 1", st.Index, st.Attempt)
		}
	}
	c3 := b.claimOne()
	if c3.Job.Attempt != 2 {
		t.Fatalf("claim after the release is attempt %d, want 2", c3.Job.Attempt)
	}
	if j := b.complete(c3, store.JobFailed); j.Status != store.JobRetrying {
		t.Fatalf("second failure left the job %s; want retrying, a third attempt being allowed", j.Status)
	}
	b.clk.Advance(2 * time.Second)
	b.promote()
	c4 := b.claimOne()
	if j := b.complete(c4, store.JobFailed); j.Status != store.JobFailed || j.Attempt != 3 {
		t.Errorf("third failure: %s; want failed at attempt 3", jobState(j))
	}
	b.wantRunDone(run.ID, store.RunFailed)
}

// testReleaseOnlyCurrent: a token that is no longer the job's (the job finished, or its
// lease was reaped and claimed again) releases nothing and changes nothing; unknown jobs
// are skipped, and releasing nothing is not an error.
func testReleaseOnlyCurrent(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(singleJob)
	c := b.claimOne()
	b.clk.Advance(leaseTTL + time.Second)
	if n := b.reap(); n != 1 {
		t.Fatalf("reaped %d, want 1", n)
	}
	c2 := b.claimOne()
	n, err := b.s.ReleaseClaims(b.ctx, []store.LeaseRef{ref(c), {JobID: store.NewID(), Token: "x"}, {JobID: c.Job.ID}})
	if err != nil || n != 0 {
		t.Fatalf("ReleaseClaims of a stale token = %d, %v; want 0", n, err)
	}
	j := b.wantJobStatus(c2.Job.ID, store.JobAssigned)
	if j.LeaseToken != c2.Lease.Token || j.Attempt != c2.Job.Attempt {
		t.Errorf("a stale release changed the new lease: %s", jobState(j))
	}
	b.complete(c2, store.JobSuccess)
	if n, err := b.s.ReleaseClaims(b.ctx, []store.LeaseRef{ref(c2)}); err != nil || n != 0 {
		t.Errorf("ReleaseClaims of a finished job = %d, %v; want 0", n, err)
	}
	b.wantJobStatus(c2.Job.ID, store.JobSuccess)
	if n, err := b.s.ReleaseClaims(b.ctx, nil); err != nil || n != 0 {
		t.Errorf("ReleaseClaims(nil) = %d, %v; want 0", n, err)
	}
}

// testReleaseCancelled: a job asked to cancel between its claim and the release ends
// cancelled instead of being queued again.
func testReleaseCancelled(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(singleJob)
	c := b.claimOne()
	if err := b.s.CancelJob(b.ctx, c.Job.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := b.s.ReleaseClaims(b.ctx, []store.LeaseRef{ref(c)}); err != nil || n != 1 {
		t.Fatalf("ReleaseClaims = %d, %v; want 1", n, err)
	}
	b.wantJobStatus(c.Job.ID, store.JobCancelled)
	b.wantRunDone(run.ID, store.RunCancelled)
}
