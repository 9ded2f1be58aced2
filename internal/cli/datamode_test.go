package cli

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUpDataModes: everything gantry up keeps in its data directory — the database and
// its -wal and -shm files, logs, artifact blobs, the URL-signing key, the lock and the
// workers' work directory — is its owner's only (directories 0700, files 0600), whatever
// the umask. The one exception is a finished job's step-file and runner directories that
// a worker keeps for its next job (agent's jobdirs.go): made for the steps to write, they
// hold nothing but empty files, inside the owner's work directory, and are gone once up
// has stopped. Not parallel: the umask belongs to the whole process.
func TestUpDataModes(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })

	data := filepath.Join(t.TempDir(), "data")
	base, stop := startUp(t, data)
	run := submitRun(t, base, "name: modes\njobs:\n  a:\n    steps: [{run: 'echo secret && echo kept > out.txt'}]\n    artifacts: {paths: [out.txt]}\n").ID
	if r := waitRun(t, base, run, func(r runDetails) bool { return r.Status != "pending" && r.Status != "running" }); r.Status != "success" {
		t.Fatalf("run %s", r.Status)
	}
	// A job's workspace and step files, which hold what its steps made with their own
	// umask, are removed once its worker's slot is free again, after the job is reported.
	work := filepath.Join(data, "work")
	deadline := time.Now().Add(10 * time.Second)
	for {
		entries, err := os.ReadDir(work)
		if err != nil {
			t.Fatal(err)
		}
		left := slices.ContainsFunc(entries, func(e fs.DirEntry) bool {
			return strings.HasPrefix(e.Name(), "gantry-job-")
		})
		if !left {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job's files still in %s after it ended: %v", work, entries)
		}
		time.Sleep(10 * time.Millisecond)
	}
	check := func(when string, stopped bool) map[string]bool {
		t.Helper()
		seen := map[string]bool{}
		err := filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(data, p)
			seen[rel] = true
			if spare := strings.HasPrefix(rel, "work/gantry-files-") || strings.HasPrefix(rel, "work/gantry-runner-"); spare {
				switch {
				case stopped:
					t.Errorf("%s: %s left after up stopped", when, rel)
				case !d.IsDir() && fi.Size() != 0:
					t.Errorf("%s: %s kept for the next job holds %d bytes", when, rel, fi.Size())
				}
				return nil
			}
			want := fs.FileMode(0o600)
			if d.IsDir() {
				want = 0o700
			}
			if got := fi.Mode().Perm(); got != want {
				t.Errorf("%s: %s has mode %o, want %o", when, rel, got, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return seen
	}
	seen := check("while up", false)
	for _, p := range []string{".", "gantry.db", "gantry.db-wal", "gantry.db-shm", "gantry.lock", "logs", "blobs", "blobs/signing.key", "work"} {
		if !seen[p] {
			t.Errorf("no %s in the data directory", p)
		}
	}
	var logs, blobs int
	for p := range seen {
		if strings.HasPrefix(p, "logs/") && strings.HasSuffix(p, ".log") {
			logs++
		}
		if strings.HasPrefix(p, "blobs/sha256/") && len(filepath.Base(p)) == 64 {
			blobs++
		}
	}
	if logs == 0 || blobs == 0 {
		t.Errorf("%d log files and %d blobs checked, want some of each: %v", logs, blobs, seen)
	}
	if code := stop(); code != exitOK {
		t.Fatalf("up exited %d", code)
	}
	check("after up stopped", true)
}
