package bench

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/testbin"
)

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
		notes := strings.Join(r.Notes, "\n")
		want := map[string]string{"throughput-8": "RUSAGE_SELF", "artifacts": "`gantry worker` processes"}[r.Scenario]
		if !strings.Contains(notes, want) {
			t.Errorf("%s: the notes do not say whose the workers' CPU is (%q):\n%s", r.Scenario, want, notes)
		}
	}
}
