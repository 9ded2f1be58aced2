package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// Store kinds a scenario runs its coordinator on.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// Options is what every scenario is given.
type Options struct {
	// Command makes the command that runs `gantry <args>`: the gantry binary itself, or in
	// tests the test binary re-executed as gantry.
	Command func(args ...string) *exec.Cmd
	// Postgres is a server URL whose user may CREATE DATABASE; each scenario on PostgreSQL
	// gets a database of its own beside it, dropped afterwards.
	Postgres string
	// Scale multiplies every count and duration of a scenario: 1 is the size the numbers
	// in BENCHMARKS.md are measured at; tests run at a few percent.
	Scale float64
	// Dir holds the scenarios' data directories; default the temp dir.
	Dir string
	// Log receives progress; default discards.
	Log *slog.Logger
	// Noise, when above zero, runs `gantry bench-burn` with that many busy loops beside
	// each scenario, so that it is measured while another process wants every core.
	Noise int
	// Helper makes the command of the bench's own helper processes (the noise burner);
	// nil uses Command. A comparison of builds runs Command as the other build's binary
	// and keeps the load beside it this build's.
	Helper func(args ...string) *exec.Cmd
	// Repeat, when above zero, is how many times a scenario that repeats its measurement
	// (the `gantry run` ones) repeats it; 0 its own count. A comparison of builds sets 1
	// and alternates the builds' rounds instead.
	Repeat int
}

// repeats is how many times a scenario that measures n times at full scale (and once
// below it) measures.
func (o *Options) repeats(n int) int {
	switch {
	case o.Repeat > 0:
		return o.Repeat
	case o.Scale < 1:
		return 1
	}
	return n
}

// helper makes the command of a helper process of the bench's own.
func (o *Options) helper(args ...string) *exec.Cmd {
	if o.Helper != nil {
		return o.Helper(args...)
	}
	return o.Command(args...)
}

// defaults fills what was left unset.
func (o *Options) defaults() {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Scale <= 0 {
		o.Scale = 1
	}
	if o.Dir == "" {
		o.Dir = os.TempDir()
	}
}

func (o *Options) scaled(n int) int {
	return max(1, int(float64(n)*o.Scale+0.5))
}

func (o *Options) scaledDur(d time.Duration) time.Duration {
	return max(time.Second, time.Duration(float64(d)*o.Scale))
}

// Scenario is one named measurement.
type Scenario struct {
	Name string
	// About says in one line what is measured.
	About string
	// Stores lists the stores the scenario runs on by default.
	Stores []string
	// Repeats is how many times the scenario repeats its measurement at full scale (0:
	// it measures once): a comparison of builds runs that many rounds of each build by
	// default, alternately.
	Repeats int
	Run     func(ctx context.Context, o *Options, store string) (*Result, error)
}

// Result is what one scenario measured on one store.
type Result struct {
	Scenario string `json:"scenario"`
	Store    string `json:"store"`
	// Params are the scenario's sizes as run (jobs, workers, rate), for the report.
	Params  map[string]any `json:"params"`
	Metrics []Metric       `json:"metrics"`
	// Notes say what the numbers mean where the name does not.
	Notes   []string      `json:"notes,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns"`

	// cpu is what the scenario's processes spent, for its CPU per job metrics.
	cpu cpuUse
}

// Metric is one measured value, with its target when the project has one.
type Metric struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// Target is the bound, when there is one: Value must be at least Min or at most Max.
	Target *Target `json:"target,omitempty"`
}

// Target is a bound a metric is held to.
type Target struct {
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
}

// Met says whether the metric is within its target; ok is false when it has none.
func (m Metric) Met() (met, ok bool) {
	if m.Target == nil {
		return false, false
	}
	if m.Target.Min != nil && m.Value < *m.Target.Min {
		return false, true
	}
	if m.Target.Max != nil && m.Value > *m.Target.Max {
		return false, true
	}
	return true, true
}

func atLeast(v float64) *Target { return &Target{Min: &v} }
func atMost(v float64) *Target  { return &Target{Max: &v} }

func (r *Result) add(name string, v float64, unit string, t *Target) {
	r.Metrics = append(r.Metrics, Metric{Name: name, Value: v, Unit: unit, Target: t})
}

// addMillis adds a duration metric in milliseconds.
func (r *Result) addMillis(name string, d time.Duration, t *Target) {
	r.add(name, float64(d.Microseconds())/1000, "ms", t)
}

// addLatency adds p50, p99 and max of ds, the p99 held to p99Max when it is not zero.
func (r *Result) addLatency(name string, ds []time.Duration, p99Max time.Duration) {
	s := summarize(ds)
	var t *Target
	if p99Max > 0 {
		t = atMost(float64(p99Max.Microseconds()) / 1000)
	}
	r.addMillis(name+" p50", s.P50, nil)
	r.addMillis(name+" p99", s.P99, t)
	r.addMillis(name+" max", s.Max, nil)
}

// Metric returns the named metric's value, and whether the result has it.
func (r *Result) Metric(name string) (float64, bool) {
	for _, m := range r.Metrics {
		if m.Name == name {
			return m.Value, true
		}
	}
	return 0, false
}

