package storetest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
)

var stepTests = []test{
	{"UpdateRecordsProgress", testStepUpdate},
	{"InvalidUpdate", testStepInvalidUpdate},
	{"OnceAcrossAttempts", testStepOnce},
	{"OnceNotRecordedRunsAgain", testStepOnceNotRecorded},
	{"CarriedByCompletion", testStepsWithCompletion},
	{"FailureKind", testStepFailureKind},
	{"RefusedAmongOthers", testStepsRefusedAmongOthers},
}

const fourSteps = `
name: steps
jobs:
  job:
    steps:
      - { name: compile, run: make }
      - { name: test, run: make test }
      - { name: lint, run: make lint }
      - { name: package, run: make dist }
`

func testStepUpdate(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(fourSteps)
	c := b.claimOne()
	update := func(index int, status store.StepStatus, exit *int) {
		t.Helper()
		if err := b.s.UpdateStep(b.ctx, store.UpdateStepParams{LeaseRef: ref(c), StepUpdate: store.StepUpdate{Index: index, Status: status, ExitCode: exit}}); err != nil {
			t.Fatalf("UpdateStep(%d, %s): %v", index, status, err)
		}
	}
	step := func(index int) *store.Step {
		t.Helper()
		ss := b.listSteps(c.Job.ID)
		if len(ss) != 4 {
			t.Fatalf("%d steps, want 4", len(ss))
		}
		for i, s := range ss {
			if s.Index != i {
				t.Fatalf("ListSteps out of order: position %d has index %d", i, s.Index)
			}
		}
		return ss[index]
	}

	b.clk.Advance(time.Second)
	t1 := b.clk.Now()
	update(0, store.StepRunning, nil)
	s := step(0)
	if s.Status != store.StepRunning || s.ExitCode != nil || s.Attempt != 1 {
		t.Errorf("step 0 running: %s", stepsState([]*store.Step{s}))
	}
	wantTime(t, "running StartedAt", s.StartedAt, t1)
	wantTime(t, "running FinishedAt", s.FinishedAt, timeZero)

	b.clk.Advance(2 * time.Second)
	t2 := b.clk.Now()
	update(0, store.StepSuccess, intPtr(0))
	s = step(0)
	if s.Status != store.StepSuccess || s.ExitCode == nil || *s.ExitCode != 0 {
		t.Errorf("step 0 succeeded: %s", stepsState([]*store.Step{s}))
	}
	wantTime(t, "success StartedAt", s.StartedAt, t1)
	wantTime(t, "success FinishedAt", s.FinishedAt, t2)

	update(1, store.StepRunning, nil)
	b.clk.Advance(time.Second)
	update(1, store.StepFailed, intPtr(3))
	s = step(1)
	if s.Status != store.StepFailed || s.ExitCode == nil || *s.ExitCode != 3 {
		t.Errorf("step 1 failed: %s", stepsState([]*store.Step{s}))
	}
	wantTime(t, "failed StartedAt", s.StartedAt, t2)
	wantTime(t, "failed FinishedAt", s.FinishedAt, b.clk.Now())

	b.clk.Advance(time.Second)
	update(2, store.StepSkipped, nil)
	s = step(2)
	if s.Status != store.StepSkipped {
		t.Errorf("step 2 skipped: %s", stepsState([]*store.Step{s}))
	}
	wantTime(t, "skipped FinishedAt", s.FinishedAt, b.clk.Now())

	update(3, store.StepRunning, nil)
	b.clk.Advance(time.Second)
	update(3, store.StepCancelled, intPtr(143))
	s = step(3)
	if s.Status != store.StepCancelled || s.ExitCode == nil || *s.ExitCode != 143 {
		t.Errorf("step 3 cancelled: %s", stepsState([]*store.Step{s}))
	}
	wantTime(t, "cancelled FinishedAt", s.FinishedAt, b.clk.Now())

	// Steps belong to the job; updating them does not finish it.
	b.wantJobStatus(c.Job.ID, store.JobAssigned)
}

