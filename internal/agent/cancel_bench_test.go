package agent

import (
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
)

// cancelStep records when its SIGTERM handler runs, after saying it is ready.
const cancelStep = `
import os, signal, sys, time

def term(signum, frame):
    now = time.time_ns()
    tmp = os.environ["TERMED"] + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(now))
    os.rename(tmp, os.environ["TERMED"])
    sys.exit(0)

signal.signal(signal.SIGTERM, term)
open(os.environ["READY"], "w").close()
while True:
    time.sleep(60)
`

// BenchmarkCancelLatency measures, through the whole system, the time from a cancel
// request to the API until the step's SIGTERM handler runs: API, store, the control
// long-poll, the agent, the executor's signal. The lease timings are the defaults (a
// heartbeat every 10s), so the heartbeat never carries the cancel. It reports the p50,
// p99 and max latency in ms; the time per op includes nothing but the cancel.
func BenchmarkCancelLatency(b *testing.B) {
	c := newCoordinator(b, coordOpts{leaseTTL: 45 * time.Second, heartbeatEvery: 10 * time.Second, reapEvery: 5 * time.Second})
	c.up()
	startAgent(b, c.url, slog.LevelWarn)
	bu := c.bundle()
	dir := b.TempDir()
	lat := make([]time.Duration, 0, b.N)
	b.StopTimer()
	for i := range b.N {
		ready, termed := filepath.Join(dir, fmt.Sprintf("ready-%d", i)), filepath.Join(dir, fmt.Sprintf("termed-%d", i))
		id := bu.submit(b, fmt.Sprintf("jobs:\n  slow:\n    cancel_grace: 5s\n    env: {READY: %q, TERMED: %q}\n    steps: [{shell: python3, run: %q}]\n",
			ready, termed, cancelStep))
		waitFile(b, ready)

		b.StartTimer()
		sent := time.Now()
		resp, err := http.Post(c.url+"/api/v1/runs/"+id.String()+"/cancel", "application/json", nil)
		if err != nil {
			b.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			b.Fatalf("cancel: %s", resp.Status)
		}
		data := waitFile(b, termed)
		b.StopTimer()

		ns, err := strconv.ParseInt(string(data), 10, 64)
		if err != nil {
			b.Fatalf("%s: %v", termed, err)
		}
		lat = append(lat, time.Unix(0, ns).Sub(sent))
		if r := bu.waitRun(b, id); r.Status != store.RunCancelled {
			b.Fatalf("run %s, want cancelled", r.Status)
		}
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	at := func(q float64) time.Duration { return lat[max(0, int(math.Ceil(q*float64(len(lat))))-1)] }
	b.ReportMetric(ms(at(0.50)), "p50-ms")
	b.ReportMetric(ms(at(0.99)), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
}

// waitFile waits for path to exist and returns its content.
func waitFile(tb testing.TB, path string) []byte {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, err := os.ReadFile(path)
		if err == nil {
			return data
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s did not appear within 30s", path)
		}
		select {
		case <-time.After(2 * time.Millisecond):
		case <-tb.Context().Done():
			tb.Fatal(tb.Context().Err())
		}
	}
}
