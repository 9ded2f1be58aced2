package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
	"github.com/google/uuid"
)

type bundle struct {
	st    store.Store
	url   string
	blobs *flakyBlobs
}

// setup starts a real coordinator API on a real store.
func setup(t *testing.T) *bundle {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlitetest.Path(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bs := newBlobs(t, t.TempDir())
	b := setupWith(t, st, bs)
	b.blobs = bs
	return b
}

// setupWith starts a real coordinator API on st, keeping artifacts in bs.
func setupWith(t *testing.T, st store.Store, bs blob.Store) *bundle {
	t.Helper()
	coordinator := api.New(api.Config{Store: st, HeartbeatEvery: 200 * time.Millisecond, LeaseTTL: 5 * time.Second, Blobs: bs})
	srv := httptest.NewServer(coordinator.Handler())
	t.Cleanup(func() {
		srv.Close()
		coordinator.Close()
		_ = st.Close()
	})
	return &bundle{st: st, url: srv.URL}
}

// start runs a worker until the test ends.
func (b *bundle) start(t *testing.T, maxJobs int) {
	t.Helper()
	b.startWith(t, Config{Name: "test", Labels: []string{"linux"}, MaxJobs: maxJobs})
}

// startWith runs a worker configured by cfg (its server, logger and, unless it has one,
// work dir filled in) until the test ends.
func (b *bundle) startWith(t *testing.T, cfg Config) {
	t.Helper()
	cfg.Server = b.url
	if cfg.WorkDir == "" {
		cfg.WorkDir = t.TempDir()
	}
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	drain, stop := context.WithCancel(context.Background())
	a := New(cfg)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := a.Run(drain, drain); err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	t.Cleanup(func() { stop(); wg.Wait() })
}

func (b *bundle) submit(t testing.TB, yaml string) uuid.UUID {
	t.Helper()
	p, err := pipeline.Compile([]byte(yaml), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run, _, _, err := b.st.CreateRun(t.Context(), store.CreateRunParams{Plan: p, Trigger: store.Trigger{Branch: "main"}})
	if err != nil {
		t.Fatal(err)
	}
	return run.ID
}

func (b *bundle) waitRun(t testing.TB, id uuid.UUID) *store.Run {
	t.Helper()
	return b.waitRunWithin(t, id, 30*time.Second)
}

// wantSuccess waits for the run and fails the test, with every job's log, unless it
// succeeded.
func (b *bundle) wantSuccess(t *testing.T, run uuid.UUID) {
	t.Helper()
	if r := b.waitRun(t, run); r.Status != store.RunSuccess {
		jobs, _ := b.st.ListJobs(t.Context(), run)
		for _, j := range jobs {
			t.Logf("%s: %s %s\n%s", j.Key, j.Status, j.FailureKind, b.jobLog(t, run, j.Key))
		}
		t.Fatalf("run %s, want success", r.Status)
	}
}

// waitRunWithin waits up to d for the run to end.
func (b *bundle) waitRunWithin(t testing.TB, id uuid.UUID, d time.Duration) *store.Run {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		r, err := b.st.GetRun(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Terminal() {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run still %s after %s", r.Status, d)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}

// TestRunsPipeline: a worker runs a pipeline end to end with real processes: steps share a
// workspace, see env and matrix values and Gantry's variables, and the DAG advances.
func TestRunsPipeline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 2)
	id := b.submit(t, `
name: e2e
env: {GREETING: hello}
jobs:
  build:
    runs_on: [linux]
    matrix: {os: [linux]}
    steps:
      - run: echo "$GREETING from $GANTRY_JOB_NAME on $GANTRY_MATRIX_OS" > out.txt
      - run: test "$(cat out.txt)" = "hello from build on linux"
      - run: test -n "$GANTRY_IDEMPOTENCY_KEY" && test "$GANTRY_ATTEMPT" = 1 && test "$GANTRY_WORKSPACE" = "$PWD"
  flaky:
    steps:
      - {run: exit 3, continue_on_error: true}
      - run: "true"
  after:
    needs: [build, flaky]
    steps:
      - {run: "import os; assert os.environ['GANTRY_JOB_NAME'] == 'after'", shell: python3}
`)
	if r := b.waitRun(t, id); r.Status != store.RunSuccess {
		jobs, _ := b.st.ListJobs(t.Context(), id)
		for _, j := range jobs {
			t.Logf("%s: %s %s", j.Key, j.Status, j.FailureKind)
		}
		t.Fatalf("run %s, want success", r.Status)
	}
	jobs, _ := b.st.ListJobs(t.Context(), id)
	for _, j := range jobs {
		if j.Name != "flaky" {
			continue
		}
		steps, _ := b.st.ListSteps(t.Context(), j.ID)
		if steps[0].Status != store.StepFailed || steps[0].ExitCode == nil || *steps[0].ExitCode != 3 || steps[1].Status != store.StepSuccess {
			t.Errorf("flaky steps: %+v %+v", steps[0], steps[1])
		}
	}
}

func TestFailureFailsTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 1)
	id := b.submit(t, "jobs:\n  a: {steps: [{run: exit 7}, {run: echo never}]}\n  b: {needs: [a], steps: [{run: 'true'}]}\n")
	if r := b.waitRun(t, id); r.Status != store.RunFailed {
		t.Fatalf("run %s, want failed", r.Status)
	}
	jobs, _ := b.st.ListJobs(t.Context(), id)
	if jobs[0].Status != store.JobFailed || jobs[0].ExitCode == nil || *jobs[0].ExitCode != 7 || jobs[1].Status != store.JobSkipped {
		t.Errorf("jobs: a %s exit %v, b %s", jobs[0].Status, jobs[0].ExitCode, jobs[1].Status)
	}
}

// TestCancelReachesTheProcess: cancelling a run stops its running step through the
// control channel, long before the step would end.
func TestCancelReachesTheProcess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 1)
	id := b.submit(t, "jobs:\n  slow: {cancel_grace: 1s, steps: [{run: 'sleep 120'}]}\n")
	deadline := time.Now().Add(20 * time.Second)
	for {
		jobs, _ := b.st.ListJobs(t.Context(), id)
		if jobs[0].Status == store.JobRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job never started: %s", jobs[0].Status)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-t.Context().Done():
			return
		}
	}
	if err := b.st.CancelRun(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if r := b.waitRun(t, id); r.Status != store.RunCancelled {
		t.Fatalf("run %s, want cancelled", r.Status)
	}
}

