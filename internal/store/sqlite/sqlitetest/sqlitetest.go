// Package sqlitetest gives tests SQLite databases that are already migrated, each a copy
// of one template made per test binary. It must not be imported by non-test code.
//
// Migrating an empty database runs every migration through SQLite's parser, which under
// -race costs a third of a CPU second or more; tests that open hundreds of stores would
// spend most of their time there. The migrations themselves stay tested: the template is
// made by sqlite.Open, and the store suite's tests of opening and migrating start from
// empty databases.
package sqlitetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gantry-ci/gantry/internal/store/sqlite"
)

var (
	once     sync.Once
	template []byte // the migrated database file
	errMake  error
)

// Path returns the path of a fresh SQLite database file, migrated to the latest schema,
// in a directory that is removed when t finishes. sqlite.Open on it finds every migration
// applied and only checks that.
func Path(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gantry.db")
	Create(t, path)
	return path
}

// Create writes a fresh migrated database at path, for a test that keeps the database
// beside other files of its own. The file must not exist yet.
func Create(t testing.TB, path string) {
	t.Helper()
	once.Do(func() { template, errMake = makeTemplate() })
	if errMake != nil {
		t.Fatalf("sqlitetest: %v", errMake)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatalf("sqlitetest: create the database: %v", err)
	}
	_, err = f.Write(template)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("sqlitetest: copy the migrated template to %s: %v", path, err)
	}
}

// makeTemplate migrates a database in a directory of its own and returns the file's
// bytes. Closing the store checkpoints its write-ahead log into the file, so the file
// alone is the whole database.
func makeTemplate() ([]byte, error) {
	dir, err := os.MkdirTemp("", "gantry-sqlitetest-")
	if err != nil {
		return nil, fmt.Errorf("make the template's directory: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "gantry.db")
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		return nil, fmt.Errorf("migrate the template: %w", err)
	}
	if err := st.Close(); err != nil {
		return nil, fmt.Errorf("close the template: %w", err)
	}
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
		return nil, fmt.Errorf("the template's write-ahead log holds %d bytes after close; the file alone is not the database", fi.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the template: %w", err)
	}
	return b, nil
}
