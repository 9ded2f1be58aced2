package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantry-ci/gantry/internal/bench"
	"github.com/gantry-ci/gantry/internal/pgcluster"
)

// benchConfig is everything `gantry bench` acts on.
type benchConfig struct {
	Scenarios []string
	Stores    string
	Postgres  string
	JSON      string
	Markdown  string
	Scale     float64
	List      bool
	// Report renders a JSON report written earlier instead of running anything.
	Report string
	// Compare is an earlier JSON report to print this run's ratio against, per metric.
	Compare string
	// CompareBuild is another gantry binary whose runs alternate with this build's,
	// Rounds rounds of each (0: each scenario's own repetitions, else 3).
	CompareBuild string
	Rounds       int
	// Noise is how many busy loops a second process runs beside each scenario; 0 none.
	Noise    int
	Dir      string
	LogLevel string
}

func (a *app) benchCommand() *cobra.Command {
	cfg := benchConfig{Stores: "sqlite,postgres", Scale: 1, LogLevel: "info"}
	cmd := &cobra.Command{
		Use:   "bench [SCENARIO...]",
		Short: "Measure Gantry: named load scenarios against real coordinator processes",
		Long: "Bench runs named scenarios (all of them when none is named) against `gantry\n" +
			"server` processes it starts on fresh stores, SQLite and PostgreSQL, with workers\n" +
			"that speak the real protocol over HTTP: simulated ones where the scenario\n" +
			"measures orchestration, real `gantry run` with shell steps where it measures a\n" +
			"pipeline end to end. It prints a table as each scenario ends, and can write every\n" +
			"result as JSON and as the generated section of BENCHMARKS.md. With --compare-build\n" +
			"OTHER it runs each scenario with this build and with the gantry binary OTHER,\n" +
			"alternately, and prints both builds' values and B/A per metric.\n\n" +
			"Exit status: 0 every scenario ran (whether or not it met its target), 1 a\n" +
			"scenario failed to run, 2 usage error.",
		Example: "  gantry bench --list\n" +
			"  gantry bench throughput-64 dispatch --store sqlite\n" +
			"  gantry bench --postgres postgres://postgres@127.0.0.1/postgres --json bench.json --markdown BENCHMARKS.md\n" +
			"  gantry bench --compare-build /tmp/gantry-main dag-chain throughput-64 --store sqlite",
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Scenarios = args
			if err := cfg.validate(); err != nil {
				return err
			}
			return a.bench(cmd.Context(), cfg, cmd.CommandPath()+" "+strings.Join(os.Args[2:], " "))
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Stores, "store", cfg.Stores, "comma-separated stores to run on: sqlite, postgres")
	f.StringVar(&cfg.Postgres, "postgres", "", "PostgreSQL server whose user may CREATE DATABASE; each scenario makes its own database there "+
		"(default: a throwaway cluster started with this machine's initdb, PostgreSQL's defaults but max_connections, removed at the end)")
	f.StringVar(&cfg.JSON, "json", "", "write every result to this file as JSON")
	f.StringVar(&cfg.Markdown, "markdown", "", "rewrite the generated section of this Markdown file (BENCHMARKS.md)")
	f.Float64Var(&cfg.Scale, "scale", cfg.Scale, "multiply every count and duration (0.1 for a quick look)")
	f.BoolVar(&cfg.List, "list", false, "list the scenarios and exit")
	f.StringVar(&cfg.Report, "report", "", "print (and with --markdown write) the results in this JSON file from an earlier --json, running nothing")
	f.StringVar(&cfg.Compare, "compare", "", "after the run (or --report), print each metric's ratio against this earlier --json report")
	f.StringVar(&cfg.CompareBuild, "compare-build", "", "run each scenario with this build (A) and with this other gantry binary (B), alternately, "+
		"and print both and B/A per metric")
	f.IntVar(&cfg.Rounds, "rounds", 0, "with --compare-build: rounds of each build per scenario (default: the scenario's own repetitions, else 3)")
	f.IntVar(&cfg.Noise, "noise", 0, "run a CPU burner process beside each scenario with this many busy loops (0: none; give the machine's core count to load it all)")
	f.Lookup("noise").NoOptDefVal = strconv.Itoa(runtime.NumCPU())
	f.StringVar(&cfg.Dir, "dir", "", "where the scenarios' data directories go (default: the temp dir)")
	f.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "progress messages on stderr: debug, info, warn or error")
	return cmd
}

