package postgres

import (
	"context"
	"errors"
	"strings"
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
	s, dsn, run, jobs := runOnPostgres(t, "jobs:\n  a: {steps: [{run: 'true'}]}\n  b: {steps: [{run: 'true'}]}\n")
	var b any
	for _, j := range jobs {
		if j.Key == "b" {
			b = j.ID
		}
	}
	connect := func() *pgx.Conn { return connectPG(t, dsn) }

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
	wantKeyShared(t, dsn, run.ID)
	within := func(what string, call func(context.Context) error) { t.Helper(); withinHeld(t, holder, what, call) }
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

// TestCancelLetsForeignKeyChecksBe: cancelling a run reads it locked for its update, and
// must not wait for a transaction that holds only a foreign key check's lock on it (one
// writing a job of the run): FOR UPDATE would, FOR NO KEY UPDATE does not.
func TestCancelLetsForeignKeyChecksBe(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, dsn, run, jobs := runOnPostgres(t, "jobs:\n  a: {steps: [{run: 'true'}]}\n")
	holder, err := connectPG(t, dsn).Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer func() { _ = holder.Rollback(context.Background()) }()
	// A new job of the run, written and not committed: its foreign key check holds the
	// run FOR KEY SHARE, and the cancel does not see the job itself.
	for _, q := range []string{
		`CREATE TEMP TABLE held ON COMMIT DROP AS SELECT * FROM jobs WHERE id = $1`,
		`UPDATE held SET id = gen_random_uuid(), key = 'held'`,
		`INSERT INTO jobs SELECT * FROM held`,
	} {
		args := []any{}
		if strings.Contains(q, "$1") {
			args = append(args, jobs[0].ID)
		}
		if _, err := holder.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	wantKeyShared(t, dsn, run.ID)
	withinHeld(t, holder, "cancel of the run", func(ctx context.Context) error { return s.CancelRun(ctx, run.ID) })
	if err := holder.Rollback(ctx); err != nil {
		t.Fatalf("roll back holder: %v", err)
	}
	r, err := s.GetRun(ctx, run.ID)
	if err != nil {
		t.Fatalf("GetRun: %v", err)
	}
	if r.Status != store.RunCancelled {
		t.Errorf("run is %s after its cancel, want cancelled", r.Status)
	}
}

// runOnPostgres opens a store on a database of its own and creates a run of definition in
// it, returning the store, the database and the run with its jobs.
func runOnPostgres(t *testing.T, definition string) (store.Store, string, *store.Run, []*store.Job) {
	t.Helper()
	dsn := testdb.Postgres(t)
	s, err := open(t.Context(), dsn, clock.Real{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	plan, err := pipeline.Compile([]byte(definition), pipeline.Options{})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	run, jobs, _, err := s.CreateRun(t.Context(), store.CreateRunParams{Plan: plan, Definition: []byte("x")})
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	return s, dsn, run, jobs
}

// connectPG opens a connection of its own to dsn, closed when the test ends.
func connectPG(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// wantKeyShared fails the test unless another transaction holds run so that a FOR UPDATE
// of it fails at once: the foreign key check's lock the test needs, without which it
// would prove nothing.
func wantKeyShared(t *testing.T, dsn string, run any) {
	t.Helper()
	probe, err := connectPG(t, dsn).Begin(t.Context())
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer func() { _ = probe.Rollback(context.Background()) }()
	_, err = probe.Exec(t.Context(), `SELECT id FROM runs WHERE id = $1 FOR UPDATE NOWAIT`, run)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
		t.Fatalf("FOR UPDATE NOWAIT of the run beside the holder: err = %v, want lock_not_available (55P03)", err)
	}
}

// withinHeld runs call, which must end while holder is open; past the deadline the holder
// rolls back, which frees a call that waited for it, and the test fails.
func withinHeld(t *testing.T, holder pgx.Tx, what string, call func(context.Context) error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call(t.Context()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(20 * time.Second):
		_ = holder.Rollback(context.Background())
		<-done
		t.Fatalf("%s waited for the holder's transaction, whose lock it must not wait for", what)
	}
}
