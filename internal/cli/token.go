package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
)

// tokenConfig is everything `gantry token` acts on.
type tokenConfig struct {
	DB   string
	Role string
	Name string
	// Labels and Projects scope a register token; ExpiresIn ends any token.
	Labels    string
	Projects  string
	ExpiresIn time.Duration
	// Project scopes a user's token: project names, or "all"; none follows the
	// memberships of User (default the token's name).
	Project []string
	User    string
	// Agents lists worker credentials too.
	Agents bool
	JSON   bool
	// Client, when --server is given, manages the tokens over the coordinator's REST API
	// with its --token instead of opening --db.
	Client clientConfig
}

// defaultTokenDB is where gantry token looks without --db or --server.
const defaultTokenDB = "sqlite://.gantry/gantry.db"

// remote says whether the command goes to a coordinator (--server) rather than a store
// (--db): the command line decides (both is a usage error), else GANTRY_SERVER when
// GANTRY_DB does not name a store.
func (c *tokenConfig) remote(cmd *cobra.Command) (bool, error) {
	server, db := cmd.Flags().Changed("server"), cmd.Flags().Changed("db")
	switch {
	case server && db:
		return false, usagef("--server and --db both say where the tokens are: give one")
	case server || db:
		return server, nil
	}
	return c.Client.Server != "" && c.DB == defaultTokenDB, nil
}

// tokenClientFlags adds --server, --token and --token-file to a token command.
func (a *app) tokenClientFlags(cmd *cobra.Command, c *clientConfig) {
	c.lookupEnv = a.lookupEnv
	f := cmd.Flags()
	f.StringVar(&c.Server, "server", "", "manage tokens over this coordinator's API instead of --db (an admin's token, or a maintainer's for its projects)")
	f.StringVar(&c.Token, "token", "", "API token, with --server")
	f.StringVar(&c.TokenFile, "token-file", "", "read the API token from this file (its first line), with --server")
}

