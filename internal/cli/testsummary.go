package cli

import (
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// testSummaryView is a branch's test summary as the API answers it.
type testSummaryView struct {
	Branch string `json:"branch"`
	Run    *struct {
		Number    int    `json:"number"`
		SHA       string `json:"sha"`
		CreatedAt string `json:"created_at"`
	} `json:"run"`
	Total        int        `json:"total"`
	FailingTotal int        `json:"failing_total"`
	Slowest      []testView `json:"slowest"`
	Failing      []struct {
		testView
		Since     streakPointView  `json:"since"`
		LastPass  *streakPointView `json:"last_pass"`
		StreakCut bool             `json:"streak_cut"`
		// Quarantined marks a test the project has quarantined now.
		Quarantined bool `json:"quarantined"`
	} `json:"failing"`
}

// streakPointView is a result of a failing test's streak.
type streakPointView struct {
	Run int    `json:"run"`
	SHA string `json:"sha"`
	At  string `json:"at"`
}

func (p streakPointView) String() string {
	s := fmt.Sprintf("run #%d", p.Run)
	if p.SHA != "" {
		s += " at " + shortSHA(p.SHA)
	}
	return s + ", " + p.At
}

func (a *app) testSummaryCommand() *cobra.Command {
	var cfg testsConfig
	cmd := &cobra.Command{
		Use:   "summary --project P [--branch B]",
		Short: "Show a branch's failing tests, since when each fails, and its slowest tests",
		Long: "Summary reads the latest finished run of a branch (the project's default\n" +
			"branch unless --branch) that kept test results, among its last 20 runs, and\n" +
			"prints its failing tests, the newest failures first, each with the run and\n" +
			"commit where it began failing on the branch, the run where it last passed,\n" +
			"and its verdict (new, still failing, known broken, flaky); then the run's 20\n" +
			"slowest tests. Runs under way and cancelled runs are passed over.\n\n" + configHelp,
		Example: "  gantry tests summary --project web\n" +
			"  gantry tests summary --project web --branch release/2.x --json",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Project == "" {
				return usagef("--project is required")
			}
			c, err := cfg.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if cfg.Branch != "" {
				q.Set("branch", cfg.Branch)
			}
			path := "/api/v1/projects/" + url.PathEscape(cfg.Project) + "/tests/summary"
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			var v testSummaryView
			if done, err := a.getTests(cmd.Context(), c, cfg.clientConfig, path, "the branch's test summary", &v); done || err != nil {
				return err
			}
			return a.printTestSummary(cfg.Project, v)
		},
	}
	a.clientFlags(cmd, &cfg.clientConfig)
	cmd.Flags().StringVar(&cfg.Project, "project", "", "the project (required)")
	cmd.Flags().StringVar(&cfg.Branch, "branch", "", "the branch (the project's default branch unless given)")
	return cmd
}

func (a *app) printTestSummary(project string, v testSummaryView) error {
	var b strings.Builder
	switch {
	case v.Branch == "":
		_, err := fmt.Fprintf(a.stdout, "project %s has no default branch: name one with --branch\n", project)
		return err
	case v.Run == nil:
		_, err := fmt.Fprintf(a.stdout, "no finished run of %s in project %s kept test results (a job's reports: names the files its steps write)\n",
			v.Branch, project)
		return err
	}
	fmt.Fprintf(&b, "%s: run #%d", v.Branch, v.Run.Number)
	if v.Run.SHA != "" {
		b.WriteString(" at " + shortSHA(v.Run.SHA))
	}
	fmt.Fprintf(&b, ", %s, %d %s, %d failing\n\n", v.Run.CreatedAt, v.Total, plural(v.Total, "test", "tests"), v.FailingTotal)
	if len(v.Failing) == 0 {
		b.WriteString("No failing tests.\n")
	} else {
		b.WriteString("FAILING, newest first\n")
		for _, f := range v.Failing {
			fmt.Fprintf(&b, "%-8s %s  %s", strings.ToUpper(f.Status), f.id(), f.Job)
			if f.Verdict != nil {
				b.WriteString("  " + verdictWords[f.Verdict.Kind])
			}
			if f.Quarantined {
				b.WriteString("  quarantined")
			}
			b.WriteByte('\n')
			since := "since " + f.Since.String()
			if f.StreakCut {
				since = "since at least " + f.Since.String()
			}
			fmt.Fprintf(&b, "         %s\n", since)
			if f.LastPass != nil {
				fmt.Fprintf(&b, "         last passed in %s\n", f.LastPass)
			} else if !f.StreakCut {
				b.WriteString("         never passed on " + v.Branch + "\n")
			}
		}
		if len(v.Failing) < v.FailingTotal {
			fmt.Fprintf(&b, "(the first %d of %d failing tests)\n", len(v.Failing), v.FailingTotal)
		}
	}
	b.WriteString("\nSLOWEST\n")
	if _, err := fmt.Fprint(a.stdout, b.String()); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DURATION\tTEST\tJOB\tSTATUS")
	for _, t := range v.Slowest {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.duration(), t.id(), t.Job, t.Status)
	}
	return tw.Flush()
}
