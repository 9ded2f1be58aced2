package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
)

// tokenConfig is everything `gantry token create` acts on.
type tokenConfig struct {
	DB   string
	Role string
	Name string
}

func (a *app) tokenCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Manage API tokens",
		Args:  noArgs,
	}
	cfg := tokenConfig{DB: "sqlite://.gantry/gantry.db", Role: string(store.RoleWrite)}
	create := &cobra.Command{
		Use:   "create",
		Short: "Create an API token and print it",
		Long: "Create writes a new token straight into the store the server uses (--db, the\n" +
			"same value as the server's) and prints its secret once: only its hash is kept.\n\n" +
			"Roles: read (look), write (submit, cancel, retry; and read), admin (everything),\n" +
			"register (enroll workers: give it to gantry worker --token).",
		Example: "  gantry token create --role admin --name ops\n" +
			"  gantry token create --db postgres://gantry@db/gantry --role register --name workers",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Name == "" {
				return usagef("--name is required: say what the token is for")
			}
			switch store.Role(cfg.Role) {
			case store.RoleAdmin, store.RoleWrite, store.RoleRead, store.RoleRegister:
			default:
				return usagef("--role %q: want admin, write, read or register", cfg.Role)
			}
			return a.tokenCreate(cmd.Context(), cfg)
		},
	}
	f := create.Flags()
	f.StringVar(&cfg.DB, "db", cfg.DB, "store: sqlite://PATH or postgres://...")
	f.StringVar(&cfg.Role, "role", cfg.Role, "admin, write, read or register")
	f.StringVar(&cfg.Name, "name", "", "what the token is for (required)")
	cmd.AddCommand(create)
	return cmd
}

func (a *app) tokenCreate(ctx context.Context, cfg tokenConfig) error {
	probe := serverConfig{DB: cfg.DB}
	if !probe.dbSchemeOK() {
		return usagef("--db %q: want sqlite://PATH or postgres://...", cfg.DB)
	}
	st, err := openStore(ctx, cfg.DB, sqlite.Options{})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	secret, err := api.IssueToken(ctx, st, cfg.Name, store.Role(cfg.Role), "")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(a.stdout, secret)
	return err
}
