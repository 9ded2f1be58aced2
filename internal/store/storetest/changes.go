package storetest

import (
	"slices"
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var changeFeedTests = []test{
	{"JobsChangedSince", testJobsChangedSince},
	{"OtherRunsUntouched", testJobsChangedOtherRuns},
}

// changedKeys lists the keys of the run's jobs changed since since, and fails the test
// on an error.
func (b *bundle) changedKeys(runID uuid.UUID, since int64) []string {
	b.t.Helper()
	jobs := mustChanged(b, runID, since)
	keys := make([]string, len(jobs))
	for i, j := range jobs {
		keys[i] = j.Key
	}
	return keys
}

func testJobsChangedSince(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(diamondYAML)
	r0 := b.getRun(run.ID)
	if r0.JobSeq < 1 {
		t.Fatalf("new run's JobSeq = %d, want at least 1", r0.JobSeq)
	}
	if got := b.changedKeys(run.ID, 0); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("changed since 0 = %v, want every job in plan order", got)
	}
	if got := b.changedKeys(run.ID, r0.JobSeq); len(got) != 0 {
		t.Fatalf("changed since the run was read = %v, want none", got)
	}

	// A claim changes the claimed job only.
	c := b.claimOne()
	r1 := b.getRun(run.ID)
	if r1.JobSeq <= r0.JobSeq {
		t.Fatalf("JobSeq after a claim = %d, want more than %d", r1.JobSeq, r0.JobSeq)
	}
	if got := b.changedKeys(run.ID, r0.JobSeq); !slices.Equal(got, []string{c.Job.Key}) {
		t.Fatalf("changed by the claim = %v, want [%s]", got, c.Job.Key)
	}
	if got := b.changedKeys(run.ID, r1.JobSeq); len(got) != 0 {
		t.Fatalf("changed since the claim = %v, want none", got)
	}

	// A heartbeat changes nothing a reader of the run sees.
	if _, err := b.s.Heartbeat(b.ctx, store.HeartbeatParams{LeaseRef: ref(c), TTL: leaseTTL}); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if got := b.changedKeys(run.ID, r1.JobSeq); len(got) != 0 {
		t.Fatalf("changed by a heartbeat = %v, want none", got)
	}

	// Completing both roots queues c: all three changed, and each one shows what it is now.
	c2 := b.claimOne()
	b.complete(c, store.JobSuccess)
	b.complete(c2, store.JobSuccess)
	jobs := mustChanged(b, run.ID, r1.JobSeq)
	want := map[string]store.JobStatus{"a": store.JobSuccess, "b": store.JobSuccess, "c": store.JobQueued}
	if len(jobs) != len(want) {
		t.Fatalf("changed after both roots ended: %d jobs, want %d", len(jobs), len(want))
	}
	for _, j := range jobs {
		if want[j.Key] != j.Status {
			t.Errorf("changed job %s is %s, want %s", j.Key, j.Status, want[j.Key])
		}
	}
	r2 := b.getRun(run.ID)
	if r2.JobSeq <= r1.JobSeq {
		t.Fatalf("JobSeq after completions = %d, want more than %d", r2.JobSeq, r1.JobSeq)
	}
	if got := b.changedKeys(run.ID, r2.JobSeq); len(got) != 0 {
		t.Fatalf("changed since the last read = %v, want none", got)
	}

	// Cancelling changes every job that had not ended.
	if err := b.s.CancelRun(b.ctx, run.ID); err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	if got := b.changedKeys(run.ID, r2.JobSeq); !slices.Equal(got, []string{"c", "d"}) {
		t.Fatalf("changed by the cancel = %v, want [c d]", got)
	}
}

func testJobsChangedOtherRuns(t *testing.T, h Harness) {
	_, b := setup(t, h)
	one, _ := b.create(diamondYAML)
	two, _ := b.create(diamondYAML)
	before := b.getRun(two.ID).JobSeq
	for _, c := range b.claimAll() {
		if c.Job.RunID == one.ID {
			b.complete(c, store.JobSuccess)
		}
	}
	// two's roots were claimed too; only the changes of one must not show in two's feed.
	for _, j := range mustChanged(b, two.ID, before) {
		if j.RunID != two.ID {
			t.Errorf("run %s's feed lists job %s of run %s", two.ID, j.Key, j.RunID)
		}
		if j.Status != store.JobAssigned && j.Status != store.JobRunning {
			t.Errorf("run %s's feed lists job %s as %s, want claimed", two.ID, j.Key, j.Status)
		}
	}
}

func mustChanged(b *bundle, runID uuid.UUID, since int64) []*store.Job {
	b.t.Helper()
	jobs, err := b.s.ListJobsChanged(b.ctx, runID, since)
	if err != nil {
		b.t.Fatalf("ListJobsChanged(%s, %d): %v", runID, since, err)
	}
	return jobs
}
