package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// emitterSource prints "<unix nanos> <seq>" lines at a steady rate: whenever lines are
// due (at least a millisecond apart) it writes them, each stamped with the time it was
// written, so a reader can tell how long a line took to reach it. It is C so that a
// hundred of them cost next to no CPU: Go emitters, each with its runtime's timers and
// threads, took three quarters of a 2-core machine from what is measured.
//
// Usage: emit RATE COUNT DELAY: COUNT lines at RATE lines/s, after DELAY seconds (which
// lets the readers connect before the first line).
const emitterSource = `#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
	if (argc < 4) return 2;
	long rate = atol(argv[1]), total = atol(argv[2]);
	double delay = strtod(argv[3], NULL);
	if (rate <= 0) return 2;
	struct timespec d = {(time_t)delay, (long)((delay - (time_t)delay) * 1e9)};
	nanosleep(&d, NULL);
	long long start = now_ns();
	long seq = 0;
	static char buf[1 << 16];
	while (seq < total) {
		long due = (long)((double)rate * (now_ns() - start) / 1e9) + 1;
		if (due > total) due = total;
		size_t n = 0;
		for (; seq < due; seq++) {
			n += snprintf(buf + n, sizeof buf - n, "%lld %ld\n", now_ns(), seq + 1);
			if (n > sizeof buf - 64) { fwrite(buf, 1, n, stdout); n = 0; }
		}
		fwrite(buf, 1, n, stdout);
		fflush(stdout);
		long long next = start + (long long)((double)seq / rate * 1e9);
		long long wait = next - now_ns();
		if (wait < 1000000) wait = 1000000;
		struct timespec w = {wait / 1000000000LL, wait % 1000000000LL};
		nanosleep(&w, NULL);
	}
	return 0;
}
`

// compileC builds a C program from src into dir with cc, for steps that must cost the
// machine next to nothing, and returns the binary's path.
func compileC(ctx context.Context, dir, name, src string) (string, error) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		return "", fmt.Errorf("build the %s step program: this scenario compiles a small C program and needs a C compiler (cc) on PATH: %w", name, err)
	}
	file := filepath.Join(dir, name+".c")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", file, err)
	}
	bin := filepath.Join(dir, name)
	if out, err := exec.CommandContext(ctx, cc, "-O2", "-o", bin, file).CombinedOutput(); err != nil {
		return "", fmt.Errorf("compile %s with cc: %w\n%s", file, err, out)
	}
	return bin, nil
}

// rig is a coordinator with real `gantry worker` processes, whose jobs run real steps,
// in a scenario directory of its own.
type rig struct {
	o   *Options
	dir string
	c   *coordinator
	// workers are the live workers, which waits give up on when one exits; started is
	// every worker the rig started, for their CPU.
	workers []*process
	started []*process
}

// withRig runs fn against a fresh coordinator on store in a directory of the scenario's
// own; the workers fn starts are stopped before the coordinator.
func withRig(ctx context.Context, o *Options, name, store string, fn func(g *rig, r *Result) error, extra ...string) (*Result, error) {
	return withCoordinator(ctx, o, name, store, func(c *coordinator, r *Result) error {
		g := &rig{o: o, dir: c.dir, c: c}
		defer g.stopWorkers()
		r.cpu.workers = realWorkers
		err := fn(g, r)
		if err == nil {
			// Stopped before they are read, so that their CPU is their whole lives'.
			g.stopWorkers()
			for _, p := range g.started {
				r.cpu.workerCPU += p.cpu()
			}
			return nil
		}
		// What the processes said explains a failure better than what the scenario saw:
		// a step the worker could not start, a cancel that never reached it. (An exited
		// coordinator is told by withCoordinator.)
		for _, p := range g.processes() {
			select {
			case <-p.exited:
				if p != c.process {
					err = errors.Join(err, p.failure("exited"))
				}
			default:
				err = errors.Join(err, fmt.Errorf("%s is running; its output ends:\n%s", p.name, p.out.last(2<<10)))
			}
		}
		return err
	}, extra...)
}

