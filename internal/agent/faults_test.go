package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/scheduler"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
	"github.com/google/uuid"
)

// coordinator is a real coordinator (SQLite store, API over HTTP, scheduler loops) that a
// test can stop and start again on the same database file and the same address.
type coordinator struct {
	tb    testing.TB
	path  string
	addr  string
	url   string
	opts  coordOpts
	st    store.Store
	close func()
}

type coordOpts struct {
	leaseTTL       time.Duration // default 5s
	heartbeatEvery time.Duration // default 200ms
	reapEvery      time.Duration // default 100ms
	clock          clock.Clock   // the store's; default the wall clock
}

// newCoordinator reserves an address and a database file; up starts serving them.
func newCoordinator(tb testing.TB, opts coordOpts) *coordinator {
	tb.Helper()
	if opts.leaseTTL == 0 {
		opts.leaseTTL = 5 * time.Second
	}
	if opts.heartbeatEvery == 0 {
		opts.heartbeatEvery = 200 * time.Millisecond
	}
	if opts.reapEvery == 0 {
		opts.reapEvery = 100 * time.Millisecond
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		tb.Fatal(err)
	}
	c := &coordinator{tb: tb, path: sqlitetest.Path(tb), addr: addr, url: "http://" + addr, opts: opts}
	tb.Cleanup(func() {
		if c.close != nil {
			c.down()
		}
	})
	return c
}

// up opens the store and serves the API and the scheduler loops on the coordinator's
// address, as `gantry server` does.
func (c *coordinator) up() {
	c.tb.Helper()
	st, err := sqlite.Open(context.Background(), c.path, sqlite.Options{Clock: c.opts.clock})
	if err != nil {
		c.tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		_ = st.Close()
		c.tb.Fatalf("listen again on %s: %v", c.addr, err)
	}
	h := api.New(api.Config{Store: st, LeaseTTL: c.opts.leaseTTL, HeartbeatEvery: c.opts.heartbeatEvery, Blobs: newBlobs(c.tb, filepath.Join(filepath.Dir(c.path), "blobs")),
		Logger: slog.New(slog.NewTextHandler(c.tb.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}).Handler()
	// Handlers are counted so that down closes the store only after the last one returned.
	var handlers sync.WaitGroup
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers.Add(1)
		defer handlers.Done()
		h.ServeHTTP(w, r)
	})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	loopCtx, stopLoops := context.WithCancel(context.Background())
	loops := scheduler.New(scheduler.Config{Store: st, ReapEvery: c.opts.reapEvery, PromoteEvery: 100 * time.Millisecond,
		StartGrace: c.opts.leaseTTL})
	loopsDone := make(chan struct{})
	go func() {
		defer close(loopsDone)
		loops.Run(loopCtx)
	}()
	c.st = st
	c.close = func() {
		_ = srv.Close() // also ends the long polls in flight: their connections close
		<-served
		handlers.Wait()
		stopLoops()
		<-loopsDone
		if err := st.Close(); err != nil {
			c.tb.Errorf("close store: %v", err)
		}
	}
}

// down stops serving and closes the store, like a coordinator that went away.
func (c *coordinator) down() {
	c.close()
	c.close, c.st = nil, nil
}

func (c *coordinator) bundle() *bundle { return &bundle{st: c.st, url: c.url} }

// logRecorder keeps the messages an agent logs, and passes them on to the test's output.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
	cond chan struct{} // closed and replaced on every message
}

func newLogRecorder() *logRecorder { return &logRecorder{cond: make(chan struct{})} }

func (r *logRecorder) add(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, msg)
	close(r.cond)
	r.cond = make(chan struct{})
}

// count says how many times msg was logged, and gives a channel closed on the next message.
func (r *logRecorder) count(msg string) (int, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		if m == msg {
			n++
		}
	}
	return n, r.cond
}

