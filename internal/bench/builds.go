package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// defaultRounds is how many rounds of each build a comparison runs of a scenario that
// measures once.
const defaultRounds = 3

// BuildComparison is what a comparison of two builds measured: each build's results,
// every metric the median of the build's rounds (Params["rounds"] says how many).
type BuildComparison struct {
	A *Report `json:"a"`
	B *Report `json:"b"`
}

// Rounds is how many rounds of each build a comparison runs of s: rounds when above
// zero, else the scenario's own repetitions, else defaultRounds.
func Rounds(s Scenario, rounds int) int {
	switch {
	case rounds > 0:
		return rounds
	case s.Repeats > 0:
		return s.Repeats
	}
	return defaultRounds
}

// CompareBuilds runs each scenario on each store (as RunAll chooses them) with two
// gantry binaries, a and b, alternately: a, b, a, b, ... for Rounds(s, rounds) rounds
// each, a scenario that repeats its measurement repeating it once a round, so that
// its repetitions are what alternate. Only the processes the scenarios start are the
// builds'; the simulated workers, submitters and readers are this process's, and the
// noise burner is o.Helper's, else a's. It returns each build's results with every
// metric aggregated over the build's rounds: the median, or for a metric whose name
// ends in " min" the least and in " max" the most. report is told of each scenario and
// store as both builds' rounds are done. A scenario that fails in any round is left out
// of both and reported in the error; the others still run.
func CompareBuilds(ctx context.Context, o *Options, a, b func(args ...string) *exec.Cmd, scenarios []Scenario, stores []string,
	rounds int, report func(a, b *Result)) (as, bs []*Result, err error) {
	o.defaults()
	helper := o.Helper
	if helper == nil {
		helper = a
	}
	builds := []struct {
		name    string
		command func(args ...string) *exec.Cmd
	}{{"A", a}, {"B", b}}
	var errs []error
	for _, s := range scenarios {
		for _, st := range storesOf(s, stores) {
			n := Rounds(s, rounds)
			runs := [2][]*Result{}
			var failed error
		rounds:
			for i := range n {
				for k, build := range builds {
					if ctx.Err() != nil {
						return as, bs, errors.Join(append(errs, ctx.Err())...)
					}
					ob := *o
					ob.Command, ob.Helper, ob.Repeat = build.command, helper, 1
					o.Log.Info("scenario", "name", s.Name, "store", st, "build", build.name, "round", fmt.Sprintf("%d of %d", i+1, n))
					r, err := runScenario(ctx, &ob, s, st)
					if err != nil {
						failed = fmt.Errorf("%s on %s, build %s, round %d of %d: %w", s.Name, st, build.name, i+1, n, err)
						break rounds
					}
					runs[k] = append(runs[k], r)
				}
			}
			if failed != nil {
				errs = append(errs, failed)
				continue
			}
			ra, rb := mergeRounds(runs[0]), mergeRounds(runs[1])
			as, bs = append(as, ra), append(bs, rb)
			if report != nil {
				report(ra, rb)
			}
		}
	}
	return as, bs, errors.Join(errs...)
}

// mergeRounds is one result of a build's rounds of one scenario: the first round's
// metrics in its order, each aggregated over the rounds that have it, the median
// elapsed time, and every round's notes.
func mergeRounds(rs []*Result) *Result {
	first := rs[0]
	m := &Result{Scenario: first.Scenario, Store: first.Store, Params: maps.Clone(first.Params)}
	if m.Params == nil {
		m.Params = map[string]any{}
	}
	m.Params["rounds"] = len(rs)
	for _, fm := range first.Metrics {
		var vs []float64
		for _, r := range rs {
			if v, ok := r.Metric(fm.Name); ok {
				vs = append(vs, v)
			}
		}
		fm.Value = aggregate(fm.Name, vs)
		m.Metrics = append(m.Metrics, fm)
	}
	elapsed := make([]float64, len(rs))
	for i, r := range rs {
		elapsed[i] = float64(r.Elapsed)
	}
	m.Elapsed = time.Duration(median(elapsed))
	for _, r := range rs {
		for _, n := range r.Notes {
			if !slices.Contains(m.Notes, n) {
				m.Notes = append(m.Notes, n)
			}
		}
	}
	m.Notes = append(m.Notes, fmt.Sprintf("compared builds: %d rounds of each, alternately, each metric the median of the "+
		"rounds (a min the least, a max the most)", len(rs)))
	return m
}