// startWorker starts a `gantry worker` with room for maxJobs jobs, its workspaces under
// the rig's directory.
func (g *rig) startWorker(maxJobs int) (*process, error) {
	i := len(g.workers)
	work := filepath.Join(g.dir, fmt.Sprintf("worker-%d", i))
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, fmt.Errorf("make the work dir of worker %d: %w", i, err)
	}
	p, err := startProcess(g.o.Command, fmt.Sprintf("gantry worker %d", i), nil, "worker", "--server", g.c.base,
		"--name", fmt.Sprintf("bench-%d", i), "--max-jobs", strconv.Itoa(maxJobs), "--work-dir", work, "--log-format", "json")
	if err != nil {
		return nil, err
	}
	g.workers = append(g.workers, p)
	g.started = append(g.started, p)
	return p, nil
}

func (g *rig) stopWorkers() {
	var wg sync.WaitGroup
	for _, p := range g.started {
		wg.Go(func() { p.stop(10 * time.Second) })
	}
	wg.Wait()
}

// processes are the rig's processes, for waits to give up on when one exits.
func (g *rig) processes() []*process {
	return append([]*process{g.c.process}, g.workers...)
}

// waitFor polls cond until it holds, fails, one of procs exits, or within runs out.
func waitFor(ctx context.Context, within time.Duration, what string, procs []*process, cond func() (bool, error)) error {
	deadline := time.After(within)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("wait for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		for _, p := range procs {
			select {
			case <-p.exited:
				return fmt.Errorf("wait for %s: %w", what, p.failure("exited early"))
			default:
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", what, ctx.Err())
		case <-deadline:
			return fmt.Errorf("wait for %s: not within %s", what, within)
		case <-tick.C:
		}
	}
}

// runView is a run as the API shows it, with its jobs.
type runView struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Jobs   []struct {
		ID     string `json:"id"`
		Name   string `json:"name"`
		Status string `json:"status"`
	} `json:"jobs"`
}

