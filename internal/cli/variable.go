package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// variableConfig is everything `gantry var` acts on.
type variableConfig struct {
	clientConfig
	Project     string
	Environment string
	FromFile    string
}

// variableView is a variable as the API shows it.
type variableView struct {
	Name        string `json:"name"`
	Environment string `json:"environment"`
	Value       string `json:"value"`
	UpdatedAt   string `json:"updated_at"`
}

func (a *app) variableCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "var",
		Short: "Manage a project's configuration variables: set, get, list, rm",
		Long: "Var manages a project's configuration variables, which a workflow reads as\n" +
			"${{ vars.NAME }} and in if:. They are not secret: their values are stored, shown\n" +
			"and logged as they are (keep secrets with gantry secret). A variable is\n" +
			"project-wide, or an environment's (--environment), which a job in that\n" +
			"environment reads over the project-wide one. Names are " + pipeline.VariableNameRule + ",\n" +
			"case-insensitive and kept in upper case. A run keeps the values it started with.\n" +
			"These commands need a maintainer of the project.\n\n" + configHelp,
		Args: noArgs,
	}

	var set variableConfig
	setCmd := &cobra.Command{
		Use:   "set NAME [VALUE] --project P [--environment E] [--from-file F]",
		Short: "Set a variable from an argument, a file or stdin",
		Long: "Set stores a variable. The value is VALUE, else the content of --from-file,\n" +
			"else stdin; from a file or stdin one trailing newline is dropped (echo adds one).\n" +
			fmt.Sprintf("A value is at most %d KiB; a project has at most %d variables project-wide and\n", store.MaxVariableBytes>>10, store.MaxProjectVariables) +
			fmt.Sprintf("%d in each environment, %d KiB of names and values in all.", store.MaxEnvironmentVariables, store.MaxVariablesTotal>>10),
		Example: "  gantry var set DEPLOY yes --project web\n" +
			"  gantry var set REGION eu-central-1 --project web --environment production\n" +
			"  gantry var set MATRIX_JSON --project web --from-file ./matrix.json\n" +
			"  git rev-parse HEAD | gantry var set BASELINE --project web",
		Args: rangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := set.check(args[0])
			if err != nil {
				return err
			}
			var value string
			switch {
			case len(args) == 2 && set.FromFile != "":
				return usagef("give the value as an argument or with --from-file, not both")
			case len(args) == 2:
				value = args[1]
			default:
				if value, err = a.variableValue(set.FromFile); err != nil {
					return err
				}
			}
			if len(value) > store.MaxVariableBytes {
				return usagef("the value is %d bytes; the most is %d", len(value), store.MaxVariableBytes)
			}
			body, _ := json.Marshal(map[string]string{"value": value, "environment": set.Environment})
			raw, err := a.secretCall(cmd.Context(), set.clientConfig, http.MethodPut, set.path(name, ""), body)
			if err != nil {
				return fmt.Errorf("set variable %s: %w", name, err)
			}
			if set.JSON {
				return writeRaw(a.stdout, raw)
			}
			scope := "every environment"
			if set.Environment != "" {
				scope = "environment " + set.Environment
			}
			_, err = fmt.Fprintf(a.stdout, "variable %s set for project %s (%s)\n", name, set.Project, scope)
			return err
		},
	}
	set.flags(a, setCmd, true)
	setCmd.Flags().StringVar(&set.FromFile, "from-file", "", "read the value from this file")

	var get variableConfig
	getCmd := &cobra.Command{
		Use:   "get NAME --project P [--environment E]",
		Short: "Print a variable's value",
		Long:  "Get prints the variable's value and a newline, nothing else, for a script to read.",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := get.check(args[0])
			if err != nil {
				return err
			}
			raw, err := a.secretCall(cmd.Context(), get.clientConfig, http.MethodGet, get.path(name, get.Environment), nil)
			if err != nil {
				return fmt.Errorf("get variable %s: %w", name, err)
			}
			if get.JSON {
				return writeRaw(a.stdout, raw)
			}
			var v variableView
			if err := json.Unmarshal(raw, &v); err != nil {
				return fmt.Errorf("read the server's answer: %w", err)
			}
			_, err = fmt.Fprintln(a.stdout, v.Value)
			return err
		},
	}
	get.flags(a, getCmd, true)

	var list variableConfig
	listCmd := &cobra.Command{
		Use:   "list --project P",
		Short: "List a project's variables with their values",
		Long:  "List shows every variable of the project, by name, then environment; a long or\nmulti-line value is cut at its first line (get or --json shows it whole).",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if list.Project == "" {
				return usagef("--project is required")
			}
			raw, err := a.secretCall(cmd.Context(), list.clientConfig, http.MethodGet, "/api/v1/projects/"+url.PathEscape(list.Project)+"/variables", nil)
			if err != nil {
				return fmt.Errorf("list variables: %w", err)
			}
			if list.JSON {
				return writeRaw(a.stdout, raw)
			}
			var ans struct {
				Variables []variableView `json:"variables"`
			}
			if err := json.Unmarshal(raw, &ans); err != nil {
				return fmt.Errorf("read the server's answer: %w", err)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tENVIRONMENT\tVALUE\tUPDATED")
			for _, v := range ans.Variables {
				env := v.Environment
				if env == "" {
					env = "(all)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.Name, env, shownValue(v.Value), v.UpdatedAt)
			}
			return tw.Flush()
		},
	}
	list.flags(a, listCmd, false)

	var rm variableConfig
	rmCmd := &cobra.Command{
		Use:     "rm NAME --project P [--environment E]",
		Aliases: []string{"delete"},
		Short:   "Delete a variable",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := rm.check(args[0])
			if err != nil {
				return err
			}
			if _, err := a.secretCall(cmd.Context(), rm.clientConfig, http.MethodDelete, rm.path(name, rm.Environment), nil); err != nil {
				return fmt.Errorf("delete variable %s: %w", name, err)
			}
			_, err = fmt.Fprintf(a.stdout, "variable %s deleted from project %s\n", name, rm.Project)
			return err
		},
	}
	rm.flags(a, rmCmd, true)
	cmd.AddCommand(setCmd, getCmd, listCmd, rmCmd)
	return cmd
}

