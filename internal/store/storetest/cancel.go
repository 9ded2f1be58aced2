package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
)

var cancelTests = []test{
	{"RunWithRunningJob", testCancelRun},
	{"RunWithOnlyQueuedJobs", testCancelRunQueued},
	{"FinishedRunConflict", testCancelFinishedRun},
	{"JobCancelsDownstream", testCancelJobDownstream},
	{"JobByState", testCancelJobByState},
	{"FlaggedJobWhoseWorkerDied", testCancelFlaggedJobReaped},
}

var terminalTests = []test{
	{"CompleteTwice", testCompleteTwice},
	{"MaintenanceLeavesFinishedJobsAlone", testMaintenanceLeavesFinished},
	{"CompleteWithInvalidStatus", testCompleteInvalidStatus},
}

func testCancelRun(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(`
name: cancel
jobs:
  a:
    priority: high
    steps: [ { run: sleep 60 } ]
  b:
    steps: [ { run: "true" } ]
  c:
    needs: [a]
    steps: [ { run: "true" } ]
  d:
    needs: [c]
    if: always()
    steps: [ { run: "true" } ]
`)
	jobs := b.jobsByKey(run.ID)
	c := b.claimOne()
	if c.Job.Key != "a" {
		t.Fatalf("claimed %q, want a", c.Job.Key)
	}
	if err := b.s.StartJob(b.ctx, ref(c)); err != nil {
		t.Fatalf("StartJob: %v", err)
	}
	b.clk.Advance(time.Second)
	if err := b.s.CancelRun(b.ctx, run.ID); err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	for _, key := range []string{"b", "c", "d"} {
		j := b.wantJobStatus(jobs[key].ID, store.JobCancelled)
		wantTime(t, key+" FinishedAt", j.FinishedAt, b.clk.Now())
	}
	a := b.wantJobStatus(jobs["a"].ID, store.JobRunning)
	if !a.CancelRequested || a.LeaseToken != c.Lease.Token {
		t.Errorf("running job after CancelRun: %s; want cancel requested, lease kept", jobState(a))
	}
	r := b.getRun(run.ID)
	if !r.CancelRequested || r.Status != store.RunRunning || r.JobsFinished != 3 || !r.FinishedAt.IsZero() {
		t.Errorf("run while its last job stops: status %s cancel %v finished %d at %v; want running, true, 3, unset",
			r.Status, r.CancelRequested, r.JobsFinished, r.FinishedAt)
	}
	b.expectNoClaim(store.ClaimParams{Max: 8})

	res, err := b.s.Heartbeat(b.ctx, store.HeartbeatParams{LeaseRef: ref(c), TTL: leaseTTL})
	if err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if !res.CancelRequested {
		t.Errorf("Heartbeat of a job whose run was cancelled: CancelRequested = false")
	}

	b.clk.Advance(time.Second)
	b.complete(c, store.JobCancelled)
	b.wantJobStatus(jobs["a"].ID, store.JobCancelled)
	b.wantRunDone(run.ID, store.RunCancelled)
	wantErr(t, "CancelRun of a cancelled run", b.s.CancelRun(b.ctx, run.ID), store.ErrConflict)
	b.expectNoClaim(store.ClaimParams{Max: 8})
}

// testCancelFlaggedJobReaped checks that a job flagged for cancellation whose worker stops
// heartbeating ends cancelled when its lease is reaped, even though its retry policy
// would put a lost attempt back in the queue.
func testCancelFlaggedJobReaped(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(`
name: dead-worker
jobs:
  job:
    retry: { max_attempts: 3, on: [lost] }
    steps: [ { run: sleep 600 } ]
`)
	c := b.claimOne()
	if err := b.s.StartJob(b.ctx, ref(c)); err != nil {
		t.Fatalf("StartJob: %v", err)
	}
	if err := b.s.CancelRun(b.ctx, run.ID); err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	b.clk.Advance(leaseTTL + time.Second)
	if n := b.reap(); n != 1 {
		t.Fatalf("reaped %d jobs, want 1", n)
	}
	j := b.wantJobStatus(c.Job.ID, store.JobCancelled)
	wantTime(t, "FinishedAt", j.FinishedAt, b.clk.Now())
	b.wantRunDone(run.ID, store.RunCancelled)
	b.expectNoClaim(store.ClaimParams{Max: 8})
}

func testCancelRunQueued(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, jobs := b.create(diamondYAML)
	b.clk.Advance(time.Second)
	if err := b.s.CancelRun(b.ctx, run.ID); err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	for _, j := range jobs {
		b.wantJobStatus(j.ID, store.JobCancelled)
	}
	b.wantRunDone(run.ID, store.RunCancelled)
	b.expectNoClaim(store.ClaimParams{Max: 8})
}