func testStepInvalidUpdate(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(fourSteps)
	c := b.claimOne()
	before := stepsState(b.listSteps(c.Job.ID))
	err := b.s.UpdateStep(b.ctx, store.UpdateStepParams{LeaseRef: ref(c), StepUpdate: store.StepUpdate{Index: 0, Status: "finished"}})
	wantErr(t, "UpdateStep with an unknown status", err, store.ErrInvalid)
	for _, index := range []int{-1, 4, 99} {
		err := b.s.UpdateStep(b.ctx, store.UpdateStepParams{LeaseRef: ref(c), StepUpdate: store.StepUpdate{Index: index, Status: store.StepRunning}})
		wantErr(t, "UpdateStep of a step the job does not have", err, store.ErrInvalid, store.ErrNotFound)
	}
	if after := stepsState(b.listSteps(c.Job.ID)); after != before {
		t.Errorf("refused updates changed the steps:\nbefore %s\nafter  %s", before, after)
	}
}

// testStepsWithCompletion checks that step updates sent with the completion are applied
// as UpdateStep would apply them, in the completing transaction, and that one the store
// refuses leaves the job running.
func testStepsWithCompletion(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(fourSteps)
	c := b.claimOne()
	if err := b.s.UpdateStep(b.ctx, store.UpdateStepParams{LeaseRef: ref(c), StepUpdate: store.StepUpdate{Index: 0, Status: store.StepRunning}}); err != nil {
		t.Fatal(err)
	}
	before := stepsState(b.listSteps(c.Job.ID))
	_, err := b.s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: ref(c), Status: store.JobSuccess,
		Steps: []store.StepUpdate{{Index: 0, Status: store.StepSuccess, ExitCode: intPtr(0)}, {Index: 7, Status: store.StepRunning}}})
	wantErr(t, "CompleteJob with an update of a step the job does not have", err, store.ErrInvalid, store.ErrNotFound)
	_, err = b.s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: ref(c), Status: store.JobSuccess,
		Steps: []store.StepUpdate{{Index: 1, Status: "finished"}}})
	wantErr(t, "CompleteJob with an unknown step status", err, store.ErrInvalid)
	if after := stepsState(b.listSteps(c.Job.ID)); after != before {
		t.Errorf("a refused completion changed the steps:\nbefore %s\nafter  %s", before, after)
	}
	b.wantJobStatus(c.Job.ID, store.JobAssigned)

	b.clk.Advance(time.Second)
	end := b.clk.Now()
	job, err := b.s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: ref(c), Status: store.JobFailed, ExitCode: intPtr(3),
		Steps: []store.StepUpdate{
			{Index: 0, Status: store.StepSuccess, ExitCode: intPtr(0)},
			{Index: 1, Status: store.StepRunning},
			{Index: 1, Status: store.StepFailed, ExitCode: intPtr(3)},
			{Index: 2, Status: store.StepSkipped},
		}})
	if err != nil {
		t.Fatalf("CompleteJob with steps: %v", err)
	}
	if job.Status != store.JobFailed {
		t.Errorf("job after completion: %s", job.Status)
	}
	ss := b.listSteps(c.Job.ID)
	want := []struct {
		status store.StepStatus
		exit   *int
	}{{store.StepSuccess, intPtr(0)}, {store.StepFailed, intPtr(3)}, {store.StepSkipped, nil}, {store.StepPending, nil}}
	for i, w := range want {
		s := ss[i]
		if s.Status != w.status || (s.ExitCode == nil) != (w.exit == nil) || (s.ExitCode != nil && *s.ExitCode != *w.exit) || s.Attempt != 1 && w.status != store.StepPending {
			t.Errorf("step %d after completion: %s, want %s", i, stepsState([]*store.Step{s}), w.status)
		}
	}
	wantTime(t, "step 0 FinishedAt", ss[0].FinishedAt, end)
	wantTime(t, "step 1 StartedAt", ss[1].StartedAt, end)
	wantTime(t, "step 1 FinishedAt", ss[1].FinishedAt, end)
	// Updates for a lease that is gone change nothing, as UpdateStep's do not.
	before = stepsState(ss)
	_, err = b.s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: ref(c), Status: store.JobSuccess,
		Steps: []store.StepUpdate{{Index: 3, Status: store.StepSuccess}}})
	wantErr(t, "CompleteJob after the attempt ended", err, store.ErrLeaseLost)
	if after := stepsState(b.listSteps(c.Job.ID)); after != before {
		t.Errorf("a completion on a lost lease changed the steps:\nbefore %s\nafter  %s", before, after)
	}

	// A success carries its steps as a failure does: a step seen running before, one
	// that ran and ended within the completion, one skipped, one never reported.
	b.create(fourSteps)
	c = b.claimOne()
	began := b.clk.Now()
	if err := b.s.UpdateStep(b.ctx, store.UpdateStepParams{LeaseRef: ref(c), StepUpdate: store.StepUpdate{Index: 0, Status: store.StepRunning}}); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Second)
	end = b.clk.Now()
	job, err = b.s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: ref(c), Status: store.JobSuccess, ExitCode: intPtr(0),
		Steps: []store.StepUpdate{
			{Index: 0, Status: store.StepSuccess, ExitCode: intPtr(0)},
			{Index: 1, Status: store.StepRunning},
			{Index: 1, Status: store.StepSuccess, ExitCode: intPtr(0)},
			{Index: 2, Status: store.StepSkipped},
		}})
	if err != nil {
		t.Fatalf("CompleteJob of a success with steps: %v", err)
	}
	if job.Status != store.JobSuccess || job.Attempt != 1 {
		t.Errorf("job after its success: %s, attempt %d", job.Status, job.Attempt)
	}
	ss = b.listSteps(c.Job.ID)
	want = []struct {
		status store.StepStatus
		exit   *int
	}{{store.StepSuccess, intPtr(0)}, {store.StepSuccess, intPtr(0)}, {store.StepSkipped, nil}, {store.StepPending, nil}}
	for i, w := range want {
		s := ss[i]
		if s.Status != w.status || (s.ExitCode == nil) != (w.exit == nil) || (s.ExitCode != nil && *s.ExitCode != *w.exit) ||
			s.Attempt != 1 && w.status != store.StepPending {
			t.Errorf("step %d after the success: %s attempt %d, want %s", i, stepsState([]*store.Step{s}), s.Attempt, w.status)
		}
	}
	wantTime(t, "success: step 0 StartedAt", ss[0].StartedAt, began)
	wantTime(t, "success: step 0 FinishedAt", ss[0].FinishedAt, end)
	wantTime(t, "success: step 1 StartedAt", ss[1].StartedAt, end)
	wantTime(t, "success: step 1 FinishedAt", ss[1].FinishedAt, end)
	wantTime(t, "success: step 2 FinishedAt", ss[2].FinishedAt, end)
	if !ss[3].StartedAt.IsZero() || !ss[3].FinishedAt.IsZero() {
		t.Errorf("success: step 3, never reported, has times %v and %v", ss[3].StartedAt, ss[3].FinishedAt)
	}
}