// TestTimeoutAndHeartbeats: a step that outlives the lease TTL keeps its lease through
// heartbeats, and a job past its timeout is stopped and reported as a timeout.
func TestTimeoutAndHeartbeats(t *testing.T) {
	t.Parallel()
	b := setup(t) // lease TTL 5s, heartbeats every 200ms
	b.start(t, 2)
	long := b.submit(t, "jobs:\n  long: {steps: [{run: 'sleep 6'}]}\n")
	slow := b.submit(t, "jobs:\n  slow: {timeout: 1s, cancel_grace: 1s, steps: [{run: 'sleep 120'}]}\n")
	if r := b.waitRun(t, slow); r.Status != store.RunFailed {
		t.Errorf("run past its timeout: %s, want failed", r.Status)
	}
	jobs, _ := b.st.ListJobs(t.Context(), slow)
	if jobs[0].FailureKind != store.FailureTimeout {
		t.Errorf("failure kind %q, want timeout", jobs[0].FailureKind)
	}
	if r := b.waitRun(t, long); r.Status != store.RunSuccess {
		t.Errorf("a step longer than the lease TTL: run %s, want success", r.Status)
	}
	jobs, _ = b.st.ListJobs(t.Context(), long)
	if jobs[0].Attempt != 1 {
		t.Errorf("the long job ran %d times; its lease should have been renewed", jobs[0].Attempt)
	}
}

// TestDrain: once draining, the worker finishes the job it runs and claims no other.
func TestDrain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	drain, stopClaiming := context.WithCancel(context.Background())
	kill, stopJobs := context.WithCancel(context.Background())
	defer stopJobs()
	a := New(Config{Server: b.url, Name: "drainer", MaxJobs: 1, WorkDir: t.TempDir()})
	first := b.submit(t, "jobs:\n  a: {steps: [{run: 'sleep 1'}]}\n")
	done := make(chan error, 1)
	go func() { done <- a.Run(drain, kill) }()
	waitInHand(t, b.st, first)
	stopClaiming()
	second := b.submit(t, "jobs:\n  b: {steps: [{run: 'true'}]}\n")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("worker: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the draining worker did not stop after its job")
	}
	if r, _ := b.st.GetRun(t.Context(), first); r.Status != store.RunSuccess {
		t.Errorf("the running job's run: %s, want success", r.Status)
	}
	if r, _ := b.st.GetRun(t.Context(), second); r.Status != store.RunPending {
		t.Errorf("a run submitted while draining: %s, want still pending", r.Status)
	}
}

// TestMoreSlotsThanOneClaim: a worker with more slots than one claim may ask for still
// claims (up to the limit at a time) and runs its jobs.
func TestMoreSlotsThanOneClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 100)
	id := b.submit(t, "jobs:\n  a: {steps: [{run: 'true'}]}\n  b: {steps: [{run: 'true'}]}\n")
	b.wantSuccess(t, id)
}

