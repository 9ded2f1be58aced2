package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// githubHash is hashFiles as GitHub's runner computes it, written out for the files given
// in order.
func githubHash(contents ...string) string {
	sum := sha256.New()
	for _, c := range contents {
		d := sha256.Sum256([]byte(c))
		sum.Write(d[:])
	}
	return hex.EncodeToString(sum.Sum(nil))
}

func TestHashFiles(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{
		"go.sum": "root", "a/go.sum": "a", "a-b/go.sum": "a-b", "vendor/go.sum": "vendor", "src/x.go": "x", "README": "r",
	})
	if err := os.Symlink("go.sum", filepath.Join(ws, "link.sum")); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "secret")
	writeFiles(t, filepath.Dir(outside), map[string]string{"secret": "s"})
	if err := os.Symlink(outside, filepath.Join(ws, "out.sum")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		patterns []string
		want     string
	}{
		{"one file", []string{"go.sum"}, githubHash("root")},
		{"sorted by path, - before /", []string{"**/go.sum"}, githubHash("a-b", "a", "root", "vendor")},
		{"excluded", []string{"**/go.sum", "!vendor/**"}, githubHash("a-b", "a", "root")},
		{"several patterns, each file once", []string{"go.sum", "*.sum"}, githubHash("root", "root")},
		{"none matches", []string{"nothing/*"}, ""},
		{"directories are not files", []string{"src"}, ""},
		{"leading ./", []string{"./src/*.go"}, githubHash("x")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := hashFiles(ws, tt.patterns)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("hashFiles(%q) = %q, want %q", tt.patterns, got, tt.want)
			}
		})
	}
}

// TestCacheArchiveRoundTrip: what writeCache keeps, extractCache puts back: contents,
// modes, symlinks, files under home; and it replaces what is in the way.
func TestCacheArchiveRoundTrip(t *testing.T) {
	t.Parallel()
	ws, home := t.TempDir(), t.TempDir()
	writeFiles(t, ws, map[string]string{"build/a.txt": "a", "build/sub/b.txt": "b"})
	writeFiles(t, home, map[string]string{".cache/go/x": "x"})
	if err := os.Chmod(filepath.Join(ws, "build/a.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/b.txt", filepath.Join(ws, "build/link")); err != nil {
		t.Fatal(err)
	}
	rec := logs.NewRecorder(func([]logs.Line) {}, logs.RecorderOptions{})
	archive := filepath.Join(t.TempDir(), "archive")
	n, digest, size, err := writeCache(archive, []string{"build", "~/.cache/go", "missing"}, ws, home, rec, "k")
	if err != nil {
		t.Fatal(err)
	}
	if n != 7 || len(digest) != 64 || size <= 0 {
		t.Errorf("writeCache: %d entries, digest %q, %d bytes; want 7 entries", n, digest, size)
	}
	ws2, home2 := t.TempDir(), filepath.Join(t.TempDir(), "home")
	// In the way: a directory where a file goes, a file where a directory goes.
	writeFiles(t, ws2, map[string]string{"build/a.txt/old": "old", "build/sub": "file"})
	got, err := extractCache(archive, ws2, home2)
	if err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Errorf("extracted %d entries, want %d", got, n)
	}
	for p, want := range map[string]string{filepath.Join(ws2, "build/a.txt"): "a", filepath.Join(ws2, "build/sub/b.txt"): "b",
		filepath.Join(ws2, "build/link"): "b", filepath.Join(home2, ".cache/go/x"): "x"} {
		b, err := os.ReadFile(p)
		if err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", p, b, err, want)
		}
	}
	if st, err := os.Stat(filepath.Join(ws2, "build/a.txt")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("mode of a.txt: %v, %v", st.Mode(), err)
	}
	if target, err := os.Readlink(filepath.Join(ws2, "build/link")); err != nil || target != "sub/b.txt" {
		t.Errorf("link: %q, %v", target, err)
	}
}

