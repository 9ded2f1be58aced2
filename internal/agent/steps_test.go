package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// jobView is GET /api/v1/jobs/{id}, as far as these tests read it.
type jobView struct {
	Status      string `json:"status"`
	FailureKind string `json:"failure_kind"`
	Steps       []struct {
		Name        string          `json:"name"`
		Status      string          `json:"status"`
		FailureKind json.RawMessage `json:"failure_kind"`
	} `json:"steps"`
}

func (b *bundle) jobView(t *testing.T, id uuid.UUID) jobView {
	t.Helper()
	res, err := http.Get(b.url + "/api/v1/jobs/" + id.String())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var v jobView
	if err := json.NewDecoder(res.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// waitJob polls until the run's only job reaches one of statuses.
func (b *bundle) waitJob(t *testing.T, run uuid.UUID, statuses ...store.JobStatus) *store.Job {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		jobs, err := b.st.ListJobs(t.Context(), run)
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 1 {
			t.Fatalf("%d jobs, want 1", len(jobs))
		}
		for _, s := range statuses {
			if jobs[0].Status == s {
				return jobs[0]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("job is %s, want one of %v", jobs[0].Status, statuses)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestStepTimeout runs a step past its own timeout: it is stopped, the step and the job
// fail with failure kind timeout, the log says so, and the retry policy's on: [timeout]
// applies. A step within its timeout is not touched, and continue_on_error goes on past
// a step that timed out.
func TestStepTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 2)

	t.Run("fails the job", func(t *testing.T) {
		t.Parallel()
		run := b.submit(t, `
name: timeout
jobs:
  slow:
    retry: { max_attempts: 2, backoff: 1h, on: [timeout] }
    steps:
      - { name: quick, run: "true", timeout: 30s }
      - { name: hang, run: "echo started; sleep 60", timeout: 1s }
      - { name: never, run: "true" }
`)
		began := time.Now()
		job := b.waitJob(t, run, store.JobRetrying, store.JobFailed, store.JobSuccess)
		if took := time.Since(began); took > 20*time.Second {
			t.Errorf("a step with a 1s timeout held its job %s", took)
		}
		if job.Status != store.JobRetrying || job.FailureKind != store.FailureTimeout {
			t.Errorf("job %s, failure kind %q; want retrying (on: [timeout]) after a timeout", job.Status, job.FailureKind)
		}
		steps, err := b.st.ListSteps(t.Context(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s := steps[0]; s.Status != store.StepSuccess || s.FailureKind != "" {
			t.Errorf("step quick: %s %q, want success", s.Status, s.FailureKind)
		}
		if s := steps[1]; s.Status != store.StepFailed || s.FailureKind != store.FailureTimeout {
			t.Errorf("step hang: %s %q, want failed, timeout", s.Status, s.FailureKind)
		}
		if s := steps[2]; s.Status != store.StepSkipped {
			t.Errorf("step never: %s, want skipped (a step before it failed)", s.Status)
		}
		v := b.jobView(t, job.ID)
		if got := string(v.Steps[1].FailureKind); got != `"timeout"` {
			t.Errorf("API view of step hang: failure_kind %s, want \"timeout\"", got)
		}
		if got := v.Steps[0].FailureKind; got != nil {
			t.Errorf("API view of step quick: failure_kind %s, want it omitted", got)
		}
		log := b.jobLog(t, run, "slow")
		if !strings.Contains(log, "step hang timed out after 1s") || !strings.Contains(log, "started") {
			t.Errorf("log does not tell the timeout:\n%s", log)
		}
	})

	t.Run("continue_on_error", func(t *testing.T) {
		t.Parallel()
		run := b.submit(t, `
name: timeout-continue
jobs:
  slow:
    steps:
      - { name: hang, run: "sleep 60", timeout: 1s, continue_on_error: true }
      - { name: after, run: "true" }
`)
		job := b.waitJob(t, run, store.JobSuccess, store.JobFailed)
		if job.Status != store.JobSuccess {
			t.Errorf("job %s %q, want success: the timed-out step continues on error", job.Status, job.FailureKind)
		}
		steps, err := b.st.ListSteps(t.Context(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if steps[0].Status != store.StepFailed || steps[0].FailureKind != store.FailureTimeout || steps[1].Status != store.StepSuccess {
			t.Errorf("steps %s %q, %s; want failed timeout, success", steps[0].Status, steps[0].FailureKind, steps[1].Status)
		}
	})

	t.Run("job timeout", func(t *testing.T) {
		t.Parallel()
		run := b.submit(t, `
name: job-timeout
jobs:
  slow:
    timeout: 1s
    steps:
      - { name: hang, run: "sleep 60" }
`)
		job := b.waitJob(t, run, store.JobFailed, store.JobSuccess)
		if job.FailureKind != store.FailureTimeout {
			t.Errorf("job %s %q, want failed, timeout", job.Status, job.FailureKind)
		}
		steps, err := b.st.ListSteps(t.Context(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if steps[0].Status != store.StepFailed || steps[0].FailureKind != store.FailureTimeout {
			t.Errorf("step stopped by its job's timeout: %s %q, want failed, timeout", steps[0].Status, steps[0].FailureKind)
		}
	})
}

// TestStepUser runs steps as an unprivileged user: they see its uid, and can write
// their workspace.
func TestStepUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("running steps as another user needs a root worker: run the tests as root")
	}
	u, err := executor.LookupUser("nobody")
	if err != nil {
		t.Fatal(err)
	}
	// The step user must reach the workspaces under the work dir.
	work := t.TempDir()
	for _, d := range []string{filepath.Dir(work), work} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b := setup(t)
	a := New(Config{Server: b.url, Name: "as-nobody", MaxJobs: 1, Executor: executor.Shell{User: u}, WorkDir: work,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	drain, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(drain, drain) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	run := b.submit(t, `
name: step-user
jobs:
  who:
    steps:
      - { run: "id -u; id -g; echo written > f; cat f" }
`)
	b.wantSuccess(t, run)
	log := b.jobLog(t, run, "who")
	want := strconv.Itoa(int(u.UID)) + "\n" + strconv.Itoa(int(u.GID)) + "\nwritten\n"
	if !strings.Contains(log, want) {
		t.Errorf("log %q, want the step user's uid and gid (%q)", log, want)
	}
	if out, err := exec.Command("id", "-u").Output(); err != nil || strings.TrimSpace(string(out)) != "0" {
		t.Errorf("the worker itself is not root (%q, %v)", out, err)
	}
}
