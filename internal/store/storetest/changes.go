package storetest

import (
	"maps"
	"slices"
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var changeFeedTests = []test{
	{"JobsChangedSince", testJobsChangedSince},
	{"OtherRunsUntouched", testJobsChangedOtherRuns},
}

// feed checks a run's change feed against what the test did to its jobs.
type feed struct {
	b     *bundle
	exact bool                       // Harness.ExactChangeFeed
	run   uuid.UUID                  // the run followed
	plan  []string                   // the run's job keys in plan order
	known map[string]store.JobStatus // key -> the status the test last saw the job in
}

func newFeed(b *bundle, h Harness, run uuid.UUID) *feed {
	f := &feed{b: b, exact: h.ExactChangeFeed, run: run, known: map[string]store.JobStatus{}}
	for _, j := range mustChanged(b, run, 0) {
		f.plan = append(f.plan, j.Key)
		f.known[j.Key] = j.Status
	}
	return f
}

// check lists the jobs changed since since, what, and checks that every job of changed
// is listed in the status given, in plan order. An exact feed may list nothing else; any
// other may list again a job that did not change, but only as the test last saw it.
// The statuses listed become what the test knows.
func (f *feed) check(since int64, what string, changed map[string]store.JobStatus) {
	f.b.t.Helper()
	jobs := mustChanged(f.b, f.run, since)
	keys := make([]string, len(jobs))
	for i, j := range jobs {
		keys[i] = j.Key
	}
	if !isSubsequence(keys, f.plan) {
		f.b.t.Fatalf("%s: listed %v, not in plan order %v", what, keys, f.plan)
	}
	listed := map[string]bool{}
	for _, j := range jobs {
		listed[j.Key] = true
		want, ok := changed[j.Key]
		switch {
		case ok && j.Status != want:
			f.b.t.Errorf("%s: job %s is %s, want %s", what, j.Key, j.Status, want)
		case !ok && f.exact:
			f.b.t.Errorf("%s: listed job %s, which did not change", what, j.Key)
		case !ok && j.Status != f.known[j.Key]:
			f.b.t.Errorf("%s: listed job %s as %s, but it did not change from %s", what, j.Key, j.Status, f.known[j.Key])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(changed)) {
		if !listed[k] {
			f.b.t.Errorf("%s: job %s changed but is not listed (listed %v)", what, k, keys)
		}
	}
	maps.Copy(f.known, changed)
}

// isSubsequence says whether every element of sub is in seq, in seq's order.
func isSubsequence(sub, seq []string) bool {
	i := 0
	for _, s := range seq {
		if i < len(sub) && sub[i] == s {
			i++
		}
	}
	return i == len(sub)
}

// moved checks that the run's cursor did not go back, and with an exact feed that it
// went forward: a change numbers above every earlier cursor. (PostgreSQL's cursor stays
// while any older transaction of the server is open, which the suite does not control.)
func (f *feed) moved(before, after int64, what string) {
	f.b.t.Helper()
	if after < before || f.exact && after == before {
		f.b.t.Fatalf("JobSeq after %s = %d, want more than %d", what, after, before)
	}
}

func testJobsChangedSince(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(diamondYAML)
	r0 := b.getRun(run.ID)
	if r0.JobSeq < 1 {
		t.Fatalf("new run's JobSeq = %d, want at least 1", r0.JobSeq)
	}
	f := newFeed(b, h, run.ID)
	if !slices.Equal(f.plan, []string{"a", "b", "c", "d"}) {
		t.Fatalf("changed since 0 = %v, want every job in plan order", f.plan)
	}
	f.check(r0.JobSeq, "changed since the run was read", nil)

	// A claim changes the claimed job only.
	c := b.claimOne()
	r1 := b.getRun(run.ID)
	f.moved(r0.JobSeq, r1.JobSeq, "a claim")
	claimed := b.getJob(c.Job.ID).Status
	f.check(r0.JobSeq, "changed by the claim", map[string]store.JobStatus{c.Job.Key: claimed})
	f.check(r1.JobSeq, "changed since the claim", nil)

	// A heartbeat changes nothing a reader of the run sees.
	if _, err := b.s.Heartbeat(b.ctx, store.HeartbeatParams{LeaseRef: ref(c), TTL: leaseTTL}); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	f.check(r1.JobSeq, "changed by a heartbeat", nil)

	// Completing both roots queues c: all three changed, and each one shows what it is now.
	c2 := b.claimOne()
	b.complete(c, store.JobSuccess)
	b.complete(c2, store.JobSuccess)
	f.check(r1.JobSeq, "changed after both roots ended",
		map[string]store.JobStatus{"a": store.JobSuccess, "b": store.JobSuccess, "c": store.JobQueued})
	r2 := b.getRun(run.ID)
	f.moved(r1.JobSeq, r2.JobSeq, "completions")
	f.check(r2.JobSeq, "changed since the last read", nil)

	// Cancelling changes every job that had not ended.
	if err := b.s.CancelRun(b.ctx, run.ID); err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	f.check(r2.JobSeq, "changed by the cancel",
		map[string]store.JobStatus{"c": store.JobCancelled, "d": store.JobCancelled})
}

func testJobsChangedOtherRuns(t *testing.T, h Harness) {
	_, b := setup(t, h)
	one, _ := b.create(diamondYAML)
	two, _ := b.create(diamondYAML)
	before := b.getRun(two.ID).JobSeq
	f := newFeed(b, h, two.ID)
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
		claimed := j.Status == store.JobAssigned || j.Status == store.JobRunning
		if !claimed && (f.exact || j.Status != f.known[j.Key]) {
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