// wait waits until msg was logged more than after times.
func (r *logRecorder) wait(tb testing.TB, msg string, after int) {
	tb.Helper()
	deadline := time.After(30 * time.Second)
	for {
		n, next := r.count(msg)
		if n > after {
			return
		}
		select {
		case <-next:
		case <-deadline:
			tb.Fatalf("the agent did not log %q within 30s", msg)
		}
	}
}

type recordingHandler struct {
	slog.Handler
	r *logRecorder
}

func (h recordingHandler) Handle(ctx context.Context, rec slog.Record) error {
	h.r.add(rec.Message)
	return h.Handler.Handle(ctx, rec)
}

func (h recordingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return recordingHandler{h.Handler.WithAttrs(as), h.r}
}

func (h recordingHandler) WithGroup(name string) slog.Handler {
	return recordingHandler{h.Handler.WithGroup(name), h.r}
}

// startAgent runs a one-slot worker against url until the test ends, and returns what it
// logs at level and above.
func startAgent(tb testing.TB, url string, level slog.Level) *logRecorder {
	tb.Helper()
	rec := newLogRecorder()
	text := slog.NewTextHandler(tb.Output(), &slog.HandlerOptions{Level: level})
	a := New(Config{Server: url, Name: "faulty", Labels: []string{"linux"}, MaxJobs: 1, WorkDir: tb.TempDir(),
		Logger: slog.New(recordingHandler{text, rec})})
	drain, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := a.Run(drain, drain); err != nil {
			tb.Errorf("agent: %v", err)
		}
	}()
	tb.Cleanup(func() { stop(); <-done })
	return rec
}

// waitJob polls the run's only job until ok accepts it.
func waitJob(tb testing.TB, st store.Store, run uuid.UUID, what string, ok func(*store.Job) bool) *store.Job {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		jobs, err := st.ListJobs(tb.Context(), run)
		if err != nil {
			tb.Fatal(err)
		}
		if ok(jobs[0]) {
			return jobs[0]
		}
		if time.Now().After(deadline) {
			tb.Fatalf("job never %s: %s, attempt %d", what, jobs[0].Status, jobs[0].Attempt)
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-tb.Context().Done():
			tb.Fatal(tb.Context().Err())
		}
	}
}

// waitInHand waits until the run's only job is running on the worker: its first step has
// started. A job is running as soon as a claim that starts it commits, which may be
// before the worker has the claim's answer.
func waitInHand(tb testing.TB, st store.Store, run uuid.UUID) *store.Job {
	tb.Helper()
	return waitJob(tb, st, run, "running on the worker", func(j *store.Job) bool {
		if j.Status != store.JobRunning {
			return false
		}
		steps, err := st.ListSteps(tb.Context(), j.ID)
		return err == nil && len(steps) > 0 && steps[0].Status != store.StepPending
	})
}

// pause lets an outage last d. It is the fault being injected, not a wait for something.
func pause(tb testing.TB, d time.Duration) {
	select {
	case <-time.After(d):
	case <-tb.Context().Done():
		tb.Fatal(tb.Context().Err())
	}
}

