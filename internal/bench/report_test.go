package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestUpdateMarkdown(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if err := os.WriteFile(path, []byte("# Benchmarks\n\nBefore.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	report := func(jobsPerSec float64) *Report {
		r := &Result{Scenario: "throughput-64", Store: SQLite, Params: map[string]any{"runs": 10000}, Elapsed: 5 * time.Second}
		r.add("jobs/s", jobsPerSec, "jobs/s", atLeast(2000))
		return &Report{Date: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC), Commit: "abc1234", Command: "gantry bench",
			Machine: Machine{CPUs: 2}, Scale: 1, Results: []*Result{r}}
	}
	if err := UpdateMarkdown(path, report(1500)); err != nil {
		t.Fatal(err)
	}
	// Text written after the generated section stays when it is generated again.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("\nAfter.\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := UpdateMarkdown(path, report(2500)); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	md := string(raw)
	for _, want := range []string{
		"# Benchmarks\n\nBefore.\n",
		"at commit abc1234 with `gantry bench`",
		"| jobs/s | **2,500 jobs/s** | >= 2,000 jobs/s: met (sqlite) |",
		"### Summary",
		"| throughput-64 | jobs/s | >= 2,000 jobs/s | sqlite: 2,500 jobs/s, met |",
		markdownEnd + "\n\nAfter.\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("missing %q in:\n%s", want, md)
		}
	}
	if strings.Contains(md, "1,500") || strings.Count(md, markdownBegin) != 1 {
		t.Errorf("the first report was not replaced:\n%s", md)
	}
}

// A scenario whose target differs by store shows each store's, in its table and in
// the summary, rather than the last store's for both.
func TestMarkdownTargetsPerStore(t *testing.T) {
	t.Parallel()
	var results []*Result
	for _, st := range []struct {
		store  string
		value  float64
		target float64
	}{{SQLite, 2842, 4000}, {Postgres, 2100, 2000}} {
		r := &Result{Scenario: "throughput-64", Store: st.store, Params: map[string]any{"runs": 10000}, Elapsed: time.Second}
		r.add("jobs/s", st.value, "jobs/s", atLeast(st.target))
		results = append(results, r)
	}
	md := Markdown(&Report{Date: time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC), Commit: "abc1234", Command: "gantry bench",
		Machine: Machine{CPUs: 2}, Scale: 1, Results: results})
	for _, want := range []string{
		"| jobs/s | **2,842 jobs/s** | **2,100 jobs/s** | sqlite >= 4,000 jobs/s, postgres >= 2,000 jobs/s: **missed** (sqlite), met (postgres) |",
		"| throughput-64 | jobs/s | sqlite >= 4,000 jobs/s, postgres >= 2,000 jobs/s | sqlite: 2,842 jobs/s, **missed**; postgres: 2,100 jobs/s, met |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("missing %q in:\n%s", want, md)
		}
	}
}

// A metric only one store measures has its row, the other store's cell empty, wherever
// it comes among the metrics.
func TestMarkdownMetricOfOneStore(t *testing.T) {
	t.Parallel()
	sqlite := &Result{Scenario: "throughput-64", Store: SQLite, Elapsed: time.Second}
	sqlite.add("jobs/s", 1400, "jobs/s", nil)
	sqlite.add("CPU per job", 1.05, "ms", nil)
	pg := &Result{Scenario: "throughput-64", Store: Postgres, Elapsed: time.Second}
	pg.add("jobs/s", 420, "jobs/s", nil)
	pg.add("PostgreSQL CPU per job", 1.83, "ms", nil)
	pg.add("CPU per job", 1.79, "ms", nil)
	md := Markdown(&Report{Date: time.Date(2026, 12, 7, 7, 0, 0, 0, time.UTC), Commit: "abc1234", Command: "gantry bench",
		Machine: Machine{CPUs: 2}, Scale: 1, Results: []*Result{sqlite, pg}})
	for _, want := range []string{
		"| jobs/s | 1,400 jobs/s | 420 jobs/s |  |",
		"| CPU per job | 1.05 ms | 1.79 ms |  |",
		"| PostgreSQL CPU per job | | 1.83 ms |  |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("missing %q in:\n%s", want, md)
		}
	}
}

