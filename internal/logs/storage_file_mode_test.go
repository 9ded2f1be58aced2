package logs_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/google/uuid"
)

// TestFileStorageModes: log directories are 0700 and log files 0600, whatever the umask
// (a step's output may hold anything); a log file an older version made 0644 is narrowed
// when it is opened again. Not parallel: the umask belongs to the whole process.
func TestFileStorageModes(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })

	dir := filepath.Join(t.TempDir(), "data", "logs")
	s, err := logs.OpenFileStorage(dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	k := logs.Key{Job: uuid.New(), Attempt: 1}
	if _, err := s.Append(context.Background(), k, []logs.Line{{Seq: 1, Stream: "stdout", Text: "secret"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, k.Job.String(), "1.log")
	want := map[string]os.FileMode{
		filepath.Dir(dir): 0o700, dir: 0o700, filepath.Dir(file): 0o700, file: 0o600,
	}
	for p, mode := range want {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != mode {
			t.Errorf("%s has mode %o, want %o", p, got, mode)
		}
	}

	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(context.Background(), k, []logs.Line{{Seq: 2, Stream: "stdout", Text: "more"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("a 0644 log written again: %v, %v; want mode 600", fi.Mode(), err)
	}
}