// TestCoordinatorRestart: the coordinator stops (server and store) while a worker runs a
// job and comes back on the same database and address, within the lease's TTL less the
// worker's margin. The worker keeps running the job through failing heartbeats, and its
// result is recorded once the coordinator is back: the first attempt succeeds. (A longer
// outage fences the job: TestOutageFences.)
func TestCoordinatorRestart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts coordOpts
		step string
		// outage is how long the coordinator stays down once the job runs.
		outage time.Duration
	}{
		// The step ends during the outage: its step and completion reports wait for
		// the coordinator to come back.
		{"step ends during the outage", coordOpts{leaseTTL: 8 * time.Second}, "sleep 2", 3 * time.Second},
		// The step outlasts the outage; the reaper, running every 20ms, must leave the
		// lease to the worker's heartbeats once the coordinator is back.
		{"step outlasts the outage", coordOpts{leaseTTL: 8 * time.Second, reapEvery: 20 * time.Millisecond},
			"sleep 5", 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCoordinator(t, tt.opts)
			c.up()
			logs := startAgent(t, c.url, slog.LevelInfo)
			id := c.bundle().submit(t, fmt.Sprintf("jobs:\n  a: {steps: [{run: %q}, {run: 'true'}]}\n", tt.step))
			waitInHand(t, c.st, id)
			c.down()
			// Shorter than the TTL less the worker's margin (an eighth), counted from the
			// last heartbeat before the outage.
			pause(t, tt.outage)
			c.up()
			b := c.bundle()
			b.wantSuccess(t, id)
			jobs, err := b.st.ListJobs(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if jobs[0].Attempt != 1 {
				t.Errorf("job ran %d attempts; want the first one to be recorded", jobs[0].Attempt)
			}
			if n, _ := logs.count("heartbeat failed; the job keeps running while its lease lasts"); n == 0 {
				t.Error("no heartbeat failed during the outage")
			}
			if n, _ := logs.count(fencedMsg); n != 0 {
				t.Error("the worker fenced a job whose lease the outage did not outlast")
			}
			wantStepsSucceeded(t, b.st, jobs[0].ID)
		})
	}
}

// fencedMsg is what the worker logs when it stops a job whose lease it could not renew.
const fencedMsg = "lease not renewed in time: killing the job's steps and reporting nothing more of this attempt"

// TestOutageFences: the coordinator goes away for longer than the lease's TTL while a
// worker runs a job. Before the TTL is over by the worker's clock the worker kills the
// job's processes, at once although they ignore SIGTERM and the job's cancel grace is
// five minutes, while the coordinator is still away; it reports nothing of that attempt.
// Once the coordinator is back the job is reaped and runs again, and its second attempt
// decides the result.
func TestOutageFences(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	c := newCoordinator(t, coordOpts{leaseTTL: ttl, heartbeatEvery: 500 * time.Millisecond, reapEvery: 20 * time.Millisecond})
	c.up()
	logs := startAgent(t, c.url, slog.LevelInfo)
	pidFile := filepath.Join(t.TempDir(), "pids")
	id := c.bundle().submit(t, fmt.Sprintf(`
jobs:
  a:
    cancel_grace: 5m
    env: {PIDS: %q}
    steps:
      - run: |
          if [ "$GANTRY_ATTEMPT" = 1 ]; then
            trap "" TERM
            echo $$ >> "$PIDS"
            sleep 300 &
            echo $! >> "$PIDS"
            wait
          fi
`, pidFile))
	waitInHand(t, c.st, id)
	pids := readPids(t, pidFile, 2)
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	c.down()
	downAt := time.Now()
	logs.wait(t, fencedMsg, 0)
	// The fence fires within the TTL of the last renewal, which was before the outage;
	// the kill takes no grace.
	waitGone(t, pids, 10*time.Second)
	if d := time.Since(downAt); d > ttl+5*time.Second {
		t.Errorf("the step's processes died %s after the coordinator went away; want within the TTL (%s) and the kill", d, ttl)
	}
	logs.wait(t, "lease ran out: the job's steps were killed; not reporting", 0)
	c.up()
	b := c.bundle()
	b.wantSuccess(t, id)
	jobs, err := b.st.ListJobs(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if jobs[0].Attempt != 2 {
		t.Errorf("job succeeded at attempt %d; want the second attempt, after the first was fenced", jobs[0].Attempt)
	}
	if n, _ := logs.count("report completion"); n != 0 {
		t.Errorf("the worker tried to report the fenced attempt %d times", n)
	}
	wantStepsSucceeded(t, b.st, jobs[0].ID)
}

// alive says whether the process exists and is not a zombie.
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	i := bytes.LastIndexByte(data, ')')
	return i < 0 || i+2 >= len(data) || data[i+2] != 'Z'
}

