package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/google/uuid"
)

// emitterSource prints "<unix nanos> <seq>" lines at a steady rate: whenever lines are
// due (at least a millisecond apart) it writes them, each stamped with the time it was
// written, so a reader can tell how long a line took to reach it. It is C so that a
// hundred of them cost next to no CPU: Go emitters, each with its runtime's timers and
// threads, took three quarters of this 2-core machine from what is measured.
const emitterSource = `#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <string.h>

static double parse_dur(const char *s) {
	/* durations as Go prints them for the benchmark: "5s", "1.5s", "200ms" */
	char *end;
	double v = strtod(s, &end);
	if (strcmp(end, "ms") == 0) return v / 1e3;
	if (strcmp(end, "s") == 0) return v;
	if (strcmp(end, "us") == 0 || strcmp(end, "µs") == 0) return v / 1e6;
	if (strcmp(end, "m") == 0) return v * 60;
	return v;
}

static long long now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
	if (argc < 4) return 2;
	long rate = atol(argv[1]);
	double dur = parse_dur(argv[2]), delay = parse_dur(argv[3]);
	struct timespec d = {(time_t)delay, (long)((delay - (time_t)delay) * 1e9)};
	nanosleep(&d, NULL);
	long total = (long)(rate * dur);
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

// buildEmitter compiles emitterSource once into a temporary directory.
func buildEmitter(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	src := filepath.Join(dir, "emit.c")
	if err := os.WriteFile(src, []byte(emitterSource), 0o644); err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(dir, "emit")
	cmd := exec.CommandContext(b.Context(), "cc", "-O2", "-o", bin, src)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build the emitter with cc: %v\n%s", err, out)
	}
	return bin
}

// logCoordinator serves the API with the given log storage on a real store, the way
// `gantry server` does in embedded mode (without the scheduler loops, which these
// benchmarks do not need).
func logCoordinator(b *testing.B, storage func(store.Store) logs.Storage) *bundle {
	b.Helper()
	dir := b.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "gantry.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ls := storage(st)
	svc := logs.NewService(logs.Config{Storage: ls, Notifier: st})
	srv := httptest.NewServer(api.New(api.Config{Store: st, Logs: svc, LeaseTTL: 10 * time.Minute, HeartbeatEvery: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(b.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}).Handler())
	b.Cleanup(func() {
		srv.Close()
		svc.Close()
		if err := ls.Close(); err != nil {
			b.Errorf("close log storage: %v", err)
		}
		if err := st.Close(); err != nil {
			b.Errorf("close store: %v", err)
		}
	})
	return &bundle{st: st, url: srv.URL}
}

// fileStorage opens file log storage in a temporary directory, with the default sync.
func fileStorage(b *testing.B) func(store.Store) logs.Storage {
	return func(store.Store) logs.Storage {
		fs, err := logs.OpenFileStorage(filepath.Join(b.TempDir(), "logs"), 0, nil)
		if err != nil {
			b.Fatal(err)
		}
		return fs
	}
}

func chunkStorage(st store.Store) logs.Storage { return logs.NewChunkStorage(st) }

// BenchmarkLogLatency measures, through the whole system, how long a line takes from a
// step's stdout to a reader following the job's log over SSE: the worker's recorder,
// spool and shipper, the coordinator's append and storage (files), the hub, and the
// stream. Steps print lines stamped with their emit time at a steady rate; every
// stdout line of every job is measured. It reports p50, p99 and max in ms.
func BenchmarkLogLatency(b *testing.B) {
	emitter := buildEmitter(b)
	for _, sc := range []struct {
		name       string
		jobs, rate int // rate is per job, lines/s
	}{
		{"1job-10klps", 1, 10_000},
		{"100jobs-100lps", 100, 100},
	} {
		b.Run(sc.name, func(b *testing.B) {
			const seconds = 5
			bu := logCoordinator(b, fileStorage(b))
			// A claim takes at most 64 jobs, and a worker asks for as many as it has
			// free slots, so more than 64 jobs need more than one worker.
			for range (sc.jobs + 49) / 50 {
				startLogAgent(b, bu.url, min(sc.jobs, 50))
			}
			var yaml strings.Builder
			yaml.WriteString("jobs:\n")
			for i := range sc.jobs {
				// The delay lets the readers connect before the first line.
				fmt.Fprintf(&yaml, "  j%d: {steps: [{run: \"'%s' %d %ds 1s\"}]}\n", i, emitter, sc.rate, seconds)
			}
			var lat []time.Duration
			b.ResetTimer()
			for range b.N {
				id := bu.submit(b, yaml.String())
				jobs, err := bu.st.ListJobs(b.Context(), id)
				if err != nil {
					b.Fatal(err)
				}
				var (
					mu sync.Mutex
					wg sync.WaitGroup
				)
				// Bounded, so that a job that never runs fails the benchmark instead of
				// hanging it.
				ctx, cancel := context.WithTimeout(b.Context(), (seconds+60)*time.Second)
				// The readers connect all at once, as the start delay means them to be
				// there before the first line: connected one after another they took up
				// to 9 s on a busy machine, so the lines the last ones measured had waited
				// for the reader rather than for the pipeline.
				for _, j := range jobs {
					wg.Go(func() {
						body, err := openStream(ctx, bu.url, j.ID)
						if err != nil {
							b.Error(err)
							return
						}
						defer body.Close()
						got := readStream(b, body)
						if len(got) != sc.rate*seconds {
							b.Errorf("job %s: %d lines reached the reader, want %d", j.ID, len(got), sc.rate*seconds)
						}
						mu.Lock()
						lat = append(lat, got...)
						mu.Unlock()
					})
				}
				wg.Wait()
				cancel()
				if r := bu.waitRun(b, id); r.Status != store.RunSuccess {
					b.Fatalf("run %s, want success", r.Status)
				}
			}
			b.StopTimer()
			if len(lat) == 0 {
				b.Fatal("no lines measured")
			}
			slices.Sort(lat)
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			at := func(q float64) time.Duration { return lat[max(0, int(math.Ceil(q*float64(len(lat))))-1)] }
			b.ReportMetric(ms(at(0.50)), "p50-ms")
			b.ReportMetric(ms(at(0.99)), "p99-ms")
			b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
			b.ReportMetric(float64(len(lat)), "lines")
		})
	}
}

// startLogAgent runs a worker with room for maxJobs jobs until the benchmark ends.
func startLogAgent(b *testing.B, url string, maxJobs int) {
	b.Helper()
	a := New(Config{Server: url, Name: "bench", Labels: []string{"linux"}, MaxJobs: maxJobs, WorkDir: b.TempDir(),
		Logger: slog.New(slog.NewTextHandler(b.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	drain, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := a.Run(drain, drain); err != nil {
			b.Errorf("agent: %v", err)
		}
	}()
	b.Cleanup(func() { stop(); <-done })
}

// openStream follows a job's log over SSE; it returns once the stream has started.
func openStream(ctx context.Context, url string, job uuid.UUID) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/v1/jobs/"+job.String()+"/logs/stream", nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("stream logs of job %s: %w", job, err)
	}
	if res.StatusCode != http.StatusOK {
		_ = res.Body.Close()
		return nil, fmt.Errorf("stream logs of job %s: %s", job, res.Status)
	}
	return res.Body, nil
}

// readStream reads line events until the end event, and returns for each stdout line
// how long ago it was emitted.
func readStream(b *testing.B, body io.Reader) []time.Duration {
	var lat []time.Duration
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	event := ""
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("event: ")):
			event = string(line[len("event: "):])
		case bytes.HasPrefix(line, []byte("data: ")):
			if event == "end" {
				return lat
			}
			now := time.Now()
			var l logs.Line
			if err := json.Unmarshal(line[len("data: "):], &l); err != nil {
				b.Errorf("event %q: %v", line, err)
				return lat
			}
			if l.Stream != logs.Stdout {
				continue
			}
			stamp, _, _ := strings.Cut(l.Text, " ")
			ns, err := strconv.ParseInt(stamp, 10, 64)
			if err != nil {
				b.Errorf("line %q: %v", l.Text, err)
				continue
			}
			lat = append(lat, now.Sub(time.Unix(0, ns)))
		}
	}
	b.Errorf("stream ended without an end event: %v", sc.Err())
	return lat
}

// BenchmarkLogIngest measures how many lines one coordinator stores per second:
// concurrent clients send batches of 500 lines of 80 bytes, as workers' shippers do, for
// jobs leased through the API, each client to its own job. An op is one batch.
func BenchmarkLogIngest(b *testing.B) {
	for _, sc := range []struct {
		name    string
		storage func(*testing.B) func(store.Store) logs.Storage
	}{
		{"file", fileStorage},
		{"chunks-sqlite", func(*testing.B) func(store.Store) logs.Storage { return chunkStorage }},
	} {
		b.Run(sc.name, func(b *testing.B) {
			const (
				clients = 8
				batch   = 500
			)
			bu := logCoordinator(b, sc.storage(b))
			leases := leaseJobs(b, bu, clients)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
			text := strings.Repeat("x", 70)
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for _, ls := range leases {
				wg.Go(func() {
					var body bytes.Buffer
					seq := int64(0)
					lines := make([]logs.Line, batch)
					for next.Add(1) <= int64(b.N) {
						ts := time.Now().UnixMilli()
						for i := range lines {
							seq++
							lines[i] = logs.Line{Seq: seq, TS: ts, Stream: logs.Stdout, Text: fmt.Sprintf("%s %08d", text, seq)}
						}
						body.Reset()
						if err := json.NewEncoder(&body).Encode(map[string]any{"token": ls.token, "lines": lines}); err != nil {
							b.Error(err)
							return
						}
						res, err := client.Post(bu.url+"/api/v1/agent/jobs/"+ls.job+"/logs", "application/json", &body)
						if err != nil {
							b.Error(err)
							return
						}
						var ans struct {
							NextSeq   int64 `json:"next_seq"`
							Truncated bool  `json:"truncated"`
						}
						err = json.NewDecoder(res.Body).Decode(&ans)
						_ = res.Body.Close()
						if err != nil || res.StatusCode != http.StatusOK || ans.NextSeq != seq+1 || ans.Truncated {
							b.Errorf("append logs: %s, %+v, %v; want next seq %d", res.Status, ans, err, seq+1)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "lines/s")
		})
	}
}

type lease struct{ job, token string }

// leaseJobs submits a run of n jobs and claims them through the API, as a worker would.
func leaseJobs(b *testing.B, bu *bundle, n int) []lease {
	b.Helper()
	var yaml strings.Builder
	yaml.WriteString("jobs:\n")
	for i := range n {
		fmt.Fprintf(&yaml, "  j%d: {steps: [{run: 'true'}]}\n", i)
	}
	bu.submit(b, yaml.String())
	var reg struct {
		WorkerID string `json:"worker_id"`
	}
	postJSON(b, bu.url+"/api/v1/agent/register", map[string]any{"name": "ingest", "labels": []string{"linux"}, "max_jobs": n}, &reg)
	var out []lease
	for len(out) < n {
		var claim struct {
			Jobs []struct {
				ID    string `json:"id"`
				Lease struct {
					Token string `json:"token"`
				} `json:"lease"`
			} `json:"jobs"`
		}
		postJSON(b, bu.url+"/api/v1/agent/claim", map[string]any{"worker_id": reg.WorkerID, "labels": []string{"linux"},
			"max": n - len(out), "wait": "5s"}, &claim)
		if len(claim.Jobs) == 0 {
			b.Fatalf("claimed %d of %d jobs", len(out), n)
		}
		for _, j := range claim.Jobs {
			out = append(out, lease{job: j.ID, token: j.Lease.Token})
		}
	}
	return out
}

func postJSON(b *testing.B, url string, body, out any) {
	b.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		b.Fatal(err)
	}
	res, err := http.Post(url, "application/json", bytes.NewReader(data))
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b.Fatalf("POST %s: %s", url, res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		b.Fatal(err)
	}
}
