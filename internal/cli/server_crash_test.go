package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/testdb"
)

// Environment that turns the test binary into a `gantry server` process, so a test can
// SIGKILL a real server: a goroutine cannot be killed mid-write.
const (
	serverChildEnv     = "GANTRY_TEST_SERVER_CHILD"
	serverChildArgsEnv = "GANTRY_TEST_SERVER_ARGS" // newline-separated arguments to Run
)

func TestMain(m *testing.M) {
	if os.Getenv(serverChildEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Run(ctx, strings.Split(os.Getenv(serverChildArgsEnv), "\n"), os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	testdb.Main(m)
}

// serverProcess is a `gantry server` running as a child process of the test.
type serverProcess struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	base   string        // http://host:port
	exited chan struct{} // closed once the process has exited and been waited for
}

// startServerProcess re-executes the test binary as `gantry server` on db and waits until
// it reports its address. The process is killed when t ends, if it is still running.
func startServerProcess(t testing.TB, db string, extra ...string) *serverProcess {
	t.Helper()
	args := append([]string{"server", "--addr", "127.0.0.1:0", "--db", db,
		"--reap-every", "1s", "--lease-ttl", "4s", "--heartbeat-every", "2s"}, extra...)
	p := startChild(t, args)
	cmd, exited := p.cmd, p.exited
	deadline := time.After(20 * time.Second)
	for {
		if m := listening.FindStringSubmatch(p.stderr.String()); m != nil {
			p.base = "http://" + m[1]
			return p
		}
		select {
		case <-exited:
			t.Fatalf("server process exited (%v) before listening:\n%s", cmd.ProcessState, p.stderr.String())
		case <-deadline:
			t.Fatalf("server process did not report its address:\n%s", p.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// childCommand makes the command that re-executes the test binary as `gantry <args>`.
func childCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serverChildEnv+"=1", serverChildArgsEnv+"="+strings.Join(args, "\n"))
	return cmd
}

// startChild re-executes the test binary as `gantry <args>`, with its output kept in
// stderr. The process is killed when t ends, if it is still running.
func startChild(t testing.TB, args []string) *serverProcess {
	t.Helper()
	return startChildEnv(t, nil, args)
}

// startChildEnv is startChild with env (NAME=VALUE) added to the process's environment.
func startChildEnv(t testing.TB, env []string, args []string) *serverProcess {
	t.Helper()
	cmd := childCommand(args...)
	cmd.Env = append(cmd.Env, env...)
	p := &serverProcess{cmd: cmd, stderr: &syncBuffer{}}
	cmd.Stdout = p.stderr
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s process: %v", args[0], err)
	}
	exited := make(chan struct{})
	p.exited = exited
	go func() {
		// Only this goroutine waits; the others learn of the exit through exited.
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		p.kill(t)
		if t.Failed() {
			t.Logf("%s process %d log:\n%s", args[0], cmd.Process.Pid, p.stderr.String())
		}
	})
	return p
}

// stop sends the process SIGTERM, as a supervisor stopping it does, and waits until it
// has exited (it may take its time: a worker drains first).
func (p *serverProcess) stop(t testing.TB, within time.Duration) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("stop process: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(within):
		t.Errorf("process %d did not exit within %s of SIGTERM", p.cmd.Process.Pid, within)
	}
}

// kill SIGKILLs the process and waits until it is gone.
func (p *serverProcess) kill(t testing.TB) {
	t.Helper()
	select {
	case <-p.exited:
		return
	default:
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("kill server process: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		t.Errorf("server process %d did not exit after SIGKILL", p.cmd.Process.Pid)
	}
}

// crashChain is a run of three jobs, each needing the one before.
const crashChain = `name: chain
jobs:
  a: {steps: [{run: 'true'}]}
  b: {needs: [a], steps: [{run: 'true'}]}
  c: {needs: [b], steps: [{run: 'true'}]}
`

// errServerDown is a call that did not get an answer: the server is gone or restarting.
var errServerDown = errors.New("server unreachable")

// postJSON posts body to base+path and decodes a 200 answer into out. A transport failure
// wraps errServerDown; any other status is returned as that status with a nil error.
func postJSON(ctx context.Context, client *http.Client, base, path string, body, out any) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("POST %s: %w: %w", path, errServerDown, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		// The server died while answering: whether the call took effect is unknown.
		return 0, fmt.Errorf("POST %s: read answer: %w: %w", path, errServerDown, err)
	}
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("POST %s: decode %s: %w", path, data, err)
		}
	}
	return resp.StatusCode, nil
}

// crashWorker speaks the worker protocol against whichever server base points at. It
// runs every job it claims at once (start, then complete with success), retries calls
// that got no answer, and drops a job whose lease was lost.
type crashWorker struct {
	base   *atomic.Pointer[string]
	client *http.Client

	mu        sync.Mutex
	acked     []string       // job ids whose completion the server acknowledged
	claims    map[string]int // job id -> times claimed
	ackTarget int
	reached   chan struct{} // closed when len(acked) reaches ackTarget
	resume    chan struct{} // the worker waits for it after reaching ackTarget
	inFlight  atomic.Int64  // claimed jobs not yet completed or dropped, as of the last ack
}

