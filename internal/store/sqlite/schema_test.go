package sqlite

import (
	"bytes"
	"compress/gzip"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/store/sqlstore"
)

var updateSchema = flag.Bool("update-schema", false, "rewrite schema.sql from the migrations")

// TestSchemaSnapshot migrates an empty database one migration at a time, as a database
// made before the latest migration is, and holds schema.sql, which Open gives an empty
// database instead, to what that makes. After adding a migration:
//
//	go test ./internal/store/sqlite -run TestSchemaSnapshot -args -update-schema
func TestSchemaSnapshot(t *testing.T) {
	t.Parallel()
	db := rawDB(t, filepath.Join(t.TempDir(), "migrated.db"))
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlstore.Migrate(t.Context(), db, &sqlstore.Dialect{Name: "sqlite"}, sub); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	got := dumpSchema(t, db)
	if *updateSchema {
		if err := os.WriteFile("schema.sql", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("schema.db.gz", makeSchemaFile(t, got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != schema {
		t.Fatalf("schema.sql is not what the migrations make; rerun with -update-schema. The migrations make:\n%s", got)
	}

	// A new database, made from schema.db.gz where Open can place a file, and by
	// running schema.sql where there already is one, empty, holds what the migrations
	// made: the same objects, every migration recorded so that Open migrates nothing
	// more, and no other rows.
	for _, how := range []string{"schema.db.gz", "schema.sql"} {
		t.Run(how, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "fresh.db")
			if how == "schema.sql" {
				if err := os.WriteFile(path, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			fresh, err := Open(t.Context(), path, Options{})
			if err != nil {
				t.Fatalf("open an empty database: %v", err)
			}
			if err := fresh.Close(); err != nil {
				t.Fatal(err)
			}
			made := rawDB(t, path)
			checkFresh(t, made, db)
			if files, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*.new-*")); len(files) > 0 {
				t.Errorf("copies left beside the database: %v", files)
			}
		})
	}

	// The embedded file itself, as TestSchemaSnapshot would write it now.
	placed := filepath.Join(t.TempDir(), "placed.db")
	if err := placeSchemaFile(placed, "OFF"); err != nil {
		t.Fatal(err)
	}
	checkFresh(t, rawDB(t, placed), db)
	var check string
	if err := rawDB(t, placed).QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Errorf("schema.db.gz: integrity check %q, %v", check, err)
	}
}

// checkFresh holds a new database, made, to what the migrations made of one, migrated.
func checkFresh(t *testing.T, made, migrated *sql.DB) {
	t.Helper()
	if a, b := objects(t, migrated), objects(t, made); !slices.Equal(a, b) {
		t.Errorf("the new database holds\n%s\nthe migrations made\n%s\n(after a migration: rerun with -update-schema)", strings.Join(b, "\n"), strings.Join(a, "\n"))
	}
	if got := dumpSchema(t, made); got != schema {
		t.Errorf("the new database dumps as\n%s", got)
	}
	tables := strs(t, made, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT IN ('schema_migrations', 'sqlite_sequence', 'sqlite_stat1')")
	for _, table := range tables {
		var n int
		if err := made.QueryRow(`SELECT count(*) FROM "` + table + `"`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("a new database's table %s holds %d rows", table, n)
		}
	}
}

// makeSchemaFile runs script on a new database file and returns the file, gzipped.
func makeSchemaFile(t *testing.T, script string) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "schema.db")
	db := rawDB(t, path)
	if _, err := db.Exec("BEGIN; " + script + "; COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestOpenKeepsExisting opens a database that already holds a table of its own: it is
// not empty, so Open migrates it as it always did rather than running the script, and
// the migrations' error about it is not hidden.
func TestOpenKeepsExisting(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "gantry.db")
	db := rawDB(t, path)
	if _, err := db.Exec("CREATE TABLE jobs (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := Open(t.Context(), path, Options{}); err == nil {
		_ = st.Close()
		t.Fatal("a database with a jobs table of another shape was opened")
	}
}

func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(path, "OFF", false))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// dumpSchema writes db's schema as a script that makes it: every object in the order
// SQLite holds them (a table before its indexes and triggers), then the migrations
// recorded.
func dumpSchema(t *testing.T, db *sql.DB) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("-- Generated by TestSchemaSnapshot from migrations/; do not edit.\n")
	rows, err := db.Query("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		b.WriteString(s + ";\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	mrows, err := db.Query("SELECT version, name FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	defer mrows.Close()
	for mrows.Next() {
		var v int64
		var name string
		if err := mrows.Scan(&v, &name); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (%d, '%s', 0);\n", v, strings.ReplaceAll(name, "'", "''"))
	}
	if err := mrows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// objects lists db's schema objects, internal ones too, by name.
func objects(t *testing.T, db *sql.DB) []string {
	t.Helper()
	return strs(t, db, "SELECT type || ' ' || name || ' ON ' || tbl_name || ': ' || coalesce(sql, '') FROM sqlite_master ORDER BY name")
}

// strs returns the one text column of query's rows.
func strs(t *testing.T, db *sql.DB, query string) []string {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPlaceSchemaFileLeavesLeftovers: a write-ahead log or journal left without its
// database would be recovered into a copy of the schema's file, so none is placed; nor
// over a file that is there, even an empty one.
func TestPlaceSchemaFileLeavesLeftovers(t *testing.T) {
	t.Parallel()
	for _, left := range []string{"-wal", "-journal", ""} {
		dir := t.TempDir()
		path := filepath.Join(dir, "gantry.db")
		if err := os.WriteFile(path+left, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := placeSchemaFile(path, "OFF"); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		switch {
		case left != "" && !errors.Is(err, os.ErrNotExist):
			t.Errorf("with %s left, a database file was placed (%v)", left, err)
		case left == "" && (err != nil || st.Size() != 0):
			t.Errorf("an empty database file was replaced: %v, %v", st, err)
		}
		if files, _ := filepath.Glob(filepath.Join(dir, "*.new-*")); len(files) > 0 {
			t.Errorf("copies left beside the database: %v", files)
		}
	}
}
