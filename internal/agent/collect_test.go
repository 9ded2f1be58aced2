package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/store"
)

// copyingJobs is a JobExecutor whose sessions run the steps in a copy of the workspace,
// as a pod does, and implement executor.Collector: until Collect copies the copy back,
// the worker's workspace holds nothing the steps made.
type copyingJobs struct {
	executor.Shell
	collectErr error

	mu     sync.Mutex
	events []string // "step", "collect", "end", in the order the agent called them
}

func (f *copyingJobs) note(ev string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, ev)
}

func (f *copyingJobs) calls() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.events, ",")
}

func (f *copyingJobs) Begin(ctx context.Context, j executor.Job) (executor.Session, error) {
	pod := filepath.Join(filepath.Dir(j.Workspace), filepath.Base(j.Workspace)+"-pod")
	if out, err := exec.Command("cp", "-a", j.Workspace, pod).CombinedOutput(); err != nil {
		return nil, errors.New("copy the workspace in: " + string(out))
	}
	return &copyingSession{f: f, ws: j.Workspace, pod: pod}, nil
}

type copyingSession struct {
	f       *copyingJobs
	ws, pod string
}

func (s *copyingSession) Run(ctx context.Context, st executor.Step) (executor.Result, error) {
	s.f.note("step")
	st.Dir = s.pod
	return s.f.Shell.Run(ctx, st)
}

func (s *copyingSession) Collect(ctx context.Context) error {
	s.f.note("collect")
	if s.f.collectErr != nil {
		return s.f.collectErr
	}
	if err := os.RemoveAll(s.ws); err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-a", s.pod, s.ws).CombinedOutput(); err != nil {
		return errors.New("copy the workspace back: " + string(out))
	}
	return nil
}

func (s *copyingSession) End(ctx context.Context) error {
	s.f.note("end")
	return os.RemoveAll(s.pod)
}

// TestCollectBeforeArtifacts: a session that is an executor.Collector has the workspace
// copied back after the last step and before End, so the artifacts a job made in its
// environment are kept; a job without artifacts or caches is not copied; a failed copy
// fails the job and says why.
func TestCollectBeforeArtifacts(t *testing.T) {
	t.Parallel()
	t.Run("artifacts", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		fake := &copyingJobs{}
		b.startWith(t, Config{Name: "k8s", MaxJobs: 1, Executor: fake})
		run := b.submit(t, `
jobs:
  build:
    image: gantry-test/go:1.26
    steps:
      - run: mkdir -p out && echo built > out/app && chmod 755 out/app
      - run: test -f out/app
    artifacts: { paths: [out/app] }
`)
		b.wantSuccess(t, run)
		if got, want := fake.calls(), "step,step,collect,end"; got != want {
			t.Errorf("session calls %s, want %s", got, want)
		}
		as := b.runArtifacts(t, run)
		if a, ok := as["build:out/app"]; !ok || a.State != "stored" || a.Mode != 0o755 {
			t.Errorf("artifacts %+v, want out/app stored with mode 755", as)
		}
	})
	t.Run("nothing to keep", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		fake := &copyingJobs{}
		b.startWith(t, Config{Name: "k8s", MaxJobs: 1, Executor: fake})
		run := b.submit(t, "jobs:\n  a:\n    image: gantry-test/go:1.26\n    steps: [{run: 'echo x > x'}]\n")
		b.wantSuccess(t, run)
		if got, want := fake.calls(), "step,end"; got != want {
			t.Errorf("session calls %s, want %s", got, want)
		}
	})
	t.Run("copy fails", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		fake := &copyingJobs{collectErr: errors.New("pod gantry-x: gantry pod-tar exited 2: no space")}
		b.startWith(t, Config{Name: "k8s", MaxJobs: 1, Executor: fake})
		run := b.submit(t, "jobs:\n  a:\n    image: gantry-test/go:1.26\n    steps: [{run: 'echo x > x'}]\n    artifacts: { paths: [x] }\n")
		if r := b.waitRun(t, run); r.Status != store.RunFailed {
			t.Fatalf("run %s, want failed", r.Status)
		}
		if got, want := fake.calls(), "step,collect,end"; got != want {
			t.Errorf("session calls %s, want %s", got, want)
		}
		log := b.jobLog(t, run, "a")
		if !strings.Contains(log, "could not copy the workspace back from the job's environment") || !strings.Contains(log, "no space") {
			t.Errorf("log does not say why:\n%s", log)
		}
		if as := b.runArtifacts(t, run); len(as) != 0 {
			t.Errorf("artifacts %+v kept from a workspace not copied back", as)
		}
	})
}

// losingJobs is a JobExecutor whose environment is lost under the first step, as a pod
// evicted mid-job.
type losingJobs struct {
	executor.Shell
}

func (f *losingJobs) Begin(ctx context.Context, j executor.Job) (executor.Session, error) {
	return losingSession{}, nil
}

type losingSession struct{}

func (losingSession) Run(ctx context.Context, st executor.Step) (executor.Result, error) {
	return executor.Result{}, fmt.Errorf("step in pod gantry-x: pod is gone: it was deleted or evicted: %w", executor.ErrEnvironmentLost)
}

func (losingSession) End(ctx context.Context) error { return nil }

// TestEnvironmentLost: a job whose environment goes under a step is reported failed as
// lost, which goes back to the queue at once as a lapsed lease does: counted with
// retry.on: [lost] while attempts are left, as a free redelivery (three at most)
// without it; and the log says what happened.
func TestEnvironmentLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWith(t, Config{Name: "k8s", MaxJobs: 2, Executor: &losingJobs{}})
	for _, tt := range []struct {
		name, retry                string
		attempts, wantRedeliveries int
	}{
		{"retried", "retry: { max_attempts: 2, backoff: 1h, on: [lost] }", 2, 0},
		{"not in on", "retry: { max_attempts: 2, backoff: 1h, on: [failure] }", 4, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			run := b.submit(t, "jobs:\n  a:\n    image: gantry-test/go:1.26\n    "+tt.retry+"\n    steps: [{run: 'true'}]\n")
			job := b.waitJob(t, run, store.JobRetrying, store.JobFailed, store.JobSuccess)
			if job.Status != store.JobFailed || job.FailureKind != store.FailureLost || job.Attempt != tt.attempts || job.Redeliveries != tt.wantRedeliveries {
				t.Errorf("job %s, failure kind %q, attempt %d, %d redeliveries; want failed, lost, attempt %d, %d redeliveries",
					job.Status, job.FailureKind, job.Attempt, job.Redeliveries, tt.attempts, tt.wantRedeliveries)
			}
			if log := b.jobLog(t, run, "a"); !strings.Contains(log, "the job's environment was lost: step in pod gantry-x: pod is gone") {
				t.Errorf("log does not say the environment was lost:\n%s", log)
			}
		})
	}
}
