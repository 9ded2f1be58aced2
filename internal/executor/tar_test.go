package executor

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestTarDir: files, directories and symlinks go in with their bits, a FIFO does not; a
// reproducible stream is the same for the same tree written at another time, and a
// plain one keeps the times.
func TestTarDir(t *testing.T) {
	t.Parallel()
	tree := func(at time.Time) string {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "sub", "run.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("sub/run.sh", filepath.Join(dir, "link")); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"sub/run.sh", "sub", ""} {
			if err := os.Chtimes(filepath.Join(dir, p), at, at); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	stream := func(dir string, reproducible bool) []byte {
		var b bytes.Buffer
		if err := TarDir(&b, dir, reproducible); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	one, two := tree(time.Unix(1e9, 0)), tree(time.Unix(2e9, 0))
	if !bytes.Equal(stream(one, true), stream(two, true)) {
		t.Error("reproducible streams of the same tree differ")
	}
	if bytes.Equal(stream(one, false), stream(two, false)) {
		t.Error("plain streams of trees written at other times are the same: times were dropped")
	}
	got := map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(stream(one, false)))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h
	}
	if len(got) != 3 || got["sub/"] == nil || got["link"].Linkname != "sub/run.sh" || got["sub/run.sh"].Mode&0o111 == 0 ||
		!got["sub/run.sh"].ModTime.Equal(time.Unix(1e9, 0)) {
		t.Errorf("entries %v: want sub/, sub/run.sh (executable, its time) and link, and no fifo", got)
	}
}
