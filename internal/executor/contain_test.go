package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/executor/executortest"
)

// The environment that turns the test binary into a worker stand-in: it holds a
// Containment and runs one step that never ends, so that a test can SIGKILL it.
const (
	childModeEnv  = "GANTRY_EXECUTOR_TEST_CHILD" // "cgroup" or "subreaper"
	childStateEnv = "GANTRY_EXECUTOR_TEST_STATE"
	childWSEnv    = "GANTRY_EXECUTOR_TEST_WS"
	childTokenEnv = "GANTRY_EXECUTOR_TEST_TOKEN"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childModeEnv); mode != "" {
		os.Exit(child(mode))
	}
	os.Exit(m.Run())
}

func child(mode string) int {
	c, err := executor.NewContainment(executor.ContainmentConfig{StateDir: os.Getenv(childStateEnv), NoCgroup: mode != "cgroup"})
	if err != nil || c.Mode() != mode {
		fmt.Fprintf(os.Stderr, "containment: mode %v, %v\n", c.Mode(), err)
		return 2
	}
	token := os.Getenv(childTokenEnv)
	_, err = executor.Shell{Containment: c}.Run(context.Background(), executor.Step{
		Dir: os.Getenv(childWSEnv), Env: []string{"PATH=" + os.Getenv("PATH")},
		Script: fmt.Sprintf(`setsid sh -c 'sleep 1%[1]s & echo $! > escaped' &
sleep 2%[1]s &
while [ ! -s escaped ]; do sleep 0.01; done
echo go > ready
sleep 3%[1]s`, token),
	})
	fmt.Fprintf(os.Stderr, "the step ended: %v\n", err)
	return 1
}

// TestContainmentWorkerKilled kills a process that runs a step the way a worker does,
// with SIGKILL, and shows that the step's processes, one of which left the process
// group with setsid and lost its parent, do not outlive it: on the cgroup path they
// die with it, on the subreaper path the next Containment on the same state directory
// kills them.
func TestContainmentWorkerKilled(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"cgroup", "subreaper"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			state, ws, token := t.TempDir(), t.TempDir(), executortest.Token(t)
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childModeEnv+"="+mode, childStateEnv+"="+state, childWSEnv+"="+ws, childTokenEnv+"="+token)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() {
				defer close(exited)
				_ = cmd.Wait()
			}()
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
				// Whatever the test found, leave nothing running.
				if _, err := executor.NewContainment(executor.ContainmentConfig{StateDir: state, NoCgroup: true}); err != nil {
					t.Error(err)
				}
			})
			deadline := time.Now().Add(20 * time.Second)
			for {
				if b, err := os.ReadFile(filepath.Join(ws, "ready")); err == nil && len(b) > 0 {
					break
				}
				select {
				case <-exited:
					t.Fatalf("the worker stand-in exited: %s", stderr.String())
				case <-time.After(10 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatalf("the step did not start: %s", stderr.String())
				}
			}
			if n := len(executortest.Processes(token)); n < 3 {
				t.Fatalf("%d of the step's processes are running, want 3 or more: %v", n, executortest.Processes(token))
			}
			records := stepRecords(t, state)
			if len(records) != 1 {
				t.Fatalf("step records %v, want one", records)
			}

			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-exited

			if mode == "cgroup" {
				// The guard kills the worker's cgroups as soon as the worker is gone.
				waitGone(t, token)
			} else if left := executortest.Processes(token); len(left) == 0 {
				// Only the leader has a parent-death signal; what left it is found by
				// its mark, by the next worker.
				t.Log("every process died with the worker")
			}

			c, err := executor.NewContainment(executor.ContainmentConfig{StateDir: state, NoCgroup: mode != "cgroup"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			if c.Reclaimed() != 1 {
				t.Errorf("Reclaimed() = %d, want 1", c.Reclaimed())
			}
			if left := executortest.Processes(token); len(left) > 0 {
				t.Errorf("after a new Containment on the same state dir, the dead worker's step still runs: %v", left)
			}
			if left := stepRecords(t, state); len(left) != 0 {
				t.Errorf("records left: %v", left)
			}
			if mode == "cgroup" {
				var r struct{ Cgroup string }
				if err := json.Unmarshal([]byte(records[0]), &r); err != nil || r.Cgroup == "" {
					t.Fatalf("cgroup record %q: %v", records[0], err)
				}
				if _, err := os.Stat(r.Cgroup); !os.IsNotExist(err) {
					t.Errorf("the dead worker's step cgroup %s is still there: %v", r.Cgroup, err)
				}
				if _, err := os.Stat(filepath.Dir(r.Cgroup)); !os.IsNotExist(err) {
					t.Errorf("the dead worker's cgroup %s is still there: %v", filepath.Dir(r.Cgroup), err)
				}
			}
		})
	}
}

// stepRecords returns the contents of the step records in dir.
func stepRecords(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// waitGone waits until no live process carries token.
func waitGone(t *testing.T, token string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := executortest.Processes(token)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the step's processes outlived their worker: %v", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSubreaperReapsOrphans: on the subreaper path the worker adopts a step's orphans;
// one that exits on its own while the step runs must not stay a zombie of the worker.
func TestSubreaperReapsOrphans(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	ex := executor.Shell{Containment: contained(t, false)}
	res, err := ex.Run(t.Context(), executor.Step{Dir: ws, Env: []string{"PATH=" + os.Getenv("PATH")},
		Script: "(sh -c 'echo $$ > orphan' &)\nwhile [ ! -s orphan ]; do sleep 0.01; done\nsleep 0.2"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	b, err := os.ReadFile(filepath.Join(ws, "orphan"))
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(b))
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err == nil && strings.Contains(string(stat), ") Z ") {
		t.Errorf("the step's orphan %s is a zombie after the step: %s", pid, stat)
	}
}
