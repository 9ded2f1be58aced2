package cli

import (
	"fmt"
	"net/http"
	"net/url"
	"text/tabwriter"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// cacheConfig is everything `gantry cache` acts on.
type cacheConfig struct {
	clientConfig
	Project string
	Key     string
	Scope   string
	All     bool
}

// cacheView is a cache entry as the API shows it.
type cacheView struct {
	ID         string `json:"id"`
	Scope      string `json:"scope"`
	Key        string `json:"key"`
	Size       int64  `json:"size"`
	CreatedAt  string `json:"created_at"`
	LastUsedAt string `json:"last_used_at"`
}

func (a *app) cacheCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "List and delete a project's job caches",
		Long: "Cache lists and deletes the entries of a project's job caches (cache: in a\n" +
			"pipeline). Each entry is an archive saved under a key in a scope: the branch,\n" +
			"pr/N or tag/NAME its run was of. A deleted entry is saved again by the next job\n" +
			"that misses it. Deleting needs a write token.\n\n" + configHelp,
		Args: noArgs,
	}
	var list cacheConfig
	listCmd := &cobra.Command{
		Use:   "list --project P",
		Short: "List a project's cache entries, most recently used first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if list.Project == "" {
				return usagef("--project is required")
			}
			var out []cacheView
			raw, err := a.environmentCall(cmd.Context(), list.clientConfig, http.MethodGet,
				"/api/v1/projects/"+url.PathEscape(list.Project)+"/caches", nil, &out)
			if err != nil {
				return fmt.Errorf("list caches: %w", err)
			}
			if list.JSON {
				return writeRaw(a.stdout, raw)
			}
			if len(out) == 0 {
				_, err := fmt.Fprintf(a.stdout, "project %s has no caches\n", list.Project)
				return err
			}
			var total int64
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SCOPE\tKEY\tSIZE\tLAST USED\tCREATED\tID")
			for _, c := range out {
				total += c.Size
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Scope, c.Key, humanBytes(c.Size), c.LastUsedAt, c.CreatedAt, c.ID)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "%d %s, %s\n", len(out), plural(len(out), "entry", "entries"), humanBytes(total))
			return err
		},
	}
	a.clientFlags(listCmd, &list.clientConfig)
	listCmd.Flags().StringVar(&list.Project, "project", "", "the project (required)")

	var del cacheConfig
	deleteCmd := &cobra.Command{
		Use:   "delete [ID] --project P [--key K] [--scope S] [--all]",
		Short: "Delete cache entries: one by id, those of a key or scope, or --all",
		Example: "  gantry cache delete --project web --key go-1f2e...\n" +
			"  gantry cache delete --project web --scope feature/login --all\n" +
			"  gantry cache delete 01a2... --project web",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("unexpected argument %q", args[1])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if del.Project == "" {
				return usagef("--project is required")
			}
			path := "/api/v1/projects/" + url.PathEscape(del.Project) + "/caches"
			switch {
			case len(args) == 1:
				if _, err := uuid.Parse(args[0]); err != nil {
					return usagef("cache id %q is not an id (gantry cache list shows them)", args[0])
				}
				if del.Key != "" || del.Scope != "" || del.All {
					return usagef("give an id, or --key, --scope and --all, not both")
				}
				path += "/" + url.PathEscape(args[0])
			case del.Key == "" && !del.All:
				return usagef("say what to delete: an id, --key K, or --all (with --scope S, only that scope's)")
			default:
				q := url.Values{}
				if del.Key != "" {
					q.Set("key", del.Key)
				}
				if del.Scope != "" {
					q.Set("scope", del.Scope)
				}
				if len(q) > 0 {
					path += "?" + q.Encode()
				}
			}
			var out struct {
				Deleted int `json:"deleted"`
			}
			raw, err := a.environmentCall(cmd.Context(), del.clientConfig, http.MethodDelete, path, nil, &out)
			if err != nil {
				return fmt.Errorf("delete caches: %w", err)
			}
			if del.JSON {
				return writeRaw(a.stdout, raw)
			}
			_, err = fmt.Fprintf(a.stdout, "deleted %d cache %s of project %s\n", out.Deleted, plural(out.Deleted, "entry", "entries"), del.Project)
			return err
		},
	}
	a.clientFlags(deleteCmd, &del.clientConfig)
	deleteCmd.Flags().StringVar(&del.Project, "project", "", "the project (required)")
	deleteCmd.Flags().StringVar(&del.Key, "key", "", "delete the entries of this exact key")
	deleteCmd.Flags().StringVar(&del.Scope, "scope", "", "only in this scope: a branch, pr/N or tag/NAME")
	deleteCmd.Flags().BoolVar(&del.All, "all", false, "delete every entry (of --scope, when given)")

	cmd.AddCommand(listCmd, deleteCmd)
	return cmd
}
