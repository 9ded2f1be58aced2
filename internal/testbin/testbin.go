// Package testbin builds the gantry binary of this source tree for tests that start it as
// processes of their own: in containers, in pods, or as the coordinators and workers of
// `gantry bench`. It is test support: only _test files and test support import it.
package testbin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Gantry builds a static (no cgo), stripped gantry binary of this source tree without
// the race detector, once per test process, and returns its path. Every caller builds it
// with the same flags, so after the first build of a `make test` the go build cache holds
// its packages and a build is a link. Each test process has a file of its own, replaced
// atomically, so another process's build does not change the binary this one runs; the
// files of test processes that are gone are removed, so that the temporary directory
// does not fill with copies.
var Gantry = sync.OnceValues(func() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("build gantry: no go on PATH: %w", err)
	}
	dir := filepath.Join(os.TempDir(), "gantry-testbin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, "build-*")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	f.Close()
	cmd := exec.Command(goBin, "build", "-trimpath", "-ldflags=-s -w", "-o", tmp, "github.com/gantry-ci/gantry/cmd/gantry")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("build a static gantry (%s): %v\n%s", strings.Join(cmd.Args, " "), err, msg)
	}
	out := filepath.Join(dir, fmt.Sprintf("gantry-%d", os.Getpid()))
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	removeStale(dir)
	return out, nil
})

// removeStale removes the binaries of test processes that are gone.
func removeStale(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "gantry-"))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
