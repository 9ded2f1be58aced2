package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// projectConfig is everything `gantry project` acts on.
type projectConfig struct {
	clientConfig
	Repo              string
	Provider          string
	Pipeline          string
	DefaultBranch     string
	WebhookSecretFile string
	APIURL            string
	APITokenFile      string
	// The secrets holding the repository's credential (a private repository).
	RepoTokenSecret      string
	RepoTokenUser        string
	RepoSSHKeySecret     string
	RepoKnownHostsSecret string
	CommitStatuses       string
	// GitHubTokenSecret names the secret secrets.GITHUB_TOKEN and github.token read.
	GitHubTokenSecret string
	RotateSecret      bool
}

// projectView is a project as the API shows it.
type projectView struct {
	Name                 string `json:"name"`
	RepoURL              string `json:"repo_url"`
	Provider             string `json:"provider"`
	PipelinePath         string `json:"pipeline_path"`
	DefaultBranch        string `json:"default_branch"`
	APIBaseURL           string `json:"api_base_url"`
	APITokenFile         string `json:"api_token_file"`
	RepoTokenSecret      string `json:"repo_token_secret"`
	RepoTokenUser        string `json:"repo_token_user"`
	RepoSSHKeySecret     string `json:"repo_ssh_key_secret"`
	RepoKnownHostsSecret string `json:"repo_known_hosts_secret"`
	GitHubTokenSecret    string `json:"github_token_secret"`
	CommitStatuses       string `json:"commit_statuses"`
	MaxConcurrentJobs    int    `json:"max_concurrent_jobs"`
	FairWeight           int    `json:"fair_weight"`
	WebhookSecretSet     bool   `json:"webhook_secret_set"`
	WebhookSecret        string `json:"webhook_secret"`
	HookPath             string `json:"hook_path"`
	CreatedAt            string `json:"created_at"`
	UpdatedAt            string `json:"updated_at"`
}

func (a *app) projectCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "project",
		Short: "Connect projects to repositories: create, list, get, update, delete",
		Long: "Project manages projects connected to a git repository. A push to the repository\n" +
			"reaches Gantry as a webhook at the project's hook path (/api/v1/hooks/PROVIDER/NAME),\n" +
			"signed with its webhook secret; Gantry reads the pipeline file at the pushed\n" +
			"commit and starts a run. Creating, updating and deleting need an admin token.\n\n" + configHelp,
		Args: noArgs,
	}
	var create projectConfig
	createCmd := &cobra.Command{
		Use:   "create NAME --repo URL",
		Short: "Connect a project to a repository and print its webhook secret once",
		Long: "Create connects a project to a repository. --provider is the forge that sends its\n" +
			"webhooks: github, gitlab, gitea, forgejo or generic (default: guessed from the\n" +
			"host, else generic). --pipeline is the pipeline file in the repository (default\n" +
			".gantry.yml). --default-branch is learned from the repository when not given.\n" +
			"The webhook secret is read from --webhook-secret-file, and then not printed (you\n" +
			"have it), or generated and printed once, with the URL to give the forge.\n" +
			"A private repository names the project secrets holding its credential:\n" +
			"--repo-token-secret (an https token) or --repo-ssh-key-secret (a deploy key, with\n" +
			"--repo-known-hosts-secret). Give --default-branch with them, then set the secrets\n" +
			"(gantry secret set NAME --project NAME): a project's secrets need the project.\n\n" + configHelp,
		Example: "  gantry project create web --repo https://github.com/octo-org/web.git\n" +
			"  gantry project create api --repo git@gitlab.example.com:platform/api.git --provider gitlab \\\n" +
			"      --pipeline ci/gantry.yml --default-branch main --webhook-secret-file ./hook.secret",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if create.Repo == "" {
				return usagef("--repo is required: the git remote to build")
			}
			body, err := create.request(cmd, args[0])
			if err != nil {
				return err
			}
			return a.projectCall(cmd.Context(), create.clientConfig, http.MethodPost, "/api/v1/projects", body, "created", create.WebhookSecretFile)
		},
	}
	a.clientFlags(createCmd, &create.clientConfig)
	create.settingFlags(createCmd)

	var update projectConfig
	updateCmd := &cobra.Command{
		Use:   "update NAME [flags]",
		Short: "Change a project's settings; only the flags given change",
		Long: "Update changes the settings named by the flags given and leaves the others.\n" +
			"--rotate-webhook-secret makes a new secret and prints it once; the forge must be\n" +
			"given it before its next webhook. An empty --api-url, --api-token-file or --repo-*-secret\n" +
			"clears it.\n\n" + configHelp,
		Example: "  gantry project update web --pipeline .gantry/main.yml\n" +
			"  gantry project update web --rotate-webhook-secret",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := update.request(cmd, "")
			if err != nil {
				return err
			}
			return a.projectCall(cmd.Context(), update.clientConfig, http.MethodPatch, projectPath(args[0]), body, "updated", update.WebhookSecretFile)
		},
	}
	a.clientFlags(updateCmd, &update.clientConfig)
	update.settingFlags(updateCmd)
	updateCmd.Flags().BoolVar(&update.RotateSecret, "rotate-webhook-secret", false, "make a new webhook secret and print it once")

	var list clientConfig
	listCmd := &cobra.Command{
		Use:   "list",
		Short: "List projects: never their webhook secrets",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.projectList(cmd.Context(), list)
		},
	}
	a.clientFlags(listCmd, &list)

	var get clientConfig
	getCmd := &cobra.Command{
		Use:   "get NAME",
		Short: "Show a project's settings and its hook path",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.projectCall(cmd.Context(), get, http.MethodGet, projectPath(args[0]), nil, "", "")
		},
	}
	a.clientFlags(getCmd, &get)

	var del clientConfig
	deleteCmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a project that has no runs",
		Long:  "Delete removes a project and the webhook deliveries it remembers. A project with\nruns is kept (exit 1), so no run loses its project.\n\n" + configHelp,
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := del.client()
			if err != nil {
				return err
			}
			if _, err := c.call(cmd.Context(), http.MethodDelete, projectPath(args[0]), nil, nil); err != nil {
				return fmt.Errorf("delete project %s: %w", args[0], err)
			}
			_, err = fmt.Fprintf(a.stdout, "project %s deleted\n", args[0])
			return err
		},
	}
	a.clientFlags(deleteCmd, &del)
	cmd.AddCommand(createCmd, listCmd, getCmd, updateCmd, deleteCmd, a.projectSetCommand(), a.projectWebhookCommand(), a.projectMemberCommand())
	return cmd
}

