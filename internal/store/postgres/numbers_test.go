package postgres

import (
	"database/sql"
	"io/fs"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlstore"
	"github.com/gantry-ci/gantry/internal/store/storetest"
	"github.com/gantry-ci/gantry/internal/testdb"
)

// TestRunNumbersMigration migrates a database that holds runs made before runs were
// numbered: each project's runs are numbered by creation order, and the project's next
// run takes the number after its last.
func TestRunNumbersMigration(t *testing.T) {
	t.Parallel()
	dsn := testdb.Postgres(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sub := migrationsFS(t)
	before := storetest.MigrationsBefore(t, sub, "0035")
	d := dialect
	if err := sqlstore.Migrate(t.Context(), db, &d, before); err != nil {
		t.Fatalf("migrate to 0034: %v", err)
	}
	web, api := store.NewID(), store.NewID()
	// Ids and creation times disagree on purpose: creation time decides.
	runs := []struct {
		project any
		created int64
		want    int
	}{{web, 300, 3}, {web, 100, 1}, {api, 200, 1}, {web, 200, 2}}
	ids := make([]any, len(runs))
	if _, err := db.Exec(`INSERT INTO projects (id, name, created_at) VALUES ($1, 'web', 0), ($2, 'api', 0)`, web, api); err != nil {
		t.Fatal(err)
	}
	for i, r := range runs {
		ids[i] = store.NewID()
		if _, err := db.Exec(`INSERT INTO runs (id, project_id, name, status, trigger, jobs_total, created_at)
			VALUES ($1, $2, 'old', 'success', '{}', 0, $3)`, ids[i], r.project, r.created); err != nil {
			t.Fatal(err)
		}
	}
	if err := sqlstore.Migrate(t.Context(), db, &d, sub); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	for i, r := range runs {
		var n int
		if err := db.QueryRow(`SELECT number FROM runs WHERE id = $1`, ids[i]).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != r.want {
			t.Errorf("run created at %d: number %d, want %d", r.created, n, r.want)
		}
	}
	st, err := Open(t.Context(), dsn, Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer st.Close()
	plan, err := pipeline.Compile([]byte("jobs: { a: { steps: [ { run: 'true' } ] } }"), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for project, want := range map[string]int{"web": 4, "api": 2, "new": 1} {
		run, _, _, err := st.CreateRun(t.Context(), store.CreateRunParams{Project: project, Plan: plan})
		if err != nil {
			t.Fatalf("CreateRun: %v", err)
		}
		if run.Number != want {
			t.Errorf("%s's next run: number %d, want %d", project, run.Number, want)
		}
	}
}

// migrationsFS is the store's migrations.
func migrationsFS(t *testing.T) fs.FS {
	t.Helper()
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	return sub
}