// testStepOnce checks that a once step that succeeded is reported on every later attempt,
// whether the job was retried after a failure or redelivered after a lost lease.
func testStepOnce(t *testing.T, h Harness) {
	const yaml = `
name: once
jobs:
  deploy:
    retry: { max_attempts: 3, backoff: 1s, max_backoff: 1s, on: [failure] }
    steps:
      - { name: migrate, run: ./migrate, once: true }
      - { name: build, run: make }
      - { name: notify, run: ./notify, once: true }
`
	tests := []struct {
		name string
		// again ends the attempt c and claims the next one.
		again func(b *bundle, c *store.Claim) *store.Claim
	}{
		{"retry after failure", func(b *bundle, c *store.Claim) *store.Claim {
			b.complete(c, store.JobFailed)
			b.clk.Advance(2 * time.Second)
			if n := b.promote(); n != 1 {
				b.t.Fatalf("promoted %d jobs, want 1", n)
			}
			return b.claimOne()
		}},
		{"redelivery after a lost lease", func(b *bundle, c *store.Claim) *store.Claim {
			b.clk.Advance(leaseTTL + time.Second)
			if n := b.reap(); n != 1 {
				b.t.Fatalf("reaped %d jobs, want 1", n)
			}
			return b.claimOne()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, b := setup(t, h)
			b.create(yaml)
			c := b.claimOne()
			if len(c.OnceDone) != 0 {
				t.Errorf("first attempt: OnceDone = %v, want none", c.OnceDone)
			}
			update := func(c *store.Claim, index int, status store.StepStatus, exit *int) {
				t.Helper()
				if err := b.s.UpdateStep(b.ctx, store.UpdateStepParams{LeaseRef: ref(c), StepUpdate: store.StepUpdate{Index: index, Status: status, ExitCode: exit}}); err != nil {
					t.Fatalf("UpdateStep(%d, %s): %v", index, status, err)
				}
			}
			// Attempt 1: migrate (once) and build succeed, notify (once) fails.
			for i, end := range []store.StepStatus{store.StepSuccess, store.StepSuccess, store.StepFailed} {
				update(c, i, store.StepRunning, nil)
				exit := 0
				if end == store.StepFailed {
					exit = 1
				}
				update(c, i, end, &exit)
			}
			if ss := b.listSteps(c.Job.ID); !ss[0].OnceSucceeded || ss[1].OnceSucceeded || ss[2].OnceSucceeded {
				t.Errorf("after attempt 1: %s; want only migrate marked once-succeeded", stepsState(ss))
			}

			for attempt := 2; attempt <= 3; attempt++ {
				c = tc.again(b, c)
				if c.Job.Attempt != attempt {
					t.Fatalf("claimed attempt %d, want %d", c.Job.Attempt, attempt)
				}
				if !slices.Equal(c.OnceDone, []int{0}) {
					t.Errorf("attempt %d: OnceDone = %v, want [0] (migrate)", attempt, c.OnceDone)
				}
				ss := b.listSteps(c.Job.ID)
				if len(ss) != 3 {
					t.Fatalf("%d steps, want 3", len(ss))
				}
				for _, s := range ss {
					if s.Attempt != attempt || s.Status != store.StepPending || s.ExitCode != nil || !s.StartedAt.IsZero() || !s.FinishedAt.IsZero() {
						t.Errorf("attempt %d starts with step %s; want pending, no exit code or times", attempt, stepsState([]*store.Step{s}))
					}
					if want := s.Index == 0; s.OnceSucceeded != want {
						t.Errorf("attempt %d: step %d OnceSucceeded = %v, want %v", attempt, s.Index, s.OnceSucceeded, want)
					}
				}
				// The worker skips migrate and the rest fail again; the mark stays.
				update(c, 0, store.StepSkipped, nil)
				update(c, 1, store.StepRunning, nil)
				update(c, 1, store.StepFailed, intPtr(1))
				if ss := b.listSteps(c.Job.ID); !ss[0].OnceSucceeded || ss[0].Status != store.StepSkipped {
					t.Errorf("after skipping migrate in attempt %d: %s; want it skipped and still once-succeeded", attempt, stepsState(ss))
				}
			}
		})
	}
}

