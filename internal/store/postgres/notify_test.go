package postgres

import (
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/testdb"
)

// TestQueuedWakesReplicas: a run whose jobs are queued on one replica wakes the claimers
// waiting on another, whether the notice goes with CreateRun's own statement or before
// the commit.
func TestQueuedWakesReplicas(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := testdb.Postgres(t)
	a, err := open(ctx, dsn, clock.Real{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = a.Close() })
	b, err := open(ctx, dsn, clock.Real{})
	if err != nil {
		t.Fatalf("open second store: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	for _, tc := range []struct{ name, yaml string }{
		{"queued at creation", "jobs:\n  a: {steps: [{run: 'true'}]}\n"},
		{"queued by an environment's gate", "jobs:\n  a: {environment: prod, steps: [{run: 'true'}]}\n"},
	} {
		plan, err := pipeline.Compile([]byte(tc.yaml), pipeline.Options{})
		if err != nil {
			t.Fatalf("%s: compile: %v", tc.name, err)
		}
		wake, stop := b.WaitForJobs()
		if _, _, _, err := a.CreateRun(ctx, store.CreateRunParams{Plan: plan, Definition: []byte(tc.yaml)}); err != nil {
			stop()
			t.Fatalf("%s: CreateRun: %v", tc.name, err)
		}
		select {
		case <-wake:
		case <-time.After(10 * time.Second):
			t.Errorf("%s: the other replica was not woken", tc.name)
		}
		stop()
	}
}
