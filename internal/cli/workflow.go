package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// workflowView is a registered workflow as the API shows it.
type workflowView struct {
	ID         string `json:"id"`
	Project    string `json:"project"`
	Name       string `json:"name"`
	Version    int    `json:"version"`
	Enabled    bool   `json:"enabled"`
	Definition string `json:"definition"`
	Inputs     []struct {
		Name     string   `json:"name"`
		Type     string   `json:"type"`
		Required bool     `json:"required"`
		Default  *string  `json:"default"`
		Options  []string `json:"options"`
	} `json:"inputs"`
	Schedules []struct {
		Cron     string `json:"cron"`
		Timezone string `json:"timezone"`
		Missed   string `json:"missed"`
	} `json:"schedules"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

// workflowConfig is everything `gantry workflow` acts on.
type workflowConfig struct {
	clientConfig
	Project string
	File    string
	Enable  bool
	Disable bool
	Version int
}

func (a *app) workflowCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workflow",
		Short: "Register pipelines in a project and start them by hand or on schedule",
		Long: "Workflow keeps registered workflows: named pipeline definitions stored in a project\n" +
			"rather than read from a repository. Each new definition is a new version; runs\n" +
			"record the version they ran. A workflow starts with gantry dispatch PROJECT\n" +
			"--workflow NAME, or on the schedules its on: lists, while it is enabled.\n\n" + configHelp,
		Args: noArgs,
	}
	var create workflowConfig
	createCmd := &cobra.Command{
		Use:     "create PROJECT NAME FILE",
		Short:   "Register a pipeline file as a workflow of the project (version 1)",
		Example: "  gantry workflow create ops rotate-keys rotate.yml",
		Args:    exactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			def, err := a.readDefinition(args[2])
			if err != nil {
				return err
			}
			req := map[string]any{"project": args[0], "name": args[1], "definition": def}
			if create.Disable {
				req["enabled"] = false
			}
			return a.workflowCall(cmd.Context(), create.clientConfig, http.MethodPost, "/api/v1/workflows", req, "created")
		},
	}
	a.clientFlags(createCmd, &create.clientConfig)
	createCmd.Flags().BoolVar(&create.Disable, "disable", false, "register it disabled: no dispatch, no schedule")

	var update workflowConfig
	updateCmd := &cobra.Command{
		Use:   "update PROJECT NAME [--file FILE] [--enable|--disable]",
		Short: "Give a workflow a new definition (a new version), or enable or disable it",
		Example: "  gantry workflow update ops rotate-keys --file rotate.yml\n" +
			"  gantry workflow update ops rotate-keys --disable",
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := map[string]any{}
			if update.Enable && update.Disable {
				return usagef("--enable and --disable: give one")
			}
			if update.Enable || update.Disable {
				req["enabled"] = update.Enable
			}
			if update.File != "" {
				def, err := a.readDefinition(update.File)
				if err != nil {
					return err
				}
				req["definition"] = def
			}
			if len(req) == 0 {
				return usagef("nothing to update: give --file, --enable or --disable")
			}
			if update.Version != 0 {
				req["version"] = update.Version
			}
			c, err := update.client()
			if err != nil {
				return err
			}
			id, err := findWorkflow(cmd.Context(), c, args[0], args[1])
			if err != nil {
				return err
			}
			return a.workflowCall(cmd.Context(), update.clientConfig, http.MethodPatch, "/api/v1/workflows/"+id, req, "updated")
		},
	}
	a.clientFlags(updateCmd, &update.clientConfig)
	uf := updateCmd.Flags()
	uf.StringVar(&update.File, "file", "", "the new definition (YAML or JSON; - reads standard input)")
	uf.BoolVar(&update.Enable, "enable", false, "allow dispatches and schedules")
	uf.BoolVar(&update.Disable, "disable", false, "refuse dispatches and stop its schedules")
	uf.IntVar(&update.Version, "if-version", 0, "change it only if it is still at this version")

	var list workflowConfig
	listCmd := &cobra.Command{
		Use:   "list [--project P]",
		Short: "List registered workflows",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.workflowList(cmd.Context(), list)
		},
	}
	a.clientFlags(listCmd, &list.clientConfig)
	listCmd.Flags().StringVar(&list.Project, "project", "", "only this project's")

	var get clientConfig
	getCmd := &cobra.Command{
		Use:   "get PROJECT NAME",
		Short: "Show a workflow: its version, inputs, schedules and definition",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := get.client()
			if err != nil {
				return err
			}
			id, err := findWorkflow(cmd.Context(), c, args[0], args[1])
			if err != nil {
				return err
			}
			return a.workflowCall(cmd.Context(), get, http.MethodGet, "/api/v1/workflows/"+id, nil, "")
		},
	}
	a.clientFlags(getCmd, &get)

	var del clientConfig
	deleteCmd := &cobra.Command{
		Use:   "delete PROJECT NAME",
		Short: "Delete a workflow; its runs stay",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := del.client()
			if err != nil {
				return err
			}
			id, err := findWorkflow(cmd.Context(), c, args[0], args[1])
			if err != nil {
				return err
			}
			if _, err := c.call(cmd.Context(), http.MethodDelete, "/api/v1/workflows/"+url.PathEscape(id), nil, nil); err != nil {
				return fmt.Errorf("delete workflow %s: %w", args[1], err)
			}
			_, err = fmt.Fprintf(a.stdout, "workflow %s of project %s deleted\n", args[1], args[0])
			return err
		},
	}
	a.clientFlags(deleteCmd, &del)
	cmd.AddCommand(createCmd, listCmd, getCmd, updateCmd, deleteCmd)
	return cmd
}

// readDefinition reads a pipeline file (- for standard input) as text.
func (a *app) readDefinition(name string) (string, error) {
	srcs, err := a.readSources([]string{name})
	if err != nil {
		return "", err
	}
	return string(srcs[0].data), nil
}

// workflowCall sends a workflow request and prints the workflow it answers with; done
// names what happened ("created", "updated"), "" for a plain read.
func (a *app) workflowCall(ctx context.Context, cfg clientConfig, method, path string, req map[string]any, done string) error {
	c, err := cfg.client()
	if err != nil {
		return err
	}
	var body io.Reader
	var header http.Header
	if req != nil {
		b, _ := json.Marshal(req)
		body, header = bytes.NewReader(b), http.Header{"Content-Type": {"application/json"}}
	}
	raw, err := c.call(ctx, method, path, body, header)
	if err != nil {
		what := "get workflow"
		if done != "" {
			what = strings.TrimSuffix(done, "d") + " workflow"
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	if cfg.JSON {
		return writeRaw(a.stdout, raw)
	}
	var wf workflowView
	if err := json.Unmarshal(raw, &wf); err != nil {
		return fmt.Errorf("read the server's answer: %w", err)
	}
	var b strings.Builder
	if done != "" {
		fmt.Fprintf(&b, "workflow %s of project %s %s: version %d\n", wf.Name, wf.Project, done, wf.Version)
	}
	state := "enabled"
	if !wf.Enabled {
		state = "disabled"
	}
	fmt.Fprintf(&b, "id:        %s\nproject:   %s\nname:      %s\nversion:   %d\nstate:     %s\n", wf.ID, wf.Project, wf.Name, wf.Version, state)
	for _, in := range wf.Inputs {
		line := in.Name + " (" + in.Type
		if in.Required {
			line += ", required"
		}
		if in.Default != nil {
			line += ", default " + *in.Default
		}
		if len(in.Options) > 0 {
			line += ", one of " + strings.Join(in.Options, "|")
		}
		fmt.Fprintf(&b, "input:     %s)\n", line)
	}
	for _, s := range wf.Schedules {
		tz := s.Timezone
		if tz == "" {
			tz = "UTC"
		}
		fmt.Fprintf(&b, "schedule:  %s %s (missed: %s)\n", s.Cron, tz, s.Missed)
	}
	if done == "" {
		fmt.Fprintf(&b, "\n%s", wf.Definition)
	}
	_, err = io.WriteString(a.stdout, b.String())
	return err
}

func (a *app) workflowList(ctx context.Context, cfg workflowConfig) error {
	c, err := cfg.client()
	if err != nil {
		return err
	}
	path := "/api/v1/workflows"
	if cfg.Project != "" {
		path += "?project=" + url.QueryEscape(cfg.Project)
	}
	var out struct {
		Workflows []workflowView `json:"workflows"`
	}
	raw, err := c.getRaw(ctx, path, &out)
	if err != nil {
		return fmt.Errorf("list workflows: %w", err)
	}
	if cfg.JSON {
		return writeRaw(a.stdout, raw)
	}
	if len(out.Workflows) == 0 {
		_, err := fmt.Fprintln(a.stdout, "no workflows")
		return err
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECT\tNAME\tVERSION\tSTATE\tSCHEDULES\tID")
	for _, wf := range out.Workflows {
		state := "enabled"
		if !wf.Enabled {
			state = "disabled"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\n", wf.Project, wf.Name, wf.Version, state, len(wf.Schedules), wf.ID)
	}
	return tw.Flush()
}
