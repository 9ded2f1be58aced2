package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// quarantineRuleConfig is everything `gantry tests quarantine-rule` acts on.
type quarantineRuleConfig struct {
	clientConfig
	Project string
	Flaky   int
	Within  string
	For     string
	Owner   string
	Off     bool
	// set says the rule is being set (--flaky, --within, --for or --owner given);
	// flakyGiven that --flaky is, 0 too.
	set, flakyGiven bool
}

// check validates the flags as the server would, so that a bad rule is a usage error
// before anything is sent.
func (c *quarantineRuleConfig) check() error {
	switch {
	case c.Project == "":
		return usagef("--project is required")
	case c.Off && c.set:
		return usagef("--off removes the rule: give it without --flaky, --within, --for and --owner")
	case !c.set:
		return nil
	case !c.flakyGiven || c.Within == "":
		return usagef("--flaky and --within are required to set a rule: on how many commits within how long a test must have flipped")
	}
	rule := store.QuarantineRule{FlakyCommits: c.Flaky, For: store.DefaultRuleQuarantine, Owner: store.ActorRule}
	if c.Owner != "" {
		rule.Owner = c.Owner
	}
	for _, f := range []struct {
		name, value string
		into        *time.Duration
	}{{"--within", c.Within, &rule.Within}, {"--for", c.For, &rule.For}} {
		if f.value == "" {
			continue
		}
		d, err := pipeline.ParseDuration(f.value)
		if err != nil {
			return usagef("%s %q is not a duration such as 7d or 36h", f.name, f.value)
		}
		*f.into = d
	}
	if msg := store.CheckQuarantineRule(&rule); msg != "" {
		return usagef("%s", msg)
	}
	return nil
}

// quarantineRuleView is a project's rule as the API shows it.
type quarantineRuleView struct {
	Enabled      bool   `json:"enabled"`
	FlakyCommits int    `json:"flaky_commits"`
	Within       string `json:"within"`
	For          string `json:"for"`
	Owner        string `json:"owner"`
	UpdatedBy    string `json:"updated_by"`
	UpdatedAt    string `json:"updated_at"`
}

func (a *app) quarantineRuleCommand() *cobra.Command {
	var cfg quarantineRuleConfig
	cmd := &cobra.Command{
		Use:   "quarantine-rule --project P [--flaky N --within 7d [--for 14d] [--owner O] | --off]",
		Short: "Show, set or remove a project's rule that quarantines flaky tests",
		Long: "Quarantine-rule sets the project's rule: a test that failed and passed on one\n" +
			"commit, on at least --flaky commits (1 to 100) within --within (1h to 90d), is\n" +
			"quarantined for --for (default 14d, at most 90d), owned by --owner (default\n" +
			"rule). The coordinator applies it when a job of the project that reported test\n" +
			"results completes; it never shortens a quarantine in force, and counts only\n" +
			"what a test did after its last quarantine ended. --off removes the rule (its\n" +
			"quarantines last until they end); without flags it shows the rule. Setting\n" +
			"and removing it needs a maintainer of the project.\n\n" + configHelp,
		Example: "  gantry tests quarantine-rule --project web --flaky 3 --within 7d --for 14d\n" +
			"  gantry tests quarantine-rule --project web\n" +
			"  gantry tests quarantine-rule --project web --off",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, f := range []string{"flaky", "within", "for", "owner"} {
				cfg.set = cfg.set || cmd.Flags().Changed(f)
			}
			cfg.flakyGiven = cmd.Flags().Changed("flaky")
			if err := cfg.check(); err != nil {
				return err
			}
			c, err := cfg.client()
			if err != nil {
				return err
			}
			return a.quarantineRule(cmd.Context(), c, cfg)
		},
	}
	a.clientFlags(cmd, &cfg.clientConfig)
	f := cmd.Flags()
	f.StringVar(&cfg.Project, "project", "", "the project (required)")
	f.IntVar(&cfg.Flaky, "flaky", 0, "quarantine a test flaky on at least this many commits (1 to 100)")
	f.StringVar(&cfg.Within, "within", "", "within this long (7d, 36h; 1h to 90d)")
	f.StringVar(&cfg.For, "for", "", "for this long (default 14d; 1h to 90d)")
	f.StringVar(&cfg.Owner, "owner", "", "who is to fix the tests the rule quarantines (default rule)")
	f.BoolVar(&cfg.Off, "off", false, "remove the rule")
	return cmd
}

func (a *app) quarantineRule(ctx context.Context, c *apiClient, cfg quarantineRuleConfig) error {
	path := "/api/v1/projects/" + url.PathEscape(cfg.Project) + "/tests/quarantine-rule"
	var (
		raw []byte
		err error
	)
	switch {
	case cfg.Off:
		if _, err := c.call(ctx, http.MethodDelete, path, nil, nil); err != nil {
			return testsError(err)
		}
		_, err := fmt.Fprintf(a.stdout, "project %s has no quarantine rule now; the quarantines it made last until they end\n", cfg.Project)
		return err
	case cfg.set:
		body := map[string]any{"flaky_commits": cfg.Flaky, "within": cfg.Within, "for": cfg.For, "owner": cfg.Owner}
		b, merr := json.Marshal(body)
		if merr != nil {
			return merr
		}
		raw, err = c.callJSON(ctx, http.MethodPut, path, b)
	default:
		raw, err = c.call(ctx, http.MethodGet, path, nil, nil)
	}
	if err != nil {
		return testsError(err)
	}
	if cfg.JSON {
		return writeRaw(a.stdout, raw)
	}
	var v quarantineRuleView
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("decode the quarantine rule: %w", err)
	}
	if !v.Enabled {
		_, err := fmt.Fprintf(a.stdout, "project %s has no quarantine rule\n", cfg.Project)
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "project %s quarantines for %s a test flaky on %d %s within %s, owned by %s\n", cfg.Project, v.For,
		v.FlakyCommits, plural(v.FlakyCommits, "commit", "commits"), v.Within, v.Owner)
	if v.UpdatedBy != "" {
		fmt.Fprintf(&b, "set by %s at %s\n", v.UpdatedBy, v.UpdatedAt)
	} else {
		fmt.Fprintf(&b, "set at %s\n", v.UpdatedAt)
	}
	_, err = fmt.Fprint(a.stdout, b.String())
	return err
}