type crashJob struct {
	id, token string
	started   bool
}

// ack records an acknowledged completion. At the target it stops the worker until the
// test has killed the server, so the jobs still in hand meet a dead server.
func (w *crashWorker) ack(ctx context.Context, id string) {
	w.mu.Lock()
	w.acked = append(w.acked, id)
	reached := len(w.acked) == w.ackTarget
	w.mu.Unlock()
	if reached {
		close(w.reached)
		select {
		case <-w.resume:
		case <-ctx.Done():
		}
	}
}

func (w *crashWorker) ackedSoFar() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.acked...)
}

// run works until ctx ends. It returns an error only for answers the protocol does not
// allow; an unreachable server is waited out.
func (w *crashWorker) run(ctx context.Context) error {
	var workerID string
	var pending []*crashJob
	backoff := func() {
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	for ctx.Err() == nil {
		base := *w.base.Load()
		if workerID == "" {
			var reg struct {
				WorkerID string `json:"worker_id"`
			}
			code, err := postJSON(ctx, w.client, base, "/api/v1/agent/register",
				map[string]any{"name": "crash-test", "max_jobs": 4}, &reg)
			switch {
			case errors.Is(err, errServerDown):
				backoff()
				continue
			case err != nil:
				return err
			case code != http.StatusOK || reg.WorkerID == "":
				return fmt.Errorf("register: status %d, worker %q", code, reg.WorkerID)
			}
			workerID = reg.WorkerID
		}
		if len(pending) == 0 {
			var claimed struct {
				Jobs []struct {
					ID    string `json:"id"`
					Lease struct {
						Token string `json:"token"`
					} `json:"lease"`
				} `json:"jobs"`
			}
			code, err := postJSON(ctx, w.client, base, "/api/v1/agent/claim",
				map[string]any{"worker_id": workerID, "max": 4, "wait": "1s"}, &claimed)
			switch {
			case errors.Is(err, errServerDown):
				backoff()
				continue
			case err != nil:
				return err
			case code != http.StatusOK:
				return fmt.Errorf("claim: status %d", code)
			}
			w.mu.Lock()
			for _, j := range claimed.Jobs {
				w.claims[j.ID]++
				pending = append(pending, &crashJob{id: j.ID, token: j.Lease.Token})
			}
			w.mu.Unlock()
			continue
		}

		j := pending[0]
		path := "/api/v1/agent/jobs/" + j.id
		if !j.started {
			code, err := postJSON(ctx, w.client, base, path+"/start", map[string]any{"token": j.token}, nil)
			switch {
			case errors.Is(err, errServerDown):
				backoff()
				continue
			case err != nil:
				return err
			case code == http.StatusConflict:
				pending = pending[1:] // lease lost: someone else has the job now
				continue
			case code != http.StatusOK:
				return fmt.Errorf("start job %s: status %d", j.id, code)
			}
			j.started = true
		}
		var done struct {
			Status string `json:"status"`
		}
		code, err := postJSON(ctx, w.client, base, path+"/complete",
			map[string]any{"token": j.token, "status": "success", "exit_code": 0}, &done)
		switch {
		case errors.Is(err, errServerDown):
			backoff()
			continue
		case err != nil:
			return err
		case code == http.StatusConflict:
			// Lease lost, or the completion took effect but its answer died with the server.
			pending = pending[1:]
			continue
		case code != http.StatusOK || done.Status != "success":
			return fmt.Errorf("complete job %s: status %d, job %q", j.id, code, done.Status)
		}
		pending = pending[1:]
		w.inFlight.Store(int64(len(pending)))
		w.ack(ctx, j.id)
	}
	return nil
}

type crashRunView struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	JobsTotal    int    `json:"jobs_total"`
	JobsFinished int    `json:"jobs_finished"`
	Jobs         []struct {
		ID      string `json:"id"`
		Key     string `json:"key"`
		Status  string `json:"status"`
		Attempt int    `json:"attempt"`
	} `json:"jobs"`
}

func getJSON(t testing.TB, client *http.Client, url string, out any) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d, %v: %s", url, resp.StatusCode, err, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("GET %s: decode %s: %v", url, data, err)
	}
}

