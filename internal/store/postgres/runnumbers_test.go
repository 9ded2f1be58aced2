package postgres

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// TestCreationsWaitingForARunNumberHoldUpNothingElse holds a project's run counter row in
// a transaction of its own, as another replica's run creation does until it commits, and
// creates runs of the project beside it: they wait for the row, and a claim and a
// completion must not wait with them. With every writer free to take a creation, each
// writer whose batch held one waited for the row, and claims and completions queued
// behind them; creations have one writer of their own.
func TestCreationsWaitingForARunNumberHoldUpNothingElse(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, dsn, run, _ := runOnPostgres(t, "jobs:\n  a: {steps: [{run: 'true'}]}\n")
	holder, err := connectPG(t, dsn).Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer func() { _ = holder.Rollback(context.Background()) }()
	if _, err := holder.Exec(ctx, `UPDATE run_numbers SET last = last WHERE project_id = $1`, run.ProjectID); err != nil {
		t.Fatalf("hold the run counter: %v", err)
	}

	plan, err := pipeline.Compile([]byte("jobs:\n  b: {steps: [{run: 'true'}]}\n"), pipeline.Options{})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	const creations = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		numbers []int
	)
	for range creations {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, _, _, err := s.CreateRun(ctx, store.CreateRunParams{Plan: plan, Definition: []byte("x")})
			if err != nil {
				t.Errorf("CreateRun: %v", err)
				return
			}
			mu.Lock()
			numbers = append(numbers, r.Number)
			mu.Unlock()
		}()
	}
	// Wait until a creation waits for the row: else the claim below proves nothing.
	probe := connectPG(t, dsn)
	for deadline := time.Now().Add(20 * time.Second); ; {
		var waiting int
		if err := probe.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatalf("count waiting backends: %v", err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no creation waits for the held run counter")
		}
		time.Sleep(10 * time.Millisecond)
	}

	var claim *store.Claim
	withinHeld(t, holder, "claim beside creations waiting for a run number", func(ctx context.Context) error {
		claims, err := s.Claim(ctx, store.ClaimParams{WorkerID: "w", Max: 1, LeaseTTL: time.Hour, TimeoutGrace: time.Minute, Start: true})
		if err == nil && len(claims) == 1 {
			claim = claims[0]
		}
		return err
	})
	if claim == nil || claim.Job.RunID != run.ID {
		t.Fatalf("the claim took %v, want the job of the run made before the counter was held", claim)
	}
	exit := 0
	withinHeld(t, holder, "completion beside creations waiting for a run number", func(ctx context.Context) error {
		_, err := s.CompleteJob(ctx, store.CompleteParams{
			LeaseRef: store.LeaseRef{JobID: claim.Job.ID, Token: claim.Lease.Token}, Status: store.JobSuccess, ExitCode: &exit,
		})
		return err
	})

	if err := holder.Rollback(ctx); err != nil {
		t.Fatalf("roll back holder: %v", err)
	}
	wg.Wait()
	slices.Sort(numbers)
	want := make([]int, creations)
	for i := range want {
		want[i] = run.Number + 1 + i
	}
	if !slices.Equal(numbers, want) {
		t.Errorf("run numbers %v, want %v: each once, no gaps", numbers, want)
	}
}
