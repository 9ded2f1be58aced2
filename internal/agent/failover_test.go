package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/scheduler"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
)

// replica is one coordinator replica of a shared store, served through a front that a
// test can make fail as a dead replica, or a proxy in front of one, would.
type replica struct {
	srv *httptest.Server
	// fault is how the front fails every request from now on; "" serves them.
	fault atomic.Value
	mu    sync.Mutex
	paths map[string]int // requests served, by the route they took
}

// Faults a replica's front can have.
const (
	faultNone        = ""
	faultUnavailable = "503"   // a proxy answers 503: the replica behind it is gone
	faultReset       = "reset" // the connection is closed without an answer
)

func newReplica(t *testing.T, h http.Handler) *replica {
	r := &replica{paths: map[string]int{}}
	r.fault.Store(faultNone)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch r.fault.Load().(string) {
		case faultUnavailable:
			http.Error(w, "no healthy upstream", http.StatusServiceUnavailable)
			return
		case faultReset:
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		r.mu.Lock()
		r.paths[route(req.URL.Path)]++
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// route names an agent endpoint without the job's id: "heartbeat", "steps", "claim".
func route(path string) string {
	parts := strings.Split(strings.TrimPrefix(path, "/api/v1/agent/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "jobs":
		return parts[2]
	case len(parts) >= 1:
		return parts[0]
	}
	return path
}

// served says how many requests of route the replica served.
func (r *replica) served(route string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.paths[route]
}

// TestFailover: a worker given two coordinator replicas of one store works through the
// first until it fails in the middle of a job, then through the second: the job's
// heartbeats, log, step reports, artifact and completion go there, under the lease the
// first handed out, and the job succeeds at its first attempt although it ran for
// longer than a lease after the failure. A replica down from the start is passed over
// at the register.
func TestFailover(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// fail makes the first replica fail; before says it fails before the worker
		// starts.
		fail   func(r *replica)
		before bool
	}{
		{"closed mid-job", func(r *replica) { r.srv.CloseClientConnections(); r.srv.Listener.Close() }, false},
		{"a proxy answers 503 mid-job", func(r *replica) { r.fault.Store(faultUnavailable) }, false},
		{"connections reset mid-job", func(r *replica) { r.fault.Store(faultReset) }, false},
		{"closed from the start", func(r *replica) { r.srv.Close() }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			testFailover(t, tt.fail, tt.before)
		})
	}
}

func testFailover(t *testing.T, fail func(*replica), before bool) {
	const ttl = 2 * time.Second
	st, err := sqlite.Open(t.Context(), sqlitetest.Path(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	// The reaper takes back a lease that lapsed: a worker that lost its lease while it
	// moved to the other replica would show as a second attempt.
	loopCtx, stopLoops := context.WithCancel(context.Background())
	loops := scheduler.New(scheduler.Config{Store: st, ReapEvery: 50 * time.Millisecond, PromoteEvery: 100 * time.Millisecond,
		StartGrace: ttl})
	loopsDone := make(chan struct{})
	go func() {
		defer close(loopsDone)
		loops.Run(loopCtx)
	}()
	t.Cleanup(func() { stopLoops(); <-loopsDone })
	blobs := newBlobs(t, t.TempDir())
	newAPI := func() http.Handler {
		return api.New(api.Config{Store: st, HeartbeatEvery: 200 * time.Millisecond, LeaseTTL: ttl, Blobs: blobs,
			Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}).Handler()
	}
	first, second := newReplica(t, newAPI()), newReplica(t, newAPI())
	if before {
		fail(first)
	}
	// What the test reads over HTTP it reads from the replica that stays.
	b := &bundle{st: st, url: second.srv.URL}
	goFile := filepath.Join(t.TempDir(), "go")
	// The step waits for the test's word, then outlasts two leases.
	id := b.submit(t, fmt.Sprintf(`
jobs:
  long:
    runs_on: [linux]
    artifacts: { paths: [out.txt] }
    steps:
      - run: 'until [ -e %q ]; do sleep 0.02; done'
      - run: 'for i in 1 2 3; do echo "line $i"; sleep 1.5; done; echo done > out.txt'
`, goFile))
	b.startWith(t, Config{Name: "replicated", Labels: []string{"linux"}, MaxJobs: 1,
		Servers: []string{first.srv.URL, second.srv.URL}})
	waitInHand(t, st, id)
	if !before {
		if first.served("claim") == 0 {
			t.Fatal("the worker did not claim through the first replica")
		}
		fail(first)
	}
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b.wantSuccess(t, id)
	jobs, err := st.ListJobs(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if j := jobs[0]; j.Attempt != 1 {
		t.Errorf("the job ran %d attempts; want its first lease kept through the failover", j.Attempt)
	}
	if log := b.jobLog(t, id, "long"); !strings.Contains(log, "line 1\nline 2\nline 3\n") {
		t.Errorf("the job's log lost lines in the failover:\n%s", log)
	}
	as, err := st.ListArtifacts(t.Context(), jobs[0].ID)
	if err != nil || len(as) != 1 {
		t.Errorf("artifacts of the job: %d, err %v; want out.txt", len(as), err)
	}
	for _, r := range []string{"heartbeat", "logs", "steps", "artifacts", "complete", "control"} {
		if second.served(r) == 0 {
			t.Errorf("no %s request reached the second replica", r)
		}
	}
	if before && second.served("register") == 0 {
		t.Error("the worker did not register through the second replica")
	}
}