// testStepOnceNotRecorded: a once step skips later attempts only when its success was
// recorded. A worker cut off from the coordinator ran the step to success, but its report
// came after the job was reaped (on its own, or carried by the completion): the report is
// refused, nothing marks the step, and the next attempt runs it again. This is the
// promise docs/reliability.md makes ("whose success the coordinator recorded").
func testStepOnceNotRecorded(t *testing.T, h Harness) {
	const yaml = `
name: once
jobs:
  deploy:
    steps:
      - { name: migrate, run: ./migrate, once: true }
      - { name: build, run: make }
`
	tests := []struct {
		name string
		// report tells, too late, that the cut-off attempt's migrate succeeded.
		report func(b *bundle, c *store.Claim) error
	}{
		{"step update", func(b *bundle, c *store.Claim) error {
			return b.s.UpdateStep(b.ctx, store.UpdateStepParams{LeaseRef: ref(c),
				StepUpdate: store.StepUpdate{Index: 0, Status: store.StepSuccess, ExitCode: intPtr(0)}})
		}},
		{"carried by the completion", func(b *bundle, c *store.Claim) error {
			_, err := b.s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: ref(c), Status: store.JobSuccess, ExitCode: intPtr(0),
				Steps: []store.StepUpdate{{Index: 0, Status: store.StepSuccess, ExitCode: intPtr(0)}, {Index: 1, Status: store.StepSuccess, ExitCode: intPtr(0)}}})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, b := setup(t, h)
			b.create(yaml)
			c := b.claimOne()
			if err := b.s.UpdateStep(b.ctx, store.UpdateStepParams{LeaseRef: ref(c), StepUpdate: store.StepUpdate{Index: 0, Status: store.StepRunning}}); err != nil {
				t.Fatalf("UpdateStep(0, running): %v", err)
			}
			// The worker is cut off while migrate runs; its lease runs out and the job is
			// reaped before the step's success is told.
			b.clk.Advance(leaseTTL + time.Second)
			if n := b.reap(); n != 1 {
				t.Fatalf("reaped %d jobs, want 1", n)
			}
			wantErr(t, "the late report of migrate's success", tc.report(b, c), store.ErrLeaseLost)
			if ss := b.listSteps(c.Job.ID); ss[0].OnceSucceeded {
				t.Errorf("after the refused report: %s; want migrate not marked once-succeeded", stepsState(ss))
			}
			next := b.claimOne()
			if next.Job.Attempt != 2 || len(next.OnceDone) != 0 {
				t.Errorf("next claim: attempt %d, OnceDone %v; want attempt 2 with migrate to run again", next.Job.Attempt, next.OnceDone)
			}
		})
	}
}