// Scenarios lists every scenario in the order `gantry bench` runs them.
func Scenarios() []Scenario {
	return []Scenario{
		throughputScenario(8),
		throughputScenario(64),
		dispatchScenario(),
		dagScenario("dag-independent", "200 independent jobs", 200, independentDAG),
		dagScenario("dag-chain", "a chain of 50 jobs", 50, chainDAG),
		dagScenario("dag-fan", "1 -> 50 -> 1", 50, fanDAG),
		linearScenario(),
		dagImageScenario("dag-independent-image", "200 independent jobs", 200, independentDAG),
		dagImageScenario("dag-chain-image", "a chain of 50 jobs", 50, chainDAG),
		dagImageScenario("dag-fan-image", "1 -> 50 -> 1", 50, fanDAG),
		containerOverheadScenario(),
		concurrencyScenario(),
		backlogScenario(),
		historyScenario(),
		testReportsScenario(),
		testHistoryScenario(),
		intakeScenario(),
		logLatencyScenario("logs-latency-1", "1 job printing 10,000 lines/s for 5 s", 1, 10_000, 100*time.Millisecond),
		logLatencyScenario("logs-latency-100", "100 jobs printing 100 lines/s each for 5 s", 100, 100, 200*time.Millisecond),
		logIngestScenario(),
		cancelScenario(),
		artifactsScenario(),
		hooksLatencyScenario(),
		hooksThroughputScenario(),
		checkoutScenario(),
	}
}

// Select returns the scenarios named, in the order given; "all" or none means every one.
func Select(names []string) ([]Scenario, error) {
	all := Scenarios()
	if len(names) == 0 || slices.Contains(names, "all") {
		return all, nil
	}
	var out []Scenario
	for _, n := range names {
		i := slices.IndexFunc(all, func(s Scenario) bool { return s.Name == n })
		if i < 0 {
			known := make([]string, len(all))
			for j, s := range all {
				known[j] = s.Name
			}
			return nil, fmt.Errorf("no scenario %q; known: %s", n, strings.Join(known, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// RunAll runs each scenario on each of stores it supports (its default stores when
// stores is empty), calling report after each, and returns every result. A scenario that
// fails is reported as an error and the others still run.
func RunAll(ctx context.Context, o *Options, scenarios []Scenario, stores []string, report func(*Result)) ([]*Result, error) {
	o.defaults()
	var (
		results []*Result
		errs    []error
	)
	for _, s := range scenarios {
		for _, st := range storesOf(s, stores) {
			if ctx.Err() != nil {
				return results, errors.Join(append(errs, ctx.Err())...)
			}
			o.Log.Info("scenario", "name", s.Name, "store", st)
			r, err := runScenario(ctx, o, s, st)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s on %s: %w", s.Name, st, err))
				continue
			}
			results = append(results, r)
			if report != nil {
				report(r)
			}
		}
	}
	return results, errors.Join(errs...)
}

// storesOf is the stores s runs on: those of stores it supports, or its defaults when
// stores is empty.
func storesOf(s Scenario, stores []string) []string {
	if len(stores) == 0 {
		return s.Stores
	}
	var on []string
	for _, st := range stores {
		if slices.Contains(s.Stores, st) {
			on = append(on, st)
		}
	}
	return on
}

// OnStore says whether any of scenarios runs on store when run on stores.
func OnStore(scenarios []Scenario, stores []string, store string) bool {
	return slices.ContainsFunc(scenarios, func(s Scenario) bool { return slices.Contains(storesOf(s, stores), store) })
}

// runScenario runs s once on store and names the result.
func runScenario(ctx context.Context, o *Options, s Scenario, store string) (*Result, error) {
	began := time.Now()
	before, sampled := sampleMachine()
	r, err := runNoisy(ctx, o, s, store)
	if err != nil {
		return nil, err
	}
	r.Scenario, r.Store, r.Elapsed = s.Name, store, time.Since(began)
	if after, ok := sampleMachine(); ok && sampled {
		r.addMachine(before, after)
	}
	if o.Noise > 0 {
		r.Params["noise"] = o.Noise
		r.Notes = append(r.Notes, fmt.Sprintf("measured while a second process ran %d busy loops (gantry bench --noise)", o.Noise))
	}
	if o.Scale != 1 {
		// The targets hold at the sizes the scenarios name, not at others.
		for i := range r.Metrics {
			r.Metrics[i].Target = nil
		}
	}
	return r, nil
}

// runNoisy runs the scenario, beside a CPU burner process when o.Noise asks for one.
func runNoisy(ctx context.Context, o *Options, s Scenario, store string) (*Result, error) {
	if o.Noise <= 0 {
		return s.Run(ctx, o, store)
	}
	burner, err := startProcess(o.helper, "burner", nil, "bench-burn", "--loops", fmt.Sprint(o.Noise))
	if err != nil {
		return nil, err
	}
	defer burner.stop(5 * time.Second)
	r, err := s.Run(ctx, o, store)
	select {
	case <-burner.exited:
		// A burner that died early measured a quiet machine, not a loaded one.
		return nil, errors.Join(err, burner.failure("exited during the scenario"))
	default:
	}
	if r != nil && r.Params == nil {
		r.Params = map[string]any{}
	}
	return r, err
}