func projectPath(name string) string { return "/api/v1/projects/" + url.PathEscape(name) }

// settingFlags adds the flags of a project's settings.
func (c *projectConfig) settingFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.Repo, "repo", "", "the git remote: https://, ssh://, user@host:path or file://")
	f.StringVar(&c.Provider, "provider", "", "the forge: github, gitlab, gitea, forgejo or generic")
	f.StringVar(&c.Pipeline, "pipeline", "", "the pipeline file in the repository (default .gantry.yml)")
	f.StringVar(&c.DefaultBranch, "default-branch", "", "the default branch (learned from the repository when not given)")
	f.StringVar(&c.WebhookSecretFile, "webhook-secret-file", "", "read the webhook secret from this file (default: generate one)")
	f.StringVar(&c.APIURL, "api-url", "", "the forge's API root for commit statuses (default: the provider's public one)")
	f.StringVar(&c.APITokenFile, "api-token-file", "", "a file on the coordinator holding the forge API token for commit statuses")
	f.StringVar(&c.RepoTokenSecret, "repo-token-secret", "", "the project secret holding an access token for a private https repository")
	f.StringVar(&c.RepoTokenUser, "repo-token-user", "", "the user name sent with that token (default: x-access-token on GitHub, oauth2 on GitLab, the token on Gitea)")
	f.StringVar(&c.RepoSSHKeySecret, "repo-ssh-key-secret", "", "the project secret holding a deploy key (private ssh key) for a private ssh repository")
	f.StringVar(&c.RepoKnownHostsSecret, "repo-known-hosts-secret", "", "the project secret holding the known_hosts lines the ssh host must match (default: trust on first use)")
	f.StringVar(&c.CommitStatuses, "commit-statuses", "", "what runs report to the forge: jobs (a status per job beside the run's; the default) or run (the run's only)")
	f.StringVar(&c.GitHubTokenSecret, "github-token-secret", "", githubTokenSecretUsage)
}

// githubTokenSecretUsage describes --github-token-secret.
const githubTokenSecretUsage = "the project secret a workflow's secrets.GITHUB_TOKEN and github.token read (default GITHUB_TOKEN; \"\" goes back to it)"

