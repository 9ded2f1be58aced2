package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/bench"
	"github.com/gantry-ci/gantry/internal/testbin"
)

// TestBench runs every scenario of gantry bench, scaled down, against real coordinator
// processes on SQLite, and the orchestration scenarios on PostgreSQL, and checks that each
// measured what it names: the numbers themselves are for BENCHMARKS.md, not for a test
// to judge.
func TestBench(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		testBench(t, bench.SQLite, nil)
	})
	// With no --postgres, as `make bench` runs it, the bench starts a PostgreSQL
	// cluster of its own.
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		testBench(t, bench.Postgres, []string{"throughput-8", "concurrency", "intake"})
	})
}

func testBench(t *testing.T, store string, scenarios []string) {
	dir := t.TempDir()
	jsonPath, mdPath := filepath.Join(dir, "bench.json"), filepath.Join(dir, "BENCHMARKS.md")
	if err := os.WriteFile(mdPath, []byte("# Benchmarks\n\nText the team wrote.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"bench", "--scale", "0.02", "--store", store,
		"--json", jsonPath, "--markdown", mdPath, "--dir", dir, "--log-level", "warn"}
	// The coordinators and workers the scenarios start are a gantry binary built without
	// the race detector, as `gantry bench` runs: under it they took five times as long, and
	// what this test checks is what the bench reports, not the server's races, which
	// the rest of the suite looks for.
	bin, err := testbin.Gantry()
	if err != nil {
		t.Fatal(err)
	}
	out := runCLI(t, invocation{args: append(args, scenarios...), gantry: func(args ...string) *exec.Cmd { return exec.Command(bin, args...) }})
	if out.code != exitOK {
		t.Fatalf("gantry bench exited %d\nstdout:\n%s\nstderr:\n%s", out.code, out.stdout, out.stderr)
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("JSON report: %v\n%s", err, raw)
	}
	if rep.Scale != 0.02 || rep.Machine.CPUs == 0 || rep.Commit == "" {
		t.Errorf("report header: scale %v, machine %+v, commit %q", rep.Scale, rep.Machine, rep.Commit)
	}
	wantServer := regexp.MustCompile(`^$`)
	if store == bench.Postgres {
		wantServer = regexp.MustCompile(`^PostgreSQL [0-9][^,]*, a throwaway cluster the bench started with initdb, ` +
			`PostgreSQL's defaults but max_connections = 200$`)
	}
	if !wantServer.MatchString(rep.Postgres) {
		t.Errorf("report says the PostgreSQL server was %q, want %s", rep.Postgres, wantServer)
	}
	got := map[string]*bench.Result{}
	for _, r := range rep.Results {
		if r.Store != store {
			t.Errorf("%s ran on %s, asked for %s only", r.Scenario, r.Store, store)
		}
		got[r.Scenario] = r
	}
	want, _ := bench.Select(scenarios)
	for _, s := range want {
		if !slices.Contains(s.Stores, store) {
			continue
		}
		r := got[s.Name]
		if r == nil {
			t.Errorf("no result for %s", s.Name)
			continue
		}
		if !strings.Contains(out.stdout, s.Name+"  "+store) {
			t.Errorf("the table has no row for %s:\n%s", s.Name, out.stdout)
		}
		for _, m := range r.Metrics {
			if m.Target != nil {
				t.Errorf("%s: %s has a target at scale 0.02", s.Name, m.Name)
			}
		}
	}
	// Every scenario measured something real: jobs went through, latencies were seen.
	positive := map[string][]string{
		"throughput-8":          {"jobs/s", "dispatch p99", "submit p99", "coordinator RSS"},
		"throughput-64":         {"jobs/s", "dispatch p99", "submit p99", "coordinator RSS"},
		"dispatch":              {"jobs/s", "dispatch p50", "dispatch p99"},
		"dag-independent":       {"wall median", "one-job pipeline"},
		"dag-chain":             {"wall median", "one-job pipeline"},
		"dag-fan":               {"wall median", "one-job pipeline"},
		"dag-independent-10000": {"wall of 20 jobs", "wall of 200 jobs", "large / (small scaled up)", "CPU per job, large / small"},
		"dag-independent-image": {"wall median", "one-job pipeline"},
		"dag-chain-image":       {"wall median", "one-job pipeline"},
		"dag-fan-image":         {"wall median", "one-job pipeline"},
		"container-overhead":    {"wall on the host", "wall in containers", "docker worker's CPU per job"},
		"backlog":               {"claim p99", "coordinator RSS", "time to queue every job"},
		"history":               {"claim (no history) p99", "claim (with history) p99", "finished job rows"},
		"concurrency":           {"coordinator RSS", "heartbeats", "heartbeat p99", "time to start every job"},
		"intake":                {"submit p99", "dispatch p99", "time to submit every run"},
		"logs-latency-1":        {"line latency p50", "line latency p99", "lines"},
		"logs-latency-100":      {"line latency p50", "line latency p99", "lines"},
		"logs-ingest":           {"lines/s", "append p99"},
		"cancel":                {"cancel p50", "cancel p99"},
		"artifacts":             {"hashing", "upload", "download", "worker peak RSS", "server peak RSS"},
		"hooks-latency":         {"webhook to running p50", "webhook to running p99", "webhook answer p99"},
		"hooks-throughput":      {"webhooks/s", "jobs created", "webhook answer p99"},
		"checkout":              {"checkout p50", "checkout p99", "first checkout, cold mirror", "checkout on tmpfs p50", "checkout on tmpfs p99"},
	}
	for name, r := range got {
		for _, m := range positive[name] {
			if v, ok := r.Metric(m); !ok || v <= 0 {
				t.Errorf("%s: %s = %v (present %v), want a positive measurement", name, m, v, ok)
			}
		}
		// Every scenario reports its CPU per job (or per its unit of work) beside its
		// wall times (issue 34).
		i := slices.IndexFunc(r.Metrics, func(m bench.Metric) bool {
			return strings.HasPrefix(m.Name, "CPU per ") || strings.Contains(m.Name, "CPU per job")
		})
		if i < 0 || r.Metrics[i].Value <= 0 {
			t.Errorf("%s: no CPU per job measured: %+v", name, r.Metrics)
		}
	}
	if len(scenarios) == 0 {
		// Issue 17's measurements: webhook to running, webhooks/s, checkout from a warm mirror.
		for _, name := range []string{"hooks-latency", "hooks-throughput", "checkout"} {
			if got[name] == nil {
				t.Errorf("no result for %s", name)
			}
		}
	}
	if r := got["checkout"]; r != nil && !strings.Contains(strings.Join(r.Notes, "\n"), "(tmpfs)") {
		t.Errorf("checkout: the notes do not say which workspaces were on a tmpfs: %q", r.Notes)
	}
	if r := got["concurrency"]; r != nil {
		if v, _ := r.Metric("leases expired"); v != 0 {
			t.Errorf("concurrency: %v leases expired while every worker heartbeat", v)
		}
	}
	// The saved JSON renders the same section again without running anything.
	again := filepath.Join(dir, "AGAIN.md")
	if out := runCLI(t, invocation{args: []string{"bench", "--report", jsonPath, "--markdown", again}}); out.code != exitOK ||
		!strings.Contains(out.stdout, "  "+store+"  ") {
		t.Errorf("bench --report: exit %d\n%s%s", out.code, out.stdout, out.stderr)
	}
	// Against itself every metric that was measured as non-zero compares at 1.00x.
	if out := runCLI(t, invocation{args: []string{"bench", "--report", jsonPath, "--compare", jsonPath}}); out.code != exitOK ||
		!strings.Contains(out.stdout, "new/old") || !strings.Contains(out.stdout, "1.00x") || strings.Contains(out.stdout, "better") {
		t.Errorf("bench --report --compare: exit %d\n%s%s", out.code, out.stdout, out.stderr)
	}
	md, err := os.ReadFile(mdPath)
	if err != nil {
		t.Fatal(err)
	}
	if rendered, err := os.ReadFile(again); err != nil || !strings.Contains(string(md), string(rendered[:len(rendered)/2])) {
		t.Errorf("bench --report wrote %q (%v), not the section the run wrote", rendered, err)
	}
	if rep.Postgres != "" && !strings.Contains(string(md), "\nPostgreSQL: "+rep.Postgres+".\n") {
		t.Errorf("the Markdown does not say what PostgreSQL server the scenarios ran on:\n%s", md)
	}
	if !strings.HasPrefix(string(md), "# Benchmarks\n\nText the team wrote.\n") {
		t.Errorf("the Markdown lost the text around the generated section:\n%s", md)
	}
	for name := range got {
		if !strings.Contains(string(md), "### "+name+"\n") {
			t.Errorf("the Markdown has no section for %s", name)
		}
	}
}

func TestBenchUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "nosuch"}, `no scenario "nosuch"`},
		{[]string{"bench", "--scale", "0"}, "--scale 0"},
		{[]string{"bench", "--store", "mysql"}, `--store "mysql"`},
		{[]string{"bench", "--log-level", "loud"}, "loud"},
		{[]string{"bench", "--report", "/nonexistent/bench.json"}, "--report"},
		{[]string{"bench", "--compare", "/nonexistent/bench.json", "nosuch-never-run"}, `no scenario "nosuch-never-run"`},
		{[]string{"bench", "--compare", "/nonexistent/bench.json", "--list"}, "--compare"},
		{[]string{"bench", "--noise=-1"}, "--noise -1"},
		{[]string{"bench", "--rounds", "3"}, "--rounds: only with --compare-build"},
		{[]string{"bench", "--compare-build", "/nonexistent/gantry"}, "--compare-build: stat /nonexistent/gantry"},
		{[]string{"bench", "--compare-build", "/dev/null"}, "--compare-build: /dev/null is not an executable file"},
		{[]string{"bench", "--compare-build", "/bin/sh", "--rounds", "-1"}, "--rounds -1"},
		{[]string{"bench", "--compare-build", "/bin/sh", "--markdown", "BENCHMARKS.md"}, "--compare-build with --markdown"},
		{[]string{"bench", "--compare-build", "/bin/sh", "--compare", "old.json"}, "--compare-build with --compare"},
		{[]string{"bench", "--compare-build", "/bin/false", "dag-chain"}, "/bin/false version: exit status 1 (is it a gantry binary?)"},
		{[]string{"bench-burn", "--loops", "0"}, "--loops 0"},
	} {
		out := runCLI(t, invocation{args: tc.args})
		if out.code != exitUsage || !strings.Contains(out.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, out.code, out.stderr, tc.want)
		}
	}
	out := runCLI(t, invocation{args: []string{"bench", "--list"}})
	if out.code != exitOK {
		t.Fatalf("bench --list: exit %d: %s", out.code, out.stderr)
	}
	for _, s := range bench.Scenarios() {
		if !slices.ContainsFunc(strings.Split(out.stdout, "\n"), func(l string) bool { return strings.HasPrefix(l, s.Name+" ") }) {
			t.Errorf("bench --list does not list %s:\n%s", s.Name, out.stdout)
		}
	}
}

