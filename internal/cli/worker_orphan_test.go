package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/executor/executortest"
	"github.com/gantry-ci/gantry/internal/testdb"
)

// TestWorkerOrphans is the orphan test: a real `gantry worker` process runs a job whose
// step forks a background child and a setsid'd grandchild, and is killed with SIGKILL
// mid-step. The step's processes must not outlive it: with cgroups they die with the
// worker; on the subreaper path (--step-cgroup=false) a new worker on the same
// --work-dir kills them as it starts. The cgroup case also runs its step as an
// unprivileged --step-user.
func TestWorkerOrphans(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		// diesWithWorker says the steps are gone without waiting for a new worker.
		diesWithWorker bool
	}{
		{"cgroup", []string{"--step-user", "nobody"}, true},
		{"subreaper", []string{"--step-cgroup=false"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The step user must reach its workspace and the test's marker files.
			root := t.TempDir()
			for _, d := range []string{filepath.Dir(root), root} {
				if err := os.Chmod(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			work, marks := filepath.Join(root, "work"), filepath.Join(root, "marks")
			for _, d := range []string{work, marks} {
				if err := os.Mkdir(d, 0o777); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(d, 0o777); err != nil { // past the umask
					t.Fatal(err)
				}
			}
			token := executortest.Token(t)
			server := startServerProcess(t, "sqlite://"+testdb.SQLitePath(t))
			workerArgs := append([]string{"worker", "--server", server.base, "--work-dir", work, "--name", "orphans",
				"--max-jobs", "1"}, tc.args...)
			worker := startChild(t, workerArgs)

			run := submitRun(t, server.base, fmt.Sprintf(`name: orphans
jobs:
  work:
    steps:
      - run: |
          id -u > %[2]s/uid
          setsid sh -c 'sleep 1%[1]s & echo $! > %[2]s/escaped' &
          sleep 2%[1]s &
          while [ ! -s %[2]s/escaped ]; do sleep 0.01; done
          echo go > %[2]s/ready
          sleep 3%[1]s
`, token, marks))
			deadline := time.Now().Add(30 * time.Second)
			for {
				if b, err := os.ReadFile(filepath.Join(marks, "ready")); err == nil && len(b) > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the step of run %s did not start; worker log:\n%s", run.ID, worker.stderr.String())
				}
				select {
				case <-worker.exited:
					t.Fatalf("the worker exited:\n%s", worker.stderr.String())
				case <-time.After(20 * time.Millisecond):
				}
			}
			if n := len(executortest.Processes(token)); n < 3 {
				t.Fatalf("%d of the step's processes run, want 3 or more: %v", n, executortest.Processes(token))
			}
			if tc.name == "cgroup" {
				uid, err := os.ReadFile(filepath.Join(marks, "uid"))
				if err != nil || strings.TrimSpace(string(uid)) != "65534" {
					t.Errorf("the step ran as uid %q (%v), want nobody's, 65534", uid, err)
				}
			}

			worker.kill(t)

			if tc.diesWithWorker {
				waitNoProcesses(t, token, "after its worker was killed")
				return
			}
			// A parent-death signal reached the leader only; the rest is the next
			// worker's to find.
			t.Logf("left running by the killed worker: %v", executortest.Processes(token))
			next := startChild(t, workerArgs)
			waitNoProcesses(t, token, "after a new worker started on the same --work-dir")
			deadline = time.Now().Add(10 * time.Second)
			for !strings.Contains(next.stderr.String(), `"reclaimed":1`) {
				if time.Now().After(deadline) {
					t.Fatalf("the new worker's log does not say it reclaimed a step:\n%s", next.stderr.String())
				}
				<-time.After(20 * time.Millisecond)
			}
		})
	}
}

// waitNoProcesses waits until no live process carries token.
func waitNoProcesses(t *testing.T, token, when string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := executortest.Processes(token)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the step's processes are still running %s: %v", when, left)
		}
		<-time.After(20 * time.Millisecond)
	}
}

// TestStepUserRefused: a worker (or gantry up) refuses to start with a --step-user that
// does not exist, or that cannot reach the work dir, and says why.
func TestStepUserRefused(t *testing.T) {
	t.Parallel()
	private := t.TempDir() // 0700, root's: nobody cannot pass through it
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"worker", "--step-user", "gantry-no-such-user"}, "--step-user: look up step user \"gantry-no-such-user\""},
		{[]string{"worker", "--step-user", "nobody", "--work-dir", filepath.Join(private, "work")}, "step user nobody cannot reach"},
		{[]string{"up", "--step-user", "gantry-no-such-user", "--data", t.TempDir()}, "--step-user: look up step user \"gantry-no-such-user\""},
	} {
		out := runCLI(t, invocation{args: tc.args})
		if out.code != 2 || !strings.Contains(out.stderr, tc.want) {
			t.Errorf("gantry %s: exit %d, stderr %q; want 2 and %q", strings.Join(tc.args, " "), out.code, out.stderr, tc.want)
		}
	}
}
