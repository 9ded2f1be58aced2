package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) cancelCommand() *cobra.Command {
	var cfg clientConfig
	cmd := &cobra.Command{
		Use:   "cancel RUN",
		Short: "Cancel a run's unfinished jobs",
		Long: "Cancel stops a run: jobs not yet running are cancelled at once, running ones are\n" +
			"stopped by their worker. A run that already finished is an error (exit 1).\n\n" + runRefHelp + configHelp,
		Example: "  gantry cancel web#42\n  gantry cancel 0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runAction(cmd.Context(), cfg, args[0], "cancel")
		},
	}
	a.clientFlags(cmd, &cfg)
	return cmd
}

func (a *app) retryCommand() *cobra.Command {
	var cfg clientConfig
	cmd := &cobra.Command{
		Use:   "retry RUN",
		Short: "Run a finished run's failed, cancelled and skipped jobs again",
		Long: "Retry gives a finished run's failed, cancelled and skipped jobs, and the jobs\n" +
			"that need them, a new attempt; the other jobs that succeeded are kept. A run that\n" +
			"has not finished is an error (exit 1). It is gantry runs rerun RUN --failed.\n\n" + runRefHelp + configHelp,
		Example: "  gantry retry web#42\n  gantry retry 0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runAction(cmd.Context(), cfg, args[0], "retry")
		},
	}
	a.clientFlags(cmd, &cfg)
	return cmd
}

// runAction posts a cancel or retry of the run arg names and prints the run as it now is.
func (a *app) runAction(ctx context.Context, cfg clientConfig, arg, action string) error {
	if _, _, _, err := parseRunRef(arg); err != nil {
		return err
	}
	c, err := cfg.client()
	if err != nil {
		return err
	}
	id, err := resolveRun(ctx, c, arg)
	if err != nil {
		return err
	}
	var run runDetails
	raw, err := c.postRaw(ctx, "/api/v1/runs/"+id+"/"+action, &run)
	if err != nil {
		return fmt.Errorf("%s run %s: %w", action, id, err)
	}
	if cfg.JSON {
		return writeRaw(a.stdout, raw)
	}
	switch {
	case action == "retry":
		fmt.Fprintf(a.stdout, "run %s: %s again\n", runLabel(run), countOf(reopenedCount(run), "job runs", "jobs run"))
	case runTerminal(run.Status):
		fmt.Fprintf(a.stdout, "run %s: %s\n", runLabel(run), run.Status)
	default:
		fmt.Fprintf(a.stdout, "run %s: cancelling (its running jobs are being stopped)\n", runLabel(run))
	}
	return nil
}
