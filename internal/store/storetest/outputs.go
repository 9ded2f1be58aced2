package storetest

import (
	"maps"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
)

var outputTests = []test{
	{"KeptAndReadByNeeds", testOutputsKept},
	{"InvalidRefused", testOutputsInvalid},
	{"ConditionReadsThem", testOutputsInCondition},
	{"RunEnvOverridesInCondition", testRunEnvOverrides},
	{"FailFast", testFailFast},
}

// completeWith ends the claimed attempt with status and outputs.
func (b *bundle) completeWith(c *store.Claim, status store.JobStatus, outputs map[string]string) (*store.Job, error) {
	b.t.Helper()
	p := store.CompleteParams{LeaseRef: ref(c), Status: status, Outputs: outputs}
	if status == store.JobFailed {
		p.FailureKind = store.FailureExit
		p.ExitCode = intPtr(1)
	}
	return b.s.CompleteJob(b.ctx, p)
}

// testOutputsKept: a job's outputs are kept with its completion, shown by GetJob, and
// given to the jobs that need it by NeedsOf, a matrix job's instances merged in plan order.
func testOutputsKept(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(`
jobs:
  build:
    matrix: {os: [a, b]}
    steps: [{run: "true"}]
  lint:
    steps: [{run: "true"}]
  deploy:
    needs: [build, lint]
    steps: [{run: "true"}]
`)
	for range 3 {
		c := b.claimOne()
		var out map[string]string
		switch c.Job.Key {
		case "build (os=a)":
			out = map[string]string{"version": "1", "a": "only a"}
		case "build (os=b)":
			out = map[string]string{"version": "2"}
		}
		if _, err := b.completeWith(c, store.JobSuccess, out); err != nil {
			t.Fatalf("complete %s: %v", c.Job.Key, err)
		}
	}
	jobs := b.jobsByKey(run.ID)
	if got := b.getJob(jobs["build (os=a)"].ID).Outputs; !maps.Equal(got, map[string]string{"version": "1", "a": "only a"}) {
		t.Errorf("GetJob outputs %q", got)
	}
	if got := b.getJob(jobs["lint"].ID).Outputs; got != nil {
		t.Errorf("a job that left none has outputs %q", got)
	}
	needs, err := b.s.NeedsOf(b.ctx, jobs["deploy"].ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := needs["build"]; got.Result != "success" || !maps.Equal(got.Outputs, map[string]string{"version": "2", "a": "only a"}) {
		t.Errorf("NeedsOf build = %+v, want success with the instances merged, the later one winning", got)
	}
	if got := needs["lint"]; got.Result != "success" || len(got.Outputs) != 0 {
		t.Errorf("NeedsOf lint = %+v", got)
	}
}

// testOutputsInvalid: outputs that break the limits or hold ${{ are refused with
// ErrInvalid and the job stays leased, so nothing is lost.
func testOutputsInvalid(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create("jobs:\n  a:\n    steps: [{run: \"true\"}]\n")
	c := b.claimOne()
	for _, out := range []map[string]string{
		{"v": "${{ secrets.X }}"},
		{"1bad": "x"},
		{"big": strings.Repeat("x", 1<<20+1)},
	} {
		_, err := b.completeWith(c, store.JobSuccess, out)
		wantErr(t, "CompleteJob with bad outputs", err, store.ErrInvalid)
	}
	if j := b.jobsByKey(run.ID)["a"]; !j.Status.Leased() {
		t.Errorf("job %s after refused completions, want still leased", j.Status)
	}
	if _, err := b.completeWith(c, store.JobSuccess, map[string]string{"ok": "yes"}); err != nil {
		t.Fatal(err)
	}
}

// testOutputsInCondition: a dependant's if: reads needs.X.outputs.Y when it is decided.
func testOutputsInCondition(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(`
jobs:
  build:
    steps: [{run: "true"}]
  yes:
    needs: [build]
    if: needs.build.outputs.deploy == "true"
    steps: [{run: "true"}]
  no:
    needs: [build]
    if: needs.build.outputs.missing == "x"
    steps: [{run: "true"}]
`)
	c := b.claimOne()
	if _, err := b.completeWith(c, store.JobSuccess, map[string]string{"deploy": "true"}); err != nil {
		t.Fatal(err)
	}
	jobs := b.jobsByKey(run.ID)
	if got := jobs["yes"].Status; got != store.JobQueued {
		t.Errorf("yes: %s, want queued", got)
	}
	if got := jobs["no"]; got.Status != store.JobSkipped || !strings.Contains(got.Reason, "was false") {
		t.Errorf("no: %s (%s), want skipped by its if:", got.Status, got.Reason)
	}
}

// testRunEnvOverrides: the run's env (gantry submit --env) is laid over the file's when a
// job's if: reads env.X, at creation for a root job and when its needs end for the rest.
func testRunEnvOverrides(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.createRun(`
env: {DEPLOY: "no"}
jobs:
  root:
    env: {TARGET: "staging"}
    if: env.DEPLOY == "yes" && env.TARGET == "prod"
    steps: [{run: "true"}]
  after:
    needs: [root]
    env: {DEPLOY: "never"}
    if: env.DEPLOY == "yes"
    steps: [{run: "true"}]
`, store.CreateRunParams{Env: map[string]string{"DEPLOY": "yes", "TARGET": "prod"}})
	if got := b.jobsByKey(run.ID)["root"].Status; got != store.JobQueued {
		t.Fatalf("root: %s, want queued: the run's env overrides the file's in if:", got)
	}
	b.complete(b.claimOne(), store.JobSuccess)
	if got := b.jobsByKey(run.ID)["after"].Status; got != store.JobQueued {
		t.Errorf("after: %s, want queued: the run's env overrides the job's in if:", got)
	}
}

// testFailFast: when an instance of a matrix job with fail_fast fails for good, the
// others not started are cancelled at once and leased ones asked to cancel; without
// fail_fast, and for a failure that continues on error, the others go on.
func testFailFast(t *testing.T, h Harness) {
	for _, tc := range []struct {
		name, extra string
		cancels     bool
	}{
		{"on", "fail_fast: true", true},
		{"off", "fail_fast: false", false},
		{"continue on error", "fail_fast: true\n    continue_on_error: true", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, b := setup(t, h)
			run, _ := b.create(`
jobs:
  test:
    matrix: {n: [1, 2, 3]}
    ` + tc.extra + `
    steps: [{run: "true"}]
  other:
    needs: []
    steps: [{run: "true"}]
  after:
    needs: [test]
    if: always()
    steps: [{run: "true"}]
`)
			cs := b.claim(store.ClaimParams{Max: 2})
			var failing, running *store.Claim
			for _, c := range cs {
				switch c.Job.Key {
				case "test (n=1)":
					failing = c
				case "test (n=2)":
					running = c
				}
			}
			if failing == nil || running == nil {
				t.Fatalf("claimed %d jobs, want test (n=1) and test (n=2) first", len(cs))
			}
			b.complete(failing, store.JobFailed)
			jobs := b.jobsByKey(run.ID)
			third := jobs["test (n=3)"]
			if tc.cancels {
				if third.Status != store.JobCancelled {
					t.Errorf("test (n=3): %s, want cancelled by fail_fast", third.Status)
				}
				if !jobs["test (n=2)"].CancelRequested {
					t.Errorf("test (n=2) not asked to cancel")
				}
				if jobs["other"].Status.Terminal() {
					t.Errorf("other, not an instance, is %s", jobs["other"].Status)
				}
				b.complete(running, store.JobCancelled)
				if got := b.jobsByKey(run.ID)["after"].Status; got != store.JobQueued {
					t.Errorf("after: %s, want queued (if: always()) once every instance ended", got)
				}
				return
			}
			if third.Status != store.JobQueued || jobs["test (n=2)"].CancelRequested {
				t.Errorf("test (n=3) %s, test (n=2) cancel requested %v: want the others untouched", third.Status, jobs["test (n=2)"].CancelRequested)
			}
		})
	}
}
