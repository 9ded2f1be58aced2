package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// testsConfig is everything `gantry tests` acts on.
type testsConfig struct {
	clientConfig
	Run     string
	All     bool
	Limit   int
	Project string
	Branch  string
	Days    int
}

// testView is a test's result as the API shows it.
type testView struct {
	Job        string  `json:"job"`
	Attempt    int     `json:"attempt"`
	Suite      string  `json:"suite"`
	Name       string  `json:"name"`
	File       string  `json:"file"`
	Line       int     `json:"line"`
	Status     string  `json:"status"`
	DurationMS float64 `json:"duration_ms"`
	Message    string  `json:"message"`
	Output     string  `json:"output"`
	Run        int     `json:"run"`
	Branch     string  `json:"branch"`
	SHA        string  `json:"sha"`
	CreatedAt  string  `json:"created_at"`
	Verdict    *struct {
		Kind string `json:"kind"`
		Why  string `json:"why"`
	} `json:"verdict"`
}

func (t testView) id() string {
	if t.Suite == "" {
		return t.Name
	}
	return t.Suite + "." + t.Name
}

func (t testView) duration() string {
	return formatDuration(time.Duration(t.DurationMS * float64(time.Millisecond)))
}

// runTestsView is a run's tests as the API answers them.
type runTestsView struct {
	Counts     map[string]int `json:"counts"`
	Total      int            `json:"total"`
	Headline   string         `json:"headline"`
	Judged     int            `json:"judged"`
	Tests      []testView     `json:"tests"`
	NextOffset *int           `json:"next_offset"`
}

// verdictWords are the verdicts as the failures list says them.
var verdictWords = map[string]string{"new": "new failure", "still": "still failing", "known": "known broken", "flaky": "flaky"}

// errNoTests is a server too old to keep test results.
var errNoTests = errors.New("the server does not keep test results: it is of an older version than this client")

func (a *app) testsCommand() *cobra.Command {
	var cfg testsConfig
	cmd := &cobra.Command{
		Use:   "tests RUN",
		Short: "Show a run's test results: failures first, each new, known broken or flaky",
		Long: "Tests prints what a run's test reports held (a job's reports: in a pipeline):\n" +
			"the counts by status, then each failing test with its job, how long it took,\n" +
			"its message and where it failed, and whether the failure is new, still failing\n" +
			"on the branch, known broken on the default branch, or flaky (it failed and\n" +
			"passed on the same commit). --all lists the skipped and passed tests too.\n" +
			"The exit status is 0 whatever the tests' results.\n\n" +
			"  gantry tests history TEST --project P   one test's results, newest first\n" +
			"  gantry tests flaky --project P          the project's flaky tests\n" +
			"  gantry tests summary --project P        a branch's failing and slowest tests\n\n" + runRefHelp + configHelp,
		Example: "  gantry tests web#42\n" +
			"  gantry tests --all --limit 500 web#42\n" +
			"  gantry tests history example.com/web/pkg.TestLogin --project web --branch main\n" +
			"  gantry tests flaky --project web --days 30",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Run = args[0]
			return a.tests(cmd.Context(), cfg)
		},
	}
	a.clientFlags(cmd, &cfg.clientConfig)
	cmd.Flags().BoolVar(&cfg.All, "all", false, "list skipped and passed tests too, not only the failing ones")
	cmd.Flags().IntVar(&cfg.Limit, "limit", 200, "list at most this many tests (1 to 1000)")
	cmd.AddCommand(a.testHistoryCommand(), a.flakyTestsCommand(), a.testSummaryCommand(), a.quarantineCommand(), a.releaseCommand(),
		a.quarantineRuleCommand())
	return cmd
}

