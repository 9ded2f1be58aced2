package sqlite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSynchronous(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path, wantPath, wantSync string
	}{
		{"/d/gantry.db", "/d/gantry.db", "FULL"},
		{"/d/gantry.db?synchronous=normal", "/d/gantry.db", "NORMAL"},
		{"/d/gantry.db?synchronous=OFF", "/d/gantry.db", "OFF"},
		{"/d/gantry.db?synchronous=full&mode=rwc", "/d/gantry.db?mode=rwc", "FULL"},
		{"file:/d/gantry.db?cache=shared&synchronous=off", "file:/d/gantry.db?cache=shared", "OFF"},
	} {
		path, sync, err := synchronous(tc.path)
		if err != nil || path != tc.wantPath || sync != tc.wantSync {
			t.Errorf("synchronous(%q) = %q, %q, %v; want %q, %q", tc.path, path, sync, err, tc.wantPath, tc.wantSync)
		}
	}
	if d := dsn("/d/gantry.db", "OFF", false); !strings.Contains(d, "_pragma=synchronous%28OFF%29") || strings.Contains(d, "FULL") {
		t.Errorf("dsn with OFF: %s", d)
	}
	if _, _, err := synchronous("/d/gantry.db?synchronous=sometimes"); err == nil {
		t.Error("synchronous=sometimes was taken")
	}
}

// TestOpenSynchronous opens a database with synchronous=off in its path: the file is the
// path without the parameter, and the store's connections run with the pragma.
func TestOpenSynchronous(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := Open(t.Context(), filepath.Join(dir, "gantry.db")+"?synchronous=off", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := os.Stat(filepath.Join(dir, "gantry.db")); err != nil {
		t.Errorf("the database is not at the path without its parameter: %v", err)
	}
	if _, err := Open(t.Context(), filepath.Join(dir, "other.db")+"?synchronous=later", Options{}); err == nil {
		t.Error("Open took synchronous=later")
	}
}
