package postgres

import (
	"context"
	"slices"
	"testing"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/testdb"
	"github.com/jackc/pgx/v5"
)

// TestChangeFeedInFlight changes jobs in transactions of its own connections, as another
// replica would, around a reader's read of the run: a change that commits after the read
// is listed from the cursor the read gave, however its transaction's id sorts against
// the changes the reader saw, also when it was made inside a savepoint.
func TestChangeFeedInFlight(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := testdb.Postgres(t)
	s, err := open(ctx, dsn, clock.Real{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	plan, err := pipeline.Compile([]byte("jobs:\n  a: {steps: [{run: 'true'}]}\n  b: {steps: [{run: 'true'}]}\n  c: {steps: [{run: 'true'}]}\n"), pipeline.Options{})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	run, jobs, _, err := s.CreateRun(ctx, store.CreateRunParams{Plan: plan, Definition: []byte("x")})
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	id := map[string]any{}
	for _, j := range jobs {
		id[j.Key] = j.ID
	}
	connect := func() pgx.Tx {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatalf("begin: %v", err)
		}
		return tx
	}
	exec := func(tx pgx.Tx, q string, args ...any) {
		t.Helper()
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	// older takes its transaction id first and changes a inside a savepoint; newer, which
	// began later and so has the larger id, changes b and commits before the reader looks.
	older, newer := connect(), connect()
	exec(older, `SELECT pg_current_xact_id()`)
	exec(newer, `UPDATE jobs SET reason = 'newer' WHERE id = $1`, id["b"])
	if err := newer.Commit(ctx); err != nil {
		t.Fatalf("commit newer: %v", err)
	}
	exec(older, `SAVEPOINT one`)
	exec(older, `UPDATE jobs SET reason = 'older' WHERE id = $1`, id["a"])
	exec(older, `RELEASE SAVEPOINT one`)

	r, err := s.GetRun(ctx, run.ID)
	if err != nil {
		t.Fatalf("GetRun: %v", err)
	}
	if err := older.Commit(ctx); err != nil {
		t.Fatalf("commit older: %v", err)
	}
	changed, err := s.ListJobsChanged(ctx, run.ID, r.JobSeq)
	if err != nil {
		t.Fatalf("ListJobsChanged: %v", err)
	}
	var keys []string
	for _, j := range changed {
		keys = append(keys, j.Key)
		if j.Key == "a" && j.Reason != "older" {
			t.Errorf("job a listed with reason %q, want the change committed after the read", j.Reason)
		}
	}
	if !slices.Contains(keys, "a") {
		t.Errorf("changed since the read = %v: misses a, changed by a transaction open during the read", keys)
	}

	// A change made after a read, in a transaction that began after it, is listed too.
	r, err = s.GetRun(ctx, run.ID)
	if err != nil {
		t.Fatalf("GetRun: %v", err)
	}
	tx := connect()
	exec(tx, `UPDATE jobs SET reason = 'last' WHERE id = $1`, id["c"])
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	changed, err = s.ListJobsChanged(ctx, run.ID, r.JobSeq)
	if err != nil {
		t.Fatalf("ListJobsChanged: %v", err)
	}
	if !slices.ContainsFunc(changed, func(j *store.Job) bool { return j.Key == "c" && j.Reason == "last" }) {
		t.Errorf("changed since the second read lacks c's change")
	}
}