// TestBenchCompareBuild runs a scenario with this build and another binary (the same
// gantry behind a script), and checks what a user reads: both builds' values and B/A per
// metric, the summary, and the JSON of both.
func TestBenchCompareBuild(t *testing.T) {
	t.Parallel()
	bin, err := testbin.Gantry()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	other := filepath.Join(dir, "gantry-other")
	if err := os.WriteFile(other, []byte("#!/bin/sh\nexec '"+bin+"' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	jsonPath := filepath.Join(dir, "builds.json")
	out := runCLI(t, invocation{args: []string{"bench", "--compare-build", other, "--rounds", "2", "--scale", "0.1", "--store", "sqlite",
		"--dir", dir, "--json", jsonPath, "--log-level", "warn", "dag-chain"},
		gantry: func(args ...string) *exec.Cmd { return exec.Command(bin, args...) }})
	if out.code != exitOK {
		t.Fatalf("gantry bench --compare-build exited %d\nstdout:\n%s\nstderr:\n%s", out.code, out.stdout, out.stderr)
	}
	for _, want := range []string{"A: this build (", "B: " + other + " (gantry ", "dag-chain on sqlite: 2 rounds of A and of B, alternately",
		"scenario   store   metric", "B/A", "dag-chain  sqlite  CPU per job  ", "dag-chain  sqlite  wall median  ",
		"B/A (below 1.00x B spends less):"} {
		if !strings.Contains(out.stdout, want) {
			t.Errorf("the output lacks %q:\n%s", want, out.stdout)
		}
	}
	// Every metric of the scenario has a unit that says which way is good: each row's
	// verdict says whose it is.
	if !regexp.MustCompile(`(?m)^dag-chain  sqlite  wall median .*x B (better|worse) *$`).MatchString(out.stdout) {
		t.Errorf("wall median's row does not say whether B is better or worse:\n%s", out.stdout)
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var cmp bench.BuildComparison
	if err := json.Unmarshal(raw, &cmp); err != nil {
		t.Fatalf("JSON: %v\n%s", err, raw)
	}
	if cmp.A == nil || cmp.B == nil || len(cmp.A.Results) != 1 || len(cmp.B.Results) != 1 || cmp.B.Command != other {
		t.Fatalf("JSON of the comparison: %s", raw)
	}
	for _, r := range []*bench.Result{cmp.A.Results[0], cmp.B.Results[0]} {
		if v, ok := r.Metric("CPU per job"); !ok || v <= 0 {
			t.Errorf("JSON: CPU per job %v (present %v)", v, ok)
		}
	}
}
