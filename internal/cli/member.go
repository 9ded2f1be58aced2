package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// memberConfig is what `gantry project member` acts on.
type memberConfig struct {
	clientConfig
	Role string
}

type memberView struct {
	Project   string `json:"project"`
	User      string `json:"user"`
	Role      string `json:"role"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

func memberPath(project, user string) string {
	return projectPath(project) + "/members/" + url.PathEscape(user)
}

func (a *app) projectMemberCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "member",
		Short: "Give users a role in a project: add, remove, list",
		Long: "Member manages who may do what in a project. A user is the user of their tokens\n" +
			"(gantry token create --user, or the token's name). Roles: viewer (reads the\n" +
			"project's runs, jobs, logs, artifacts and settings), developer (also submits,\n" +
			"cancels, retries and dispatches runs), maintainer (also manages secrets, settings,\n" +
			"environments, webhooks and members). A token without --project reaches the projects\n" +
			"its user is a member of, at most in the token's own role. Adding and removing\n" +
			"need a maintainer of the project (or the admin); every change is audited.\n\n" + configHelp,
		Args: noArgs,
	}
	var add memberConfig
	addCmd := &cobra.Command{
		Use:   "add PROJECT USER --role viewer|developer|maintainer",
		Short: "Add a user to a project, or change their role",
		Example: "  gantry project member add web alice --role maintainer\n" +
			"  gantry project member add web bob --role viewer",
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch add.Role {
			case "viewer", "developer", "maintainer":
			case "":
				return usagef("--role is required: viewer, developer or maintainer")
			default:
				return usagef("--role %q: want viewer, developer or maintainer", add.Role)
			}
			body, err := json.Marshal(map[string]string{"role": add.Role})
			if err != nil {
				return err
			}
			c, err := add.client()
			if err != nil {
				return err
			}
			raw, err := c.callJSON(cmd.Context(), http.MethodPut, memberPath(args[0], args[1]), body)
			if err != nil {
				return fmt.Errorf("add %s to project %s: %w", args[1], args[0], err)
			}
			if add.JSON {
				return writeRaw(a.stdout, raw)
			}
			var m memberView
			if err := json.Unmarshal(raw, &m); err != nil {
				return fmt.Errorf("read the server's answer: %w", err)
			}
			_, err = fmt.Fprintf(a.stdout, "%s is a %s of project %s\n", m.User, m.Role, m.Project)
			return err
		},
	}
	a.clientFlags(addCmd, &add.clientConfig)
	addCmd.Flags().StringVar(&add.Role, "role", "", "viewer, developer or maintainer")

	var remove clientConfig
	removeCmd := &cobra.Command{
		Use:   "remove PROJECT USER",
		Short: "Remove a user from a project",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := remove.client()
			if err != nil {
				return err
			}
			if _, err := c.call(cmd.Context(), http.MethodDelete, memberPath(args[0], args[1]), nil, nil); err != nil {
				return fmt.Errorf("remove %s from project %s: %w", args[1], args[0], err)
			}
			_, err = fmt.Fprintf(a.stdout, "%s removed from project %s\n", args[1], args[0])
			return err
		},
	}
	a.clientFlags(removeCmd, &remove)

	var list clientConfig
	listCmd := &cobra.Command{
		Use:   "list PROJECT",
		Short: "List a project's members and their roles",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.memberList(cmd.Context(), list, args[0])
		},
	}
	a.clientFlags(listCmd, &list)
	cmd.AddCommand(addCmd, removeCmd, listCmd)
	return cmd
}

func (a *app) memberList(ctx context.Context, cfg clientConfig, project string) error {
	c, err := cfg.client()
	if err != nil {
		return err
	}
	var out struct {
		Members []memberView `json:"members"`
	}
	raw, err := c.getRaw(ctx, projectPath(project)+"/members", &out)
	if err != nil {
		return fmt.Errorf("list members of project %s: %w", project, err)
	}
	if cfg.JSON {
		return writeRaw(a.stdout, raw)
	}
	if len(out.Members) == 0 {
		_, err := fmt.Fprintf(a.stdout, "project %s has no members\n", project)
		return err
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tROLE\tSINCE")
	for _, m := range out.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", m.User, m.Role, m.CreatedAt)
	}
	return tw.Flush()
}