// TestStepReportsWithCompletion checks that step reports still queued when a job ends
// go with its completion to a coordinator that takes them, and each on its own to one
// that does not, and that the steps end up recorded the same either way.
func TestStepReportsWithCompletion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		features bool
	}{{"coordinator takes them", true}, {"older coordinator", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, err := sqlite.Open(t.Context(), sqlitetest.Path(t), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			// The last step fails and the job goes on (continue_on_error): the worker writes
			// that to the job's log just after it queued the step's report, so once the
			// line arrives the report is queued, behind a first report not yet answered.
			stepsDone := make(chan struct{})
			closeDone := sync.OnceFunc(func() { close(stepsDone) })
			var separate, carried atomic.Int64
			h := api.New(api.Config{Store: st, HeartbeatEvery: 200 * time.Millisecond, LeaseTTL: 5 * time.Second}).Handler()
			var held atomic.Bool
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				report := strings.HasSuffix(r.URL.Path, "/start") || strings.Contains(r.URL.Path, "/steps/")
				if report && held.CompareAndSwap(false, true) {
					// Hold the job's first report (its start, or its first step's) so
					// that the rest queue behind it.
					select {
					case <-stepsDone:
					case <-time.After(10 * time.Second):
						t.Error("the steps' log did not arrive while the first report was held")
					}
				}
				switch {
				case strings.HasSuffix(r.URL.Path, "/logs"):
					raw, _ := io.ReadAll(r.Body)
					if bytes.Contains(raw, []byte("continuing")) {
						closeDone()
					}
					r.Body = io.NopCloser(bytes.NewReader(raw))
				case strings.Contains(r.URL.Path, "/steps/"):
					separate.Add(1)
				case strings.HasSuffix(r.URL.Path, "/complete"):
					raw, _ := io.ReadAll(r.Body)
					var body struct {
						Steps []json.RawMessage `json:"steps"`
					}
					_ = json.Unmarshal(raw, &body)
					carried.Add(int64(len(body.Steps)))
					r.Body = io.NopCloser(bytes.NewReader(raw))
				case strings.HasSuffix(r.URL.Path, "/register") && !tc.features:
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, r)
					var ans map[string]any
					_ = json.Unmarshal(rec.Body.Bytes(), &ans)
					delete(ans, "features")
					w.Header().Set("Content-Type", "application/json")
					_ = json.NewEncoder(w).Encode(ans)
					return
				}
				h.ServeHTTP(w, r)
			}))
			t.Cleanup(func() {
				srv.Close()
				_ = st.Close()
			})
			b := &bundle{st: st, url: srv.URL}
			b.start(t, 1)
			run := b.submit(t, "name: s\njobs:\n  j:\n    steps:\n      - {run: 'true'}\n      - {run: 'exit 3', continue_on_error: true}\n")
			b.wantSuccess(t, run)
			jobs, err := st.ListJobs(t.Context(), run)
			if err != nil {
				t.Fatal(err)
			}
			steps, err := st.ListSteps(t.Context(), jobs[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			want := []struct {
				status store.StepStatus
				exit   int
			}{{store.StepSuccess, 0}, {store.StepFailed, 3}}
			for i, s := range steps {
				if s.Status != want[i].status || s.ExitCode == nil || *s.ExitCode != want[i].exit || s.StartedAt.IsZero() || s.FinishedAt.IsZero() {
					t.Errorf("step %d: %s exit %v, started %v, finished %v", s.Index, s.Status, s.ExitCode, s.StartedAt, s.FinishedAt)
				}
			}
			// Each step is reported running, then ended: four reports in all.
			if got := separate.Load() + carried.Load(); got != 4 {
				t.Errorf("%d step reports on their own and %d with the completion, want 4 in all", separate.Load(), carried.Load())
			}
			if tc.features && carried.Load() == 0 || !tc.features && carried.Load() != 0 {
				t.Errorf("%d step reports went with the completion", carried.Load())
			}
		})
	}
}

// stopWorker drains a worker with stop and waits for its Run to return on done.
func stopWorker(t *testing.T, stop func(), done <-chan error) {
	t.Helper()
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("worker: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not stop")
	}
}

// TestJobFilesRemovedOnceReported: a job's workspace and step files are removed after its
// slot is free (a next job does not wait for the file system), and by the time the worker
// stops, none of its jobs' files is left; a failed job's are removed too.
func TestJobFilesRemovedOnceReported(t *testing.T) {
	t.Parallel()
	b := setup(t)
	drain, stop := context.WithCancel(context.Background())
	defer stop()
	work := t.TempDir()
	a := New(Config{Server: b.url, Name: "cleaner", MaxJobs: 1, WorkDir: work})
	done := make(chan error, 1)
	go func() { done <- a.Run(drain, drain) }()
	ok := b.submit(t, "jobs:\n  a: {steps: [{run: 'echo x > f; echo y=1 >> \"$GANTRY_OUTPUT\"'}]}\n  b: {needs: [a], steps: [{run: 'true'}]}\n")
	b.wantSuccess(t, ok)
	failed := b.submit(t, "jobs:\n  c: {steps: [{run: 'echo x > f; exit 3'}]}\n")
	if r := b.waitRun(t, failed); r.Status != store.RunFailed {
		t.Fatalf("run %s, want failed", r.Status)
	}
	stopWorker(t, stop, done)
	entries, err := os.ReadDir(work)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "gantry-job-") || strings.HasPrefix(e.Name(), "gantry-files-") || strings.HasPrefix(e.Name(), "gantry-log-") {
			t.Errorf("left in the work directory: %s", e.Name())
		}
	}
}
