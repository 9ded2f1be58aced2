package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// environmentConfig is everything `gantry environment` acts on.
type environmentConfig struct {
	clientConfig
	Project   string
	Branches  []string
	Tags      []string
	Approvals int
	Approvers []string
	Timeout   time.Duration
	// PreventSelfReview: the user who started a run may not approve its jobs.
	PreventSelfReview bool
}

// environmentView is an environment as the API shows it.
type environmentView struct {
	Name              string   `json:"name"`
	Branches          []string `json:"branches"`
	Tags              []string `json:"tags"`
	RequiredApprovals int      `json:"required_approvals"`
	Approvers         []string `json:"approvers"`
	ApprovalTimeout   string   `json:"approval_timeout"`
	PreventSelfReview bool     `json:"prevent_self_review"`
	UpdatedAt         string   `json:"updated_at"`
}

func (a *app) environmentCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "environment",
		Short: "Manage deployment environments: set, list, delete",
		Long: "Environment manages a project's environments: the targets jobs name with\n" +
			"`environment: NAME`. An environment may allow only some branches and tags to deploy\n" +
			"to it, and may require approvals before a job runs (gantry approve). A job naming an\n" +
			"environment the project does not define runs with no rules. Setting and deleting\n" +
			"need an admin token.\n\n" + configHelp,
		Args: noArgs,
	}
	var set environmentConfig
	setCmd := &cobra.Command{
		Use:   "set NAME --project P [--branch GLOB]... [--tag GLOB]... [--approvals N --approver WHO...] [--timeout D] [--prevent-self-review]",
		Short: "Create or replace an environment's rules",
		Long: "Set replaces every rule of the environment with those given. --branch and --tag\n" +
			"are glob patterns (main, release/*, v*); with either given, only a matching branch\n" +
			"or tag may deploy and a job of any other fails. --approvals N holds each job for N\n" +
			"distinct approvers among --approver: a user (a token's --user, else its name), or\n" +
			"role:admin, role:maintainer, role:developer, role:viewer (role:write, role:read)\n" +
			"for anyone holding that role (or a higher one). --timeout is how long a\n" +
			"job waits for approval before it is rejected (default 24h). --prevent-self-review\n" +
			"refuses the approval of the user who started the run (by default they may approve).",
		Example: "  gantry environment set production --project web --branch main --tag 'v*' \\\n" +
			"      --approvals 2 --approver alice --approver bob --approver role:admin --timeout 4h\n" +
			"  gantry environment set staging --project web",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := set.check(args[0]); err != nil {
				return err
			}
			if set.Timeout < 0 {
				return usagef("--timeout must be positive")
			}
			req := map[string]any{"branches": nonNilList(set.Branches), "tags": nonNilList(set.Tags),
				"required_approvals": set.Approvals, "approvers": nonNilList(set.Approvers), "prevent_self_review": set.PreventSelfReview}
			if set.Timeout > 0 {
				req["approval_timeout"] = set.Timeout.String()
			}
			body, _ := json.Marshal(req)
			var env environmentView
			raw, err := a.environmentCall(cmd.Context(), set.clientConfig, http.MethodPut, set.path(args[0]), body, &env)
			if err != nil {
				return fmt.Errorf("set environment %s: %w", args[0], err)
			}
			if set.JSON {
				return writeRaw(a.stdout, raw)
			}
			_, err = fmt.Fprintf(a.stdout, "environment %s set for project %s: %s\n", env.Name, set.Project, describeEnvironment(env))
			return err
		},
	}
	a.clientFlags(setCmd, &set.clientConfig)
	set.projectFlag(setCmd)
	setCmd.Flags().StringArrayVar(&set.Branches, "branch", nil, "a branch pattern that may deploy (repeatable)")
	setCmd.Flags().StringArrayVar(&set.Tags, "tag", nil, "a tag pattern that may deploy (repeatable)")
	setCmd.Flags().IntVar(&set.Approvals, "approvals", 0, "distinct approvals each job needs before it runs")
	setCmd.Flags().StringArrayVar(&set.Approvers, "approver", nil, "a user or role:ROLE who may approve (repeatable)")
	setCmd.Flags().DurationVar(&set.Timeout, "timeout", 0, "how long a job waits for approval before it is rejected (default 24h)")
	setCmd.Flags().BoolVar(&set.PreventSelfReview, "prevent-self-review", false, "the user who started a run may not approve its jobs")

	var list environmentConfig
	listCmd := &cobra.Command{
		Use:   "list --project P",
		Short: "List a project's environments and their rules",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := list.check(""); err != nil {
				return err
			}
			var out struct {
				Environments []environmentView `json:"environments"`
			}
			raw, err := a.environmentCall(cmd.Context(), list.clientConfig, http.MethodGet,
				"/api/v1/projects/"+url.PathEscape(list.Project)+"/environments", nil, &out)
			if err != nil {
				return fmt.Errorf("list environments: %w", err)
			}
			if list.JSON {
				return writeRaw(a.stdout, raw)
			}
			if len(out.Environments) == 0 {
				_, err := fmt.Fprintf(a.stdout, "project %s has no environments\n", list.Project)
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tDEPLOYS FROM\tAPPROVALS\tTIMEOUT")
			for _, e := range out.Environments {
				approvals := approvalsNeeded(e)
				if e.PreventSelfReview && e.RequiredApprovals > 0 {
					approvals += " (not the run's author)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Name, refsAllowed(e), approvals, e.ApprovalTimeout)
			}
			return tw.Flush()
		},
	}
	a.clientFlags(listCmd, &list.clientConfig)
	list.projectFlag(listCmd)

	var del environmentConfig
	deleteCmd := &cobra.Command{
		Use:   "delete NAME --project P",
		Short: "Delete an environment: its jobs then run with no rules",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := del.check(args[0]); err != nil {
				return err
			}
			if _, err := a.environmentCall(cmd.Context(), del.clientConfig, http.MethodDelete, del.path(args[0]), nil, nil); err != nil {
				return fmt.Errorf("delete environment %s: %w", args[0], err)
			}
			_, err := fmt.Fprintf(a.stdout, "environment %s of project %s deleted\n", args[0], del.Project)
			return err
		},
	}
	a.clientFlags(deleteCmd, &del.clientConfig)
	del.projectFlag(deleteCmd)

	cmd.AddCommand(setCmd, listCmd, deleteCmd)
	return cmd
}