// aggregate is the value of a metric over rounds: the least of a min, the most of a
// max, else the median.
func aggregate(name string, vs []float64) float64 {
	switch {
	case len(vs) == 0:
		return 0
	case strings.HasSuffix(name, " min"):
		return slices.Min(vs)
	case strings.HasSuffix(name, " max"):
		return slices.Max(vs)
	}
	return median(vs)
}

// median is the middle value of vs, or the mean of the middle two; vs is sorted.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}

// scenarioWall is the name a comparison of builds gives a scenario's whole wall time.
const scenarioWall = "scenario wall"

// buildChanges pairs every metric of a with b's, and the scenario's wall times last.
func buildChanges(a, b *Result) []Change {
	changes := Compare(&Report{Results: []*Result{a}}, &Report{Results: []*Result{b}})
	return append(changes, Change{Scenario: a.Scenario, Store: a.Store, Metric: scenarioWall, Unit: "ms",
		Old: float64(a.Elapsed.Microseconds()) / 1000, New: float64(b.Elapsed.Microseconds()) / 1000, HasOld: true, HasNew: true})
}

// WriteBuildComparison prints one scenario's results of two builds: every metric of
// each, the medians of its rounds, and B/A with whether B is better or worse, as the
// unit judges it.
func WriteBuildComparison(w io.Writer, a, b *Result) error {
	rounds := a.Params["rounds"]
	fmt.Fprintf(w, "%s on %s: %v rounds of A and of B, alternately; each value the median of its build's rounds\n", a.Scenario, a.Store, rounds)
	return writeChanges(w, "A", "B", "B/A", "B ", buildChanges(a, b))
}

// WriteBuildSummary prints, for each scenario compared, B/A of its CPU per job and of
// its wall time: the scenario's `wall median` where it has one (the `gantry run`
// scenarios), else its whole wall time.
func WriteBuildSummary(w io.Writer, as, bs []*Result) error {
	fmt.Fprintf(w, "B/A (below 1.00x B spends less):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "scenario\tstore\tCPU\tCPU B/A\twall\twall B/A\t\n")
	for i, a := range as {
		b := bs[i]
		changes := buildChanges(a, b)
		cpu, wall := headlines(changes)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", a.Scenario, a.Store, cpu.Metric, ratioText(cpu), wall.Metric, ratioText(wall))
	}
	return tw.Flush()
}

// headlines picks a scenario's CPU per job and wall time from its changes: `CPU per
// job`, else the first metric of CPU per something; `wall median`, else the scenario's
// whole wall time.
func headlines(changes []Change) (cpu, wall Change) {
	cpu.Metric, wall.Metric = "-", scenarioWall
	i := slices.IndexFunc(changes, func(c Change) bool { return c.Metric == "CPU per job" })
	if i < 0 {
		i = slices.IndexFunc(changes, func(c Change) bool { return strings.Contains(c.Metric, "CPU per ") })
	}
	if i >= 0 {
		cpu = changes[i]
	}
	if i := slices.IndexFunc(changes, func(c Change) bool { return c.Metric == "wall median" }); i >= 0 {
		wall = changes[i]
	} else if i := slices.IndexFunc(changes, func(c Change) bool { return c.Metric == scenarioWall }); i >= 0 {
		wall = changes[i]
	}
	return cpu, wall
}

// ratioText is a change's ratio for a table: the ratio, "-" where there is none.
func ratioText(c Change) string {
	if r, ok := c.Ratio(); ok {
		return formatRatio(r)
	}
	return "-"
}
