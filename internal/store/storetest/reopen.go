package storetest

import (
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var reopenTests = []test{
	{"RetryRunResumesTheDAG", testRetryRunResumes},
	{"RetryCancelledRun", testRetryCancelledRun},
	{"RetryJobAndDownstream", testRetryJob},
	{"RetryConflicts", testRetryConflicts},
}

const chain = `
name: chain
jobs:
  a: {steps: [{run: "true"}]}
  b: {needs: [a], steps: [{run: "true"}]}
  c: {needs: [b], steps: [{run: "true"}]}
`

// testRetryRunResumes: a failure skips its downstream and fails the run; retrying the run
// gives the failed job a new attempt, and when it succeeds the skipped jobs run too.
func testRetryRunResumes(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(chain)
	jobs := b.drive(run.ID, map[string]store.JobStatus{"b": store.JobFailed})
	if jobs["b"].Status != store.JobFailed || jobs["c"].Status != store.JobSkipped {
		t.Fatalf("before retry: b %s, c %s; want failed, skipped", jobs["b"].Status, jobs["c"].Status)
	}
	b.wantRunDone(run.ID, store.RunFailed)

	if err := b.s.RetryRun(b.ctx, run.ID); err != nil {
		t.Fatalf("RetryRun: %v", err)
	}
	r := b.getRun(run.ID)
	if r.Status != store.RunRunning || !r.FinishedAt.IsZero() || r.JobsFinished != 1 {
		t.Fatalf("run after retry: %s, finished at %v, %d finished; want running, not finished, 1 (a)", r.Status, r.FinishedAt, r.JobsFinished)
	}
	b.wantJobStatus(jobs["a"].ID, store.JobSuccess)
	b.wantJobStatus(jobs["b"].ID, store.JobQueued)
	b.wantJobStatus(jobs["c"].ID, store.JobPending)

	c := b.claimOne()
	if c.Job.ID != jobs["b"].ID || c.Job.Attempt != 2 {
		t.Fatalf("claimed %s attempt %d; want b, attempt 2", c.Job.Key, c.Job.Attempt)
	}
	b.complete(c, store.JobSuccess)
	after := b.drive(run.ID, nil)
	if after["c"].Status != store.JobSuccess {
		t.Errorf("c after the retried b succeeded: %s, want success", after["c"].Status)
	}
	b.wantRunDone(run.ID, store.RunSuccess)
}

// testRetryCancelledRun: a cancelled run retried runs every job again from the start.
func testRetryCancelledRun(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, jobs := b.create(chain)
	if err := b.s.CancelRun(b.ctx, run.ID); err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	b.wantRunDone(run.ID, store.RunCancelled)
	if err := b.s.RetryRun(b.ctx, run.ID); err != nil {
		t.Fatalf("RetryRun: %v", err)
	}
	r := b.getRun(run.ID)
	if r.CancelRequested || r.Status != store.RunPending || r.JobsFinished != 0 {
		t.Fatalf("run after retry: %s, cancel requested %v, %d finished; want pending, no cancel, 0", r.Status, r.CancelRequested, r.JobsFinished)
	}
	b.wantJobStatus(jobs[0].ID, store.JobQueued)
	b.drive(run.ID, nil)
	b.wantRunDone(run.ID, store.RunSuccess)
}

// testRetryJob: retrying one failed leg of a diamond resumes only what depends on it.
func testRetryJob(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(`
name: diamond
jobs:
  left: {steps: [{run: "true"}]}
  right: {steps: [{run: "true"}]}
  join: {needs: [left, right], steps: [{run: "true"}]}
  after: {needs: [join], steps: [{run: "true"}]}
`)
	jobs := b.drive(run.ID, map[string]store.JobStatus{"left": store.JobFailed})
	b.wantRunDone(run.ID, store.RunFailed)
	if err := b.s.RetryJob(b.ctx, jobs["left"].ID); err != nil {
		t.Fatalf("RetryJob: %v", err)
	}
	b.wantJobStatus(jobs["left"].ID, store.JobQueued)
	b.wantJobStatus(jobs["right"].ID, store.JobSuccess)
	b.wantJobStatus(jobs["join"].ID, store.JobPending)
	b.wantJobStatus(jobs["after"].ID, store.JobPending)
	final := b.drive(run.ID, nil)
	for _, k := range []string{"left", "join", "after"} {
		if final[k].Status != store.JobSuccess {
			t.Errorf("%s = %s, want success", k, final[k].Status)
		}
	}
	if final["right"].Attempt != 1 {
		t.Errorf("right ran again: attempt %d", final["right"].Attempt)
	}
	b.wantRunDone(run.ID, store.RunSuccess)
}

func testRetryConflicts(t *testing.T, h Harness) {
	_, b := setup(t, h)
	running, jobs := b.create(chain)
	wantErr(t, "RetryRun of a run that has not finished", b.s.RetryRun(b.ctx, running.ID), store.ErrConflict)
	wantErr(t, "RetryJob of a queued job", b.s.RetryJob(b.ctx, jobs[0].ID), store.ErrConflict)
	b.drive(running.ID, nil)
	b.wantRunDone(running.ID, store.RunSuccess)
	wantErr(t, "RetryRun of a run with nothing to retry", b.s.RetryRun(b.ctx, running.ID), store.ErrConflict)
	wantErr(t, "RetryJob of a job that succeeded", b.s.RetryJob(b.ctx, jobs[0].ID), store.ErrConflict)
	wantErr(t, "RetryRun of an unknown run", b.s.RetryRun(b.ctx, uuid.New()), store.ErrNotFound)
	wantErr(t, "RetryJob of an unknown job", b.s.RetryJob(b.ctx, uuid.New()), store.ErrNotFound)
}
