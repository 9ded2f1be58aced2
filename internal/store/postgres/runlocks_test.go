package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/testdb"
)

// TestRunLocksLetForeignKeyChecksBe holds, in a transaction of its own connection, the
// lock that the foreign key check of jobs.run_id takes on a run (FOR KEY SHARE, taken
// when a transaction updates a job row it has already written, as a completion batch does
// to a dependent: its needs_left, then its status). The claim that starts the run and the
// completion that counts its job must not wait for that transaction: the UPDATEs of runs
// lock them in id order first, and a lock stronger than the UPDATE's own (FOR UPDATE)
// waits for every such check, so that two completion batches that had each made one on
// the same run deadlocked (59409f6).
func TestRunLocksLetForeignKeyChecksBe(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := testdb.Postgres(t)
	s, err := open(ctx, dsn, clock.Real{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	plan, err := pipeline.Compile([]byte("jobs:\n  a: {steps: [{run: 'true'}]}\n  b: {steps: [{run: 'true'}]}\n"), pipeline.Options{})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	run, jobs, _, err := s.CreateRun(ctx, store.CreateRunParams{Plan: plan, Definition: []byte("x")})
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	var b any
	for _, j := range jobs {
		if j.Key == "b" {
			b = j.ID
		}
	}
	connect := func() *pgx.Conn {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		return conn
	}

	holder, err := connect().Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer func() { _ = holder.Rollback(context.Background()) }()
	for range 2 {
		if _, err := holder.Exec(ctx, `UPDATE jobs SET reason = 'held' WHERE id = $1`, b); err != nil {
			t.Fatalf("update job b: %v", err)
		}
	}
	// The holder's second update ran the foreign key check: a FOR UPDATE of the run now
	// fails at once. Were the check gone, this test would prove nothing.
	probe, err := connect().Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	_, err = probe.Exec(ctx, `SELECT id FROM runs WHERE id = $1 FOR UPDATE NOWAIT`, run.ID)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
		t.Fatalf("FOR UPDATE NOWAIT of the run beside the holder: err = %v, want lock_not_available (55P03)", err)
	}
	_ = probe.Rollback(ctx)

	// Each store call must end while the holder is open; past the deadline the holder
	// rolls back, which frees a call that waited for it, and the test fails.
	within := func(what string, call func(context.Context) error) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- call(ctx) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		case <-time.After(20 * time.Second):
			_ = holder.Rollback(context.Background())
			<-done
			t.Fatalf("%s waited for a transaction that holds only a foreign key check's lock on the run", what)
		}
	}
	var claim *store.Claim
	within("claim that starts the run", func(ctx context.Context) error {
		claims, err := s.Claim(ctx, store.ClaimParams{WorkerID: "w", LeaseTTL: time.Hour, TimeoutGrace: time.Minute, Start: true})
		if err == nil && len(claims) != 1 {
			err = errors.New("claimed no job")
		}
		if err == nil {
			claim = claims[0]
		}
		return err
	})
	exit := 0
	within("completion that counts the run's job", func(ctx context.Context) error {
		_, err := s.CompleteJob(ctx, store.CompleteParams{
			LeaseRef: store.LeaseRef{JobID: claim.Job.ID, Token: claim.Lease.Token}, Status: store.JobSuccess, ExitCode: &exit,
		})
		return err
	})
	if err := holder.Rollback(ctx); err != nil {
		t.Fatalf("roll back holder: %v", err)
	}
	r, err := s.GetRun(ctx, run.ID)
	if err != nil {
		t.Fatalf("GetRun: %v", err)
	}
	if r.Status != store.RunRunning || r.JobsFinished != 1 {
		t.Errorf("run is %s with %d jobs finished, want running with 1", r.Status, r.JobsFinished)
	}
}
