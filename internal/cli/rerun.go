package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// runsRerunCommand is gantry runs rerun RUN [--failed].
func (a *app) runsRerunCommand() *cobra.Command {
	var cfg clientConfig
	var failed bool
	cmd := &cobra.Command{
		Use:   "rerun RUN [--failed]",
		Short: "Run a finished run's jobs again: all of them, or only the failed ones",
		Long: "Rerun gives every job of a finished run a new attempt, or with --failed only its\n" +
			"failed, cancelled and skipped jobs and the jobs that need them; the run is\n" +
			"running again and its status comes from the new attempts. Every attempt is\n" +
			"kept: gantry logs JOB --attempt N reads an earlier one. A run that has not\n" +
			"finished is an error (exit 1). gantry retry RUN is rerun --failed.\n\n" + runRefHelp + configHelp,
		Example: "  gantry runs rerun web#42\n" +
			"  gantry runs rerun 0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b --failed",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			which := "all"
			if failed {
				which = "failed"
			}
			return a.rerunRun(cmd.Context(), cfg, args[0], which)
		},
	}
	a.clientFlags(cmd, &cfg)
	cmd.Flags().BoolVar(&failed, "failed", false, "re-run only the failed, cancelled and skipped jobs (and what needs them)")
	return cmd
}

func (a *app) rerunRun(ctx context.Context, cfg clientConfig, arg, which string) error {
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
	body, _ := json.Marshal(map[string]string{"jobs": which})
	raw, err := c.callJSON(ctx, http.MethodPost, "/api/v1/runs/"+id+"/rerun", body)
	if err != nil {
		return fmt.Errorf("re-run run %s: %w", id, err)
	}
	if cfg.JSON {
		return writeRaw(a.stdout, raw)
	}
	var run runDetails
	if err := json.Unmarshal(raw, &run); err != nil {
		return fmt.Errorf("read the server's answer: %w", err)
	}
	fmt.Fprintf(a.stdout, "run %s: %s again\n", run.ID, countOf(reopenedCount(run), "job runs", "jobs run"))
	return nil
}

// jobsCommand is gantry jobs, the commands on one job.
func (a *app) jobsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "Act on one job of a run: rerun",
		Args:  noArgs,
	}
	var cfg clientConfig
	rerun := &cobra.Command{
		Use:   "rerun JOB",
		Short: "Run a finished job again, a successful one too, with the jobs that need it",
		Long: "Rerun gives a finished job (success, failed, cancelled or skipped) a new\n" +
			"attempt, and so every job downstream of it, as they ran after it: those that\n" +
			"need it wait for the new attempt. The run is running again. A job still queued or\n" +
			"running, or one whose dependents are, is an error (exit 1). The earlier attempt\n" +
			"is kept: gantry logs JOB --attempt N reads it.\n\n" + configHelp,
		Example: "  gantry jobs rerun 0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.rerunJob(cmd.Context(), cfg, args[0])
		},
	}
	a.clientFlags(rerun, &cfg)
	cmd.AddCommand(rerun)
	return cmd
}

func (a *app) rerunJob(ctx context.Context, cfg clientConfig, id string) error {
	if _, err := uuid.Parse(id); err != nil {
		return usagef("job id %q is not a UUID", id)
	}
	c, err := cfg.client()
	if err != nil {
		return err
	}
	var j struct {
		ID       string `json:"id"`
		Key      string `json:"key"`
		Status   string `json:"status"`
		Attempts []struct {
			Attempt int `json:"attempt"`
		} `json:"attempts"`
	}
	raw, err := c.postRaw(ctx, "/api/v1/jobs/"+id+"/rerun", &j)
	if err != nil {
		return fmt.Errorf("re-run job %s: %w", id, err)
	}
	if cfg.JSON {
		return writeRaw(a.stdout, raw)
	}
	attempt := 0
	if n := len(j.Attempts); n > 0 {
		attempt = j.Attempts[n-1].Attempt
	}
	fmt.Fprintf(a.stdout, "job %s (%s): attempt %d %s\n", j.Key, j.ID, attempt, j.Status)
	return nil
}