// testStepFailureKind checks that a failed step records why it failed (a step timeout
// is told apart from a non-zero exit), through UpdateStep and through a completion's
// step updates, that only a failed step has a kind, and that a new attempt clears it.
func testStepFailureKind(t *testing.T, h Harness) {
	const yaml = `
name: kinds
jobs:
  job:
    retry: { max_attempts: 2, backoff: 1s, max_backoff: 1s, on: [timeout] }
    steps:
      - { name: slow, run: sleep 60, timeout: 1s, continue_on_error: true }
      - { name: broken, run: exit 3, continue_on_error: true }
      - { name: fine, run: "true" }
      - { name: last, run: sleep 60, timeout: 1s }
`
	_, b := setup(t, h)
	b.create(yaml)
	c := b.claimOne()
	update := func(u store.StepUpdate) error {
		return b.s.UpdateStep(b.ctx, store.UpdateStepParams{LeaseRef: ref(c), StepUpdate: u})
	}
	kinds := func() []store.FailureKind {
		t.Helper()
		var out []store.FailureKind
		for _, s := range b.listSteps(c.Job.ID) {
			out = append(out, s.FailureKind)
		}
		return out
	}

	for _, u := range []store.StepUpdate{
		{Index: 0, Status: store.StepFailed, FailureKind: "melted"},
		{Index: 0, Status: store.StepFailed, FailureKind: store.FailureLost},
		{Index: 0, Status: store.StepSuccess, FailureKind: store.FailureTimeout},
		{Index: 0, Status: store.StepRunning, FailureKind: store.FailureExit},
	} {
		wantErr(t, fmt.Sprintf("UpdateStep(%s, kind %q)", u.Status, u.FailureKind), update(u), store.ErrInvalid)
	}
	if got := kinds(); !slices.Equal(got, []store.FailureKind{"", "", "", ""}) {
		t.Fatalf("refused updates left kinds %q", got)
	}

	for _, u := range []store.StepUpdate{
		{Index: 0, Status: store.StepRunning},
		{Index: 0, Status: store.StepFailed, ExitCode: intPtr(-1), FailureKind: store.FailureTimeout},
		{Index: 1, Status: store.StepRunning},
		{Index: 1, Status: store.StepFailed, ExitCode: intPtr(3)},
		{Index: 2, Status: store.StepRunning},
		{Index: 2, Status: store.StepSuccess, ExitCode: intPtr(0)},
	} {
		if err := update(u); err != nil {
			t.Fatalf("UpdateStep(%d, %s, %q): %v", u.Index, u.Status, u.FailureKind, err)
		}
	}
	// A failed step without a kind failed by its exit code.
	if got, want := kinds(), []store.FailureKind{store.FailureTimeout, store.FailureExit, "", ""}; !slices.Equal(got, want) {
		t.Errorf("kinds after updates: %q, want %q", got, want)
	}

	job, err := b.s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: ref(c), Status: store.JobFailed, FailureKind: store.FailureTimeout,
		Steps: []store.StepUpdate{{Index: 3, Status: store.StepRunning}, {Index: 3, Status: store.StepFailed, FailureKind: store.FailureTimeout}}})
	if err != nil {
		t.Fatalf("CompleteJob: %v", err)
	}
	if job.FailureKind != store.FailureTimeout || job.Status != store.JobRetrying {
		t.Errorf("job after a step timeout: %s, kind %q; want retrying (on: [timeout]), kind timeout", job.Status, job.FailureKind)
	}
	if got, want := kinds(), []store.FailureKind{store.FailureTimeout, store.FailureExit, "", store.FailureTimeout}; !slices.Equal(got, want) {
		t.Errorf("kinds after the completion: %q, want %q", got, want)
	}

	b.clk.Advance(2 * time.Second)
	if n := b.promote(); n != 1 {
		t.Fatalf("promoted %d jobs, want 1", n)
	}
	c = b.claimOne()
	if got := kinds(); !slices.Equal(got, []store.FailureKind{"", "", "", ""}) {
		t.Errorf("the next attempt starts with kinds %q, want none", got)
	}
}

