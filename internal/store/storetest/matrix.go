package storetest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var matrixTests = []test{
	{"ExpandedWhenNeedsEnd", testMatrixExpanded},
	{"FailsWithReason", testMatrixFails},
	{"ConcurrentNeedsExpandOnce", testMatrixConcurrent},
	{"RetryKeepsInstances", testMatrixRetry},
	{"RetryReexpandsPlaceholder", testMatrixRetryPlaceholder},
	{"CancelledBeforeExpansion", testMatrixCancelled},
}

// dynMatrixYAML is a workflow whose job test has its matrix computed from setup's
// outputs; other lists more needs of test (YAML list items), when given.
func dynMatrixYAML(other string) string {
	needs := "[setup]"
	extra := ""
	if other != "" {
		needs = "[setup, " + other + "]"
		extra = fmt.Sprintf("  %s:\n    runs-on: ubuntu-latest\n    steps:\n      - run: \"true\"\n", other)
	}
	return `on: push
jobs:
  setup:
    runs-on: ubuntu-latest
    outputs:
      matrix: ${{ steps.m.outputs.matrix }}
    steps:
      - id: m
        run: echo "matrix=$M" >> "$GITHUB_OUTPUT"
` + extra + `  test:
    needs: ` + needs + `
    runs-on: ubuntu-latest
    strategy:
      fail-fast: false
      matrix:
        x: ${{ fromJSON(needs.setup.outputs.matrix) }}
    concurrency: ${{ github.run_id }}-${{ matrix.x }}
    steps:
      - run: echo ${{ matrix.x }}
      - run: echo second
  after:
    needs: test
    runs-on: ubuntu-latest
    steps:
      - run: "true"
`
}

// keysInOrder lists the keys of a run's jobs in the run's order.
func (b *bundle) keysInOrder(runID uuid.UUID) []string {
	b.t.Helper()
	var keys []string
	for _, j := range b.listJobs(runID) {
		keys = append(keys, j.Key)
	}
	return keys
}

// completeSetup claims setup and completes it with matrix as its output.
func (b *bundle) completeSetup(matrix string) {
	b.t.Helper()
	c := b.claimOne()
	if c.Job.Key != "setup" {
		b.t.Fatalf("claimed %q, want setup", c.Job.Key)
	}
	if _, err := b.completeWith(c, store.JobSuccess, map[string]string{"matrix": matrix}); err != nil {
		b.t.Fatalf("complete setup: %v", err)
	}
}

var instanceKeys = []string{"test (x=a)", "test (x=b)", "test (x=c)"}

// testMatrixExpanded: the placeholder waits, like any job, for its needs; the completion
// of the last one replaces it by its instances (the first keeps its id), in the run's
// order, with their steps; the run counts them, and a job that needed the placeholder
// waits for every instance and reads them as one need.
func testMatrixExpanded(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, jobs := b.create(dynMatrixYAML(""))
	placeholder := jobs[1]
	if placeholder.Key != "test" || placeholder.Status != store.JobPending || placeholder.Spec.DynamicMatrix == nil {
		t.Fatalf("placeholder %s", jobState(placeholder))
	}
	b.completeSetup(`["a","b","c"]`)
	if got, want := b.keysInOrder(run.ID), slices.Concat([]string{"setup"}, instanceKeys, []string{"after"}); !slices.Equal(got, want) {
		t.Fatalf("jobs %q, want %q", got, want)
	}
	jobs2 := b.jobsByKey(run.ID)
	if jobs2["test (x=a)"].ID != placeholder.ID {
		t.Errorf("the first instance is not the placeholder's row")
	}
	if r := b.getRun(run.ID); r.JobsTotal != 5 || r.JobsFinished != 1 {
		t.Errorf("run counts %d of %d, want 1 of 5", r.JobsFinished, r.JobsTotal)
	}
	for _, k := range instanceKeys {
		j := jobs2[k]
		if j.Status != store.JobQueued || j.Spec.DynamicMatrix != nil || len(j.Spec.Steps) != 2 {
			t.Errorf("instance %s: %s, spec %+v", k, jobState(j), j.Spec)
		}
		if steps := b.listSteps(j.ID); len(steps) != 2 {
			t.Errorf("instance %s has %d steps", k, len(steps))
		}
	}
	if got := jobs2["test (x=c)"].Spec.Steps[0].Run; got != "echo c" {
		t.Errorf("instance c runs %q", got)
	}
	// Run values are put in as when the run was created.
	if got, want := jobs2["test (x=c)"].ConcurrencyGroup, run.ID.String()+"-c"; got != want {
		t.Errorf("instance c's concurrency group %q, want %q", got, want)
	}
	if got := jobs2["after"].Spec.Needs; !slices.Equal(got, instanceKeys) {
		t.Errorf("after needs %q, want the instances", got)
	}
	claims := byKey(b.claimAll())
	if len(claims) != 3 {
		t.Fatalf("claimed %d jobs, want the 3 instances", len(claims))
	}
	for i, k := range instanceKeys {
		b.complete(claims[k], store.JobSuccess)
		if i < 2 {
			b.wantJobStatus(jobs2["after"].ID, store.JobPending)
		}
	}
	b.wantJobStatus(jobs2["after"].ID, store.JobQueued)
	needs, err := b.s.NeedsOf(b.ctx, jobs2["after"].ID)
	if err != nil {
		t.Fatal(err)
	}
	if needs["test"].Result != "success" {
		t.Errorf("after reads test as %+v", needs["test"])
	}
	b.drive(run.ID, nil)
	b.wantRunDone(run.ID, store.RunSuccess)
}