func testCancelFinishedRun(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(singleJob)
	b.complete(b.claimOne(), store.JobSuccess)
	before := b.getRun(run.ID)
	wantErr(t, "CancelRun of a finished run", b.s.CancelRun(b.ctx, run.ID), store.ErrConflict)
	after := b.getRun(run.ID)
	if after.Status != before.Status || after.CancelRequested || !after.FinishedAt.Equal(before.FinishedAt) {
		t.Errorf("refused CancelRun changed the run: %s cancel=%v", after.Status, after.CancelRequested)
	}
}

func testCancelJobDownstream(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(`
name: downstream
jobs:
  a:
    steps: [ { run: "true" } ]
  free:
    steps: [ { run: "true" } ]
  b:
    needs: [a]
    steps: [ { run: "true" } ]
  c:
    needs: [b]
    if: always()
    steps: [ { run: "true" } ]
`)
	jobs := b.jobsByKey(run.ID)
	if err := b.s.CancelJob(b.ctx, jobs["a"].ID); err != nil {
		t.Fatalf("CancelJob: %v", err)
	}
	for _, key := range []string{"a", "b", "c"} {
		b.wantJobStatus(jobs[key].ID, store.JobCancelled)
	}
	b.wantJobStatus(jobs["free"].ID, store.JobQueued)
	cs := b.claim(store.ClaimParams{Max: 8})
	if len(cs) != 1 || cs[0].Job.Key != "free" {
		t.Fatalf("claimed %d jobs after cancelling a, want only free", len(cs))
	}
	if r := b.getRun(run.ID); r.JobsFinished != 3 || r.Status.Terminal() {
		t.Errorf("run with one job left: %s, %d finished; want not finished, 3", r.Status, r.JobsFinished)
	}
	b.complete(cs[0], store.JobSuccess)
	if r := b.getRun(run.ID); !r.Status.Terminal() || r.Status == store.RunSuccess || r.JobsFinished != 4 {
		t.Errorf("run after its last job: %s, %d finished; want failed or cancelled, 4", r.Status, r.JobsFinished)
	}
	wantErr(t, "CancelJob of a cancelled job", b.s.CancelJob(b.ctx, jobs["a"].ID), store.ErrConflict)
}

func testCancelJobByState(t *testing.T, h Harness) {
	const yaml = `
name: states
jobs:
  job:
    retry: { max_attempts: 3, backoff: 1m, max_backoff: 1m, on: [failure] }
    steps: [ { run: "true" } ]
  after:
    needs: [job]
    steps: [ { run: "true" } ]
`
	tests := []struct {
		state store.JobStatus
		// prepare brings the job to state and returns its claim, if it has one.
		prepare func(b *bundle) *store.Claim
		// flagged: the job is only flagged, and its worker completes it.
		flagged bool
	}{
		{store.JobQueued, func(b *bundle) *store.Claim { return nil }, false},
		{store.JobRetrying, func(b *bundle) *store.Claim {
			b.complete(b.claimOne(), store.JobFailed)
			return nil
		}, false},
		{store.JobAssigned, func(b *bundle) *store.Claim { return b.claimOne() }, true},
		{store.JobRunning, func(b *bundle) *store.Claim {
			c := b.claimOne()
			if err := b.s.StartJob(b.ctx, ref(c)); err != nil {
				b.t.Fatalf("StartJob: %v", err)
			}
			return c
		}, true},
	}
	for _, tc := range tests {
		t.Run(string(tc.state), func(t *testing.T) {
			t.Parallel()
			_, b := setup(t, h)
			run, _ := b.create(yaml)
			jobs := b.jobsByKey(run.ID)
			c := tc.prepare(b)
			b.wantJobStatus(jobs["job"].ID, tc.state)
			b.clk.Advance(time.Second)
			if err := b.s.CancelJob(b.ctx, jobs["job"].ID); err != nil {
				t.Fatalf("CancelJob of a %s job: %v", tc.state, err)
			}
			if !tc.flagged {
				j := b.wantJobStatus(jobs["job"].ID, store.JobCancelled)
				wantTime(t, "FinishedAt", j.FinishedAt, b.clk.Now())
				b.wantJobStatus(jobs["after"].ID, store.JobCancelled)
				b.clk.Advance(2 * time.Minute)
				if n := b.promote(); n != 0 {
					t.Errorf("PromoteRetries changed %d cancelled jobs", n)
				}
				b.expectNoClaim(store.ClaimParams{Max: 8})
				return
			}
			j := b.wantJobStatus(jobs["job"].ID, tc.state)
			if !j.CancelRequested {
				t.Errorf("CancelJob of a %s job did not flag it", tc.state)
			}
			b.wantJobStatus(jobs["after"].ID, store.JobPending)
			res, err := b.s.Heartbeat(b.ctx, store.HeartbeatParams{LeaseRef: ref(c), TTL: leaseTTL})
			if err != nil || !res.CancelRequested {
				t.Fatalf("Heartbeat after CancelJob: CancelRequested %v, err %v; want true, nil", res.CancelRequested, err)
			}
			b.complete(c, store.JobCancelled)
			b.wantJobStatus(jobs["job"].ID, store.JobCancelled)
			b.wantJobStatus(jobs["after"].ID, store.JobCancelled)
			if r := b.getRun(run.ID); !r.Status.Terminal() || r.JobsFinished != 2 {
				t.Errorf("run after its jobs were cancelled: %s, %d finished; want finished, 2", r.Status, r.JobsFinished)
			}
		})
	}
}

