package cli

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkLargeArtifact moves a 1 GiB artifact between two jobs through real processes:
// a `gantry server` on SQLite with its directory blob store, and one `gantry worker`. It
// reports the worker's hashing, upload and download speeds, as its job logs tell them,
// and the peak resident memory (VmHWM) of the worker and server processes. Run it with
// -benchtime 1x: each iteration moves 3 GiB through the disk.
func BenchmarkLargeArtifact(b *testing.B) {
	dir := b.TempDir()
	srv := startServerProcess(b, "sqlite://"+filepath.Join(dir, "data", "gantry.db"))
	worker := startChild(b, []string{"worker", "--server", srv.base, "--max-jobs", "1", "--work-dir", b.TempDir(), "--log-level", "warn"})
	const pipelineYAML = `name: large
jobs:
  make:
    steps: [ { run: "head -c 1073741824 /dev/urandom > big.bin" } ]
    artifacts: { paths: [big.bin] }
  use:
    needs: [make]
    steps: [ { run: "test $(stat -c %s big.bin) = 1073741824" } ]
`
	var hash, up, down float64
	for b.Loop() {
		r := waitRunWithin(b, srv.base, submitRun(b, srv.base, pipelineYAML).ID, 5*time.Minute,
			func(r runDetails) bool { return runTerminal(r.Status) })
		if r.Status != "success" {
			b.Fatalf("run is %q, want success", r.Status)
		}
		var log strings.Builder
		for _, j := range r.Jobs {
			res, err := http.Get(srv.base + "/api/v1/jobs/" + j.ID + "/logs")
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(&log, res.Body)
			res.Body.Close()
		}
		hash += mbPerSecond(b, log.String(), `hashed in \S+ \((\d+) MB/s\)`)
		up += mbPerSecond(b, log.String(), `big\.bin .*uploaded in \S+ \((\d+) MB/s\)`)
		down += mbPerSecond(b, log.String(), `fetched big\.bin .* in \S+ \((\d+) MB/s\)`)
	}
	n := float64(b.N)
	b.ReportMetric(hash/n, "hash-MB/s")
	b.ReportMetric(up/n, "upload-MB/s")
	b.ReportMetric(down/n, "download-MB/s")
	b.ReportMetric(peakRSS(b, worker.cmd.Process.Pid), "worker-peak-MiB")
	b.ReportMetric(peakRSS(b, srv.cmd.Process.Pid), "server-peak-MiB")
}

func mbPerSecond(b *testing.B, log, pattern string) float64 {
	b.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(log)
	if m == nil {
		b.Fatalf("no line matching %q in the job logs:\n%s", pattern, log)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// peakRSS reads a live process's peak resident set size, in MiB.
func peakRSS(b *testing.B, pid int) float64 {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb / 1024
		}
	}
	b.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}
