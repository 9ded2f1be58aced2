package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var rerunTests = []test{
	{"SucceededJobAndDependents", testRerunSucceededJob},
	{"RunFailedOrAll", testRerunRun},
	{"Conflicts", testRerunConflicts},
	{"RacingRerunsRunOnce", testRerunRace},
	{"RacingACompletion", testRerunRacesCompletion},
	{"AttemptsOfRetries", testRerunKeepsRetries},
	{"WaitingApprovalInbox", testWaitingApprovalInbox},
}

func (b *bundle) rerun(p store.RerunParams) []uuid.UUID {
	b.t.Helper()
	ids, err := b.s.Rerun(b.ctx, p)
	if err != nil {
		b.t.Fatalf("Rerun(%+v): %v", p, err)
	}
	return ids
}

func (b *bundle) attempts(jobID uuid.UUID) []*store.JobAttempt {
	b.t.Helper()
	as, err := b.s.ListJobAttempts(b.ctx, jobID)
	if err != nil {
		b.t.Fatalf("ListJobAttempts: %v", err)
	}
	return as
}

// testRerunSucceededJob: re-running a job that succeeded gives it and everything
// downstream of it a new attempt, keeps the first attempt with its steps, and the run's
// status follows the latest attempts.
func testRerunSucceededJob(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(chain)
	jobs := b.drive(run.ID, nil)
	b.wantRunDone(run.ID, store.RunSuccess)
	steps := b.listSteps(jobs["b"].ID)
	if len(steps) == 0 {
		t.Fatal("b has no steps")
	}

	ids := b.rerun(store.RerunParams{JobID: jobs["b"].ID, By: "alice"})
	if want := []uuid.UUID{jobs["b"].ID, jobs["c"].ID}; !slices.Equal(ids, want) {
		t.Fatalf("Rerun reopened %v, want b and c %v", ids, want)
	}
	r := b.getRun(run.ID)
	if r.Status != store.RunRunning || !r.FinishedAt.IsZero() || r.JobsFinished != 1 {
		t.Fatalf("run after re-run: %s, finished at %v, %d finished; want running, unfinished, 1", r.Status, r.FinishedAt, r.JobsFinished)
	}
	b.wantJobStatus(jobs["a"].ID, store.JobSuccess)
	b.wantJobStatus(jobs["b"].ID, store.JobQueued)
	b.wantJobStatus(jobs["c"].ID, store.JobPending)
	for _, s := range b.listSteps(jobs["b"].ID) {
		if s.Status != store.StepPending {
			t.Errorf("step %d of the re-run b is %s, want pending", s.Index, s.Status)
		}
	}
	as := b.attempts(jobs["b"].ID)
	if len(as) != 2 || as[0].Attempt != 1 || as[0].Status != store.JobSuccess || as[0].ExitCode == nil || *as[0].ExitCode != 0 ||
		as[1].Attempt != 2 || as[1].Status != "" || as[1].Cause != store.CauseRerun || as[1].StartedBy != "alice" {
		t.Fatalf("attempts of b = %s; want 1 success exit 0, 2 not ended, re-run by alice", attemptsString(as))
	}
	if len(as[0].Steps) != len(steps) || as[0].Steps[0].Status != steps[0].Status || as[0].Steps[0].Name != steps[0].Name {
		t.Errorf("attempt 1 kept steps %+v, want %+v", as[0].Steps, steps)
	}
	if as := b.attempts(jobs["a"].ID); len(as) != 0 {
		t.Errorf("a, not re-run, has attempts %s", attemptsString(as))
	}

	c := b.claimOne()
	if c.Job.ID != jobs["b"].ID || c.Job.Attempt != 2 {
		t.Fatalf("claimed %s attempt %d; want b attempt 2", c.Job.Key, c.Job.Attempt)
	}
	b.complete(c, store.JobFailed)
	final := b.drive(run.ID, nil)
	if final["c"].Status != store.JobSkipped {
		t.Errorf("c after the re-run b failed: %s, want skipped", final["c"].Status)
	}
	b.wantRunDone(run.ID, store.RunFailed)

	// c's first attempt succeeded; its second was skipped without running.
	if as := b.attempts(jobs["c"].ID); len(as) != 2 || as[0].Status != store.JobSuccess || as[1].Cause != store.CauseRerun {
		t.Errorf("attempts of c = %s; want 1 success, 2 re-run", attemptsString(as))
	}
	// A second re-run of b keeps attempt 2 as failed and names the third.
	b.rerun(store.RerunParams{JobID: jobs["b"].ID, By: "bob"})
	as = b.attempts(jobs["b"].ID)
	if len(as) != 3 || as[0].Status != store.JobSuccess || as[1].Status != store.JobFailed || as[1].StartedBy != "alice" ||
		as[2].Attempt != 3 || as[2].StartedBy != "bob" {
		t.Fatalf("attempts of b after a second re-run = %s", attemptsString(as))
	}
	b.drive(run.ID, nil)
	b.wantRunDone(run.ID, store.RunSuccess)
}