func (c *environmentConfig) projectFlag(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.Project, "project", "", "the project (required)")
}

// check validates the project and, when given, the environment's name before any request.
func (c *environmentConfig) check(name string) error {
	if c.Project == "" {
		return usagef("--project is required")
	}
	if name != "" && !pipeline.EnvironmentNamePattern.Regexp().MatchString(name) {
		return usagef("environment name %q: use letters, digits and _ . - (at most 100, starting with a letter or digit)", name)
	}
	return nil
}

func (c *environmentConfig) path(name string) string {
	return "/api/v1/projects/" + url.PathEscape(c.Project) + "/environments/" + url.PathEscape(name)
}

// environmentCall sends a request and decodes a JSON answer into out (nil: none).
func (a *app) environmentCall(ctx context.Context, cfg clientConfig, method, path string, body []byte, out any) ([]byte, error) {
	c, err := cfg.client()
	if err != nil {
		return nil, err
	}
	raw, err := c.callJSON(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return nil, fmt.Errorf("read the server's answer: %w", err)
		}
	}
	return raw, nil
}

func nonNilList(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func refsAllowed(e environmentView) string {
	var parts []string
	if len(e.Branches) > 0 {
		parts = append(parts, "branches "+strings.Join(e.Branches, ", "))
	}
	if len(e.Tags) > 0 {
		parts = append(parts, "tags "+strings.Join(e.Tags, ", "))
	}
	if len(parts) == 0 {
		return "any ref"
	}
	return strings.Join(parts, "; ")
}

func approvalsNeeded(e environmentView) string {
	if e.RequiredApprovals == 0 {
		return "none"
	}
	return fmt.Sprintf("%d of %s", e.RequiredApprovals, strings.Join(e.Approvers, ", "))
}

func describeEnvironment(e environmentView) string {
	s := refsAllowed(e) + " may deploy"
	if e.RequiredApprovals > 0 {
		s += fmt.Sprintf("; %s approvals needed, within %s", approvalsNeeded(e), e.ApprovalTimeout)
		if e.PreventSelfReview {
			s += ", not by the run's author"
		}
	}
	return s
}