func (c *benchConfig) validate() error {
	if c.List {
		return nil
	}
	if c.Noise < 0 || c.Noise > 1024 {
		return &usageError{fmt.Errorf("--noise %d: want busy loops from 0 to 1024", c.Noise)}
	}
	if c.Scale <= 0 || c.Scale > 10 {
		return &usageError{fmt.Errorf("--scale %g: want a number above 0, at most 10", c.Scale)}
	}
	if c.Rounds < 0 || c.Rounds > 100 {
		return &usageError{fmt.Errorf("--rounds %d: want from 1 to 100 (0: the scenario's own)", c.Rounds)}
	}
	if c.Rounds > 0 && c.CompareBuild == "" {
		return &usageError{errors.New("--rounds: only with --compare-build")}
	}
	if c.CompareBuild != "" {
		for _, f := range []struct {
			flag string
			set  bool
		}{{"--compare", c.Compare != ""}, {"--report", c.Report != ""}, {"--markdown", c.Markdown != ""}} {
			if f.set {
				return &usageError{fmt.Errorf("--compare-build with %s: a comparison of builds neither reads a report nor writes BENCHMARKS.md; "+
					"run them apart", f.flag)}
			}
		}
		path, err := gantryBinary(c.CompareBuild)
		if err != nil {
			return &usageError{fmt.Errorf("--compare-build: %w", err)}
		}
		c.CompareBuild = path
	}
	for _, s := range c.stores() {
		if s != bench.SQLite && s != bench.Postgres {
			return &usageError{fmt.Errorf("--store %q: want sqlite, postgres or both, comma-separated", s)}
		}
	}
	if _, err := bench.Select(c.Scenarios); err != nil {
		return &usageError{err}
	}
	if _, err := logLevel(c.LogLevel); err != nil {
		return err
	}
	return nil
}

