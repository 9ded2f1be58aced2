package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
)

var dagTests = []test{
	{"Diamond", testDAGDiamond},
	{"DiamondRace", testDAGDiamondRace},
	{"MatrixFanIn", testDAGMatrixFanIn},
	{"Outcomes", testDAGOutcomes},
	{"RootConditions", testDAGRootConditions},
	{"RootConditionReplayAndRetry", testDAGRootConditionReplayAndRetry},
}

func testDAGDiamond(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(diamondYAML)
	cs := byKey(b.claim(store.ClaimParams{Max: 8}))
	if len(cs) != 2 || cs["a"] == nil || cs["b"] == nil {
		t.Fatalf("first claim took %d jobs, want a and b", len(cs))
	}
	jobs := b.jobsByKey(run.ID)

	b.clk.Advance(time.Second)
	b.complete(cs["a"], store.JobSuccess)
	b.wantJobStatus(jobs["c"].ID, store.JobPending)
	r := b.getRun(run.ID)
	if r.Status != store.RunRunning || r.JobsFinished != 1 {
		t.Errorf("run after a: %s with %d finished, want running with 1", r.Status, r.JobsFinished)
	}
	b.expectNoClaim(store.ClaimParams{Max: 8})

	b.clk.Advance(time.Second)
	b.complete(cs["b"], store.JobSuccess)
	c := b.wantJobStatus(jobs["c"].ID, store.JobQueued)
	wantTime(t, "c QueuedAt", c.QueuedAt, b.clk.Now())
	b.wantJobStatus(jobs["d"].ID, store.JobPending)

	cc := b.claimOne()
	if cc.Job.Key != "c" {
		t.Fatalf("claimed %q, want c", cc.Job.Key)
	}
	b.expectNoClaim(store.ClaimParams{Max: 8})
	b.clk.Advance(time.Second)
	done := b.complete(cc, store.JobSuccess)
	if done.Status != store.JobSuccess {
		t.Errorf("CompleteJob returned status %s, want success", done.Status)
	}
	wantTime(t, "c FinishedAt", done.FinishedAt, b.clk.Now())
	dc := b.claimOne()
	if dc.Job.Key != "d" {
		t.Fatalf("claimed %q, want d", dc.Job.Key)
	}
	if r := b.getRun(run.ID); r.Status != store.RunRunning || r.JobsFinished != 3 || !r.FinishedAt.IsZero() {
		t.Errorf("run before its last job: %s, %d finished, FinishedAt %v; want running, 3, unset", r.Status, r.JobsFinished, r.FinishedAt)
	}
	b.clk.Advance(time.Second)
	b.complete(dc, store.JobSuccess)
	b.wantRunDone(run.ID, store.RunSuccess)
}

const raceDiamondYAML = `
name: race
jobs:
  a:
    steps: [ { run: "true" } ]
  b:
    steps: [ { run: "true" } ]
  c:
    needs: [a, b]
    steps: [ { run: "true" } ]
`

// testDAGDiamondRace completes both needs of a job at the same moment from two goroutines,
// many times: the job must be queued exactly once every time.
func testDAGDiamondRace(t *testing.T, h Harness) {
	s, b := setup(t, h)
	for i := range 50 {
		run, _ := b.create(raceDiamondYAML)
		cs := b.claim(store.ClaimParams{Max: 8})
		if len(cs) != 2 {
			t.Fatalf("iteration %d: claimed %d jobs, want a and b", i, len(cs))
		}
		var errs [2]error
		start := make(chan struct{})
		var wg sync.WaitGroup
		for k, c := range cs {
			wg.Go(func() {
				<-start
				_, errs[k] = s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: ref(c), Status: store.JobSuccess, ExitCode: intPtr(0)})
			})
		}
		close(start)
		wg.Wait()
		for k, err := range errs {
			if err != nil {
				t.Fatalf("iteration %d: CompleteJob(%s): %v", i, cs[k].Job.Key, err)
			}
		}
		b.wantJobStatus(b.jobsByKey(run.ID)["c"].ID, store.JobQueued)
		got := b.claim(store.ClaimParams{Max: 8})
		if len(got) != 1 || got[0].Job.Key != "c" {
			t.Fatalf("iteration %d: claimed %d jobs after a and b, want c once", i, len(got))
		}
		b.complete(got[0], store.JobSuccess)
		b.wantRunDone(run.ID, store.RunSuccess)
	}
}