// waitRun waits until run id has ended and returns it.
func (g *rig) waitRun(ctx context.Context, cl *client, id string, within time.Duration) (*runView, error) {
	var run runView
	err := waitFor(ctx, within, "run "+id+" to end", g.processes(), func() (bool, error) {
		if err := cl.do(ctx, http.MethodGet, "/api/v1/runs/"+id, "", nil, &run); err != nil {
			return false, err
		}
		switch run.Status {
		case "success", "failed", "cancelled":
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w (last status %q)", err, run.Status)
	}
	return &run, nil
}

// logLatencyScenario runs jobs jobs whose step prints rate lines a second for 5 s, and
// measures every line from the step's stdout to a reader following the job's log.
func logLatencyScenario(name, about string, jobs, rate int, p99 time.Duration) Scenario {
	return Scenario{
		Name:   name,
		About:  about + ", each line from the step's stdout to an SSE reader, through real workers",
		Stores: []string{SQLite},
		Run: func(ctx context.Context, o *Options, store string) (*Result, error) {
			return withRig(ctx, o, name, store, func(g *rig, r *Result) error {
				emitter, err := compileC(ctx, g.dir, "emit", emitterSource)
				if err != nil {
					return err
				}
				n := o.scaled(jobs)
				emitFor := o.scaledDur(5 * time.Second)
				lines := int(float64(rate) * emitFor.Seconds())
				// A claim takes at most 64 jobs, and a worker asks for as many as it has
				// free slots, so more than 64 jobs need more than one worker.
				const perWorker = 50
				workers := (n + perWorker - 1) / perWorker
				r.Params["jobs"], r.Params["lines/s per job"], r.Params["emitting"], r.Params["workers"] = n, rate, emitFor.String(), workers
				r.countJobs(n, "the jobs run")
				for range workers {
					if _, err := g.startWorker(min(n, perWorker)); err != nil {
						return err
					}
				}
				var def strings.Builder
				def.WriteString("name: logs\njobs:\n")
				for i := range n {
					// The 1 s delay lets the readers connect before the first line.
					fmt.Fprintf(&def, "  j%d: {steps: [{run: \"'%s' %d %d 1\"}]}\n", i, emitter, rate, lines)
				}
				cl := g.c.client()
				run, err := cl.submit(ctx, []byte(def.String()))
				if err != nil {
					return err
				}
				// Bounded, so that a job that never runs fails the scenario instead of
				// hanging it.
				rctx, cancel := context.WithTimeout(ctx, emitFor+2*time.Minute)
				defer cancel()
				tr := http.DefaultTransport.(*http.Transport).Clone()
				tr.MaxIdleConnsPerHost = n
				readers := &http.Client{Transport: tr}
				defer tr.CloseIdleConnections()
				var (
					lat  samples
					wg   sync.WaitGroup
					errs = make([]error, len(run.Jobs))
				)
				// The readers connect all at once, as the start delay means them to be
				// there before the first line: connected one after another, the last
				// ones' lines would wait for the reader rather than for the system.
				for i, j := range run.Jobs {
					wg.Go(func() {
						got, err := followLog(rctx, readers, g.c.base, j.ID, &lat)
						if err == nil && got != lines {
							err = fmt.Errorf("job %s: %d lines reached the reader, want %d", j.Name, got, lines)
						}
						errs[i] = err
					})
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					return err
				}
				end, err := g.waitRun(ctx, cl, run.ID, time.Minute)
				if err != nil {
					return err
				}
				if end.Status != "success" {
					return fmt.Errorf("run %s is %s, want success", run.ID, end.Status)
				}
				ds := lat.take()
				r.addLatency("line latency", ds, p99)
				r.add("lines", float64(len(ds)), "", nil)
				r.Notes = append(r.Notes, "every stdout line of every job, from the emit time the step stamped on it "+
					"to its arrival at a reader following GET /api/v1/jobs/{id}/logs/stream (one per job, all connected "+
					"when the run is submitted): the worker's recorder, spool and shipper, the coordinator's append, "+
					"file log storage, hub and stream; the steps are a C emitter pacing its lines, at least 1 ms apart")
				return nil
			})
		},
	}
}

// followLog reads a job's log stream until its end event, adding to lat, for each stdout
// line, how long ago it was emitted; it returns how many such lines it read.
func followLog(ctx context.Context, hc *http.Client, base, job string, lat *samples) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/jobs/"+job+"/logs/stream", nil)
	if err != nil {
		return 0, fmt.Errorf("follow the log of job %s: %w", job, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("follow the log of job %s: %w", job, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("follow the log of job %s: %s", job, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var (
		event string
		n     int
		line  struct {
			Stream string `json:"stream"`
			Text   string `json:"text"`
		}
	)
	for sc.Scan() {
		b := sc.Bytes()
		switch {
		case bytes.HasPrefix(b, []byte("event: ")):
			event = string(b[len("event: "):])
		case bytes.HasPrefix(b, []byte("data: ")):
			if event == "end" {
				return n, nil
			}
			now := time.Now()
			line.Stream, line.Text = "", ""
			if err := json.Unmarshal(b[len("data: "):], &line); err != nil {
				return n, fmt.Errorf("log of job %s: event %q: %w", job, b, err)
			}
			if line.Stream != "stdout" {
				continue
			}
			stamp, _, _ := strings.Cut(line.Text, " ")
			ns, err := strconv.ParseInt(stamp, 10, 64)
			if err != nil {
				return n, fmt.Errorf("log of job %s: line %q is not an emitter's: %w", job, line.Text, err)
			}
			lat.add(now.Sub(time.Unix(0, ns)))
			n++
		}
	}
	return n, fmt.Errorf("log of job %s: the stream ended without an end event: %v", job, sc.Err())
}

// logIngestScenario measures how many log lines one coordinator stores per second.
func logIngestScenario() Scenario {
	const name = "logs-ingest"
	return Scenario{
		Name:   name,
		About:  "8 clients, each with a job leased through the API, POSTing batches of 500 log lines for 5 s: lines stored per second",
		Stores: []string{SQLite},
		Run: func(ctx context.Context, o *Options, store string) (*Result, error) {
			// The log size limit is raised from the default 50 MiB a job: at several
			// hundred thousand lines a second the 8 logs would reach it, and lines past it
			// are dropped rather than stored.
			return withCoordinator(ctx, o, name, store, func(c *coordinator, r *Result) error {
				const clients, batch = 8, 500
				window := o.scaledDur(5 * time.Second)
				r.Params["clients"], r.Params["lines per batch"], r.Params["sending"] = clients, batch, window.String()
				cl := newClient(c.base, 2*clients)
				leases, err := leaseJobs(ctx, cl, clients)
				if err != nil {
					return err
				}
				var (
					stored  atomic.Int64
					latency samples
					wg      sync.WaitGroup
					errs    = make([]error, clients)
				)
				text := strings.Repeat("x", 70)
				began := time.Now()
				stop := began.Add(window)
				for i, l := range leases {
					wg.Go(func() {
						errs[i] = sendLogs(ctx, cl, l, batch, text, stop, &stored, &latency)
					})
				}
				wg.Wait()
				elapsed := time.Since(began)
				if err := errors.Join(errs...); err != nil {
					return err
				}
				r.add("lines/s", float64(stored.Load())/elapsed.Seconds(), "lines/s", atLeast(100_000))
				// The window is fixed, so lines, not jobs, measure the work: the bench
				// process's clients play the workers' log shippers.
				r.countUnits(float64(stored.Load())/1000, "1,000 lines", "the thousands of lines stored")
				r.addLatency("append", latency.take(), 0)
				r.Notes = append(r.Notes, "lines/s: lines the coordinator acknowledged as stored (file log storage) "+
					"over the sending window, each client posting its next batch of 500 lines of 79 bytes to "+
					"/api/v1/agent/jobs/{id}/logs as soon as the previous one is answered; append: one batch's round trip")
				return nil
			}, "--log-max-size", "1Gi")
		},
	}
}

// lease is a job a client holds through the API, as a worker would.
type lease struct{ job, token string }

// leaseJobs submits a run of n jobs and claims them all for one registered worker.
func leaseJobs(ctx context.Context, cl *client, n int) ([]lease, error) {
	if _, err := cl.submit(ctx, manyJobs(n)); err != nil {
		return nil, err
	}
	var reg struct {
		WorkerID string `json:"worker_id"`
	}
	if err := cl.post(ctx, "/api/v1/agent/register", map[string]any{"name": "ingest", "max_jobs": n, "version": "bench"}, &reg); err != nil {
		return nil, fmt.Errorf("register the ingest clients' worker: %w", err)
	}
	var out []lease
	for len(out) < n {
		var ans claimAnswer
		if err := cl.post(ctx, "/api/v1/agent/claim", map[string]any{"worker_id": reg.WorkerID, "max": n - len(out), "wait": "5s"}, &ans); err != nil {
			return nil, fmt.Errorf("claim jobs for the ingest clients: %w", err)
		}
		if len(ans.Jobs) == 0 {
			return nil, fmt.Errorf("claim jobs for the ingest clients: %d of %d claimed, then none", len(out), n)
		}
		for _, j := range ans.Jobs {
			out = append(out, lease{job: j.ID, token: j.Lease.Token})
		}
	}
	return out, nil
}

// sendLogs posts batches of lines to l's log, each as soon as the previous one is
// answered, until stop.
func sendLogs(ctx context.Context, cl *client, l lease, batch int, text string, stop time.Time, stored *atomic.Int64, latency *samples) error {
	type line struct {
		Seq    int64  `json:"seq"`
		TS     int64  `json:"ts"`
		Stream string `json:"stream"`
		Text   string `json:"text"`
	}
	lines := make([]line, batch)
	seq := int64(0)
	for time.Now().Before(stop) {
		ts := time.Now().UnixMilli()
		for i := range lines {
			seq++
			lines[i] = line{Seq: seq, TS: ts, Stream: "stdout", Text: fmt.Sprintf("%s %08d", text, seq)}
		}
		var ans struct {
			NextSeq   int64 `json:"next_seq"`
			Truncated bool  `json:"truncated"`
		}
		began := time.Now()
		if err := cl.post(ctx, "/api/v1/agent/jobs/"+l.job+"/logs", map[string]any{"token": l.token, "lines": lines}, &ans); err != nil {
			return fmt.Errorf("append logs to job %s: %w", l.job, err)
		}
		latency.add(time.Since(began))
		if ans.NextSeq != seq+1 || ans.Truncated {
			return fmt.Errorf("append logs to job %s: next seq %d, truncated %v; want next seq %d", l.job, ans.NextSeq, ans.Truncated, seq+1)
		}
		stored.Add(int64(batch))
	}
	return nil
}