// request builds the JSON body from the flags the user gave (name only for create).
func (c *projectConfig) request(cmd *cobra.Command, name string) ([]byte, error) {
	req := map[string]any{}
	if name != "" {
		req["name"] = name
	}
	f := cmd.Flags()
	for flag, field := range map[string]*string{
		"repo": &c.Repo, "provider": &c.Provider, "pipeline": &c.Pipeline, "default-branch": &c.DefaultBranch,
		"api-url": &c.APIURL, "api-token-file": &c.APITokenFile,
		"repo-token-secret": &c.RepoTokenSecret, "repo-token-user": &c.RepoTokenUser,
		"repo-ssh-key-secret": &c.RepoSSHKeySecret, "repo-known-hosts-secret": &c.RepoKnownHostsSecret,
		"commit-statuses": &c.CommitStatuses, "github-token-secret": &c.GitHubTokenSecret,
	} {
		if f.Changed(flag) {
			req[map[string]string{
				"repo": "repo_url", "provider": "provider", "pipeline": "pipeline_path", "default-branch": "default_branch",
				"api-url": "api_base_url", "api-token-file": "api_token_file",
				"repo-token-secret": "repo_token_secret", "repo-token-user": "repo_token_user",
				"repo-ssh-key-secret": "repo_ssh_key_secret", "repo-known-hosts-secret": "repo_known_hosts_secret",
				"commit-statuses": "commit_statuses", "github-token-secret": "github_token_secret",
			}[flag]] = *field
		}
	}
	if c.WebhookSecretFile != "" {
		secret, err := readSecretFile("--webhook-secret-file", c.WebhookSecretFile)
		if err != nil {
			return nil, err
		}
		if c.RotateSecret {
			return nil, usagef("--webhook-secret-file and --rotate-webhook-secret both set the secret: give one")
		}
		req["webhook_secret"] = secret
	}
	if c.RotateSecret {
		req["rotate_webhook_secret"] = true
	}
	if name == "" && len(req) == 0 {
		return nil, usagef("nothing to update: give a flag such as --pipeline or --rotate-webhook-secret")
	}
	return json.Marshal(req)
}

// readSecretFile reads a secret's first line from a file.
func readSecretFile(flag, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	defer f.Close()
	s, err := readSecret(f)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", flag, path, err)
	}
	return s, nil
}

