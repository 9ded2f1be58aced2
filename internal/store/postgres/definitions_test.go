package postgres

import (
	"database/sql"
	"testing"

	"github.com/google/uuid"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlstore"
	"github.com/gantry-ci/gantry/internal/store/storetest"
	"github.com/gantry-ci/gantry/internal/testdb"
)

// TestRunDefinitionsMigration migrates a database whose runs keep their definitions in
// their own rows: each definition, and a run's lack of one, moves to run_definitions,
// and the runs read as they did.
func TestRunDefinitionsMigration(t *testing.T) {
	t.Parallel()
	dsn := testdb.Postgres(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sub := migrationsFS(t)
	d := dialect
	if err := sqlstore.Migrate(t.Context(), db, &d, storetest.MigrationsBefore(t, sub, "0043")); err != nil {
		t.Fatalf("migrate to 0042: %v", err)
	}
	project := store.NewID()
	if _, err := db.Exec(`INSERT INTO projects (id, name, created_at) VALUES ($1, 'web', 0)`, project); err != nil {
		t.Fatal(err)
	}
	defs := map[string][]byte{"with": []byte("jobs: { a: { steps: [ { run: 'true' } ] } }"), "without": nil}
	ids := map[string]uuid.UUID{}
	number := 0
	for name, def := range defs {
		ids[name] = store.NewID()
		number++
		if _, err := db.Exec(`INSERT INTO runs (id, project_id, name, status, trigger, definition, env, jobs_total, created_at, number)
			VALUES ($1, $2, $3, 'success', '{}', $4, '{"A":"1"}', 0, 1, $5)`, ids[name], project, name, def, number); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`INSERT INTO run_numbers (project_id, last) VALUES ($1, $2)`, project, number); err != nil {
		t.Fatal(err)
	}
	if err := sqlstore.Migrate(t.Context(), db, &d, sub); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	st, err := Open(t.Context(), dsn, Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer st.Close()
	storetest.DefinitionsMoved(t, st, ids, defs)
}
