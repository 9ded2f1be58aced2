package cli

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// approvalsCommand is gantry approvals: the jobs waiting for the caller's approval.
func (a *app) approvalsCommand() *cobra.Command {
	var cfg clientConfig
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List the jobs waiting for your approval",
		Long: "Approvals lists the jobs waiting for approval that you may decide on: their\n" +
			"environment names your token's user, or a role your token holds, among its\n" +
			"approvers; in the projects your token sees; not approved by you yet. Decide with\n" +
			"gantry approve JOB or gantry reject JOB.\n\n" + configHelp,
		Example: "  gantry approvals\n  gantry approvals --json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.listApprovals(cmd.Context(), cfg)
		},
	}
	a.clientFlags(cmd, &cfg)
	return cmd
}

func (a *app) listApprovals(ctx context.Context, cfg clientConfig) error {
	c, err := cfg.client()
	if err != nil {
		return err
	}
	var out struct {
		Approvals []struct {
			Job struct {
				ID  string `json:"id"`
				Key string `json:"key"`
			} `json:"job"`
			Project     string `json:"project"`
			RunName     string `json:"run_name"`
			Ref         string `json:"ref"`
			Environment string `json:"environment"`
			Required    int    `json:"required"`
			Approved    int    `json:"approved"`
			SelfReview  bool   `json:"self_review"`
		} `json:"approvals"`
	}
	raw, err := c.getRaw(ctx, "/api/v1/approvals", &out)
	if err != nil {
		return fmt.Errorf("list approvals: %w", err)
	}
	if cfg.JSON {
		return writeRaw(a.stdout, raw)
	}
	if len(out.Approvals) == 0 {
		fmt.Fprintln(a.stdout, "nothing is waiting for your approval")
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tNAME\tENVIRONMENT\tAPPROVALS\tPROJECT\tRUN\tREF")
	for _, it := range out.Approvals {
		approvals := fmt.Sprintf("%d of %d", it.Approved, it.Required)
		if it.SelfReview {
			approvals += " (yours: reject only)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", it.Job.ID, it.Job.Key, it.Environment, approvals, it.Project, it.RunName, it.Ref)
	}
	return tw.Flush()
}
