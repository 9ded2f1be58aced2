package bench

import (
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/testbin"
	"github.com/gantry-ci/gantry/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// gantryCommand starts the gantry binary of this tree, built without the race detector
// as `gantry bench` runs it.
func gantryCommand(t *testing.T) func(args ...string) *exec.Cmd {
	t.Helper()
	bin, err := testbin.Gantry()
	if err != nil {
		t.Fatal(err)
	}
	return func(args ...string) *exec.Cmd { return exec.Command(bin, args...) }
}

// TestCPUPerJob: a scenario of simulated workers and one of real `gantry worker`
// processes, scaled down, each report CPU per job, of the coordinator and of the workers,
// measured and adding up.
func TestCPUPerJob(t *testing.T) {
	t.Parallel()
	scenarios, err := Select([]string{"throughput-8", "artifacts"})
	if err != nil {
		t.Fatal(err)
	}
	o := &Options{Command: gantryCommand(t), Scale: 0.02, Dir: t.TempDir()}
	results, err := RunAll(t.Context(), o, scenarios, []string{SQLite}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 {
		t.Fatalf("%d results, want 2", len(results))
	}
	for _, r := range results {
		total, ok1 := r.Metric("CPU per job")
		coord, ok2 := r.Metric("coordinator CPU per job")
		workers, ok3 := r.Metric("worker CPU per job")
		if !ok1 || !ok2 || !ok3 {
			t.Errorf("%s: no CPU per job metrics in %+v", r.Scenario, r.Metrics)
			continue
		}
		// A job costs these a fraction of a millisecond to some tens of them; a second
		// would be a clock read wrong.
		for name, v := range map[string]float64{"CPU per job": total, "coordinator CPU per job": coord, "worker CPU per job": workers} {
			if v <= 0 || v > 1000 {
				t.Errorf("%s: %s = %v ms, want a measurement above 0 and below a second", r.Scenario, name, v)
			}
		}
		if d := total - coord - workers; d < -0.01 || d > 0.01 {
			t.Errorf("%s: CPU per job %v != coordinator %v + workers %v", r.Scenario, total, coord, workers)
		}
		if v, ok := r.Metric("PostgreSQL CPU per job"); ok {
			t.Errorf("%s on SQLite: PostgreSQL CPU per job %v ms", r.Scenario, v)
		}
		// The machine ran at least the scenario's own processes.
		if v, ok := r.Metric(machineBusyMetric); !ok || v <= 0 || v > float64(runtime.NumCPU()) {
			t.Errorf("%s: %s = %v (present %v), want above 0 and at most %d cores", r.Scenario, machineBusyMetric, v, ok, runtime.NumCPU())
		}
		if v, ok := r.Metric(loadMetric); !ok || v < 0 {
			t.Errorf("%s: %s = %v (present %v)", r.Scenario, loadMetric, v, ok)
		}
		notes := strings.Join(r.Notes, "\n")
		want := map[string]string{"throughput-8": "RUSAGE_SELF", "artifacts": "`gantry worker` processes"}[r.Scenario]
		if !strings.Contains(notes, want) {
			t.Errorf("%s: the notes do not say whose the workers' CPU is (%q):\n%s", r.Scenario, want, notes)
		}
	}
}

// TestServerCPUPerJob: a scenario on a PostgreSQL server of this machine also reports
// the server's CPU per job, apart from the coordinator's and the workers'.
func TestServerCPUPerJob(t *testing.T) {
	t.Parallel()
	scenarios, err := Select([]string{"throughput-8"})
	if err != nil {
		t.Fatal(err)
	}
	o := &Options{Command: gantryCommand(t), Scale: 0.02, Dir: t.TempDir(), Postgres: testdb.Postgres(t)}
	results, err := RunAll(t.Context(), o, scenarios, []string{Postgres}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 {
		t.Fatalf("%d results, want 1", len(results))
	}
	r := results[0]
	server, ok := r.Metric("PostgreSQL CPU per job")
	if !ok {
		t.Fatalf("no PostgreSQL CPU per job in %+v", r.Metrics)
	}
	// Each job is a run's creation, a claim and a completion, a dozen statements: the
	// server spends some of a millisecond on them, not nothing and not a second.
	if server <= 0 || server > 1000 {
		t.Errorf("PostgreSQL CPU per job = %v ms, want a measurement above 0 and below a second", server)
	}
	total, _ := r.Metric("CPU per job")
	coord, _ := r.Metric("coordinator CPU per job")
	workers, _ := r.Metric("worker CPU per job")
	if d := total - coord - workers; d < -0.01 || d > 0.01 {
		t.Errorf("CPU per job %v != coordinator %v + workers %v: the server's CPU is not theirs", total, coord, workers)
	}
	if notes := strings.Join(r.Notes, "\n"); !strings.Contains(notes, "PostgreSQL CPU per job: user and system CPU of the PostgreSQL server") {
		t.Errorf("the notes do not say what PostgreSQL CPU per job counts:\n%s", notes)
	}
}
