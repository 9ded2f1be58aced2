package executor_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/executor/executortest"
)

// contained makes a Containment for one test: the cgroup path, or the subreaper path
// even where cgroups work, so that both are tested on a host that has them.
func contained(t *testing.T, cgroup bool) *executor.Containment {
	t.Helper()
	c, err := executor.NewContainment(executor.ContainmentConfig{StateDir: t.TempDir(), NoCgroup: !cgroup})
	if err != nil {
		t.Fatalf("NewContainment: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Containment.Close: %v", err)
		}
	})
	want := "subreaper"
	if cgroup {
		// Fail rather than skip: a host where the cgroup path cannot be tested must
		// say so (the tests run as root, with a cgroup v2 hierarchy mounted).
		want = "cgroup"
	}
	if c.Mode() != want {
		t.Fatalf("containment mode %q, want %q: is a cgroup v2 hierarchy mounted and writable?", c.Mode(), want)
	}
	return c
}

func needBwrap(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("the sandbox executor needs bwrap: install bubblewrap (make deps does)")
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	executors := []struct {
		name string
		new  func(t *testing.T) executor.Executor
	}{
		{"ShellCgroup", func(t *testing.T) executor.Executor { return executor.Shell{Containment: contained(t, true)} }},
		{"ShellSubreaper", func(t *testing.T) executor.Executor { return executor.Shell{Containment: contained(t, false)} }},
		{"SandboxCgroup", func(t *testing.T) executor.Executor {
			needBwrap(t)
			return executor.Sandbox{Containment: contained(t, true)}
		}},
		{"SandboxSubreaper", func(t *testing.T) executor.Executor {
			needBwrap(t)
			return executor.Sandbox{Containment: contained(t, false)}
		}},
	}
	for _, e := range executors {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			executortest.Run(t, e.new)
		})
	}
}

var _ = os.Getpid