func testDAGMatrixFanIn(t *testing.T, h Harness) {
	const yaml = `
name: fan-in
jobs:
  shard:
    matrix: { n: [1, 2, 3, 4, 5, 6] }
    steps: [ { run: "true" } ]
  report:
    needs: [shard]
    steps: [ { run: "true" } ]
`
	for _, concurrent := range []bool{false, true} {
		name := "one by one"
		if concurrent {
			name = "concurrently"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, b := setup(t, h)
			run, _ := b.create(yaml)
			report := b.jobsByKey(run.ID)["report"]
			if len(report.Spec.Needs) != 6 {
				t.Fatalf("report needs %v, want the 6 shards", report.Spec.Needs)
			}
			cs := b.claimAll()
			if len(cs) != 6 {
				t.Fatalf("claimed %d jobs, want the 6 shards", len(cs))
			}
			if !concurrent {
				for i, c := range cs {
					b.complete(c, store.JobSuccess)
					if i < len(cs)-1 {
						b.wantJobStatus(report.ID, store.JobPending)
					}
				}
			} else {
				start := make(chan struct{})
				var wg sync.WaitGroup
				for _, c := range cs {
					wg.Go(func() {
						<-start
						if _, err := s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: ref(c), Status: store.JobSuccess}); err != nil {
							t.Errorf("CompleteJob(%s): %v", c.Job.Key, err)
						}
					})
				}
				close(start)
				wg.Wait()
			}
			b.wantJobStatus(report.ID, store.JobQueued)
			got := b.claim(store.ClaimParams{Max: 8})
			if len(got) != 1 || got[0].Job.ID != report.ID {
				t.Fatalf("claimed %d jobs after the shards, want report once", len(got))
			}
			b.complete(got[0], store.JobSuccess)
			b.wantRunDone(run.ID, store.RunSuccess)
		})
	}
}