// TestExtractRefusesEscapes: an archive cannot write outside the workspace, by name or
// through a symlink it makes.
func TestExtractRefusesEscapes(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	src := t.TempDir()
	// A symlink "esc" to outside, then a file written through it.
	if err := os.Symlink(outside, filepath.Join(src, "esc")); err != nil {
		t.Fatal(err)
	}
	rec := logs.NewRecorder(func([]logs.Line) {}, logs.RecorderOptions{})
	archive := filepath.Join(t.TempDir(), "archive")
	if _, _, _, err := writeCache(archive, []string{"esc"}, src, "", rec, "k"); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	if _, err := extractCache(archive, ws, ""); err != nil {
		t.Fatal(err)
	}
	// The link is restored as a link; writing through it is what the next archive tries.
	src2 := t.TempDir()
	writeFiles(t, src2, map[string]string{"esc/pwned": "x"})
	archive2 := filepath.Join(t.TempDir(), "archive")
	if _, _, _, err := writeCache(archive2, []string{"esc"}, src2, "", rec, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := extractCache(archive2, ws, ""); err == nil {
		// Replacing the link by a directory is fine too, as long as nothing lands outside.
		if st, err := os.Lstat(filepath.Join(ws, "esc")); err != nil || st.Mode()&fs.ModeSymlink != 0 {
			t.Errorf("esc after the second archive: %v, %v", st, err)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "pwned")); err == nil {
		t.Fatal("an archive wrote through a symlink out of the workspace")
	}
}

// cacheYAML is a job that checks what it expects restored, then writes files to cache.
func cacheYAML(home, key, restoreKeys, check, extra string) string {
	return fmt.Sprintf(`jobs:
  build:
    env: {HOME: %q}
    cache:
      - key: %q
        restore_keys: [%s]
        paths: [out, ~/.cache/tool]
    steps:
      - run: |
          %s
      - run: |
          mkdir -p out "$HOME/.cache/tool"
          echo %s > out/built.txt
          chmod 755 out/built.txt
          echo tool > "$HOME/.cache/tool/state"
          ln -sf built.txt out/link
          %s
`, home, key, restoreKeys, check, key, extra)
}

func (b *bundle) caches(t *testing.T) map[string]*store.CacheEntry {
	t.Helper()
	p, err := b.st.GetProjectByName(t.Context(), "default")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := b.st.ListCaches(t.Context(), p.ID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*store.CacheEntry{}
	for _, c := range cs {
		out[c.Scope+"/"+c.Key] = c
	}
	return out
}

func wantLog(t *testing.T, log string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(log, p) {
			t.Errorf("log lacks %q:\n%s", p, log)
		}
	}
}

// TestCachesEndToEnd: a job saves its cache; the next run restores the exact key (files
// in the workspace and the home directory, modes and symlinks kept) and saves nothing;
// a new key restores by restore_keys prefix and saves; a feature branch reads the
// default branch's entries and writes its own; a failed job saves nothing.
func TestCachesEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 1)
	// Refs a signed webhook gave: they count for the branch's caches (store.Trigger.RefVerified).
	main := store.Trigger{Branch: "main", Verified: store.RefFromWebhook}

	// 1. Nothing to restore; saved under main.
	run := b.submitTriggered(t, cacheYAML(t.TempDir(), "deps-v1", "deps-", "test ! -e out", ""), main)
	b.wantSuccess(t, run)
	wantLog(t, b.jobLog(t, run, "build"), "cache deps-v1: miss (no entry of this key or starting with deps- in main)", "cache deps-v1: saved in scope main")
	cs := b.caches(t)
	if c := cs["main/deps-v1"]; c == nil || c.Size <= 0 {
		t.Fatalf("entries after the first run: %v", cs)
	}

	// 2. The exact key, in a fresh home: restored, not saved again.
	check := `test "$(cat out/built.txt)" = deps-v1 && test -x out/built.txt && test -L out/link && test "$(cat "$HOME/.cache/tool/state")" = tool`
	run = b.submitTriggered(t, cacheYAML(t.TempDir(), "deps-v1", "deps-", check, ""), main)
	b.wantSuccess(t, run)
	wantLog(t, b.jobLog(t, run, "build"), "cache deps-v1: hit (exact key): restored deps-v1 from scope main", "cache deps-v1: not saved: restored from this exact key")

	// 3. A new key: the restore key finds deps-v1, and deps-v2 is saved.
	check = `test "$(cat out/built.txt)" = deps-v1`
	run = b.submitTriggered(t, cacheYAML(t.TempDir(), "deps-v2", "nope-, deps-", check, ""), main)
	b.wantSuccess(t, run)
	wantLog(t, b.jobLog(t, run, "build"), "cache deps-v2: hit (restore key, partial): restored deps-v1 from scope main", "cache deps-v2: saved in scope main")

	// 4. A feature branch: falls back to main's newest deps- entry, saves in its own scope.
	check = `test "$(cat out/built.txt)" = deps-v2`
	run = b.submitTriggered(t, cacheYAML(t.TempDir(), "deps-feature", "deps-", check, ""), store.Trigger{Branch: "feature", Verified: store.RefFromWebhook})
	b.wantSuccess(t, run)
	wantLog(t, b.jobLog(t, run, "build"), "restored deps-v2 from scope main", "cache deps-feature: saved in scope feature")
	cs = b.caches(t)
	if cs["feature/deps-feature"] == nil || cs["main/deps-feature"] != nil {
		t.Errorf("the feature branch's entry: %v", cs)
	}
	// main never reads the feature branch's entries.
	run = b.submitTriggered(t, cacheYAML(t.TempDir(), "deps-feature", "nope-", "test ! -e out", ""), main)
	b.wantSuccess(t, run)
	wantLog(t, b.jobLog(t, run, "build"), "cache deps-feature: miss")

	// 5. A failed job saves nothing.
	run = b.submitTriggered(t, cacheYAML(t.TempDir(), "broken", "nope-", "true", "exit 1"), main)
	if r := b.waitRun(t, run); r.Status != store.RunFailed {
		t.Fatalf("run %s, want failed", r.Status)
	}
	wantLog(t, b.jobLog(t, run, "build"), "cache broken: not saved: the job's steps failed and the cache is saved on success only")
	if c := b.caches(t)["main/broken"]; c != nil {
		t.Errorf("a failed job saved %+v", c)
	}
}

// TestCachesOff: a coordinator without a blob store turns caches off; the job says so and
// runs at once, neither failing nor waiting on a cache.
func TestCachesOff(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), sqlitetest.Path(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := setupWith(t, st, nil)
	b.start(t, 1)
	run := b.submitTriggered(t, cacheYAML(t.TempDir(), "deps-v1", "deps-", "true", ""), store.Trigger{Branch: "main"})
	if r := b.waitRunWithin(t, run, 20*time.Second); r.Status != store.RunSuccess {
		t.Fatalf("run %s, want success", r.Status)
	}
	log := b.jobLog(t, run, "build")
	wantLog(t, log, "cache deps-v1: caches are off: the coordinator has no blob store")
	if strings.Contains(log, "saved") {
		t.Errorf("a job without a blob store says it saved:\n%s", log)
	}
}