func (a *app) tests(ctx context.Context, cfg testsConfig) error {
	if _, _, _, err := parseRunRef(cfg.Run); err != nil {
		return err
	}
	if cfg.Limit < 1 || cfg.Limit > 1000 {
		return usagef("--limit %d: want 1 to 1000", cfg.Limit)
	}
	c, err := cfg.client()
	if err != nil {
		return err
	}
	if cfg.Run, err = resolveRun(ctx, c, cfg.Run); err != nil {
		return err
	}
	q := url.Values{"limit": {strconv.Itoa(cfg.Limit)}}
	if !cfg.All {
		q.Set("status", "failed,errored")
	}
	var v runTestsView
	if done, err := a.getTests(ctx, c, cfg.clientConfig, "/api/v1/runs/"+cfg.Run+"/tests?"+q.Encode(), "the run's tests", &v); done || err != nil {
		return err
	}
	var b strings.Builder
	if v.Total == 0 {
		fmt.Fprintf(&b, "run %s has no test results (a job's reports: names the files its steps write)\n", cfg.Run)
		_, err := fmt.Fprint(a.stdout, b.String())
		return err
	}
	fmt.Fprintf(&b, "%d %s", v.Total, plural(v.Total, "test", "tests"))
	var parts []string
	for _, s := range []string{"failed", "errored", "skipped", "passed"} {
		if n := v.Counts[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	b.WriteString(": " + strings.Join(parts, ", ") + "\n")
	if v.Headline != "" {
		b.WriteString(v.Headline)
		if failing := v.Counts["failed"] + v.Counts["errored"]; v.Judged < failing {
			fmt.Fprintf(&b, " (of the first %d failures)", v.Judged)
		}
		b.WriteByte('\n')
	}
	for _, t := range v.Tests {
		b.WriteByte('\n')
		fmt.Fprintf(&b, "%-8s %s  %s  (%s", strings.ToUpper(t.Status), t.id(), t.Job, t.duration())
		if t.Attempt > 1 {
			fmt.Fprintf(&b, ", attempt %d", t.Attempt)
		}
		b.WriteString(")")
		if t.Verdict != nil {
			b.WriteString("  " + verdictWords[t.Verdict.Kind])
		}
		b.WriteByte('\n')
		if t.File != "" {
			where := t.File
			if t.Line > 0 {
				where += ":" + strconv.Itoa(t.Line)
			}
			b.WriteString("         at " + where + "\n")
		}
		for _, l := range firstLines(t.Message, 5) {
			b.WriteString("         " + l + "\n")
		}
		if t.Verdict != nil && t.Verdict.Kind != "new" {
			b.WriteString("         " + t.Verdict.Why + "\n")
		}
	}
	if v.NextOffset != nil {
		fmt.Fprintf(&b, "\n(more: --limit %d, or --json for the API's pages)\n", min(cfg.Limit*2, 1000))
	}
	_, err = fmt.Fprint(a.stdout, b.String())
	return err
}

// firstLines are the first n non-empty lines of s, the last one saying how many more
// there are when s has more.
func firstLines(s string, n int) []string {
	var out []string
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if len(out) == n {
			out = append(out, fmt.Sprintf("... (%d more lines)", len(lines)-i))
			break
		}
		out = append(out, l)
	}
	return out
}

// getTests reads path into out, what naming it in errors; with --json it prints the
// answer as it came instead and says it is done.
func (a *app) getTests(ctx context.Context, c *apiClient, cfg clientConfig, path, what string, out any) (done bool, err error) {
	raw, err := c.call(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return false, testsError(err)
	}
	if cfg.JSON {
		return true, writeRaw(a.stdout, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return false, fmt.Errorf("decode %s: %w", what, err)
	}
	return false, nil
}

func testsError(err error) error {
	var se *serverError
	if errors.As(err, &se) && se.Status == http.StatusNotFound && se.Code == "" {
		return errNoTests
	}
	return err
}

func (a *app) testHistoryCommand() *cobra.Command {
	var cfg testsConfig
	cmd := &cobra.Command{
		Use:   "history TEST --project P [--branch B]",
		Short: "Print one test's results in a project, newest first",
		Long: "History prints a test's results in a project's runs, newest first: the run,\n" +
			"branch, commit, job, status and duration of each. TEST is SUITE.NAME as gantry\n" +
			"tests prints it (a Go package and test, pkg.TestLogin/sub, a JUnit class and\n" +
			"case), or a name alone.\n\n" + configHelp,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Project == "" {
				return usagef("--project is required")
			}
			if cfg.Limit < 1 || cfg.Limit > 1000 {
				return usagef("--limit %d: want 1 to 1000", cfg.Limit)
			}
			c, err := cfg.client()
			if err != nil {
				return err
			}
			q := url.Values{"test": {args[0]}, "limit": {strconv.Itoa(cfg.Limit)}}
			if cfg.Branch != "" {
				q.Set("branch", cfg.Branch)
			}
			var rs []testView
			path := "/api/v1/projects/" + url.PathEscape(cfg.Project) + "/tests/history?" + q.Encode()
			if done, err := a.getTests(cmd.Context(), c, cfg.clientConfig, path, "the test's history", &rs); done || err != nil {
				return err
			}
			if len(rs) == 0 {
				_, err := fmt.Fprintf(a.stdout, "project %s has no results of %s\n", cfg.Project, args[0])
				return err
			}
			fmt.Fprintf(a.stdout, "%s in project %s\n", rs[0].id(), cfg.Project)
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tBRANCH\tCOMMIT\tJOB\tATTEMPT\tSTATUS\tDURATION\tAT")
			fails := 0
			for _, r := range rs {
				if r.Status == "failed" || r.Status == "errored" {
					fails++
				}
				fmt.Fprintf(tw, "#%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.Run, r.Branch, shortSHA(r.SHA), r.Job, r.Attempt, r.Status, r.duration(), r.CreatedAt)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "%d %s, %d failing\n", len(rs), plural(len(rs), "result", "results"), fails)
			return err
		},
	}
	a.clientFlags(cmd, &cfg.clientConfig)
	cmd.Flags().StringVar(&cfg.Project, "project", "", "the project (required)")
	cmd.Flags().StringVar(&cfg.Branch, "branch", "", "only the results of runs on this branch")
	cmd.Flags().IntVar(&cfg.Limit, "limit", 50, "print at most this many results (1 to 1000)")
	return cmd
}

// flakyView is a flaky test as the API shows it.
type flakyView struct {
	Suite    string     `json:"suite"`
	Name     string     `json:"name"`
	Commits  int        `json:"commits"`
	LastSeen string     `json:"last_seen"`
	Evidence []testView `json:"evidence"`
}

func (a *app) flakyTestsCommand() *cobra.Command {
	var cfg testsConfig
	cmd := &cobra.Command{
		Use:   "flaky --project P [--days N]",
		Short: "List a project's flaky tests, with the runs that show it",
		Long: "Flaky lists the tests of a project that failed and passed on the same commit\n" +
			"(a retried job, or a rerun) in the last --days days, most recently seen\n" +
			"first, each with the results that show it.\n\n" + configHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Project == "" {
				return usagef("--project is required")
			}
			if cfg.Days < 1 || cfg.Days > 365 {
				return usagef("--days %d: want 1 to 365", cfg.Days)
			}
			c, err := cfg.client()
			if err != nil {
				return err
			}
			var fs []flakyView
			path := "/api/v1/projects/" + url.PathEscape(cfg.Project) + "/tests/flaky?days=" + strconv.Itoa(cfg.Days)
			if done, err := a.getTests(cmd.Context(), c, cfg.clientConfig, path, "the flaky tests", &fs); done || err != nil {
				return err
			}
			if len(fs) == 0 {
				_, err := fmt.Fprintf(a.stdout, "project %s has no flaky tests in the last %d days\n", cfg.Project, cfg.Days)
				return err
			}
			var b strings.Builder
			for _, f := range fs {
				id := testView{Suite: f.Suite, Name: f.Name}.id()
				fmt.Fprintf(&b, "%s  flipped on %d %s, last %s\n", id, f.Commits, plural(f.Commits, "commit", "commits"), f.LastSeen)
				for _, e := range f.Evidence {
					fmt.Fprintf(&b, "  %-8s run #%d  %s  attempt %d  %s at %s\n", e.Status, e.Run, e.Job, e.Attempt, e.Branch, shortSHA(e.SHA))
				}
			}
			_, err = fmt.Fprint(a.stdout, b.String())
			return err
		},
	}
	a.clientFlags(cmd, &cfg.clientConfig)
	cmd.Flags().StringVar(&cfg.Project, "project", "", "the project (required)")
	cmd.Flags().IntVar(&cfg.Days, "days", 14, "look this many days back (1 to 365)")
	return cmd
}

// quarantineView is a quarantine as the API shows it.
type quarantineView struct {
	Suite     string `json:"suite"`
	Name      string `json:"name"`
	Owner     string `json:"owner"`
	Reason    string `json:"reason"`
	CreatedBy string `json:"created_by"`
	CreatedAt string `json:"created_at"`
	ExpiresAt string `json:"expires_at"`
}

// quarantineConfig is everything `gantry tests quarantine` and `release` act on.
type quarantineConfig struct {
	clientConfig
	Project string
	Suite   string
	Owner   string
	Reason  string
	For     string
}

// resolveTest finds the suite and name TEST names in the project's results ("SUITE.NAME"
// or a name alone), unless suite is given: then TEST is the name.
func resolveTest(ctx context.Context, c *apiClient, project, test, suite string) (testView, error) {
	if suite != "" {
		return testView{Suite: suite, Name: test}, nil
	}
	var rs []testView
	q := url.Values{"test": {test}, "limit": {"1"}}
	if err := c.getJSON(ctx, "/api/v1/projects/"+url.PathEscape(project)+"/tests/history?"+q.Encode(), &rs); err != nil {
		return testView{}, testsError(err)
	}
	if len(rs) == 0 {
		return testView{}, fmt.Errorf("project %s has no results of %s: give its suite with --suite and its name", project, test)
	}
	return rs[0], nil
}

func (a *app) quarantineCommand() *cobra.Command {
	var cfg quarantineConfig
	cmd := &cobra.Command{
		Use:   "quarantine [TEST] --project P [--owner O --for 14d] [--reason R]",
		Short: "Quarantine a test: its failures are still shown but do not fail its job",
		Long: "Quarantine puts TEST (SUITE.NAME as gantry tests prints it) in quarantine in a\n" +
			"project until --for has passed (at most 90d): while it lasts, a job whose only\n" +
			"failures are quarantined tests (in one failed step) succeeds, and the failures\n" +
			"are still kept, counted and shown. --owner says who is to fix it. Without TEST\n" +
			"it lists the project's quarantines in force. Quarantining needs a maintainer of\n" +
			"the project; gantry tests release ends one early.\n\n" + configHelp,
		Example: "  gantry tests quarantine example.com/web/auth.TestLogin --project web --owner alice --for 14d --reason 'races on CI'\n" +
			"  gantry tests quarantine --project web",
		Args: rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Project == "" {
				return usagef("--project is required")
			}
			c, err := cfg.client()
			if err != nil {
				return err
			}
			path := "/api/v1/projects/" + url.PathEscape(cfg.Project) + "/tests/quarantine"
			if len(args) == 0 {
				if cfg.Owner != "" || cfg.For != "" || cfg.Reason != "" {
					return usagef("--owner, --for and --reason quarantine a TEST: name it")
				}
				return a.listQuarantines(cmd.Context(), c, cfg, path)
			}
			if cfg.Owner == "" || cfg.For == "" {
				return usagef("--owner and --for are required: who is to fix the test, and how long the quarantine lasts")
			}
			t, err := resolveTest(cmd.Context(), c, cfg.Project, args[0], cfg.Suite)
			if err != nil {
				return err
			}
			var q quarantineView
			body, err := json.Marshal(map[string]string{"suite": t.Suite, "name": t.Name, "owner": cfg.Owner, "reason": cfg.Reason, "for": cfg.For})
			if err != nil {
				return err
			}
			raw, err := c.callJSON(cmd.Context(), http.MethodPut, path, body)
			if err != nil {
				return testsError(err)
			}
			if cfg.JSON {
				return writeRaw(a.stdout, raw)
			}
			if err := json.Unmarshal(raw, &q); err != nil {
				return fmt.Errorf("decode the quarantine: %w", err)
			}
			_, err = fmt.Fprintf(a.stdout, "%s quarantined in project %s until %s (owner %s)\n", t.id(), cfg.Project, q.ExpiresAt, q.Owner)
			return err
		},
	}
	a.clientFlags(cmd, &cfg.clientConfig)
	f := cmd.Flags()
	f.StringVar(&cfg.Project, "project", "", "the project (required)")
	f.StringVar(&cfg.Suite, "suite", "", "the test's suite, when TEST is its name alone")
	f.StringVar(&cfg.Owner, "owner", "", "who is to fix the test")
	f.StringVar(&cfg.For, "for", "", "how long the quarantine lasts (14d, 36h; at most 90d)")
	f.StringVar(&cfg.Reason, "reason", "", "why the test is quarantined")
	return cmd
}

func (a *app) listQuarantines(ctx context.Context, c *apiClient, cfg quarantineConfig, path string) error {
	var qs []quarantineView
	if done, err := a.getTests(ctx, c, cfg.clientConfig, path, "the quarantines", &qs); done || err != nil {
		return err
	}
	if len(qs) == 0 {
		_, err := fmt.Fprintf(a.stdout, "project %s has no tests in quarantine\n", cfg.Project)
		return err
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TEST\tOWNER\tUNTIL\tBY\tREASON")
	for _, q := range qs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", testView{Suite: q.Suite, Name: q.Name}.id(), q.Owner, q.ExpiresAt, q.CreatedBy, q.Reason)
	}
	return tw.Flush()
}

func (a *app) releaseCommand() *cobra.Command {
	var cfg quarantineConfig
	cmd := &cobra.Command{
		Use:   "release TEST --project P",
		Short: "End a test's quarantine before its expiry",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Project == "" {
				return usagef("--project is required")
			}
			c, err := cfg.client()
			if err != nil {
				return err
			}
			t, err := resolveTest(cmd.Context(), c, cfg.Project, args[0], cfg.Suite)
			if err != nil {
				return err
			}
			q := url.Values{"suite": {t.Suite}, "name": {t.Name}}
			if _, err := c.call(cmd.Context(), http.MethodDelete, "/api/v1/projects/"+url.PathEscape(cfg.Project)+"/tests/quarantine?"+q.Encode(), nil, nil); err != nil {
				return testsError(err)
			}
			_, err = fmt.Fprintf(a.stdout, "%s released from quarantine in project %s\n", t.id(), cfg.Project)
			return err
		},
	}
	a.clientFlags(cmd, &cfg.clientConfig)
	cmd.Flags().StringVar(&cfg.Project, "project", "", "the project (required)")
	cmd.Flags().StringVar(&cfg.Suite, "suite", "", "the test's suite, when TEST is its name alone")
	return cmd
}