func (a *app) tokenCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Manage API tokens",
		Long: "Token creates, lists and revokes tokens straight in the store the server uses\n" +
			"(--db, the same value as the server's), or over a coordinator's API with\n" +
			"--server and --token (/api/v1/tokens): an admin's token manages every token, a\n" +
			"maintainer's the viewer, developer and maintainer tokens of its projects.",
		Args: noArgs,
	}
	cfg := tokenConfig{DB: defaultTokenDB, Role: string(store.RoleWrite)}
	create := &cobra.Command{
		Use:   "create",
		Short: "Create an API token and print it",
		Long: "Create writes a new token into the store and prints its secret once: only its\n" +
			"hash is kept.\n\n" +
			"Roles: viewer (reads a project's runs, jobs, logs, artifacts and settings),\n" +
			"developer (also submits, cancels, retries and dispatches), maintainer (also\n" +
			"manages secrets, settings, environments, webhooks and members), admin (the\n" +
			"server: everything, tokens and the audit log included), register (enroll\n" +
			"workers: give it to gantry worker --token-file). read and write are the roles of\n" +
			"before: viewer and developer of every project.\n\n" +
			"--project names a project the token works on (repeat it), or all for every\n" +
			"project. Without --project, a viewer, developer or maintainer token reaches the\n" +
			"projects its --user (default its --name) is a member of (gantry project member),\n" +
			"at most in its own role. See docs/security.md.\n\n" +
			"A register token may be scoped: a worker enrolled with it may declare only the\n" +
			"--labels given, and claims only jobs of the --projects given. --expires ends\n" +
			"the token, and the credentials of the workers it enrolled, after that long.",
		Example: "  gantry token create --role admin --name ops\n" +
			"  gantry token create --role developer --project web --project api --name ci --expires 720h\n" +
			"  gantry token create --role maintainer --name alice-laptop --user alice\n" +
			"  gantry token create --db postgres://gantry@db/gantry --role register --name web-fleet \\\n" +
			"      --labels linux,amd64 --projects web,api --expires-in 720h",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tk, err := cfg.token()
			if err != nil {
				return err
			}
			if remote, err := cfg.remote(cmd); err != nil {
				return err
			} else if remote {
				return a.createTokenRemote(cmd.Context(), cfg, tk)
			}
			return a.tokenStore(cmd.Context(), cfg, func(ctx context.Context, st store.Store) error {
				tk.ID = store.NewID()
				ctx = store.WithAudit(ctx, localAudit("token.created", tk.ID.String(), "gantry token create", tokenDetails(tk)))
				secret, err := api.IssueScopedToken(ctx, st, tk)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(a.stdout, secret)
				return err
			})
		},
	}
	f := create.Flags()
	f.StringVar(&cfg.DB, "db", cfg.DB, "store: sqlite://PATH or postgres://...")
	f.StringVar(&cfg.Role, "role", cfg.Role, "viewer, developer, maintainer, admin or register (or read, write)")
	f.StringVar(&cfg.Name, "name", "", "what the token is for (required)")
	f.StringVar(&cfg.User, "user", "", "whom the token acts for, as project members and approvers name them (default: --name)")
	f.StringArrayVar(&cfg.Project, "project", nil, "a project the token works on (repeatable), or all; none: its user's memberships")
	f.StringVar(&cfg.Labels, "labels", "", "register tokens: the only labels its workers may declare (comma-separated)")
	f.StringVar(&cfg.Projects, "projects", "", "register tokens: the only projects whose jobs its workers claim (comma-separated)")
	f.DurationVar(&cfg.ExpiresIn, "expires", 0, "the token stops working after this long (720h); default never")
	f.DurationVar(&cfg.ExpiresIn, "expires-in", 0, "the same as --expires")
	a.tokenClientFlags(create, &cfg.Client)

	list := &cobra.Command{
		Use:   "list",
		Short: "List tokens: never their secrets",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if remote, err := cfg.remote(cmd); err != nil {
				return err
			} else if remote {
				return a.listTokensRemote(cmd.Context(), cfg)
			}
			return a.tokenStore(cmd.Context(), cfg, func(ctx context.Context, st store.Store) error {
				tks, err := st.ListTokens(ctx, store.ListTokensParams{Agents: cfg.Agents})
				if err != nil {
					return fmt.Errorf("list tokens: %w", err)
				}
				return a.writeTokens(tks, cfg.JSON)
			})
		},
	}
	f = list.Flags()
	f.StringVar(&cfg.DB, "db", cfg.DB, "store: sqlite://PATH or postgres://...")
	f.BoolVar(&cfg.Agents, "agents", false, "list the credentials workers got at registration too")
	f.BoolVar(&cfg.JSON, "json", false, "print JSON for scripts")
	a.tokenClientFlags(list, &cfg.Client)

	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token, and the credentials of the workers it registered",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := uuid.Parse(args[0])
			if err != nil {
				return usagef("token id %q is not a UUID (gantry token list shows the ids)", args[0])
			}
			if remote, err := cfg.remote(cmd); err != nil {
				return err
			} else if remote {
				c, err := cfg.Client.client()
				if err != nil {
					return err
				}
				if _, err := c.callJSON(cmd.Context(), http.MethodDelete, "/api/v1/tokens/"+id.String(), nil); err != nil {
					return fmt.Errorf("revoke token: %w", err)
				}
				_, err = fmt.Fprintf(a.stdout, "revoked %s\n", id)
				return err
			}
			return a.tokenStore(cmd.Context(), cfg, func(ctx context.Context, st store.Store) error {
				ctx = store.WithAudit(ctx, localAudit("token.revoked", id.String(), "gantry token revoke", nil))
				if err := st.RevokeToken(ctx, id); errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("revoke token: no token %s", id)
				} else if err != nil {
					return fmt.Errorf("revoke token: %w", err)
				}
				_, err := fmt.Fprintf(a.stdout, "revoked %s\n", id)
				return err
			})
		},
	}
	revoke.Flags().StringVar(&cfg.DB, "db", cfg.DB, "store: sqlite://PATH or postgres://...")
	a.tokenClientFlags(revoke, &cfg.Client)
	cmd.AddCommand(create, list, revoke)
	return cmd
}