func testCompleteTwice(t *testing.T, h Harness) {
	for _, first := range []store.JobStatus{store.JobSuccess, store.JobFailed, store.JobCancelled} {
		t.Run(string(first), func(t *testing.T) {
			t.Parallel()
			_, b := setup(t, h)
			run, _ := b.create(diamondYAML)
			c := b.claimOne()
			b.complete(c, first)
			// Every later completion is refused, so they can take turns on one job.
			for _, second := range []store.JobStatus{store.JobSuccess, store.JobFailed, store.JobCancelled} {
				t.Run("then "+string(second), func(t *testing.T) {
					b := b.with(t)
					before := jobState(b.getJob(c.Job.ID))
					beforeRun := b.getRun(run.ID)
					b.clk.Advance(time.Minute)
					_, err := b.s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: ref(c), Status: second, ExitCode: intPtr(9)})
					wantErr(t, "second CompleteJob", err, store.ErrLeaseLost, store.ErrConflict)
					if after := jobState(b.getJob(c.Job.ID)); after != before {
						t.Errorf("second CompleteJob changed the job:\nbefore %s\nafter  %s", before, after)
					}
					r := b.getRun(run.ID)
					if r.Status != beforeRun.Status || r.JobsFinished != beforeRun.JobsFinished {
						t.Errorf("second CompleteJob changed the run from %s/%d to %s/%d", beforeRun.Status, beforeRun.JobsFinished, r.Status, r.JobsFinished)
					}
				})
			}
			wantErr(t, "CancelJob of a finished job", b.s.CancelJob(b.ctx, c.Job.ID), store.ErrConflict)
		})
	}
}

func testMaintenanceLeavesFinished(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(`
name: finished
jobs:
  ok:
    steps: [ { run: "true" } ]
  bad:
    priority: high
    steps: [ { run: "false" } ]
  stopped:
    priority: low
    steps: [ { run: "true" } ]
  skipped:
    needs: [bad]
    steps: [ { run: "true" } ]
`)
	jobs := b.jobsByKey(run.ID)
	cs := byKey(b.claimAll())
	b.complete(cs["ok"], store.JobSuccess)
	b.complete(cs["bad"], store.JobFailed)
	b.complete(cs["stopped"], store.JobCancelled)
	before := map[string]string{}
	for key, j := range jobs {
		before[key] = jobState(b.getJob(j.ID))
	}
	b.wantJobStatus(jobs["skipped"].ID, store.JobSkipped)
	beforeRun := b.getRun(run.ID)

	b.clk.Advance(48 * time.Hour)
	if n := b.reap(); n != 0 {
		t.Errorf("ReapExpiredLeases changed %d finished jobs", n)
	}
	if n := b.promote(); n != 0 {
		t.Errorf("PromoteRetries changed %d finished jobs", n)
	}
	if n := b.revoke(); n != 0 {
		t.Errorf("RevokeTimedOut changed %d finished jobs", n)
	}
	for key, j := range jobs {
		if after := jobState(b.getJob(j.ID)); after != before[key] {
			t.Errorf("job %q changed by maintenance:\nbefore %s\nafter  %s", key, before[key], after)
		}
	}
	r := b.getRun(run.ID)
	if r.Status != beforeRun.Status || !r.FinishedAt.Equal(beforeRun.FinishedAt) || r.JobsFinished != 4 {
		t.Errorf("run changed by maintenance: %s/%d, was %s/%d", r.Status, r.JobsFinished, beforeRun.Status, beforeRun.JobsFinished)
	}
}

func testCompleteInvalidStatus(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(singleJob)
	c := b.claimOne()
	before := jobState(b.getJob(c.Job.ID))
	for _, st := range []store.JobStatus{store.JobPending, store.JobQueued, store.JobAssigned, store.JobRunning, store.JobSkipped, store.JobRetrying, "done"} {
		_, err := b.s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: ref(c), Status: st})
		wantErr(t, fmt.Sprintf("CompleteJob with status %q", st), err, store.ErrInvalid)
	}
	for _, kind := range []store.FailureKind{store.FailureCancelled, "exploded"} {
		_, err := b.s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: ref(c), Status: store.JobFailed, FailureKind: kind})
		wantErr(t, fmt.Sprintf("CompleteJob failed with failure kind %q", kind), err, store.ErrInvalid)
	}
	if after := jobState(b.getJob(c.Job.ID)); after != before {
		t.Errorf("refused completions changed the job:\nbefore %s\nafter  %s", before, after)
	}
	b.complete(c, store.JobSuccess)
}