// testMatrixFails: a matrix that cannot be made fails the placeholder, saying why, and
// changes nothing else: no instance, the run's count as it was, dependents skipped.
func testMatrixFails(t *testing.T, h Harness) {
	cases := []struct{ output, reason string }{
		{`[]`, "Matrix vector 'x' does not contain any values"},
		{`{not json`, "fromJSON"},
	}
	for _, c := range cases {
		t.Run(c.output, func(t *testing.T) {
			t.Parallel()
			_, b := setup(t, h)
			run, _ := b.create(dynMatrixYAML(""))
			b.completeSetup(c.output)
			if got, want := b.keysInOrder(run.ID), []string{"setup", "test", "after"}; !slices.Equal(got, want) {
				t.Fatalf("jobs %q, want %q", got, want)
			}
			jobs := b.jobsByKey(run.ID)
			j := jobs["test"]
			if j.Status != store.JobFailed || j.FailureKind != store.FailureMatrix || !strings.Contains(j.Reason, c.reason) {
				t.Errorf("placeholder %s, reason %q, want failed (matrix) saying %q", jobState(j), j.Reason, c.reason)
			}
			b.wantJobStatus(jobs["after"].ID, store.JobSkipped)
			if r := b.wantRunDone(run.ID, store.RunFailed); r.JobsTotal != 3 {
				t.Errorf("run counts %d jobs, want 3", r.JobsTotal)
			}
		})
	}
}