func (c *benchConfig) stores() []string {
	var out []string
	for _, s := range strings.Split(c.Stores, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (a *app) bench(ctx context.Context, cfg benchConfig, command string) error {
	var old *bench.Report
	if cfg.Compare != "" {
		// Read it first: a bad file should stop the command before a long run, not after.
		var err error
		if old, err = bench.ReadReport(cfg.Compare); err != nil {
			return &usageError{fmt.Errorf("--compare: %w", err)}
		}
	}
	if cfg.Report != "" {
		return a.benchReport(cfg, old)
	}
	if cfg.List {
		for _, s := range bench.Scenarios() {
			fmt.Fprintf(a.stdout, "%-16s %s (%s)\n", s.Name, s.About, strings.Join(s.Stores, ", "))
		}
		return nil
	}
	scenarios, _ := bench.Select(cfg.Scenarios)
	gantry := a.gantry
	if gantry == nil {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find the gantry binary to start: %w", err)
		}
		gantry = func(args ...string) *exec.Cmd { return exec.Command(exe, args...) }
	}
	log := newLogger(a.stderr, cfg.LogLevel, "text")
	o := &bench.Options{Command: gantry, Postgres: cfg.Postgres, Scale: cfg.Scale, Dir: cfg.Dir, Log: log, Noise: cfg.Noise}
	rep := &bench.Report{Date: time.Now(), Commit: benchCommit(), Command: command, Machine: bench.ThisMachine(), Scale: cfg.Scale}
	if bench.OnStore(scenarios, cfg.stores(), bench.Postgres) {
		stop, err := benchPostgres(ctx, o, rep, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	if cfg.CompareBuild != "" {
		return a.benchBuilds(ctx, cfg, o, rep, scenarios)
	}
	results, runErr := bench.RunAll(ctx, o, scenarios, cfg.stores(), func(r *bench.Result) {
		_ = bench.WriteTable(a.stdout, r)
	})
	rep.Results = results
	var errs []error
	if old != nil && len(results) > 0 {
		fmt.Fprintln(a.stdout)
		if err := bench.WriteComparison(a.stdout, old, rep, bench.Compare(old, rep)); err != nil {
			errs = append(errs, err)
		}
	}
	if cfg.JSON != "" {
		f, err := os.Create(cfg.JSON)
		if err == nil {
			err = errors.Join(bench.WriteJSON(f, rep), f.Close())
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("write %s: %w", cfg.JSON, err))
		}
	}
	if cfg.Markdown != "" && len(results) > 0 {
		if err := bench.UpdateMarkdown(cfg.Markdown, rep); err != nil {
			errs = append(errs, fmt.Errorf("update %s: %w", cfg.Markdown, err))
		}
	}
	return errors.Join(append([]error{runErr}, errs...)...)
}

// benchPostgresConf is what a cluster the bench starts changes of PostgreSQL's defaults:
// room for the pools of a scenario's coordinators and of the bench's own connections.
const benchPostgresConf = "max_connections = 200"

// benchPostgres points o at the PostgreSQL server the scenarios make their databases on,
// and writes in rep what server that is: the one at --postgres, else a throwaway cluster
// it starts here (stop stops it).
func benchPostgres(ctx context.Context, o *bench.Options, rep *bench.Report, log *slog.Logger) (stop func(), err error) {
	stop = func() {}
	what := "the server at --postgres"
	if o.Postgres == "" {
		log.Info("no --postgres: starting a throwaway PostgreSQL cluster")
		c, err := pgcluster.Start(pgcluster.Options{Conf: benchPostgresConf, Logf: func(format string, args ...any) {
			log.Info(fmt.Sprintf(format, args...))
		}})
		if err != nil {
			return nil, fmt.Errorf("no --postgres, and a throwaway cluster did not start: %w (install PostgreSQL with make deps, "+
				"or pass --postgres URL or --store sqlite)", err)
		}
		stop = func() {
			if err := c.Stop(); err != nil {
				log.Error("stop the throwaway PostgreSQL cluster", "err", err)
			}
		}
		o.Postgres = c.URL().String()
		what = "a throwaway cluster the bench started with initdb, PostgreSQL's defaults but " + benchPostgresConf
	}
	version, err := bench.PostgresVersion(ctx, o.Postgres)
	if err != nil {
		stop()
		return nil, err
	}
	rep.Postgres = fmt.Sprintf("PostgreSQL %s, %s", version, what)
	return stop, nil
}

// benchBuilds runs the scenarios with this build (A) and the binary at
// cfg.CompareBuild (B) alternately, printing each scenario's comparison as it ends and
// B/A of every scenario's CPU per job and wall time at the end.
func (a *app) benchBuilds(ctx context.Context, cfg benchConfig, o *bench.Options, repA *bench.Report, scenarios []bench.Scenario) error {
	other := cfg.CompareBuild
	otherVersion, err := binaryVersion(ctx, other)
	if err != nil {
		return &usageError{fmt.Errorf("--compare-build: %w", err)}
	}
	repB := *repA
	repB.Commit, repB.Command = otherVersion, other
	fmt.Fprintf(a.stdout, "A: this build (%s)\nB: %s (%s)\n\n", repA.Commit, other, otherVersion)
	as, bs, runErr := bench.CompareBuilds(ctx, o, o.Command, func(args ...string) *exec.Cmd { return exec.Command(other, args...) },
		scenarios, cfg.stores(), cfg.Rounds, func(ra, rb *bench.Result) {
			_ = bench.WriteBuildComparison(a.stdout, ra, rb)
			fmt.Fprintln(a.stdout)
		})
	repA.Results, repB.Results = as, bs
	var errs []error
	if len(as) > 0 {
		if err := bench.WriteBuildSummary(a.stdout, as, bs); err != nil {
			errs = append(errs, err)
		}
	}
	if cfg.JSON != "" {
		f, err := os.Create(cfg.JSON)
		if err == nil {
			enc := json.NewEncoder(f)
			enc.SetIndent("", "  ")
			err = errors.Join(enc.Encode(bench.BuildComparison{A: repA, B: &repB}), f.Close())
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("write %s: %w", cfg.JSON, err))
		}
	}
	return errors.Join(append([]error{runErr}, errs...)...)
}

// gantryBinary checks that path names an executable file and returns it absolute: the
// scenarios run it from directories of their own.
func gantryBinary(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file", path)
	}
	return abs, nil
}

// binaryVersion is the first line `PATH version` prints: what build the binary is.
func binaryVersion(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "version").Output()
	if err != nil {
		return "", fmt.Errorf("%s version: %w (is it a gantry binary?)", path, err)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line, nil
}

// benchReport prints a saved report's results and, with --markdown, writes them there.
func (a *app) benchReport(cfg benchConfig, old *bench.Report) error {
	rep, err := bench.ReadReport(cfg.Report)
	if err != nil {
		return &usageError{fmt.Errorf("--report: %w", err)}
	}
	for _, r := range rep.Results {
		if err := bench.WriteTable(a.stdout, r); err != nil {
			return err
		}
	}
	if old != nil {
		fmt.Fprintln(a.stdout)
		if err := bench.WriteComparison(a.stdout, old, rep, bench.Compare(old, rep)); err != nil {
			return err
		}
	}
	if cfg.Markdown != "" {
		if err := bench.UpdateMarkdown(cfg.Markdown, rep); err != nil {
			return fmt.Errorf("update %s: %w", cfg.Markdown, err)
		}
	}
	return nil
}

// benchCommit names the commit the binary was built from: the version `make build` stamps
// (git describe), else the revision the Go toolchain recorded, else "dev".
func benchCommit() string {
	if v := buildVersion(); v != "dev" {
		return v
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return version
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return version
	}
	return rev[:min(len(rev), 12)] + dirty
}
