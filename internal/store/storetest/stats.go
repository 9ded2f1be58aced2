package storetest

import (
	"reflect"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

var statsTests = []test{
	{"QueueStats", testQueueStats},
	{"QueueShapes", testQueueShapes},
	{"ConcurrencyHolders", testConcurrencyHolders},
}

func testQueueStats(t *testing.T, h Harness) {
	_, b := setup(t, h)
	empty, err := b.s.QueueStats(b.ctx)
	if err != nil {
		t.Fatalf("QueueStats: %v", err)
	}
	if len(empty.Queued) != 0 || !empty.OldestQueuedAt.IsZero() || empty.Running+empty.Assigned+empty.Retrying != 0 {
		t.Fatalf("stats of an empty store: %+v", empty)
	}
	first := b.clk.Now()
	b.create(`
name: s
jobs:
  build: {runs_on: [linux], matrix: {n: [1, 2, 3]}, steps: [{run: "true"}]}
  gpu: {runs_on: [linux, gpu], priority: high, steps: [{run: "true"}]}
  any: {steps: [{run: "true"}]}
  later: {needs: [any], steps: [{run: "true"}]}
`)
	b.clk.Advance(time.Minute)
	b.create(`
name: flaky
jobs:
  flaky: {retry: {max_attempts: 2, on: [failure]}, priority: high, runs_on: [other], steps: [{run: "true"}]}
`)
	// Lease one job of each kind: one stays assigned, one runs, one fails into retrying.
	assigned := b.claim(store.ClaimParams{Labels: []string{"linux", "gpu"}, Max: 1})
	running := b.claim(store.ClaimParams{Labels: []string{"linux"}, Max: 1})
	if err := b.s.StartJob(b.ctx, ref(running[0])); err != nil {
		t.Fatalf("StartJob: %v", err)
	}
	flaky := b.claim(store.ClaimParams{Labels: []string{"other"}, Max: 1})
	b.complete(flaky[0], store.JobFailed)
	if assigned[0].Job.Name != "gpu" || running[0].Job.Name != "build" {
		t.Fatalf("claimed %s and %s, want gpu then a build", assigned[0].Job.Key, running[0].Job.Key)
	}

	got, err := b.s.QueueStats(b.ctx)
	if err != nil {
		t.Fatalf("QueueStats: %v", err)
	}
	want := []store.QueueDepth{
		{Priority: pipeline.PriorityNormal, Jobs: 1},
		{Priority: pipeline.PriorityNormal, Labels: []string{"linux"}, Jobs: 2},
	}
	if !reflect.DeepEqual(got.Queued, want) {
		t.Errorf("Queued = %+v, want %+v", got.Queued, want)
	}
	if got.Assigned != 1 || got.Running != 1 || got.Retrying != 1 {
		t.Errorf("assigned %d, running %d, retrying %d; want 1 each", got.Assigned, got.Running, got.Retrying)
	}
	wantLeased := []store.QueueDepth{{Labels: []string{"gpu", "linux"}, Jobs: 1}, {Labels: []string{"linux"}, Jobs: 1}}
	if !reflect.DeepEqual(got.Leased, wantLeased) {
		t.Errorf("Leased = %+v, want %+v", got.Leased, wantLeased)
	}
	wantTime(t, "OldestQueuedAt", got.OldestQueuedAt, first)
}

// testQueueShapes: QueueStats counts the queued jobs by label set and the resources they
// ask for, over every lane, and how many of each its project's limit holds back: what a
// worker must offer to take them, for the scaling answer.
func testQueueShapes(t *testing.T, h Harness) {
	_, b := setup(t, h)
	const gi = int64(1) << 30
	// "big" may run one job at a time: its high-priority job comes first in claim order,
	// so its three normal ones are held.
	b.createRun(`
name: big
jobs:
  huge: {runs_on: [linux], resources: {cpu: 4, memory: 8Gi}, matrix: {n: [1, 2, 3]}, steps: [{run: "true"}]}
  urgent: {runs_on: [linux], priority: high, resources: {cpu: 4, memory: 8Gi}, steps: [{run: "true"}]}
`, store.CreateRunParams{Project: "big"})
	b.setQuota("big", 1, 1)
	b.createRun(`
name: free
jobs:
  small: {runs_on: [linux], resources: {memory: 1Gi}, steps: [{run: "true"}]}
  plain: {steps: [{run: "true"}]}
  later: {needs: [plain], resources: {cpu: 64}, steps: [{run: "true"}]}
`, store.CreateRunParams{Project: "free"})
	shapes := func() []store.QueueShape {
		t.Helper()
		q, err := b.s.QueueStats(b.ctx)
		if err != nil {
			t.Fatalf("QueueStats: %v", err)
		}
		return q.Shapes
	}
	// Pending jobs (later) are not queued.
	want := []store.QueueShape{
		{Jobs: 1},
		{Labels: []string{"linux"}, Memory: gi, Jobs: 1},
		{Labels: []string{"linux"}, MilliCPU: 4000, Memory: 8 * gi, Jobs: 4, Held: 3},
	}
	if got := shapes(); !reflect.DeepEqual(got, want) {
		t.Errorf("Shapes = %+v, want %+v", got, want)
	}
	// A worker of 2 CPUs takes none of big's jobs, only small; one of 4 CPUs and 8Gi
	// takes urgent, and big stays at its limit.
	if cs := b.claim(store.ClaimParams{Labels: []string{"linux"}, FreeMilliCPU: 2000, FreeMemory: 16 * gi, Max: 4}); len(cs) != 2 {
		t.Fatalf("a 2-CPU worker claimed %d jobs, want small and plain", len(cs))
	}
	if cs := b.claim(store.ClaimParams{Labels: []string{"linux"}, FreeMilliCPU: 4000, FreeMemory: 8 * gi, Max: 4}); len(cs) != 1 || cs[0].Job.Name != "urgent" {
		t.Fatalf("a 4-CPU worker claimed %d jobs, want urgent alone", len(cs))
	}
	want = []store.QueueShape{{Labels: []string{"linux"}, MilliCPU: 4000, Memory: 8 * gi, Jobs: 3, Held: 3}}
	if got := shapes(); !reflect.DeepEqual(got, want) {
		t.Errorf("Shapes after the claims = %+v, want %+v", got, want)
	}
}