// testMatrixConcurrent: the placeholder's two needs end at once, each on its own store
// of one database (two coordinator replicas): the matrix is made exactly once.
func testMatrixConcurrent(t *testing.T, h Harness) {
	dsn := h.NewDSN(t)
	if h.NewMigratedDSN != nil {
		dsn = h.NewMigratedDSN(t)
	}
	ctx := t.Context()
	clk := clock.NewFake(epoch)
	open := func() store.Store {
		s, err := h.Open(ctx, dsn, clk)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	stores := []store.Store{open(), open()}
	b := &bundle{t: t, ctx: ctx, clk: clk, s: stores[0]}
	for round := range 5 {
		run, _ := b.create(dynMatrixYAML("other"))
		claims := byKey(b.claimAll())
		if len(claims) != 2 {
			t.Fatalf("round %d: claimed %d jobs, want setup and other", round, len(claims))
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, k := range []string{"setup", "other"} {
			wg.Go(func() {
				_, errs[i] = stores[i].CompleteJob(ctx, store.CompleteParams{LeaseRef: ref(claims[k]), Status: store.JobSuccess,
					ExitCode: intPtr(0), Outputs: map[string]string{"matrix": `["a","b","c"]`}})
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: complete: %v", round, err)
			}
		}
		want := slices.Concat([]string{"setup", "other"}, instanceKeys, []string{"after"})
		if got := b.keysInOrder(run.ID); !slices.Equal(sortedCopy(got), sortedCopy(want)) {
			t.Fatalf("round %d: jobs %q, want %q", round, got, want)
		}
		if r := b.getRun(run.ID); r.JobsTotal != 6 {
			t.Fatalf("round %d: run counts %d jobs, want 6", round, r.JobsTotal)
		}
		instances := b.claimAll()
		if len(instances) != 3 {
			t.Fatalf("round %d: claimed %d instances, want 3", round, len(instances))
		}
		after := b.jobsByKey(run.ID)["after"]
		for _, c := range instances {
			b.wantJobStatus(after.ID, store.JobPending)
			b.complete(c, store.JobSuccess)
		}
		b.wantJobStatus(after.ID, store.JobQueued)
		b.drive(run.ID, nil)
		b.wantRunDone(run.ID, store.RunSuccess)
	}
}

// testMatrixRetry: retrying a run after an instance failed runs that instance again and
// keeps the matrix: its need did not run again, so the instances are the same jobs.
func testMatrixRetry(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(dynMatrixYAML(""))
	b.completeSetup(`["a","b","c"]`)
	jobs := b.drive(run.ID, map[string]store.JobStatus{"test (x=b)": store.JobFailed})
	if jobs["after"].Status != store.JobSkipped {
		t.Fatalf("after %s", jobState(jobs["after"]))
	}
	b.wantRunDone(run.ID, store.RunFailed)
	if err := b.s.RetryRun(b.ctx, run.ID); err != nil {
		t.Fatalf("RetryRun: %v", err)
	}
	claims := b.claimAll()
	if len(claims) != 1 || claims[0].Job.Key != "test (x=b)" {
		t.Fatalf("claimed %d jobs after the retry, want test (x=b) alone", len(claims))
	}
	b.complete(claims[0], store.JobSuccess)
	jobs = b.drive(run.ID, nil)
	if len(jobs) != 5 || jobs["after"].Status != store.JobSuccess {
		t.Fatalf("after the retry: %d jobs, after %s", len(jobs), jobState(jobs["after"]))
	}
	b.wantRunDone(run.ID, store.RunSuccess)
}

// testMatrixRetryPlaceholder: a placeholder that never expanded (its need failed) is
// expanded when a retry runs its need again, from what the need leaves this time.
func testMatrixRetryPlaceholder(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(dynMatrixYAML(""))
	jobs := b.drive(run.ID, map[string]store.JobStatus{"setup": store.JobFailed})
	if jobs["test"].Status != store.JobSkipped || jobs["after"].Status != store.JobSkipped {
		t.Fatalf("test %s, after %s", jobState(jobs["test"]), jobState(jobs["after"]))
	}
	b.wantRunDone(run.ID, store.RunFailed)
	if err := b.s.RetryRun(b.ctx, run.ID); err != nil {
		t.Fatalf("RetryRun: %v", err)
	}
	b.completeSetup(`["a","b","c"]`)
	if got, want := b.keysInOrder(run.ID), slices.Concat([]string{"setup"}, instanceKeys, []string{"after"}); !slices.Equal(got, want) {
		t.Fatalf("jobs %q, want %q", got, want)
	}
	b.drive(run.ID, nil)
	b.wantRunDone(run.ID, store.RunSuccess)
	// A placeholder that failed to expand is expanded again by a retry: the same outputs
	// fail it the same way, and nothing is left half made.
	run, _ = b.create(dynMatrixYAML(""))
	b.completeSetup(`[]`)
	b.wantRunDone(run.ID, store.RunFailed)
	if err := b.s.RetryRun(b.ctx, run.ID); err != nil {
		t.Fatalf("RetryRun: %v", err)
	}
	j := b.jobsByKey(run.ID)["test"]
	if j.Status != store.JobFailed || j.FailureKind != store.FailureMatrix {
		t.Errorf("placeholder after the retry %s", jobState(j))
	}
	if r := b.wantRunDone(run.ID, store.RunFailed); r.JobsTotal != 3 {
		t.Errorf("run counts %d jobs, want 3", r.JobsTotal)
	}
}

// testMatrixCancelled: a run cancelled before its placeholder expanded cancels it, and no
// instance is ever made.
func testMatrixCancelled(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(dynMatrixYAML(""))
	c := b.claimOne()
	if err := b.s.CancelRun(b.ctx, run.ID); err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	if _, err := b.completeWith(c, store.JobCancelled, map[string]string{"matrix": `["a"]`}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if got, want := b.keysInOrder(run.ID), []string{"setup", "test", "after"}; !slices.Equal(got, want) {
		t.Fatalf("jobs %q, want %q", got, want)
	}
	b.wantJobStatus(b.jobsByKey(run.ID)["test"].ID, store.JobCancelled)
	b.wantRunDone(run.ID, store.RunCancelled)
}
