package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gantry-ci/gantry/internal/pgcluster"
)

// EnvURL names the environment variable that points the tests at an existing server. Its
// value is a postgres:// URL of a database that the user may run CREATE DATABASE from;
// each test's database is created beside it.
const EnvURL = "GANTRY_TEST_POSTGRES_URL"

// dbPrefix starts the name of every database this package creates, so that leftovers on
// a shared server are recognisable.
const dbPrefix = "gantry_test_"

// serverConf is added to the throwaway cluster's postgresql.conf. The data is thrown
// away, so durability buys nothing, and without it CREATE DATABASE and commits are fast.
// max_connections leaves room for many parallel tests, each with a pool.
const serverConf = `fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 300`

// sqlTimeout bounds each statement this package runs against the server.
const sqlTimeout = 30 * time.Second

var (
	// mainCalled records that the test binary went through Main, the only place the
	// throwaway cluster is stopped.
	mainCalled atomic.Bool

	// mu guards the throwaway cluster: it is started by the first test that needs it and
	// stopped by Main after all tests.
	mu         sync.Mutex
	shared     *pgcluster.Cluster
	startErr   error // a failed start is not retried: every later test fails the same way
	skipReason string

	// templates are the template databases PostgresFrom made in this process, by key;
	// Main drops them, those whose preparation failed too (on a throwaway cluster they go
	// with it).
	templatesMu sync.Mutex
	templates   = map[string]*template{}
)

// template is a database prepared once, that PostgresFrom copies for each test.
type template struct {
	once  sync.Once
	name  string
	admin *url.URL
	err   error
}

