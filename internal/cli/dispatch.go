package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// dispatchConfig is everything `gantry dispatch` acts on.
type dispatchConfig struct {
	clientConfig
	Project  string
	Ref      string
	Inputs   []string
	Workflow string
	Follow   bool
}

func (a *app) dispatchCommand() *cobra.Command {
	var cfg dispatchConfig
	cmd := &cobra.Command{
		Use:   "dispatch PROJECT [--ref R] [--input NAME=VALUE]... [--workflow ID|NAME]",
		Short: "Start a run by hand: a project's pipeline file at a ref, or a registered workflow",
		Long: "Dispatch starts a run of the project's pipeline file at --ref (default: the\n" +
			"project's default branch), which must list dispatch in its on:. With --workflow it\n" +
			"starts the current version of a registered workflow of the project instead, named\n" +
			"by id or name. Each --input is checked against the inputs on: dispatch declares\n" +
			"(string, boolean, choice, number; required or with a default); every wrong one is\n" +
			"listed. Steps see each input as GANTRY_INPUT_<NAME>.\n\n" +
			"With --follow, the jobs' logs are printed until the run ends, and the exit status\n" +
			"is the run's result, as with gantry submit --follow.\n\n" + configHelp,
		Example: "  gantry dispatch web\n" +
			"  gantry dispatch web --ref release/1.2 --input environment=staging --input dry_run=true --follow\n" +
			"  gantry dispatch ops --workflow rotate-keys --input region=eu",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Project = args[0]
			return a.dispatch(cmd.Context(), cfg)
		},
	}
	a.clientFlags(cmd, &cfg.clientConfig)
	f := cmd.Flags()
	f.StringVar(&cfg.Ref, "ref", "", "branch, tag, full ref or commit to run at (default: the default branch)")
	f.StringArrayVar(&cfg.Inputs, "input", nil, "NAME=VALUE for an input on: dispatch declares (repeatable)")
	f.StringVar(&cfg.Workflow, "workflow", "", "dispatch this registered workflow of the project (id or name)")
	f.BoolVarP(&cfg.Follow, "follow", "f", false, "print the jobs' logs until the run ends; exit with its result")
	return cmd
}

// parseInputs turns NAME=VALUE flags into the request's inputs; a name given twice is a
// mistake, not a silent last-one-wins.
func parseInputs(flags []string) (map[string]string, error) {
	inputs := map[string]string{}
	for _, kv := range flags {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("--input %q: want NAME=VALUE", kv)
		}
		if _, dup := inputs[k]; dup {
			return nil, usagef("--input %s is given twice", k)
		}
		inputs[k] = v
	}
	return inputs, nil
}

func (a *app) dispatch(ctx context.Context, cfg dispatchConfig) error {
	inputs, err := parseInputs(cfg.Inputs)
	if err != nil {
		return err
	}
	c, err := cfg.client()
	if err != nil {
		return err
	}
	path := "/api/v1/projects/" + url.PathEscape(cfg.Project) + "/dispatches"
	what := "project " + cfg.Project
	if cfg.Workflow != "" {
		id, err := findWorkflow(ctx, c, cfg.Project, cfg.Workflow)
		if err != nil {
			return err
		}
		path = "/api/v1/workflows/" + id + "/dispatches"
		what = "workflow " + cfg.Workflow + " of project " + cfg.Project
	}
	req := map[string]any{"inputs": inputs}
	if cfg.Ref != "" {
		req["ref"] = cfg.Ref
	}
	body, _ := json.Marshal(req)
	raw, err := c.callJSON(ctx, http.MethodPost, path, body)
	if err != nil {
		return fmt.Errorf("dispatch %s: %w", what, err)
	}
	var run runDetails
	if err := json.Unmarshal(raw, &run); err != nil {
		return fmt.Errorf("read the server's answer: %w", err)
	}
	return a.afterStart(ctx, c, cfg.clientConfig, cfg.Follow, followOptions{}, run, raw)
}

// findWorkflow returns the id of the project's workflow named by id or name.
func findWorkflow(ctx context.Context, c *apiClient, project, ref string) (string, error) {
	var list struct {
		Workflows []workflowView `json:"workflows"`
	}
	if err := c.getJSON(ctx, "/api/v1/workflows?project="+url.QueryEscape(project), &list); err != nil {
		return "", fmt.Errorf("list the workflows of project %s: %w", project, err)
	}
	var names []string
	for _, wf := range list.Workflows {
		if wf.ID == ref || wf.Name == ref {
			return wf.ID, nil
		}
		names = append(names, wf.Name)
	}
	if _, err := uuid.Parse(ref); err == nil {
		return "", fmt.Errorf("workflow %s is not one of project %s's", ref, project)
	}
	if len(names) == 0 {
		return "", fmt.Errorf("project %s has no registered workflows (gantry workflow create)", project)
	}
	return "", fmt.Errorf("project %s has no workflow named %q (it has %s)", project, ref, strings.Join(names, ", "))
}
