package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
)

// TestFileModes: the database and its -wal and -shm files are readable by their owner
// only, whatever the umask, and a database made 0644 by an older version is narrowed
// when opened. Not parallel: the umask belongs to the whole process.
func TestFileModes(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })

	dir := t.TempDir()
	path := filepath.Join(dir, "gantry.db")
	n := 0
	open := func() store.Store {
		t.Helper()
		n++
		st, err := sqlite.Open(context.Background(), path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		// A write, so that the -wal and -shm files exist.
		if err := st.CreateToken(context.Background(), &store.Token{Name: "modes", Role: store.RoleRead, Hash: fmt.Sprintf("%064x", n)}); err != nil {
			t.Fatal(err)
		}
		return st
	}
	check := func(when string) {
		t.Helper()
		for _, name := range []string{"gantry.db", "gantry.db-wal", "gantry.db-shm"} {
			fi, err := os.Stat(filepath.Join(dir, name))
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if got := fi.Mode().Perm(); got != 0o600 {
				t.Errorf("%s: %s has mode %o, want 600", when, name, got)
			}
		}
	}
	st := open()
	check("new database")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"gantry.db", "gantry.db-wal", "gantry.db-shm"} {
		if err := os.Chmod(filepath.Join(dir, name), 0o644); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	st = open()
	defer st.Close()
	check("reopened 0644 database")
}