// projectCall sends a project request and prints the project it answers with; done names
// what happened ("created", "updated"), "" for a plain read. secretFile is the file the
// request's webhook secret was read from: the user has it, so the secret the answer
// echoes is not printed (a terminal or a CI log would keep it).
func (a *app) projectCall(ctx context.Context, cfg clientConfig, method, path string, body []byte, done, secretFile string) error {
	c, err := cfg.client()
	if err != nil {
		return err
	}
	raw, err := c.callJSON(ctx, method, path, body)
	if err != nil {
		what := "get project"
		if done != "" {
			what = strings.TrimSuffix(done, "d") + " project"
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	if secretFile != "" {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err == nil {
			delete(fields, "webhook_secret")
			if b, err := json.Marshal(fields); err == nil {
				raw = b
			}
		}
	}
	if cfg.JSON {
		return writeRaw(a.stdout, raw)
	}
	var p projectView
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("read the server's answer: %w", err)
	}
	if done != "" {
		fmt.Fprintf(a.stdout, "project %s %s\n", p.Name, done)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	row("name:", p.Name)
	row("repository:", p.RepoURL)
	row("provider:", p.Provider)
	row("pipeline:", p.PipelinePath)
	row("default branch:", p.DefaultBranch)
	row("api url:", p.APIBaseURL)
	row("api token file:", p.APITokenFile)
	row("repo token secret:", p.RepoTokenSecret)
	row("repo token user:", p.RepoTokenUser)
	row("repo ssh key secret:", p.RepoSSHKeySecret)
	row("repo known hosts secret:", p.RepoKnownHostsSecret)
	if p.GitHubTokenSecret != "GITHUB_TOKEN" {
		row("GITHUB_TOKEN reads secret:", p.GitHubTokenSecret)
	}
	if p.HookPath != "" {
		row("webhook url:", c.baseURL()+p.HookPath)
	}
	if secretFile != "" {
		row("webhook secret:", "the one in "+secretFile+" (not shown)")
	} else if p.WebhookSecret != "" {
		row("webhook secret:", p.WebhookSecret+"  (shown once: give it to the forge now)")
	} else if !p.WebhookSecretSet {
		row("webhook secret:", "none: webhooks are refused")
	}
	if p.CommitStatuses == "run" {
		row("commit statuses:", "the run's only")
	}
	// The quota is shown when it is not the default (no limit, weight 1).
	if p.MaxConcurrentJobs > 0 {
		row("max concurrent jobs:", strconv.Itoa(p.MaxConcurrentJobs))
	}
	if p.FairWeight > 1 {
		row("fair-share weight:", strconv.Itoa(p.FairWeight))
	}
	row("created:", p.CreatedAt)
	row("updated:", p.UpdatedAt)
	return tw.Flush()
}

func (a *app) projectList(ctx context.Context, cfg clientConfig) error {
	c, err := cfg.client()
	if err != nil {
		return err
	}
	var out struct {
		Projects []projectView `json:"projects"`
	}
	raw, err := c.getRaw(ctx, "/api/v1/projects", &out)
	if err != nil {
		return fmt.Errorf("list projects: %w", err)
	}
	if cfg.JSON {
		return writeRaw(a.stdout, raw)
	}
	if len(out.Projects) == 0 {
		_, err := fmt.Fprintln(a.stdout, "no projects")
		return err
	}
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPROVIDER\tREPOSITORY\tBRANCH\tPIPELINE")
	for _, p := range out.Projects {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name, dash(p.Provider), dash(p.RepoURL), dash(p.DefaultBranch), dash(p.PipelinePath))
	}
	return tw.Flush()
}

// projectQuotaConfig is what `gantry project set` changes: the settings any project
// takes, with a repository or not.
type projectQuotaConfig struct {
	clientConfig
	MaxConcurrentJobs int
	Weight            int
	GitHubTokenSecret string
}

func (a *app) projectSetCommand() *cobra.Command {
	var cfg projectQuotaConfig
	cmd := &cobra.Command{
		Use:   "set NAME [--max-concurrent-jobs N] [--weight W] [--github-token-secret S]",
		Short: "Set a project's quota, and the secret its workflows' GITHUB_TOKEN reads",
		Long: "Set changes a project's quota, and which secret GITHUB_TOKEN is; only the flags\n" +
			"given change.\n" +
			"--max-concurrent-jobs bounds how many of the project's jobs run (are assigned or\n" +
			"running) at once; 0 lifts the limit. Its other jobs wait, queued, and say why.\n" +
			"--weight (1 to 100, default 1) is the project's share of dispatch while projects\n" +
			"compete: one of weight 2 gets about twice the jobs of one of weight 1. A new weight\n" +
			"applies to jobs queued after it. The quota needs an admin token.\n" +
			"--github-token-secret names the project secret that a workflow's\n" +
			"secrets.GITHUB_TOKEN and github.token read (default: the secret named GITHUB_TOKEN);\n" +
			"a maintainer of the project may set it. Any project takes these settings, also one\n" +
			"a run made without a repository.\n\n" + configHelp,
		Example: "  gantry project set nightly --max-concurrent-jobs 4\n" +
			"  gantry project set web --weight 3\n" +
			"  gantry project set nightly --max-concurrent-jobs 0\n" +
			"  gantry project set web --github-token-secret CI_BOT_TOKEN",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := cfg.request(cmd)
			if err != nil {
				return err
			}
			return a.projectCall(cmd.Context(), cfg.clientConfig, http.MethodPatch, projectPath(args[0]), body, "updated", "")
		},
	}
	a.clientFlags(cmd, &cfg.clientConfig)
	f := cmd.Flags()
	f.IntVar(&cfg.MaxConcurrentJobs, "max-concurrent-jobs", 0, "the most jobs of the project running at once (0 = no limit)")
	f.IntVar(&cfg.Weight, "weight", 1, "the project's fair-share weight, 1 to 100")
	f.StringVar(&cfg.GitHubTokenSecret, "github-token-secret", "", githubTokenSecretUsage)
	return cmd
}

// request builds the PATCH body from the flags given, checking them first.
func (c *projectQuotaConfig) request(cmd *cobra.Command) ([]byte, error) {
	req := map[string]any{}
	f := cmd.Flags()
	if f.Changed("max-concurrent-jobs") {
		if c.MaxConcurrentJobs < 0 {
			return nil, usagef("--max-concurrent-jobs %d: give 0 (no limit) or more", c.MaxConcurrentJobs)
		}
		req["max_concurrent_jobs"] = c.MaxConcurrentJobs
	}
	if f.Changed("weight") {
		if c.Weight < 1 || c.Weight > 100 {
			return nil, usagef("--weight %d: give 1 to 100", c.Weight)
		}
		req["fair_weight"] = c.Weight
	}
	if f.Changed("github-token-secret") {
		if s := c.GitHubTokenSecret; s != "" && !pipeline.ValidSecretName(s) {
			return nil, usagef("--github-token-secret %q: a secret's name is upper case letters, digits and _, not starting with a digit", s)
		}
		req["github_token_secret"] = c.GitHubTokenSecret
	}
	if len(req) == 0 {
		return nil, usagef("nothing to set: give --max-concurrent-jobs, --weight or --github-token-secret")
	}
	return json.Marshal(req)
}