// testRerunRun: a finished run re-runs its failed jobs (and what they skipped) or all.
func testRerunRun(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(chain)
	jobs := b.drive(run.ID, map[string]store.JobStatus{"b": store.JobFailed})
	b.wantRunDone(run.ID, store.RunFailed)

	if _, err := b.s.Rerun(b.ctx, store.RerunParams{RunID: run.ID, Jobs: "some"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Rerun with jobs %q: %v, want ErrInvalid", "some", err)
	}
	ids := b.rerun(store.RerunParams{RunID: run.ID, Jobs: store.RerunFailed, By: "alice"})
	if want := []uuid.UUID{jobs["b"].ID, jobs["c"].ID}; !slices.Equal(ids, want) {
		t.Fatalf("re-run failed reopened %v, want b and c %v", ids, want)
	}
	wantErr(t, "Rerun of a running run", func() error {
		_, err := b.s.Rerun(b.ctx, store.RerunParams{RunID: run.ID, Jobs: store.RerunAll})
		return err
	}(), store.ErrConflict)
	final := b.drive(run.ID, nil)
	if final["a"].Attempt != 1 || final["b"].Attempt != 2 || final["c"].Attempt != 1 {
		t.Errorf("attempts a %d, b %d, c %d; want 1, 2, 1", final["a"].Attempt, final["b"].Attempt, final["c"].Attempt)
	}
	b.wantRunDone(run.ID, store.RunSuccess)
	wantErr(t, "re-run failed of a run with none", func() error {
		_, err := b.s.Rerun(b.ctx, store.RerunParams{RunID: run.ID, Jobs: store.RerunFailed})
		return err
	}(), store.ErrConflict)

	if ids := b.rerun(store.RerunParams{RunID: run.ID, Jobs: store.RerunAll, By: "bob"}); len(ids) != 3 {
		t.Fatalf("re-run all reopened %d jobs, want 3", len(ids))
	}
	final = b.drive(run.ID, nil)
	if final["a"].Attempt != 2 || final["b"].Attempt != 3 || final["c"].Attempt != 2 {
		t.Errorf("after re-run all: attempts a %d, b %d, c %d; want 2, 3, 2", final["a"].Attempt, final["b"].Attempt, final["c"].Attempt)
	}
	b.wantRunDone(run.ID, store.RunSuccess)
	if as := b.attempts(jobs["b"].ID); len(as) != 3 || as[0].Status != store.JobFailed || as[1].Status != store.JobSuccess ||
		as[1].StartedBy != "alice" || as[2].StartedBy != "bob" || as[2].Status != "" {
		t.Errorf("attempts of b = %s", attemptsString(as))
	}
}

// testRerunConflicts: nothing is re-run while it, or what is downstream of it, is queued
// or running, and a refused re-run changes nothing.
func testRerunConflicts(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, jobs := b.create(chain)
	rerunErr := func(p store.RerunParams) error { _, err := b.s.Rerun(b.ctx, p); return err }
	wantErr(t, "Rerun of a queued job", rerunErr(store.RerunParams{JobID: jobs[0].ID}), store.ErrConflict)
	wantErr(t, "Rerun of an unknown job", rerunErr(store.RerunParams{JobID: uuid.New()}), store.ErrNotFound)
	wantErr(t, "Rerun of an unknown run", rerunErr(store.RerunParams{RunID: uuid.New(), Jobs: store.RerunAll}), store.ErrNotFound)
	wantErr(t, "Rerun of nothing", rerunErr(store.RerunParams{}), store.ErrInvalid)

	c := b.claimOne()
	b.complete(c, store.JobSuccess) // a
	cb := b.claimOne()              // b, assigned
	wantErr(t, "Rerun of a job whose dependent is assigned", rerunErr(store.RerunParams{JobID: jobs[0].ID}), store.ErrConflict)
	b.wantJobStatus(jobs[0].ID, store.JobSuccess)
	if j := b.wantJobStatus(cb.Job.ID, store.JobAssigned); j.LeaseToken != cb.Lease.Token {
		t.Errorf("the refused re-run changed b's lease")
	}
	if as := b.attempts(jobs[0].ID); len(as) != 0 {
		t.Errorf("a refused re-run kept attempts %s", attemptsString(as))
	}
	b.complete(cb, store.JobSuccess)
	b.drive(run.ID, nil)
	b.wantRunDone(run.ID, store.RunSuccess)
}

// testRerunRace: re-runs of one job racing each other reopen it once, and it is claimed
// once.
func testRerunRace(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, jobs := b.create(chain)
	b.drive(run.ID, nil)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = b.s.Rerun(b.ctx, store.RerunParams{JobID: jobs[2].ID, By: "racer"})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, store.ErrConflict):
			t.Errorf("a racing re-run: %v, want nil or ErrConflict", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d of %d racing re-runs succeeded, want 1", ok, n)
	}
	cs := b.claimAll()
	if len(cs) != 1 || cs[0].Job.ID != jobs[2].ID || cs[0].Job.Attempt != 2 {
		t.Fatalf("claims after the race: %d; want c once, attempt 2", len(cs))
	}
	wantErr(t, "Rerun racing the running attempt", func() error {
		_, err := b.s.Rerun(b.ctx, store.RerunParams{JobID: jobs[2].ID})
		return err
	}(), store.ErrConflict)
	b.complete(cs[0], store.JobSuccess)
	b.wantRunDone(run.ID, store.RunSuccess)
}