// readPids waits until the file lists at least n pids and returns them.
func readPids(tb testing.TB, path string, n int) []int {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, _ := os.ReadFile(path)
		var pids []int
		for _, f := range strings.Fields(string(data)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				tb.Fatalf("%s: %v", path, err)
			}
			pids = append(pids, pid)
		}
		if len(pids) >= n && bytes.HasSuffix(data, []byte("\n")) {
			return pids
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s lists %d pids after 30s, want %d", path, len(pids), n)
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-tb.Context().Done():
			tb.Fatal(tb.Context().Err())
		}
	}
}

// waitGone waits until none of pids is alive.
func waitGone(tb testing.TB, pids []int, within time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		var left []int
		for _, pid := range pids {
			if alive(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("processes %v still alive after %s", left, within)
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-tb.Context().Done():
			tb.Fatal(tb.Context().Err())
		}
	}
}

// TestLeaseLost: when the lease goes away under a running job (here: it expires and is
// reaped), the worker's next heartbeat gets 409: it kills the step's processes, reports
// nothing about that attempt, and the job's next attempt decides the result.
func TestLeaseLost(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	c := newCoordinator(t, coordOpts{clock: clk})
	c.up()
	logs := startAgent(t, c.url, slog.LevelInfo)
	pidFile := filepath.Join(t.TempDir(), "pids")
	id := c.bundle().submit(t, fmt.Sprintf(`
jobs:
  a:
    cancel_grace: 1s
    env: {PIDS: %q}
    steps:
      - run: |
          if [ "$GANTRY_ATTEMPT" = 1 ]; then
            echo $$ >> "$PIDS"
            sleep 300 &
            echo $! >> "$PIDS"
            wait
          fi
`, pidFile))
	first := waitInHand(t, c.st, id)
	pids := readPids(t, pidFile, 2)
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	// Expire the lease on the store's clock and reap it, as the scheduler would; a
	// heartbeat landing between the two renews it, so try until the reap took it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		clk.Advance(time.Hour)
		if _, err := c.st.ReapExpiredLeases(t.Context()); err != nil {
			t.Fatal(err)
		}
		j, err := c.st.GetJob(t.Context(), first.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.LeaseToken != first.LeaseToken {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease was never reaped")
		}
	}
	logs.wait(t, "lease lost: another worker owns the job now; not reporting", 0)
	waitGone(t, pids, 10*time.Second)

	b := c.bundle()
	b.wantSuccess(t, id)
	jobs, err := b.st.ListJobs(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if jobs[0].Attempt != 2 || jobs[0].Status != store.JobSuccess {
		t.Errorf("job: %s at attempt %d; want success from attempt 2", jobs[0].Status, jobs[0].Attempt)
	}
	steps, err := b.st.ListSteps(t.Context(), jobs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if steps[0].Status != store.StepSuccess || steps[0].Attempt != 2 {
		t.Errorf("step: %s from attempt %d; want success from attempt 2", steps[0].Status, steps[0].Attempt)
	}
	if n, _ := logs.count("report completion"); n != 0 {
		t.Errorf("the worker tried to report the lost attempt %d times", n)
	}
}

// TestOnceSkippedOnRetry: a once step that succeeded in attempt 1 is skipped when a later
// step's failure makes the job run again.
func TestOnceSkippedOnRetry(t *testing.T) {
	t.Parallel()
	c := newCoordinator(t, coordOpts{})
	c.up()
	startAgent(t, c.url, slog.LevelInfo)
	ledger := filepath.Join(t.TempDir(), "ledger")
	id := c.bundle().submit(t, fmt.Sprintf(`
jobs:
  deploy:
    retry: {max_attempts: 2, backoff: 100ms, on: [failure]}
    env: {LEDGER: %q}
    steps:
      - {run: 'echo "$GANTRY_ATTEMPT $GANTRY_IDEMPOTENCY_KEY" >> "$LEDGER"', once: true}
      - run: test "$GANTRY_ATTEMPT" -ge 2
`, ledger))
	b := c.bundle()
	b.wantSuccess(t, id)
	data, err := os.ReadFile(ledger)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(data)), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "1 ") {
		t.Errorf("ledger %q: want the once step to have run once, in attempt 1", data)
	}
	jobs, err := b.st.ListJobs(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if jobs[0].Attempt != 2 {
		t.Errorf("job succeeded at attempt %d, want 2", jobs[0].Attempt)
	}
	steps, err := b.st.ListSteps(t.Context(), jobs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if steps[0].Status != store.StepSkipped || steps[1].Status != store.StepSuccess || steps[1].Attempt != 2 {
		t.Errorf("steps: %s (attempt %d), %s (attempt %d); want skipped, then success in attempt 2",
			steps[0].Status, steps[0].Attempt, steps[1].Status, steps[1].Attempt)
	}
}

// TestCancelKillsProcessTree: cancelling a run through the API kills every process of the
// step's process group, children that ignore SIGTERM and double-forked grandchildren
// included, once the grace period is over.
//
// What the design guarantees stops at the process group: a descendant that calls setsid
// leaves the group and the Shell executor cannot reach it. The test starts one to check
// that the step still ends, and reports whether it survived.
func TestCancelKillsProcessTree(t *testing.T) {
	t.Parallel()
	c := newCoordinator(t, coordOpts{})
	c.up()
	startAgent(t, c.url, slog.LevelInfo)
	dir := t.TempDir()
	pidFile, escapedFile := filepath.Join(dir, "pids"), filepath.Join(dir, "escaped")
	// Ignored signals stay ignored in children, across exec.
	id := c.bundle().submit(t, fmt.Sprintf(`
jobs:
  tree:
    cancel_grace: 500ms
    env: {PIDS: %q, ESCAPED: %q}
    steps:
      - run: |
          trap "" TERM
          echo $$ >> "$PIDS"
          sh -c 'echo $$ >> "$PIDS"; exec sleep 300' &
          ( sh -c 'echo $$ >> "$PIDS"; exec sleep 300' & )
          setsid sh -c 'echo $$ >> "$ESCAPED"; exec sleep 300' >/dev/null 2>&1 &
          sleep 300 &
          echo $! >> "$PIDS"
          wait
`, pidFile, escapedFile))
	waitInHand(t, c.st, id)
	pids := readPids(t, pidFile, 4)
	escaped := readPids(t, escapedFile, 1)
	t.Cleanup(func() {
		for _, pid := range append(pids, escaped...) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	resp, err := http.Post(c.url+"/api/v1/runs/"+id.String()+"/cancel", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %s", resp.Status)
	}
	b := c.bundle()
	if r := b.waitRun(t, id); r.Status != store.RunCancelled {
		t.Fatalf("run %s, want cancelled", r.Status)
	}
	// The executor SIGKILLs the group before the worker reports: by now every member
	// is dead or dying.
	waitGone(t, pids, 5*time.Second)
	if alive(escaped[0]) {
		t.Logf("known limit: process %d, which left the step's session with setsid, outlived the cancel", escaped[0])
	}
}

// TestCoordinatorUnreachable: a worker started before its coordinator keeps trying to
// register and claim, and runs work once the coordinator is up; the same after the
// coordinator goes away between two jobs.
func TestCoordinatorUnreachable(t *testing.T) {
	t.Parallel()
	c := newCoordinator(t, coordOpts{})
	logs := startAgent(t, c.url, slog.LevelInfo)
	logs.wait(t, "register failed; trying again", 0)
	c.up()
	b := c.bundle()
	if r := b.waitRun(t, b.submit(t, "jobs:\n  a: {steps: [{run: 'true'}]}\n")); r.Status != store.RunSuccess {
		t.Fatalf("first run %s, want success", r.Status)
	}

	// Go down only once the worker has heard that its report arrived; an answer lost
	// on the way would keep it retrying that report instead of claiming.
	logs.wait(t, "job finished", 0)
	failed, _ := logs.count("claim failed; trying again")
	c.down()
	logs.wait(t, "claim failed; trying again", failed)
	c.up()
	b = c.bundle()
	if r := b.waitRun(t, b.submit(t, "jobs:\n  b: {steps: [{run: 'true'}]}\n")); r.Status != store.RunSuccess {
		t.Fatalf("run after the outage %s, want success", r.Status)
	}
}

// TestStepsContinueThroughOutage: while the coordinator is away, a job goes on from one
// step to the next; the steps' reports follow once it is back.
func TestStepsContinueThroughOutage(t *testing.T) {
	t.Parallel()
	c := newCoordinator(t, coordOpts{})
	c.up()
	startAgent(t, c.url, slog.LevelInfo)
	marker := filepath.Join(t.TempDir(), "second-step-ran")
	id := c.bundle().submit(t, fmt.Sprintf("jobs:\n  a: {steps: [{run: 'sleep 1'}, {run: 'touch %s'}, {run: 'true'}]}\n", marker))
	waitInHand(t, c.st, id)
	c.down()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second step did not run while the coordinator was down")
		}
		pause(t, 20*time.Millisecond)
	}
	c.up()
	b := c.bundle()
	b.wantSuccess(t, id)
	jobs, err := b.st.ListJobs(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	wantStepsSucceeded(t, b.st, jobs[0].ID)
}

// wantStepsSucceeded checks that every step of the job succeeded.
func wantStepsSucceeded(t *testing.T, st store.Store, job uuid.UUID) {
	t.Helper()
	steps, err := st.ListSteps(t.Context(), job)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if s.Status != store.StepSuccess {
			t.Errorf("step %d: %s, want success", s.Index, s.Status)
		}
	}
}

// TestStartAnswerLost: the coordinator records a job's start but its answers do not reach
// the worker (502s from a proxy in between) until the step has run: the steps do not wait
// for the start's answer, they run once, and the job succeeds. The coordinator here does
// not offer claims that start their jobs, so the worker reports each start.
func TestStartAnswerLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target, err := url.Parse(b.url)
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "runs")
	var swallowed atomic.Int32
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		if strings.HasSuffix(r.Request.URL.Path, "/register") {
			return withoutFeature(r, "claim.start")
		}
		if !strings.HasSuffix(r.Request.URL.Path, "/start") {
			return nil
		}
		first := swallowed.Add(1) == 1
		if _, err := os.Stat(marker); first || err != nil {
			return errors.New("answer lost on the way back")
		}
		return nil
	}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	startAgent(t, front.URL, slog.LevelInfo)
	id := b.submit(t, fmt.Sprintf("jobs:\n  a: {steps: [{run: 'echo ran >> %s'}]}\n", marker))
	b.wantSuccess(t, id)
	if n := swallowed.Load(); n < 2 {
		t.Errorf("the start was sent %d times, want again after the lost answers", n)
	}
	if got, _ := os.ReadFile(marker); string(got) != "ran\n" {
		t.Errorf("the step ran %q, want once", got)
	}
}

// withoutFeature takes a feature out of a register answer, as an older coordinator
// would answer.
func withoutFeature(r *http.Response, feature string) error {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	_ = r.Body.Close()
	var ans map[string]any
	if err := json.Unmarshal(raw, &ans); err != nil {
		return err
	}
	features, _ := ans["features"].([]any)
	ans["features"] = slices.DeleteFunc(features, func(f any) bool { return f == feature })
	if raw, err = json.Marshal(ans); err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	r.ContentLength = int64(len(raw))
	r.Header.Set("Content-Length", strconv.Itoa(len(raw)))
	return nil
}
