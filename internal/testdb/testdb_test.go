package testdb_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantry-ci/gantry/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// waitTimeout bounds every wait for the other parallel test.
const waitTimeout = 30 * time.Second

// TestPostgres runs two parallel tests that each get a database, checks while both are
// alive that neither sees the other's tables, and after both finished that their
// databases are gone.
func TestPostgres(t *testing.T) {
	if p := flag.Lookup("test.parallel").Value.(flag.Getter).Get().(int); p < 2 {
		t.Skipf("the two tests must run at the same time; -parallel is %d", p)
	}
	// The observer's own database lives until the end of TestPostgres, after the
	// subtests' are dropped; pg_database is shared, so it sees theirs too.
	observer := connect(t, testdb.Postgres(t))

	names := []string{"a", "b"}
	ready := map[string]*signal{"a": newSignal(), "b": newSignal()}
	checked := map[string]*signal{"a": newSignal(), "b": newSignal()}
	var mu sync.Mutex
	dbs := map[string]string{} // subtest -> database name

	t.Run("group", func(t *testing.T) {
		for _, name := range names {
			other := names[0]
			if other == name {
				other = names[1]
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				// Never leave the other test waiting, even when this one fails early.
				defer ready[name].fire()
				defer checked[name].fire()

				u := testdb.Postgres(t)
				conn := connect(t, u)
				mu.Lock()
				dbs[name] = currentDatabase(t, conn)
				mu.Unlock()

				if got := tables(t, conn); len(got) != 0 {
					t.Fatalf("new database has tables %v, want none", got)
				}
				// The same table name in both databases: neither create may conflict.
				exec(t, conn, "CREATE TABLE jobs (owner text NOT NULL)")
				exec(t, conn, "INSERT INTO jobs (owner) VALUES ($1)", name)
				exec(t, conn, "CREATE TABLE only_"+name+" (id int)")

				ready[name].fire()
				ready[other].wait(t)

				if got, want := tables(t, conn), []string{"jobs", "only_" + name}; !slices.Equal(got, want) {
					t.Errorf("tables = %v, want %v (none of %s's)", got, want, other)
				}
				var owners []string
				rows, err := conn.Query(context.Background(), "SELECT owner FROM jobs ORDER BY owner")
				if err != nil {
					t.Fatalf("select jobs: %v", err)
				}
				owners, err = pgx.CollectRows(rows, pgx.RowTo[string])
				if err != nil {
					t.Fatalf("select jobs: %v", err)
				}
				if !slices.Equal(owners, []string{name}) {
					t.Errorf("jobs owners = %v, want [%s]", owners, name)
				}

				// Keep this database until the other test has looked at its own.
				checked[name].fire()
				checked[other].wait(t)
				// The connection is left open on purpose: the drop must end it.
			})
		}
	})

	if dbs["a"] == "" || dbs["b"] == "" || dbs["a"] == dbs["b"] {
		t.Fatalf("databases = %v, want two distinct names", dbs)
	}
	for _, db := range dbs {
		if !strings.HasPrefix(db, "gantry_test_") {
			t.Errorf("database %q lacks the gantry_test_ prefix", db)
		}
		var exists bool
		err := observer.QueryRow(context.Background(),
			"SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", db).Scan(&exists)
		if err != nil {
			t.Fatalf("look for database %s: %v", db, err)
		}
		if exists {
			t.Errorf("database %s still exists after its test finished", db)
		}
	}
}

func TestSQLitePath(t *testing.T) {
	t.Parallel()
	p := testdb.SQLitePath(t)
	if filepath.Base(p) != "gantry.db" {
		t.Errorf("SQLitePath = %s, want a file named gantry.db", p)
	}
	if fi, err := os.Stat(filepath.Dir(p)); err != nil || !fi.IsDir() {
		t.Errorf("directory of %s: %v, want an existing directory", p, err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("stat %s: %v, want it not to exist yet", p, err)
	}
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func exec(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func currentDatabase(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var name string
	if err := conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&name); err != nil {
		t.Fatalf("current_database: %v", err)
	}
	return name
}

// tables lists the tables in the public schema, sorted.
func tables(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(),
		"SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1")
	if err != nil {
		t.Fatalf("list tables: %v", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("list tables: %v", err)
	}
	return names
}

// signal is fired once and waited on with a deadline.
type signal struct {
	once sync.Once
	ch   chan struct{}
}

func newSignal() *signal { return &signal{ch: make(chan struct{})} }

func (s *signal) fire() { s.once.Do(func() { close(s.ch) }) }

func (s *signal) wait(t *testing.T) {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case <-s.ch:
	case <-timer.C:
		t.Fatalf("the other test did not get there within %v", waitTimeout)
	}
}
