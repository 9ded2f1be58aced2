package source_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/source"
)

const helperEnv = "GANTRY_SOURCE_TEST_HELPER"

// helperEnsureCommit is the body of a helper process: open the mirror, say so, ensure the
// commit.
func helperEnsureCommit() int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := source.Open(ctx, source.Config{Dir: os.Getenv(helperEnv + "_DIR"), URL: os.Getenv(helperEnv + "_URL")})
	if err != nil {
		fmt.Println("open:", err)
		return 1
	}
	defer m.Close()
	fmt.Println("ready")
	if err := m.EnsureCommit(ctx, os.Getenv(helperEnv+"_SHA")); err != nil {
		fmt.Println("ensure:", err)
		return 1
	}
	fmt.Println("ok")
	return 0
}

func TestEnsureCommitAcrossProcesses(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	root := t.TempDir()
	r := newRemote(t, root, "procs")
	sha := r.commit("one", map[string]string{"a": "1"})
	r.push("refs/heads/main", false)
	srv := newGitServer(t, root, "", "")
	cache := t.TempDir()
	m := openMirror(t, cache, srv.url("procs"), source.Credentials{})

	// Hold the mirror's lock, as a process in the middle of a fetch would, until every
	// helper is about to ask for the commit: then they all contend for it at once.
	lock, err := os.OpenFile(strings.TrimSuffix(m.Dir(), ".git")+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	const n = 4
	type helper struct {
		cmd *exec.Cmd
		out *bufio.Scanner
	}
	helpers := make([]helper, n)
	for i := range helpers {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"=1", helperEnv+"_DIR="+cache, helperEnv+"_URL="+srv.url("procs"), helperEnv+"_SHA="+sha)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		helpers[i] = helper{cmd, bufio.NewScanner(stdout)}
	}
	for i, h := range helpers {
		if !h.out.Scan() || h.out.Text() != "ready" {
			t.Fatalf("helper %d: %q", i, h.out.Text())
		}
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	for i, h := range helpers {
		var said []string
		for h.out.Scan() {
			said = append(said, h.out.Text())
		}
		if err := h.cmd.Wait(); err != nil {
			t.Fatalf("helper %d: %v: %q", i, err, said)
		}
	}
	if got := srv.advertisements.Load(); got != 1 {
		t.Fatalf("%d processes fetched %d times, want once", n, got)
	}
}
