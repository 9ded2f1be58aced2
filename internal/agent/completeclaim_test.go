package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
	"github.com/google/uuid"
)

// countingAPI is a real coordinator API that counts the claims it is sent: on their
// own, and carried by completions; and the step reports and log batches sent on their
// own, and the completions that carry log lines.
type countingAPI struct {
	*bundle
	claims, carried         atomic.Int64
	steps, logs, linesAlong atomic.Int64
	// carriedOpen is told each time a completion that carries a claim arrives.
	carriedOpen chan struct{}
	// without are features the register answer leaves out, as an older coordinator's
	// would.
	without []string
	// refuseLines, when set, refuses with 400 each completion that carries log lines,
	// counted in refused.
	refuseLines atomic.Bool
	refused     atomic.Int64
}

func setupCounting(t *testing.T, leaseTTL time.Duration, without ...string) *countingAPI {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlitetest.Path(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := &countingAPI{carriedOpen: make(chan struct{}, 100), without: without}
	h := api.New(api.Config{Store: st, HeartbeatEvery: 200 * time.Millisecond, LeaseTTL: leaseTTL,
		Blobs: newBlobs(t, t.TempDir())}).Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/v1/agent/claim":
			c.claims.Add(1)
		case strings.Contains(r.URL.Path, "/steps/"):
			c.steps.Add(1)
		case strings.HasPrefix(r.URL.Path, "/api/v1/agent/") && strings.HasSuffix(r.URL.Path, "/logs"):
			c.logs.Add(1)
		case strings.HasSuffix(r.URL.Path, "/complete"):
			raw, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(raw))
			if bytes.Contains(raw, []byte(`"claim":`)) {
				c.carried.Add(1)
				c.carriedOpen <- struct{}{}
			}
			if bytes.Contains(raw, []byte(`"log":`)) {
				c.linesAlong.Add(1)
				if c.refuseLines.Load() {
					c.refused.Add(1)
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					_, _ = io.WriteString(w, `{"error": {"code": "bad_request", "message": "decode request: unknown field", "details": []}}`)
					return
				}
			}
		case r.URL.Path == "/api/v1/agent/register" && len(c.without) > 0:
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			var ans map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil {
				t.Errorf("register answer: %v", err)
			}
			features, _ := ans["features"].([]any)
			ans["features"] = slices.DeleteFunc(features, func(f any) bool { return slices.Contains(c.without, f.(string)) })
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
	c.bundle = &bundle{st: st, url: srv.URL}
	return c
}

// TestCompletionCarriesClaim runs jobs on a worker of one slot: after the first, each
// job comes with the completion of the one before, not with a claim of its own.
func TestCompletionCarriesClaim(t *testing.T) {
	t.Parallel()
	c := setupCounting(t, 5*time.Second)
	const n = 5
	var runs []uuid.UUID
	for range n {
		runs = append(runs, c.submit(t, "jobs:\n  a: {steps: [{run: 'true'}]}\n"))
	}
	c.start(t, 1)
	for _, id := range runs {
		c.wantSuccess(t, id)
	}
	if got := c.carried.Load(); got < n {
		t.Errorf("%d completions carried a claim, want all %d", got, n)
	}
	// The first job needs a claim of its own; the others were queued before it ended.
	if got := c.claims.Load(); got != 1 {
		t.Errorf("%d claims of their own for %d queued jobs, want 1", got, n)
	}
}

// TestDrainEndsCarriedClaim drains a worker whose last completion's claim is waiting:
// the worker gives the claim up and stops, rather than when the claim's wait (30 s with
// this lease TTL) runs out.
func TestDrainEndsCarriedClaim(t *testing.T) {
	t.Parallel()
	c := setupCounting(t, 2*time.Minute)
	cfg := Config{Name: "test", Labels: []string{"linux"}, MaxJobs: 1, Server: c.url, WorkDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))}
	drain, stop := context.WithCancel(context.Background())
	defer stop()
	a := New(cfg)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := a.Run(drain, drain); err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	c.wantSuccess(t, c.submit(t, "jobs:\n  a: {steps: [{run: 'true'}]}\n"))
	select {
	case <-c.carriedOpen:
	case <-time.After(30 * time.Second):
		t.Fatal("the completion carried no claim")
	}
	stop()
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the drained worker still waits on its completion's claim")
	}
}