// token validates the create flags into the token to make.
func (c *tokenConfig) token() (*store.Token, error) {
	if c.Name == "" {
		return nil, usagef("--name is required: say what the token is for")
	}
	tk := &store.Token{Name: c.Name, User: c.User, Role: store.Role(c.Role)}
	switch tk.Role {
	case store.RoleAdmin, store.RoleMaintainer, store.RoleDeveloper, store.RoleViewer, store.RoleWrite, store.RoleRead, store.RoleRegister:
	default:
		return nil, usagef("--role %q: want viewer, developer, maintainer, admin or register (or read, write)", c.Role)
	}
	tk.Labels, tk.Projects = splitList(c.Labels), splitList(c.Projects)
	if (len(tk.Labels) > 0 || len(tk.Projects) > 0) && tk.Role != store.RoleRegister {
		return nil, usagef("--labels and --projects scope register tokens only; a user's token takes --project")
	}
	if len(c.Project) > 0 {
		switch {
		case tk.Role == store.RoleRegister:
			return nil, usagef("--project scopes a user's token; a register token takes --projects")
		case tk.Role == store.RoleAdmin:
			return nil, usagef("an admin token is the server's and cannot be scoped to projects: give --role maintainer --project P")
		}
		for _, p := range c.Project {
			switch {
			case p == "all" || p == store.ScopeAll:
				if len(c.Project) > 1 {
					return nil, usagef("--project all stands alone: it already names every project")
				}
				tk.Projects = []string{store.ScopeAll}
			case strings.TrimSpace(p) == "" || strings.ContainsAny(p, ",\x00\r\n"):
				return nil, usagef("--project %q: want a project name", p)
			default:
				tk.Projects = append(tk.Projects, p)
			}
		}
	}
	if c.User != "" && (tk.Role == store.RoleRegister || strings.TrimSpace(c.User) != c.User || len(c.User) > store.MaxPrincipal) {
		return nil, usagef("--user %q: want a user name (of a viewer, developer, maintainer or admin token)", c.User)
	}
	if c.ExpiresIn < 0 {
		return nil, usagef("--expires-in %s: want a positive duration such as 720h", c.ExpiresIn)
	}
	if c.ExpiresIn > 0 {
		tk.ExpiresAt = time.Now().Add(c.ExpiresIn)
	}
	return tk, nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// tokenStore opens the store at cfg.DB for fn.
func (a *app) tokenStore(ctx context.Context, cfg tokenConfig, fn func(context.Context, store.Store) error) error {
	probe := serverConfig{DB: cfg.DB}
	if !probe.dbSchemeOK() {
		return usagef("--db %q: want sqlite://PATH or postgres://...", cfg.DB)
	}
	st, err := openStore(ctx, cfg.DB, sqlite.Options{})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	return fn(ctx, st)
}

// createTokenRemote asks the coordinator for the token tk describes and prints its secret.
func (a *app) createTokenRemote(ctx context.Context, cfg tokenConfig, tk *store.Token) error {
	c, err := cfg.Client.client()
	if err != nil {
		return err
	}
	req := map[string]any{"name": tk.Name, "user": tk.User, "role": string(tk.Role), "labels": tk.Labels, "projects": tk.Projects}
	if cfg.ExpiresIn > 0 {
		req["expires_in"] = cfg.ExpiresIn.String()
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	raw, err := c.callJSON(ctx, http.MethodPost, "/api/v1/tokens", body)
	if err != nil {
		return fmt.Errorf("create token: %w", err)
	}
	var ans struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil || ans.Token == "" {
		return fmt.Errorf("create token: the server's answer has no token: %s", raw)
	}
	_, err = fmt.Fprintln(a.stdout, ans.Token)
	return err
}

// listTokensRemote lists the tokens the coordinator shows the caller, as the local list
// prints them.
func (a *app) listTokensRemote(ctx context.Context, cfg tokenConfig) error {
	c, err := cfg.Client.client()
	if err != nil {
		return err
	}
	var ans struct {
		Tokens []tokenListJSON `json:"tokens"`
	}
	if err := c.getJSON(ctx, "/api/v1/tokens?agents="+strconv.FormatBool(cfg.Agents), &ans); err != nil {
		return fmt.Errorf("list tokens: %w", err)
	}
	stamp := func(s string) time.Time {
		t, _ := time.Parse(time.RFC3339Nano, s)
		return t
	}
	tks := make([]*store.Token, len(ans.Tokens))
	for i, v := range ans.Tokens {
		tk := &store.Token{Name: v.Name, Role: store.Role(v.Role), Labels: v.Labels, Projects: v.Projects, WorkerID: v.WorkerID,
			CreatedAt: stamp(v.CreatedAt), ExpiresAt: stamp(v.ExpiresAt), RevokedAt: stamp(v.RevokedAt), LastUsedAt: stamp(v.LastUsedAt)}
		tk.ID, _ = uuid.Parse(v.ID)
		tk.ParentID, _ = uuid.Parse(v.ParentID)
		if v.User != v.Name {
			tk.User = v.User
		}
		tks[i] = tk
	}
	return a.writeTokens(tks, cfg.JSON)
}

// tokenListJSON is a listed token: never the secret or its hash.
type tokenListJSON struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	Role       string   `json:"role"`
	Labels     []string `json:"labels"`
	Projects   []string `json:"projects"`
	User       string   `json:"user,omitempty"`
	WorkerID   string   `json:"worker_id,omitempty"`
	ParentID   string   `json:"parent_id,omitempty"`
	CreatedAt  string   `json:"created_at"`
	ExpiresAt  string   `json:"expires_at,omitempty"`
	RevokedAt  string   `json:"revoked_at,omitempty"`
	LastUsedAt string   `json:"last_used_at,omitempty"`
}

func (a *app) writeTokens(tks []*store.Token, asJSON bool) error {
	stamp := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	}
	if asJSON {
		out := make([]tokenListJSON, len(tks))
		for i, tk := range tks {
			out[i] = tokenListJSON{ID: tk.ID.String(), Name: tk.Name, Role: string(tk.Role), Labels: tk.Labels, Projects: tk.Projects, User: tk.User,
				WorkerID: tk.WorkerID, CreatedAt: stamp(tk.CreatedAt), ExpiresAt: stamp(tk.ExpiresAt),
				RevokedAt: stamp(tk.RevokedAt), LastUsedAt: stamp(tk.LastUsedAt)}
			if out[i].Labels == nil {
				out[i].Labels = []string{}
			}
			if out[i].Projects == nil {
				out[i].Projects = []string{}
			}
			if tk.ParentID != uuid.Nil {
				out[i].ParentID = tk.ParentID.String()
			}
		}
		enc := json.NewEncoder(a.stdout)
		return enc.Encode(map[string]any{"tokens": out})
	}
	if len(tks) == 0 {
		_, err := fmt.Fprintln(a.stdout, "no tokens")
		return err
	}
	orDash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tROLE\tSCOPE\tCREATED\tEXPIRES\tLAST USED\tREVOKED")
	for _, tk := range tks {
		var scope []string
		if len(tk.Labels) > 0 {
			scope = append(scope, "labels="+strings.Join(tk.Labels, ","))
		}
		switch {
		case tk.Role == store.RoleAdmin:
			scope = append(scope, "server")
		case tk.Role.ProjectRole() != "" && tk.Global():
			scope = append(scope, "projects=all")
		case tk.Role.ProjectRole() != "" && len(tk.Projects) == 0:
			scope = append(scope, "member:"+tk.Principal())
		case len(tk.Projects) > 0:
			scope = append(scope, "projects="+strings.Join(tk.Projects, ","))
		}
		if tk.User != "" && len(tk.Projects) > 0 {
			scope = append(scope, "user="+tk.User)
		}
		if tk.WorkerID != "" {
			scope = append(scope, "worker="+tk.WorkerID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", tk.ID, tk.Name, tk.Role, orDash(strings.Join(scope, " ")),
			stamp(tk.CreatedAt), orDash(stamp(tk.ExpiresAt)), orDash(stamp(tk.LastUsedAt)), orDash(stamp(tk.RevokedAt)))
	}
	return tw.Flush()
}
