// Package sqlite is Gantry's embedded store driver: SQLite in WAL mode, one writer
// connection fed by the shared group-commit engine, and a pool of read-only connections.
//
// It holds only what is particular to SQLite; every state transition lives in sqlstore.
package sqlite

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/store/sqlstore"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

//go:embed migrations/*.sql
var migrations embed.FS

// schema is the database the migrations make from nothing, as one script: their tables,
// indexes and triggers as SQLite holds them at the end, and their versions recorded as
// applied. An empty database is given it instead of the migrations one by one, whose
// ALTER TABLEs each have SQLite parse the whole schema again (tens of milliseconds on
// every `gantry run`). TestSchemaSnapshot holds it equal to the migrations' result.
//
//go:embed schema.sql
var schema string

// schemaFile is the database that schema.sql makes, as a file, gzipped: a new database
// file starts as a copy of it, which takes about a millisecond, where running the script
// takes SQLite 10-15 ms of CPU (every CREATE has it parse and rewrite its schema table).
// TestSchemaSnapshot writes it and holds it to the script.
//
//go:embed schema.db.gz
var schemaFile []byte

// Options tune the store; see sqlstore.Options.
type Options = sqlstore.Options

// Open opens (creating and migrating) the database at path, a file name or a "file:" URI.
//
// Durability: WAL with synchronous=FULL, so a commit is on disk before Open's writes
// return; a process crash or a power cut loses nothing acknowledged. Group commit makes
// that affordable: one fsync covers every operation in a batch.
//
// A path may end in ?synchronous=normal, which keeps acknowledged writes across a
// process crash but not a power cut (WAL syncs at checkpoints only), or
// ?synchronous=off, for a database thrown away with its process, which syncs nothing.
func Open(ctx context.Context, path string, opts Options) (*sqlstore.Engine, error) {
	path, sync, err := synchronous(path)
	if err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	if path == "" {
		return nil, errors.New("open sqlite store: empty path")
	}
	if err := placeSchemaFile(path, sync); err != nil {
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	if err := restrictFiles(path); err != nil {
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	writeDSN := dsn(path, sync, false)
	write, err := sql.Open("sqlite", writeDSN)
	if err != nil {
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	// One connection: SQLite allows one writer at a time, and the engine's committer
	// is that writer.
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	d := &sqlstore.Dialect{Name: "sqlite", Retryable: retryable, Full: full, Writers: 1, Savepoints: true, InsertOrIgnore: true, StatementsUncancelled: true}
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		_ = write.Close()
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	if err := createSchema(ctx, write); err != nil {
		_ = write.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	if err := sqlstore.Migrate(ctx, write, d, sub); err != nil {
		_ = write.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	read, err := sql.Open("sqlite", dsn(path, sync, true))
	if err != nil {
		_ = write.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	read.SetMaxOpenConns(8)
	read.SetMaxIdleConns(8)
	return sqlstore.New(write, read, d, opts, write, read), nil
}

// createSchema puts the database in WAL mode and gives an empty one the latest schema
// in one transaction, which
// records every migration applied; a database that holds anything is left to the
// migrations. The write lock is taken first (BEGIN IMMEDIATE), so two processes opening
// the same new file do not both create it. Where several open a new file at once, one
// may meet SQLite's busy result without its busy timeout applying (another connection
// is still turning the new file to WAL); the transaction is then tried again, as the
// store retries any other, until the busy timeout's 10 s have passed.
func createSchema(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(10 * time.Second)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		err := createSchemaOnce(ctx, db)
		if err == nil || !retryable(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("create schema: %w", ctx.Err())
		case <-time.After(wait):
		}
	}
}

func createSchemaOnce(ctx context.Context, db *sql.DB) (err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	defer conn.Close()
	// WAL is the database's own setting, kept in its file: set here once, on the writer,
	// rather than by every connection's DSN, whose pragmas the driver applies in
	// alphabetical order, journal_mode before synchronous, so that a new database's
	// switch to WAL was synced at SQLite's default even with synchronous=off.
	var mode string
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode); err != nil {
		return fmt.Errorf("create schema: journal mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") && !strings.EqualFold(mode, "memory") { // memory: an in-memory database's only
		return fmt.Errorf("create schema: journal mode is %s, not wal", mode)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("create schema: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&n); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	if n > 0 {
		_, err = conn.ExecContext(ctx, "ROLLBACK")
		return err
	}
	if _, err := conn.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("create schema: commit: %w", err)
	}
	return nil
}

// placeSchemaFile makes the database file at path, when there is none, a copy of
// schemaFile, the latest schema with no rows. The copy is written beside it and linked
// into place, which fails if another process made the file meanwhile: a file opened by
// anyone is never replaced. Where the copy cannot be made (a link refused by the file
// system, a database in memory or opened read-only, a write-ahead log or journal left
// without its database), nothing is done and createSchema runs the script as before. With sync other than OFF the copy is on disk before it is
// linked, as the script's commit would be.
func placeSchemaFile(path, sync string) error {
	name, query, _ := strings.Cut(strings.TrimPrefix(path, "file:"), "?")
	if name == "" || name == ":memory:" || strings.Contains(query, "mode=") {
		return nil
	}
	for _, suffix := range []string{"", "-wal", "-journal"} {
		if _, err := os.Lstat(name + suffix); !errors.Is(err, fs.ErrNotExist) {
			// There is a database (or something in the way, which Open reports), or
			// what is left of one, which SQLite would recover into the copy.
			return nil
		}
	}
	zr, err := gzip.NewReader(bytes.NewReader(schemaFile))
	if err != nil {
		return fmt.Errorf("read the schema's database file: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(name), filepath.Base(name)+".new-*")
	if err != nil {
		return nil // the directory is not there or not writable: Open says so
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = io.Copy(f, zr)
	if err == nil && sync != "OFF" {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write a new database file: %w", err)
	}
	if err := os.Link(tmp, name); err != nil {
		return nil // made meanwhile by another process, or no links here: the script runs
	}
	return nil
}

// restrictFiles creates the database file readable by its owner only (0600), and
// narrows the modes of an existing one and of its -wal and -shm files to that. The
// database holds pipelines, logs' metadata and tokens' hashes; SQLite creates files 0644
// (less the umask) and gives the -wal and -shm files the database file's mode, so the
// database file is made first with the mode wanted, whatever the umask.
func restrictFiles(path string) error {
	name := strings.TrimPrefix(path, "file:")
	name, _, _ = strings.Cut(name, "?")
	if name == "" || name == ":memory:" {
		return nil
	}
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("create database file: %w", err)
	}
	err = f.Chmod(0o600)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("restrict database file: %w", err)
	}
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		if err := os.Chmod(name+suffix, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("restrict database file: %w", err)
		}
	}
	return nil
}

// synchronous takes the synchronous parameter off path, returning the path without it
// and the pragma's value (FULL unless the parameter says otherwise).
func synchronous(path string) (string, string, error) {
	base, query, ok := strings.Cut(path, "?")
	if !ok {
		return path, "FULL", nil
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", "", fmt.Errorf("parameters of %s: %w", path, err)
	}
	sync := "FULL"
	if v, ok := q["synchronous"]; ok {
		switch strings.ToLower(v[len(v)-1]) {
		case "full":
		case "normal":
			sync = "NORMAL"
		case "off":
			sync = "OFF"
		default:
			return "", "", fmt.Errorf("synchronous=%s: want full, normal or off", v[len(v)-1])
		}
		q.Del("synchronous")
	}
	if len(q) == 0 {
		return base, sync, nil
	}
	return base + "?" + q.Encode(), sync, nil
}

func dsn(path, sync string, readOnly bool) string {
	name := path
	if !strings.HasPrefix(name, "file:") {
		name = "file:" + name
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "synchronous("+sync+")")
	q.Add("_pragma", "temp_store(MEMORY)")
	q.Add("_pragma", "cache_size(-65536)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	}
	sep := "?"
	if strings.Contains(name, "?") {
		sep = "&"
	}
	return name + sep + q.Encode()
}

// full reports SQLite's "database or disk is full": a write ran out of space (or hit
// the file size limit). SQLite rolls the transaction back, so nothing of it was kept.
func full(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_FULL
}

// retryable reports SQLite's busy and locked results, which only another process holding
// the database can cause; the engine runs the transaction again.
func retryable(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}