// testRerunRacesCompletion: a re-run of a job racing the completion of the job that needs
// it is refused cleanly (ErrConflict, not a deadlock or a failure): the dependent is
// leased, or the job after it is queued by then. The dependent is never leased twice, and
// the run ends consistent.
func testRerunRacesCompletion(t *testing.T, h Harness) {
	_, b := setup(t, h)
	for i := range 4 {
		run, jobs := b.create(chain)
		b.complete(b.claimOne(), store.JobSuccess) // a
		cb := b.claimOne()                         // b, leased
		var wg sync.WaitGroup
		var rerunErr error
		wg.Add(2)
		go func() { defer wg.Done(); _, rerunErr = b.s.Rerun(b.ctx, store.RerunParams{JobID: jobs[0].ID}) }()
		go func() { defer wg.Done(); b.complete(cb, store.JobSuccess) }()
		wg.Wait()
		if rerunErr != nil && !errors.Is(rerunErr, store.ErrConflict) {
			t.Fatalf("round %d: Rerun: %v", i, rerunErr)
		}
		// Whatever won, every job runs to the end with one lease at a time.
		leased := map[uuid.UUID]int{}
		for range 20 {
			cs := b.claimAll()
			if len(cs) == 0 {
				break
			}
			for _, c := range cs {
				if leased[c.Job.ID]++; leased[c.Job.ID] > 1 && rerunErr != nil {
					t.Errorf("round %d: %s leased again after a refused re-run", i, c.Job.Key)
				}
				b.complete(c, store.JobSuccess)
			}
		}
		final := b.jobsByKey(run.ID)
		if rerunErr == nil && (final["a"].Attempt != 2 || final["b"].Attempt != 2 || final["c"].Attempt != 2) {
			t.Errorf("round %d: after a re-run attempts a %d, b %d, c %d; want 2 each", i, final["a"].Attempt, final["b"].Attempt, final["c"].Attempt)
		}
		b.wantRunDone(run.ID, store.RunSuccess)
	}
}

