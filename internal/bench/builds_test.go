package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/testbin"
)

// TestCompareBuildsAlternates runs a `gantry run` scenario and a coordinator scenario
// with two builds, each a script that records its invocations in one file before it
// runs the real binary, and checks that the builds' processes alternate round by round.
func TestCompareBuildsAlternates(t *testing.T) {
	t.Parallel()
	bin, err := testbin.Gantry()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "invocations")
	build := func(name string) func(args ...string) *exec.Cmd {
		script := filepath.Join(dir, "gantry-"+name)
		src := fmt.Sprintf("#!/bin/sh\necho \"%s $1\" >> '%s'\nexec '%s' \"$@\"\n", name, log, bin)
		if err := os.WriteFile(script, []byte(src), 0o755); err != nil {
			t.Fatal(err)
		}
		return func(args ...string) *exec.Cmd { return exec.Command(script, args...) }
	}
	scenarios, err := Select([]string{"dag-chain", "throughput-8"})
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 3
	o := &Options{Scale: 0.02, Dir: dir}
	var reported []string
	as, bs, err := CompareBuilds(t.Context(), o, build("A"), build("B"), scenarios, []string{SQLite}, rounds, func(a, b *Result) {
		reported = append(reported, a.Scenario+"/"+b.Scenario)
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(reported, " ") != "dag-chain/dag-chain throughput-8/throughput-8" {
		t.Errorf("reported %q, want each scenario once as its rounds end", reported)
	}
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	// Each round of dag-chain runs its pipeline and a one-job pipeline; each of
	// throughput-8 starts one coordinator.
	for sub, want := range map[string]string{"run": "AABBAABBAABB", "server": "ABABAB"} {
		var got strings.Builder
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			if name, arg, _ := strings.Cut(line, " "); arg == sub {
				got.WriteString(name)
			}
		}
		if got.String() != want {
			t.Errorf("the builds' `gantry %s` invocations ran in the order %q, want %q:\n%s", sub, got.String(), want, raw)
		}
	}
	if len(as) != 2 || len(bs) != 2 {
		t.Fatalf("%d and %d results, want 2 of each build", len(as), len(bs))
	}
	for _, r := range append(as, bs...) {
		if r.Params["rounds"] != rounds {
			t.Errorf("%s: rounds %v, want %d", r.Scenario, r.Params["rounds"], rounds)
		}
		if v, ok := r.Metric("CPU per job"); !ok || v <= 0 {
			t.Errorf("%s: CPU per job %v (present %v), want a measurement", r.Scenario, v, ok)
		}
	}
	if runs := as[0].Params["runs"]; runs != 1 {
		t.Errorf("dag-chain ran its pipeline %v times a round, want once", runs)
	}
	var out strings.Builder
	if err := WriteBuildComparison(&out, as[0], bs[0]); err != nil {
		t.Fatal(err)
	}
	if err := WriteBuildSummary(&out, as, bs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dag-chain on sqlite: 3 rounds of A and of B", "B/A", "dag-chain  sqlite  CPU per job", "scenario wall",
		"dag-chain     sqlite  CPU per job  ", "throughput-8  sqlite  CPU per job  "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the comparison lacks %q:\n%s", want, out.String())
		}
	}
}

// TestCompareBuildsFailure: a build that fails a scenario leaves it out of both builds'
// results, naming the build and the round.
func TestCompareBuildsFailure(t *testing.T) {
	t.Parallel()
	good := gantryCommand(t)
	bad := func(_ ...string) *exec.Cmd { return exec.Command("false") }
	scenarios, err := Select([]string{"dag-chain"})
	if err != nil {
		t.Fatal(err)
	}
	as, bs, err := CompareBuilds(context.Background(), &Options{Scale: 0.05, Dir: t.TempDir()}, good, bad, scenarios, nil, 2, nil)
	if err == nil || !strings.Contains(err.Error(), "dag-chain on sqlite, build B, round 1 of 2") {
		t.Errorf("CompareBuilds with a failing B: %v", err)
	}
	if len(as) != 0 || len(bs) != 0 {
		t.Errorf("results of a failed comparison: %d and %d", len(as), len(bs))
	}
}

func TestMergeRounds(t *testing.T) {
	t.Parallel()
	round := func(wall, lo, hi float64, elapsed time.Duration) *Result {
		r := &Result{Scenario: "s", Store: SQLite, Params: map[string]any{"jobs": 5}, Elapsed: elapsed, Notes: []string{"n"}}
		r.add("wall median", wall, "ms", nil)
		r.add("wall min", lo, "ms", nil)
		r.add("wall max", hi, "ms", nil)
		return r
	}
	m := mergeRounds([]*Result{round(30, 3, 300, 3*time.Second), round(10, 1, 100, time.Second), round(20, 2, 200, 2*time.Second)})
	for name, want := range map[string]float64{"wall median": 20, "wall min": 1, "wall max": 300} {
		if v, _ := m.Metric(name); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	if m.Elapsed != 2*time.Second || m.Params["rounds"] != 3 || m.Params["jobs"] != 5 {
		t.Errorf("merged elapsed %v, params %v", m.Elapsed, m.Params)
	}
	if len(m.Notes) != 2 || m.Notes[0] != "n" {
		t.Errorf("merged notes %q, want the rounds' once and the comparison's", m.Notes)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median of 1..4 = %v, want 2.5", got)
	}
	for _, c := range []struct {
		s      Scenario
		rounds int
		want   int
	}{{Scenario{Repeats: 5}, 0, 5}, {Scenario{}, 0, defaultRounds}, {Scenario{Repeats: 5}, 2, 2}} {
		if got := Rounds(c.s, c.rounds); got != c.want {
			t.Errorf("Rounds(repeats %d, %d) = %d, want %d", c.s.Repeats, c.rounds, got, c.want)
		}
	}
}