// TestQuickJobOneRequest runs quick jobs on a worker of one slot: each job's step
// reports and log lines go with its completion, which carries the next claim too, so a
// job costs the worker one request. An older coordinator, without complete.logs, gets
// the lines in batches of their own, and a step longer than the reports' linger is told
// running while it runs. Every line is stored either way.
func TestQuickJobOneRequest(t *testing.T) {
	t.Parallel()
	const n = 4
	for _, tc := range []struct {
		name    string
		without []string
	}{{"coordinator takes them", nil}, {"older coordinator", []string{featureCompleteLogs}}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := setupCounting(t, 5*time.Second, tc.without...)
			var runs []uuid.UUID
			for i := range n {
				runs = append(runs, c.submit(t, fmt.Sprintf("jobs:\n  a: {steps: [{run: 'echo quick %d; echo two'}]}\n", i)))
			}
			// A linger far longer than a quick job, and shorter than the slow step.
			c.startWith(t, Config{Name: "test", Labels: []string{"linux"}, MaxJobs: 1, ReportLinger: time.Second})
			for i, id := range runs {
				c.wantSuccess(t, id)
				if log := c.jobLog(t, id, "a"); !strings.Contains(log, fmt.Sprintf("quick %d\ntwo", i)) {
					t.Errorf("job %d's log does not hold its lines:\n%s", i, log)
				}
			}
			if got := c.steps.Load(); got != 0 {
				t.Errorf("%d step reports on their own for %d quick jobs, want 0", got, n)
			}
			batches, along := c.logs.Load(), c.linesAlong.Load()
			if tc.without == nil && (batches != 0 || along != n) {
				t.Errorf("%d log batches on their own and %d completions with lines, want 0 and %d", batches, along, n)
			}
			if tc.without != nil && (batches < n || along != 0) {
				t.Errorf("%d log batches on their own and %d completions with lines, want at least %d and 0", batches, along, n)
			}

			// A step that outlasts the linger is told running while it runs.
			run := c.submit(t, "jobs:\n  a: {steps: [{run: 'echo slow; sleep 3'}]}\n")
			job := c.waitJob(t, run, store.JobRunning)
			deadline := time.Now().Add(30 * time.Second)
			for {
				steps, err := c.st.ListSteps(t.Context(), job.ID)
				if err != nil {
					t.Fatal(err)
				}
				if steps[0].Status == store.StepRunning {
					break
				}
				if steps[0].Status != store.StepPending || time.Now().After(deadline) {
					t.Fatalf("the slow step is %s, want it running while it runs", steps[0].Status)
				}
				select {
				case <-t.Context().Done():
					t.Fatal(t.Context().Err())
				case <-time.After(5 * time.Millisecond):
				}
			}
			c.wantSuccess(t, run)
			if got := c.steps.Load(); got != 1 {
				t.Errorf("%d step reports on their own, want 1 (the slow step's start)", got)
			}
		})
	}
}

// TestCompletionLinesRefused: a coordinator that refuses the lines a completion carries
// (400) still gets the job's result, in a completion sent again without them.
func TestCompletionLinesRefused(t *testing.T) {
	t.Parallel()
	c := setupCounting(t, 5*time.Second)
	c.refuseLines.Store(true)
	c.startWith(t, Config{Name: "test", Labels: []string{"linux"}, MaxJobs: 1, ReportLinger: time.Second})
	c.wantSuccess(t, c.submit(t, "jobs:\n  a: {steps: [{run: 'echo refused'}]}\n"))
	if c.refused.Load() != 1 {
		t.Errorf("%d completions refused for their lines, want 1", c.refused.Load())
	}
}
