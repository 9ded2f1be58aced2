package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// artifactsScenario moves one large artifact between two jobs through a real worker
// and the coordinator's directory blob store.
func artifactsScenario() Scenario {
	const name = "artifacts"
	return Scenario{
		Name:   name,
		About:  "a 1 GiB artifact kept by one job and fetched by the next, through a real worker: speeds and peak memory",
		Stores: []string{SQLite},
		Run: func(ctx context.Context, o *Options, store string) (*Result, error) {
			return withRig(ctx, o, name, store, func(g *rig, r *Result) error {
				size := max(8<<20, int64(o.Scale*(1<<30)))
				r.Params["size"] = fmt.Sprintf("%d MiB", size>>20)
				r.countJobs(2, "the run's two jobs (the first writes the artifact from /dev/urandom: its step's CPU is in it)")
				worker, err := g.startWorker(1)
				if err != nil {
					return err
				}
				def := fmt.Sprintf(`name: large
jobs:
  make:
    steps: [ { run: "head -c %[1]d /dev/urandom > big.bin" } ]
    artifacts: { paths: [big.bin] }
  use:
    needs: [make]
    steps: [ { run: "test $(stat -c %%s big.bin) = %[1]d" } ]
`, size)
				cl := g.c.client()
				run, err := cl.submit(ctx, []byte(def))
				if err != nil {
					return err
				}
				end, err := g.waitRun(ctx, cl, run.ID, 10*time.Minute)
				if err != nil {
					return err
				}
				var log strings.Builder
				for _, j := range end.Jobs {
					text, err := jobLog(ctx, cl, j.ID)
					if err != nil {
						return err
					}
					fmt.Fprintf(&log, "--- job %s (%s)\n%s", j.Name, j.Status, text)
				}
				if end.Status != "success" {
					return fmt.Errorf("run %s is %s, want success; its jobs' logs:\n%s", run.ID, end.Status, log.String())
				}
				// Read after the run, while both processes live: VmHWM is the peak of
				// their whole lives, which the 1 GiB moving through them dominates.
				wu, err := readUsage(worker.pid)
				if err != nil {
					return fmt.Errorf("read the worker's memory: %w", err)
				}
				su, err := readUsage(g.c.pid)
				if err != nil {
					return fmt.Errorf("read the coordinator's memory: %w", err)
				}
				for _, m := range []struct{ metric, pattern string }{
					{"hashing", `hashed in \S+ \((\d+) MB/s\)`},
					{"upload", `big\.bin .*uploaded in \S+ \((\d+) MB/s\)`},
					{"download", `fetched big\.bin .* in \S+ \((\d+) MB/s\)`},
				} {
					v, err := speed(log.String(), m.pattern)
					if err != nil {
						return fmt.Errorf("%s speed: %w", m.metric, err)
					}
					r.add(m.metric, v, "MB/s", nil)
				}
				r.add("worker peak RSS", float64(wu.HWM)/mib, "MiB", atMost(64))
				r.add("server peak RSS", float64(su.HWM)/mib, "MiB", nil)
				r.Notes = append(r.Notes, "a job writes the artifact from /dev/urandom and keeps it; the next job needs "+
					"it, so the worker downloads it into that job's workspace. Speeds are the ones the worker writes in "+
					"the job logs: hashing; upload, a signed PUT to the coordinator's blob handler, which hashes the "+
					"stream, fsyncs and renames; download, a signed GET hashed while written. Peak RSS is each process's "+
					"VmHWM from /proc after the run")
				return nil
			})
		},
	}
}

// jobLog reads a job's log as text.
func jobLog(ctx context.Context, cl *client, job string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cl.base+"/api/v1/jobs/"+job+"/logs", nil)
	if err != nil {
		return "", fmt.Errorf("read the log of job %s: %w", job, err)
	}
	resp, err := cl.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("read the log of job %s: %w", job, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("read the log of job %s: %w", job, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("read the log of job %s: %w", job, &apiError{Status: resp.StatusCode, Body: string(raw)})
	}
	return string(raw), nil
}

// speed finds the MB/s that pattern's first group captures in log.
func speed(log, pattern string) (float64, error) {
	m := regexp.MustCompile(pattern).FindStringSubmatch(log)
	if m == nil {
		return 0, fmt.Errorf("no line matching %q in the job logs:\n%s", pattern, log)
	}
	return strconv.ParseFloat(m[1], 64)
}