// The generated section leads with every scenario's CPU per job, the whole work's and
// not its parts, and the summary gives each measured value the load it was taken under.
func TestMarkdownLeadsWithCPU(t *testing.T) {
	t.Parallel()
	var results []*Result
	for _, st := range []struct {
		store      string
		cpu, coord float64
		load       float64
	}{{SQLite, 1.05, 0.82, 1.93}, {Postgres, 1.79, 1.44, 2.5}} {
		r := &Result{Scenario: "throughput-64", Store: st.store, Elapsed: time.Second}
		r.add("jobs/s", 1400, "jobs/s", atLeast(4000))
		r.add("CPU per job", st.cpu, "ms", nil)
		r.add("coordinator CPU per job", st.coord, "ms", nil)
		if st.store == Postgres {
			r.add("PostgreSQL CPU per job", 2.23, "ms", nil)
		}
		r.addMachine(machineSample{busy: 0, total: 100, cpus: 2}, machineSample{busy: 90, total: 200, cpus: 2, load1: st.load})
		results = append(results, r)
	}
	chain := &Result{Scenario: "dag-chain", Store: SQLite, Elapsed: time.Second}
	chain.add("CPU per job", 15.5, "ms", atMost(5))
	chain.add("system CPU per job", 7, "ms", nil)
	chain.add("history: coordinator and database CPU per read", 2, "ms", nil)
	chain.add("docker worker's CPU per job", 14.4, "ms", nil)
	chain.add("wall median", 640, "ms", atMost(120))
	results = append(results, chain)
	md := Markdown(&Report{Date: time.Date(2026, 12, 7, 7, 0, 0, 0, time.UTC), Commit: "abc1234", Command: "gantry bench",
		Machine: Machine{CPUs: 2}, Scale: 1, Results: results})
	for _, want := range []string{
		"| scenario | metric | sqlite | postgres |",
		"| throughput-64 | CPU per job | 1.05 ms | 1.79 ms |",
		"| throughput-64 | PostgreSQL CPU per job |  | 2.23 ms |",
		"| dag-chain | CPU per job | 15.5 ms |  |",
		"| dag-chain | docker worker's CPU per job | 14.4 ms |  |",
		"| throughput-64 | jobs/s | >= 4,000 jobs/s | sqlite: 1,400 jobs/s, **missed**, load 1.93; postgres: 1,400 jobs/s, **missed**, load 2.50 |",
		"| dag-chain | wall median | <= 120 ms | sqlite: 640 ms, **missed** |",
		"| machine CPU busy | 1.80 of 2 cores | 1.80 of 2 cores |  |",
		"| load average (1 min) | 1.93 | 2.50 |  |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("missing %q in:\n%s", want, md)
		}
	}
	cpu, summary := strings.Index(md, "### CPU per job"), strings.Index(md, "### Summary")
	if cpu < 0 || summary < 0 || cpu > summary {
		t.Errorf("the CPU per job table (at %d) does not come before the summary (at %d):\n%s", cpu, summary, md)
	}
	lead := md[cpu:summary]
	for _, part := range []string{"coordinator CPU per job", "system CPU per job", "database CPU per read", "jobs/s"} {
		if strings.Contains(lead, part) {
			t.Errorf("the CPU per job table has %q:\n%s", part, lead)
		}
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	s := summarize(ds)
	if s.N != 100 || s.P50 != 50*time.Millisecond || s.P99 != 99*time.Millisecond || s.Max != 100*time.Millisecond {
		t.Errorf("summarize(1..100 ms) = %+v", s)
	}
	if s := summarize(nil); s.N != 0 || s.Max != 0 {
		t.Errorf("summarize(nil) = %+v", s)
	}
}