// testRerunKeepsRetries: attempts the retry policy ended are kept as failed, and the next
// one says the policy started it.
func testRerunKeepsRetries(t *testing.T, h Harness) {
	_, b := setup(t, h)
	_, jobs := b.create(`
name: flaky
jobs:
  flaky:
    retry: { max_attempts: 2, on: [failure] }
    steps: [{run: "false"}]
`)
	b.complete(b.claimOne(), store.JobFailed)
	b.wantJobStatus(jobs[0].ID, store.JobRetrying)
	as := b.attempts(jobs[0].ID)
	if len(as) != 2 || as[0].Status != store.JobFailed || as[0].FailureKind != store.FailureExit || as[0].ExitCode == nil ||
		*as[0].ExitCode != 1 || as[0].FinishedAt.IsZero() || as[1].Cause != store.CauseRetry || as[1].Status != "" {
		t.Fatalf("attempts after a retried failure = %s", attemptsString(as))
	}
}

// testWaitingApprovalInbox: the jobs waiting for approval are listed, of the projects
// asked for, until decided.
func testWaitingApprovalInbox(t *testing.T, h Harness) {
	_, b := setup(t, h)
	pid := b.putEnv(store.Environment{Name: "production", RequiredApprovals: 1, Approvers: []string{"alice"}})
	_, jobs := b.createIn(deployYAML, store.Trigger{})
	b.create(chain) // another project, nothing waiting
	list := func(p store.ListWaitingApprovalParams) []*store.Job {
		t.Helper()
		js, err := b.s.ListWaitingApproval(b.ctx, p)
		if err != nil {
			t.Fatalf("ListWaitingApproval: %v", err)
		}
		return js
	}
	if js := list(store.ListWaitingApprovalParams{}); len(js) != 1 || js[0].ID != jobs[0].ID || js[0].Spec == nil ||
		js[0].Spec.Environment == nil || js[0].Spec.Environment.Name != "production" {
		t.Fatalf("waiting = %v, want the deploy job with its spec", js)
	}
	if js := list(store.ListWaitingApprovalParams{ProjectIDs: []uuid.UUID{pid}}); len(js) != 1 {
		t.Errorf("waiting in its project = %d jobs, want 1", len(js))
	}
	if js := list(store.ListWaitingApprovalParams{ProjectIDs: []uuid.UUID{uuid.New()}}); len(js) != 0 {
		t.Errorf("waiting in another project = %d jobs, want 0", len(js))
	}
	if js := list(store.ListWaitingApprovalParams{ProjectIDs: []uuid.UUID{}}); len(js) != 0 {
		t.Errorf("waiting in no project = %d jobs, want 0", len(js))
	}
	if _, err := b.decide(jobs[0].ID, "alice", store.Approved); err != nil {
		t.Fatalf("approve: %v", err)
	}
	if js := list(store.ListWaitingApprovalParams{}); len(js) != 0 {
		t.Errorf("waiting after the approval = %d jobs, want 0", len(js))
	}
}

func attemptsString(as []*store.JobAttempt) string {
	s := "["
	for i, a := range as {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%d:%q/%s/%s by %q", a.Attempt, a.Status, a.FailureKind, a.Cause, a.StartedBy)
	}
	return s + "]"
}