// TestServerCrashRestart SIGKILLs a server while a worker is completing jobs, starts a new
// one on the same store, and checks that every run still finishes, that no acknowledged
// completion was lost, and that jobs whose leases died with the server ran again.
func TestServerCrashRestart(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, db string) {
		const runs, jobsPerRun, killAfter = 10, 3, 10
		client := &http.Client{Timeout: 10 * time.Second}

		first := startServerProcess(t, db)
		runIDs := make([]string, 0, runs)
		for range runs {
			resp, err := client.Post(first.base+"/api/v1/runs", "application/yaml", strings.NewReader(crashChain))
			if err != nil {
				t.Fatal(err)
			}
			var created crashRunView
			err = json.NewDecoder(resp.Body).Decode(&created)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusAccepted || created.JobsTotal != jobsPerRun {
				t.Fatalf("POST /api/v1/runs = %d, %+v, %v", resp.StatusCode, created, err)
			}
			runIDs = append(runIDs, created.ID)
		}

		var base atomic.Pointer[string]
		base.Store(&first.base)
		w := &crashWorker{base: &base, client: client, claims: map[string]int{},
			ackTarget: killAfter, reached: make(chan struct{}), resume: make(chan struct{})}
		ctx, stopWorker := context.WithCancel(t.Context())
		var workerErr error // set before workerDone is closed
		workerDone := make(chan struct{})
		go func() {
			workerErr = w.run(ctx)
			close(workerDone)
		}()
		t.Cleanup(func() {
			stopWorker()
			<-workerDone
		})

		select {
		case <-w.reached:
		case <-workerDone:
			t.Fatalf("worker stopped before %d completions: %v", killAfter, workerErr)
		case <-time.After(20 * time.Second):
			t.Fatalf("worker did not complete %d jobs in time; acked %d", killAfter, len(w.ackedSoFar()))
		}
		// A second worker that dies with the server: what it claims only comes back by
		// the reaper expiring its leases on the new server.
		var doomed struct {
			WorkerID string `json:"worker_id"`
			Jobs     []struct {
				ID string `json:"id"`
			} `json:"jobs"`
		}
		if code, err := postJSON(t.Context(), client, first.base, "/api/v1/agent/register",
			map[string]any{"name": "doomed"}, &doomed); err != nil || code != http.StatusOK {
			t.Fatalf("register doomed worker: %d, %v", code, err)
		}
		if code, err := postJSON(t.Context(), client, first.base, "/api/v1/agent/claim",
			map[string]any{"worker_id": doomed.WorkerID, "max": 2, "wait": "0s"}, &doomed); err != nil || code != http.StatusOK {
			t.Fatalf("claim for doomed worker: %d, %v", code, err)
		}
		first.kill(t)
		close(w.resume)
		// Everything acknowledged so far was acknowledged by the dead server.
		ackedBeforeKill := w.ackedSoFar()
		t.Logf("killed server after %d acknowledged completions, with %d jobs in the worker's hands and %d abandoned",
			len(ackedBeforeKill), w.inFlight.Load(), len(doomed.Jobs))

		second := startServerProcess(t, db)
		base.Store(&second.base)
		for _, id := range ackedBeforeKill {
			var job struct {
				Status string `json:"status"`
			}
			getJSON(t, client, second.base+"/api/v1/jobs/"+id, &job)
			if job.Status != "success" {
				t.Errorf("job %s acknowledged before the crash is %q after restart, want success", id, job.Status)
			}
		}

		deadline := time.After(60 * time.Second)
		views := make([]crashRunView, len(runIDs))
		for i, id := range runIDs {
			for {
				getJSON(t, client, second.base+"/api/v1/runs/"+id, &views[i])
				if s := views[i].Status; s == "success" || s == "failed" || s == "cancelled" {
					break
				}
				select {
				case <-workerDone:
					t.Fatalf("worker stopped while run %s is %s: %v", id, views[i].Status, workerErr)
				case <-deadline:
					t.Fatalf("run %s still %s after 60s: %+v", id, views[i].Status, views[i])
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
		stopWorker()
		<-workerDone
		if workerErr != nil {
			t.Errorf("worker: %v", workerErr)
		}

		reattempted := 0
		for _, v := range views {
			if v.Status != "success" || v.JobsFinished != jobsPerRun || v.JobsTotal != jobsPerRun {
				t.Errorf("run %s: status %s, %d of %d jobs finished; want success, %d of %d",
					v.ID, v.Status, v.JobsFinished, v.JobsTotal, jobsPerRun, jobsPerRun)
			}
			for _, j := range v.Jobs {
				if j.Status != "success" {
					t.Errorf("run %s job %s (%s) is %s, want success", v.ID, j.Key, j.ID, j.Status)
				}
				if j.Attempt > 1 {
					reattempted++
				}
			}
		}
		w.mu.Lock()
		claims := make(map[string]int, len(w.claims))
		for id, n := range w.claims {
			claims[id] = n
		}
		w.mu.Unlock()
		for _, j := range doomed.Jobs {
			if claims[j.ID] == 0 {
				t.Errorf("job %s, abandoned when the server died, was never claimed again", j.ID)
			}
			claims[j.ID]++
		}
		twice := 0
		for _, n := range claims {
			if n > 1 {
				twice++
			}
		}
		t.Logf("%d jobs ran twice (%d with attempt > 1); %d completions acknowledged in all",
			twice, reattempted, len(w.ackedSoFar()))
	})
}