// testDAGOutcomes runs pipelines to the end, completing each job as the row says (success
// when it does not), and checks where every job and the run end up.
func testDAGOutcomes(t *testing.T, h Harness) {
	const (
		success   = store.JobSuccess
		failed    = store.JobFailed
		skipped   = store.JobSkipped
		runOK     = store.RunSuccess
		runFailed = store.RunFailed
	)
	const chain = `
name: chain
jobs:
  a:
    steps: [ { run: "true" } ]
  b:
    needs: [a]
    steps: [ { run: "true" } ]
  c:
    needs: [b]
    steps: [ { run: "true" } ]
`
	const onFailure = `
name: on-failure
jobs:
  a:
    steps: [ { run: "true" } ]
  n:
    needs: [a]
    if: failure()
    steps: [ { run: "true" } ]
`
	const deploy = `
name: deploy
jobs:
  build:
    steps: [ { run: "true" } ]
  deploy:
    needs: [build]
    if: branch == "main"
    steps: [ { run: "true" } ]
  announce:
    needs: [deploy]
    steps: [ { run: "true" } ]
`
	const needsResult = `
name: needs-result
jobs:
  a:
    steps: [ { run: "true" } ]
  r:
    needs: [a]
    if: always() && needs.a.result == "failed"
    steps: [ { run: "true" } ]
`
	tests := []struct {
		name     string
		yaml     string
		trigger  store.Trigger
		outcomes map[string]store.JobStatus
		want     map[string]store.JobStatus
		run      store.RunStatus
	}{
		{"all succeed", diamondYAML, store.Trigger{}, nil,
			map[string]store.JobStatus{"a": success, "b": success, "c": success, "d": success}, runOK},
		{"failure skips downstream", chain, store.Trigger{}, map[string]store.JobStatus{"a": failed},
			map[string]store.JobStatus{"a": failed, "b": skipped, "c": skipped}, runFailed},
		{"failure in the middle", chain, store.Trigger{}, map[string]store.JobStatus{"b": failed},
			map[string]store.JobStatus{"a": success, "b": failed, "c": skipped}, runFailed},
		{"one need of a diamond fails", diamondYAML, store.Trigger{}, map[string]store.JobStatus{"b": failed},
			map[string]store.JobStatus{"a": success, "b": failed, "c": skipped, "d": skipped}, runFailed},
		{"always() runs after a failure", `
name: always
jobs:
  a:
    steps: [ { run: "true" } ]
  b:
    needs: [a]
    steps: [ { run: "true" } ]
  cleanup:
    needs: [b]
    if: always()
    steps: [ { run: "true" } ]
`, store.Trigger{}, map[string]store.JobStatus{"a": failed},
			map[string]store.JobStatus{"a": failed, "b": skipped, "cleanup": success}, runFailed},
		{"failure() runs after a failure", onFailure, store.Trigger{}, map[string]store.JobStatus{"a": failed},
			map[string]store.JobStatus{"a": failed, "n": success}, runFailed},
		{"failure() skipped when all succeed", onFailure, store.Trigger{}, nil,
			map[string]store.JobStatus{"a": success, "n": skipped}, runOK},
		{"failure() sees a failure two jobs up", `
name: deep
jobs:
  a:
    steps: [ { run: "true" } ]
  b:
    needs: [a]
    steps: [ { run: "true" } ]
  n:
    needs: [b]
    if: failure()
    steps: [ { run: "true" } ]
`, store.Trigger{}, map[string]store.JobStatus{"a": failed},
			map[string]store.JobStatus{"a": failed, "b": skipped, "n": success}, runFailed},
		{"continue_on_error counts as success", `
name: lenient
jobs:
  flaky:
    continue_on_error: true
    steps: [ { run: "false" } ]
  next:
    needs: [flaky]
    steps: [ { run: "true" } ]
  alarm:
    needs: [flaky]
    if: failure()
    steps: [ { run: "true" } ]
`, store.Trigger{}, map[string]store.JobStatus{"flaky": failed},
			map[string]store.JobStatus{"flaky": failed, "next": success, "alarm": skipped}, runOK},
		{"condition on the branch holds", deploy, store.Trigger{Branch: "main"}, nil,
			map[string]store.JobStatus{"build": success, "deploy": success, "announce": success}, runOK},
		{"condition on the branch fails", deploy, store.Trigger{Branch: "dev"}, nil,
			map[string]store.JobStatus{"build": success, "deploy": skipped, "announce": skipped}, runOK},
		{"needs result failed", needsResult, store.Trigger{}, map[string]store.JobStatus{"a": failed},
			map[string]store.JobStatus{"a": failed, "r": success}, runFailed},
		{"needs result success", needsResult, store.Trigger{}, nil,
			map[string]store.JobStatus{"a": success, "r": skipped}, runOK},
		{"one matrix instance fails", `
name: matrix
jobs:
  shard:
    matrix: { n: [1, 2, 3] }
    steps: [ { run: "true" } ]
  report:
    needs: [shard]
    steps: [ { run: "true" } ]
`, store.Trigger{}, map[string]store.JobStatus{"shard (n=2)": failed},
			map[string]store.JobStatus{"shard (n=1)": success, "shard (n=2)": failed, "shard (n=3)": success, "report": skipped}, runFailed},
	}
	// The rows share a database: each runs its pipeline to the end before the next.
	_, shared := setup(t, h)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := shared.with(t)
			run, _ := b.createRun(tc.yaml, store.CreateRunParams{Trigger: tc.trigger})
			b.clk.Advance(time.Second)
			got := b.drive(run.ID, tc.outcomes)
			if len(got) != len(tc.want) {
				t.Errorf("run has %d jobs, the row expects %d", len(got), len(tc.want))
			}
			for key, want := range tc.want {
				j := got[key]
				if j == nil {
					t.Errorf("no job %q", key)
					continue
				}
				if j.Status != want {
					t.Errorf("job %q ended %s, want %s", key, j.Status, want)
				}
				wantTime(t, "FinishedAt of "+key, j.FinishedAt, b.clk.Now())
			}
			b.wantRunDone(run.ID, tc.run)
		})
	}
}
