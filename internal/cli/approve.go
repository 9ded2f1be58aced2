package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// decideConfig is what `gantry approve` and `gantry reject` act on.
type decideConfig struct {
	clientConfig
	Comment string
}

// decidedJob is the part of a job's answer a decision prints.
type decidedJob struct {
	ID      string `json:"id"`
	Key     string `json:"key"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Waiting *struct {
		Message string `json:"message"`
	} `json:"waiting"`
}

func (a *app) approveCommand() *cobra.Command { return a.decideCommand("approve") }

func (a *app) rejectCommand() *cobra.Command { return a.decideCommand("reject") }

func (a *app) decideCommand(verb string) *cobra.Command {
	var cfg decideConfig
	short := "Approve a job waiting for approval before it deploys"
	long := "Approve records your approval of a job waiting for approval (status\n" +
		"waiting_approval). Once as many approvers as its environment requires have approved,\n" +
		"the job is queued. You approve as your token's name, which the environment must\n" +
		"name among its approvers (or a role your token holds); approving twice counts once.\n" +
		"With auth off everyone is \"anonymous\" and may approve.\n\n" + configHelp
	if verb == "reject" {
		short = "Reject a job waiting for approval: it fails without running"
		long = "Reject fails a job waiting for approval (failure kind rejected, reason\n" +
			"\"rejected by NAME\"); one rejection is enough. Who may reject is who may approve.\n\n" + configHelp
	}
	cmd := &cobra.Command{
		Use:     verb + " JOB [--comment TEXT]",
		Short:   short,
		Long:    long,
		Example: "  gantry " + verb + " 0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b --comment \"release notes checked\"",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.decide(cmd.Context(), cfg, verb, args[0])
		},
	}
	a.clientFlags(cmd, &cfg.clientConfig)
	cmd.Flags().StringVar(&cfg.Comment, "comment", "", "a comment kept with the decision")
	return cmd
}

func (a *app) decide(ctx context.Context, cfg decideConfig, verb, id string) error {
	if _, err := uuid.Parse(id); err != nil {
		return usagef("job id %q is not a UUID", id)
	}
	c, err := cfg.client()
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]string{"comment": cfg.Comment})
	raw, err := c.call(ctx, http.MethodPost, "/api/v1/jobs/"+id+"/"+verb, bytes.NewReader(body),
		http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return fmt.Errorf("%s job %s: %w", verb, id, err)
	}
	if cfg.JSON {
		return writeRaw(a.stdout, raw)
	}
	var j decidedJob
	if err := json.Unmarshal(raw, &j); err != nil {
		return fmt.Errorf("read the server's answer: %w", err)
	}
	switch {
	case j.Status == "waiting_approval" && j.Waiting != nil:
		_, err = fmt.Fprintf(a.stdout, "job %s: approval recorded; still %s\n", j.Key, j.Waiting.Message)
	case j.Status == "failed":
		_, err = fmt.Fprintf(a.stdout, "job %s: failed (%s)\n", j.Key, j.Reason)
	default:
		_, err = fmt.Fprintf(a.stdout, "job %s: approved, now %s\n", j.Key, j.Status)
	}
	return err
}