func (c *variableConfig) flags(a *app, cmd *cobra.Command, environment bool) {
	a.clientFlags(cmd, &c.clientConfig)
	cmd.Flags().StringVar(&c.Project, "project", "", "the project (required)")
	if environment {
		cmd.Flags().StringVar(&c.Environment, "environment", "", "the environment the variable is for (default: every one)")
	}
}

// check checks the project flag and the name, and returns the name as the server keeps
// it: in upper case.
func (c *variableConfig) check(name string) (string, error) {
	if c.Project == "" {
		return "", usagef("--project is required")
	}
	if !pipeline.ValidVariableName(name) {
		return "", usagef("variable name %q: use %s", name, pipeline.VariableNameRule)
	}
	return strings.ToUpper(name), nil
}

func (c *variableConfig) path(name, environment string) string {
	p := "/api/v1/projects/" + url.PathEscape(c.Project) + "/variables/" + name
	if environment != "" {
		p += "?environment=" + url.QueryEscape(environment)
	}
	return p
}

// variableValue reads a variable's value from file, else stdin, without one trailing
// newline.
func (a *app) variableValue(file string) (string, error) {
	var r io.Reader = a.stdin
	what := "stdin"
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return "", fmt.Errorf("read the variable's value: %w", err)
		}
		defer f.Close()
		r, what = f, file
	} else if f, ok := a.stdin.(*os.File); ok && isTerminal(f) {
		fmt.Fprintln(a.stderr, "reading the variable's value from stdin; end it with Ctrl-D (or give it as an argument)")
	}
	raw, err := io.ReadAll(io.LimitReader(r, store.MaxVariableBytes+2))
	if err != nil {
		return "", fmt.Errorf("read the variable's value from %s: %w", what, err)
	}
	return strings.TrimSuffix(strings.TrimSuffix(string(raw), "\n"), "\r"), nil
}

// shownValue is a value as a table shows it: its first line, at most 60 bytes.
func shownValue(v string) string {
	first, _, multi := strings.Cut(v, "\n")
	if multi {
		first += "…"
	}
	return clipText(first, 60)
}
