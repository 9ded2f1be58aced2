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