// testStepsRefusedAmongOthers: completions made at once, so that the store's writer
// takes several in one transaction, half of them refused after their job's row was
// written (a step the job does not have): each refused one leaves its job and steps as
// they were and the others are kept.
func testStepsRefusedAmongOthers(t *testing.T, h Harness) {
	_, b := setup(t, h)
	const n = 32
	var yaml strings.Builder
	yaml.WriteString("name: many\njobs:\n")
	for i := range n {
		fmt.Fprintf(&yaml, "  j%d:\n    steps: [{run: make}, {run: make test}]\n", i)
	}
	b.create(yaml.String())
	claims := b.claimAll()
	if len(claims) != n {
		t.Fatalf("claimed %d jobs, want %d", len(claims), n)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, c := range claims {
		steps := []store.StepUpdate{{Index: 0, Status: store.StepSuccess, ExitCode: intPtr(0)}, {Index: 1, Status: store.StepSuccess, ExitCode: intPtr(0)}}
		if i%2 == 1 {
			steps[1].Index = 9
		}
		wg.Go(func() {
			<-start
			_, errs[i] = b.s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: ref(c), Status: store.JobSuccess, ExitCode: intPtr(0), Steps: steps})
		})
	}
	close(start)
	wg.Wait()
	for i, c := range claims {
		ss := b.listSteps(c.Job.ID)
		if i%2 == 0 {
			if errs[i] != nil {
				t.Errorf("completion %d, of two steps the job has: %v", i, errs[i])
			}
			b.wantJobStatus(c.Job.ID, store.JobSuccess)
			if ss[0].Status != store.StepSuccess || ss[1].Status != store.StepSuccess {
				t.Errorf("completion %d, kept: steps %s", i, stepsState(ss))
			}
			continue
		}
		wantErr(t, fmt.Sprintf("completion %d, of a step the job does not have", i), errs[i], store.ErrInvalid, store.ErrNotFound)
		b.wantJobStatus(c.Job.ID, store.JobAssigned)
		if ss[0].Status != store.StepPending || ss[1].Status != store.StepPending {
			t.Errorf("completion %d, refused: its steps changed to %s", i, stepsState(ss))
		}
	}
}
