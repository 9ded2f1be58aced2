package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
)

// TestCacheCommands: cache list shows a project's entries; cache delete removes them by
// key and scope, by id, or all, and refuses to guess what to delete.
func TestCacheCommands(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "gantry.db")
	base, stop := startServer(t, "--db", "sqlite://"+db)
	defer stop()
	srv := []string{"--server", base}

	// The entries a worker would have saved, written beside the server.
	st, err := sqlite.Open(t.Context(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.CreateProject(t.Context(), &store.Project{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	p, err := st.GetProjectByName(t.Context(), "web")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, e := range []struct{ scope, key string }{{"main", "go-a"}, {"main", "go-b"}, {"feature", "go-a"}, {"pr/7", "node"}} {
		if err := st.AddBlobOwner(t.Context(), p.ID, strings.Repeat(string(rune('a'+i)), 64)); err != nil {
			t.Fatal(err)
		}
		c, _, err := st.PutCache(t.Context(), &store.CacheEntry{ProjectID: p.ID, Scope: e.scope, Key: e.key,
			SHA256: strings.Repeat(string(rune('a'+i)), 64), Size: 2048})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID.String())
	}

	list := runCLI(t, invocation{args: append([]string{"cache", "list", "--project", "web"}, srv...)})
	if list.code != exitOK || !strings.Contains(list.stdout, "SCOPE") || !strings.Contains(list.stdout, "go-b") ||
		!strings.Contains(list.stdout, "pr/7") || !strings.HasSuffix(list.stdout, "4 entries, 8.0 KiB\n") {
		t.Fatalf("cache list: exit %d\n%s%s", list.code, list.stdout, list.stderr)
	}
	for _, args := range [][]string{
		{"cache", "list"},
		{"cache", "delete", "--project", "web"},
		{"cache", "delete", "not-an-id", "--project", "web"},
		{"cache", "delete", ids[0], "--project", "web", "--all"},
	} {
		if got := runCLI(t, invocation{args: append(args, srv...)}); got.code != exitUsage {
			t.Errorf("%v: exit %d, want usage\n%s", args, got.code, got.stderr)
		}
	}
	steps := []struct {
		args []string
		out  string
	}{
		{[]string{"--key", "go-a", "--scope", "feature"}, "deleted 1 cache entry of project web\n"},
		{[]string{ids[1]}, "deleted 1 cache entry of project web\n"},
		{[]string{"--all"}, "deleted 2 cache entries of project web\n"},
	}
	for _, s := range steps {
		got := runCLI(t, invocation{args: append(append([]string{"cache", "delete", "--project", "web"}, s.args...), srv...)})
		if got.code != exitOK || got.stdout != s.out {
			t.Errorf("cache delete %v: exit %d, %q%s; want %q", s.args, got.code, got.stdout, got.stderr, s.out)
		}
	}
	if got := runCLI(t, invocation{args: append([]string{"cache", "delete", ids[1], "--project", "web"}, srv...)}); got.code == exitOK {
		t.Errorf("deleting a deleted entry: exit %d", got.code)
	}
	if got := runCLI(t, invocation{args: append([]string{"cache", "list", "--project", "web"}, srv...)}); got.stdout != "project web has no caches\n" {
		t.Errorf("cache list after deleting: %q", got.stdout)
	}
}