// Main runs the tests, then stops the throwaway PostgreSQL cluster if a test started one,
// and exits with the tests' exit code. A package that calls Postgres calls it from
// TestMain:
//
//	func TestMain(m *testing.M) { testdb.Main(m) }
func Main(m *testing.M) {
	mainCalled.Store(true)
	code := m.Run()
	templatesMu.Lock()
	for _, tm := range templates {
		if tm.name != "" {
			if err := execAdmin(tm.admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{tm.name}.Sanitize()+" WITH (FORCE)"); err != nil {
				fmt.Fprintf(os.Stderr, "testdb: drop template: %v\n", err)
			}
		}
	}
	templatesMu.Unlock()
	mu.Lock()
	c := shared
	shared = nil
	mu.Unlock()
	if c != nil {
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testdb: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// Postgres creates a fresh, empty database for t and returns a URL to connect to it. The
// database is dropped, with any connections still open to it, when t finishes. Safe to
// call from parallel tests. It skips t when no server is configured and no PostgreSQL
// binaries are installed.
func Postgres(t testing.TB) string {
	t.Helper()
	if !mainCalled.Load() {
		t.Fatal("testdb: call testdb.Main from TestMain (func TestMain(m *testing.M) { testdb.Main(m) }) so the throwaway cluster is stopped after the tests")
	}
	admin := adminURL(t)

	name := dbPrefix + randomHex(8)
	stmt := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if err := execAdmin(admin, stmt); err != nil {
		t.Fatalf("testdb: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		// FORCE ends the connections a test left open (PostgreSQL 13 and later).
		stmt := "DROP DATABASE IF EXISTS " + pgx.Identifier{name}.Sanitize() + " WITH (FORCE)"
		if err := execAdmin(admin, stmt); err != nil {
			t.Errorf("testdb: drop database %s: %v", name, err)
		}
	})

	u := withDatabase(admin, name)
	t.Logf("testdb: created database %s on %s", name, u.Host)
	return u.String()
}

// PostgresFrom is Postgres with the database a copy of a template: the first call of the
// process with key creates the template and runs prepare on it (a store's migrations,
// say), and every call copies it with CREATE DATABASE ... TEMPLATE, which is much faster
// than preparing each test's database again. prepare must leave no connection open to
// the template. A failed prepare fails every test that asks for key.
func PostgresFrom(t testing.TB, key string, prepare func(ctx context.Context, url string) error) string {
	t.Helper()
	if !mainCalled.Load() {
		t.Fatal("testdb: call testdb.Main from TestMain (func TestMain(m *testing.M) { testdb.Main(m) }) so the throwaway cluster is stopped after the tests")
	}
	admin := adminURL(t)
	templatesMu.Lock()
	tm := templates[key]
	if tm == nil {
		tm = &template{}
		templates[key] = tm
	}
	templatesMu.Unlock()
	tm.once.Do(func() {
		name := dbPrefix + "template_" + randomHex(8)
		if err := execAdmin(admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			tm.err = fmt.Errorf("create template database %s: %w", name, err)
			return
		}
		tm.name, tm.admin = name, admin
		ctx, cancel := context.WithTimeout(context.Background(), 2*sqlTimeout)
		defer cancel()
		if err := prepare(ctx, withDatabase(admin, name).String()); err != nil {
			tm.err = fmt.Errorf("prepare template database %s (%s): %w", name, key, err)
		}
	})
	if tm.err != nil {
		t.Fatalf("testdb: %v", tm.err)
	}
	name := dbPrefix + randomHex(8)
	stmt := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " TEMPLATE " + pgx.Identifier{tm.name}.Sanitize()
	if err := execAdmin(admin, stmt); err != nil {
		t.Fatalf("testdb: create database %s from %s: %v", name, tm.name, err)
	}
	t.Cleanup(func() {
		stmt := "DROP DATABASE IF EXISTS " + pgx.Identifier{name}.Sanitize() + " WITH (FORCE)"
		if err := execAdmin(admin, stmt); err != nil {
			t.Errorf("testdb: drop database %s: %v", name, err)
		}
	})
	u := withDatabase(admin, name)
	t.Logf("testdb: created database %s from %s on %s", name, key, u.Host)
	return u.String()
}

// SQLitePath returns the path of a SQLite database file, not yet created, in a directory
// that is removed when t finishes.
func SQLitePath(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "gantry.db")
}

// adminURL returns the URL of the database to issue CREATE DATABASE from: the one in
// GANTRY_TEST_POSTGRES_URL, else the throwaway cluster's, starting it on first use.
func adminURL(t testing.TB) *url.URL {
	t.Helper()
	if raw := os.Getenv(EnvURL); raw != "" {
		u, err := parseURL(raw)
		if err != nil {
			t.Fatalf("testdb: %s: %v", EnvURL, err)
		}
		return u
	}

	mu.Lock()
	defer mu.Unlock()
	if shared == nil && startErr == nil && skipReason == "" {
		shared, startErr = pgcluster.Start(pgcluster.Options{Conf: serverConf, Logf: t.Logf})
		if errors.Is(startErr, pgcluster.ErrNoPostgres) {
			skipReason, startErr = startErr.Error(), nil
		}
	}
	switch {
	case skipReason != "" && testing.Short():
		t.Skipf("testdb: %s; skipping under -short", skipReason)
	case skipReason != "":
		// A missing server fails the test: a suite that skips the store's tests would pass
		// while testing nothing of PostgreSQL. `make deps` installs it.
		t.Fatalf("testdb: %s; set %s to a server's URL, or install PostgreSQL (make deps, or apt-get install postgresql); -short skips these tests", skipReason, EnvURL)
	case startErr != nil:
		t.Fatalf("testdb: %v", startErr)
	}
	return shared.URL()
}

// parseURL accepts only URLs (not key=value strings), since Postgres hands back a URL
// with the database swapped.
func parseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("parse URL: %w", err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, fmt.Errorf("want a postgres:// URL, got scheme %q", u.Scheme)
	}
	return u, nil
}

// withDatabase returns a copy of u that connects to database name.
func withDatabase(u *url.URL, name string) *url.URL {
	c := *u
	c.Path = "/" + name
	c.RawPath = ""
	q := c.Query()
	if q.Has("dbname") { // a dbname parameter would win over the path
		q.Del("dbname")
		c.RawQuery = q.Encode()
	}
	return &c
}

// execAdmin runs one statement on its own connection to admin: CREATE and DROP DATABASE
// cannot run inside a transaction, and a short-lived connection keeps nothing open
// between tests.
func execAdmin(admin *url.URL, stmt string) error {
	ctx, cancel := context.WithTimeout(context.Background(), sqlTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		return fmt.Errorf("connect to %s: %w", admin.Redacted(), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("run %q: %w", stmt, err)
	}
	return nil
}

// randomHex returns n random bytes in hex: 64 bits make a clash between parallel tests,
// or with a leftover on a shared server, vanishingly unlikely.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails since Go 1.24; it crashes the program instead
	return hex.EncodeToString(b)
}
