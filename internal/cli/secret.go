package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/secret"
	"github.com/gantry-ci/gantry/internal/store"
)

// secretConfig is everything `gantry secret` acts on.
type secretConfig struct {
	clientConfig
	Project     string
	Environment string
	FromFile    string
	// DB, KeyFile and NewKeyFile are rotate-key's: it works on the store directly.
	DB         string
	KeyFile    string
	NewKeyFile string
}

func (a *app) secretCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secret",
		Short: "Manage encrypted secrets: set, list, delete, forks, rotate-key",
		Long: "Secret manages a project's secrets, which pipelines read as ${{ secrets.NAME }} in\n" +
			"env. Values are encrypted at rest and shown by nothing: not the API, not the\n" +
			"logs (masked as ***), not this command. Names are upper case letters, digits and\n" +
			"_, not starting with a digit. These commands need an admin token.\n\n" + configHelp,
		Args: noArgs,
	}
	var set secretConfig
	setCmd := &cobra.Command{
		Use:   "set NAME --project P [--environment E] [--from-file F]",
		Short: "Set a secret from stdin or a file (never an argument)",
		Long: "Set stores a secret. The value is read from --from-file, else from stdin, and one\n" +
			"trailing newline is dropped (echo adds one); it is never taken from the command\n" +
			"line, where shell history and the process list would keep it.",
		Example: "  printf %s \"$TOKEN\" | gantry secret set DEPLOY_KEY --project web\n" +
			"  gantry secret set TLS_KEY --project web --environment production --from-file ./tls.key",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := set.check(args[0]); err != nil {
				return err
			}
			value, err := a.secretValue(set.FromFile)
			if err != nil {
				return err
			}
			body, _ := json.Marshal(map[string]string{"value": value, "environment": set.Environment})
			raw, err := a.secretCall(cmd.Context(), set.clientConfig, http.MethodPut, set.path(args[0], ""), body)
			if err != nil {
				return fmt.Errorf("set secret %s: %w", args[0], err)
			}
			if set.JSON {
				return writeRaw(a.stdout, raw)
			}
			scope := "every environment"
			if set.Environment != "" {
				scope = "environment " + set.Environment
			}
			_, err = fmt.Fprintf(a.stdout, "secret %s set for project %s (%s)\n", args[0], set.Project, scope)
			return err
		},
	}
	set.flags(a, setCmd, true)
	setCmd.Flags().StringVar(&set.FromFile, "from-file", "", "read the value from this file instead of stdin")

	var list secretConfig
	listCmd := &cobra.Command{
		Use:   "list --project P",
		Short: "List a project's secrets: names, environments, update times, never values",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if list.Project == "" {
				return usagef("--project is required")
			}
			raw, err := a.secretCall(cmd.Context(), list.clientConfig, http.MethodGet, "/api/v1/projects/"+url.PathEscape(list.Project)+"/secrets", nil)
			if err != nil {
				return fmt.Errorf("list secrets: %w", err)
			}
			if list.JSON {
				return writeRaw(a.stdout, raw)
			}
			var ans struct {
				Secrets []struct {
					Name        string `json:"name"`
					Environment string `json:"environment"`
					UpdatedAt   string `json:"updated_at"`
				} `json:"secrets"`
			}
			if err := json.Unmarshal(raw, &ans); err != nil {
				return fmt.Errorf("read the server's answer: %w", err)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tENVIRONMENT\tUPDATED")
			for _, s := range ans.Secrets {
				env := s.Environment
				if env == "" {
					env = "(all)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, env, s.UpdatedAt)
			}
			return tw.Flush()
		},
	}
	list.flags(a, listCmd, false)

	var del secretConfig
	delCmd := &cobra.Command{
		Use:   "delete NAME --project P [--environment E]",
		Short: "Delete a secret",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := del.check(args[0]); err != nil {
				return err
			}
			if _, err := a.secretCall(cmd.Context(), del.clientConfig, http.MethodDelete, del.path(args[0], del.Environment), nil); err != nil {
				return fmt.Errorf("delete secret %s: %w", args[0], err)
			}
			_, err := fmt.Fprintf(a.stdout, "secret %s deleted from project %s\n", args[0], del.Project)
			return err
		},
	}
	del.flags(a, delCmd, true)

	var forks secretConfig
	forksCmd := &cobra.Command{
		Use:   "forks --project P [on|off]",
		Short: "Show or set whether pull requests from forks get the project's secrets (default off)",
		Long: "Forks shows, or with on or off sets, the project's secrets_for_forks setting. Off,\n" +
			"a job of a pull request from a fork that refers to a secret fails before its first\n" +
			"step: its code is someone else's, and would otherwise read the secret.",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 || (len(args) == 1 && args[0] != "on" && args[0] != "off") {
				return usagef("want on, off or nothing")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if forks.Project == "" {
				return usagef("--project is required")
			}
			path := "/api/v1/projects/" + url.PathEscape(forks.Project) + "/secret-settings"
			method, body := http.MethodGet, []byte(nil)
			if len(args) == 1 {
				method = http.MethodPut
				body, _ = json.Marshal(map[string]bool{"secrets_for_forks": args[0] == "on"})
			}
			raw, err := a.secretCall(cmd.Context(), forks.clientConfig, method, path, body)
			if err != nil {
				return fmt.Errorf("secrets for forks: %w", err)
			}
			if forks.JSON {
				return writeRaw(a.stdout, raw)
			}
			var ans struct {
				SecretsForForks bool `json:"secrets_for_forks"`
			}
			if err := json.Unmarshal(raw, &ans); err != nil {
				return fmt.Errorf("read the server's answer: %w", err)
			}
			state := "off"
			if ans.SecretsForForks {
				state = "on"
			}
			_, err = fmt.Fprintf(a.stdout, "secrets for pull requests from forks: %s\n", state)
			return err
		},
	}
	forks.flags(a, forksCmd, false)

	rotate := secretConfig{DB: "sqlite://.gantry/gantry.db"}
	rotateCmd := &cobra.Command{
		Use:   "rotate-key --db DSN --secrets-key-file OLD --new-key-file NEW",
		Short: "Re-wrap every secret's data key under a new key-encryption key",
		Long: "Rotate-key works on the store directly (--db, the server's). It opens each data\n" +
			"key with the old key (--secrets-key-file, else GANTRY_SECRETS_KEY) and wraps it\n" +
			"again under --new-key-file; the values' ciphertexts do not change. Without\n" +
			"downtime: first restart every server with --secrets-key-file NEW\n" +
			"--secrets-old-key-file OLD (they seal with the new key and open with either), then\n" +
			"run this, then drop --secrets-old-key-file. Running it again rewraps what is left.",
		Example: "  gantry secret rotate-key --db sqlite://.gantry/gantry.db --secrets-key-file old.key --new-key-file new.key",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.rotateKey(cmd.Context(), rotate)
		},
	}
	f := rotateCmd.Flags()
	f.StringVar(&rotate.DB, "db", rotate.DB, "store: sqlite://PATH or postgres://...")
	f.StringVar(&rotate.KeyFile, "secrets-key-file", "", "the current key-encryption key (default: GANTRY_SECRETS_KEY)")
	f.StringVar(&rotate.NewKeyFile, "new-key-file", "", "the new key-encryption key (required; 32 random bytes, raw or base64)")
	cmd.AddCommand(setCmd, listCmd, delCmd, forksCmd, rotateCmd)
	return cmd
}

func (c *secretConfig) flags(a *app, cmd *cobra.Command, environment bool) {
	a.clientFlags(cmd, &c.clientConfig)
	cmd.Flags().StringVar(&c.Project, "project", "", "the project (required)")
	if environment {
		cmd.Flags().StringVar(&c.Environment, "environment", "", "the environment the secret is for (default: every one)")
	}
}

func (c *secretConfig) check(name string) error {
	if c.Project == "" {
		return usagef("--project is required")
	}
	if !pipeline.ValidSecretName(name) {
		return usagef("secret name %q: use upper case letters, digits and _, not starting with a digit", name)
	}
	return nil
}

func (c *secretConfig) path(name, environment string) string {
	p := "/api/v1/projects/" + url.PathEscape(c.Project) + "/secrets/" + name
	if environment != "" {
		p += "?environment=" + url.QueryEscape(environment)
	}
	return p
}

// secretValue reads a secret's value from file, else stdin, without one trailing newline.
func (a *app) secretValue(file string) (string, error) {
	var raw []byte
	var err error
	if file != "" {
		raw, err = os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read the secret's value: %w", err)
		}
	} else {
		if f, ok := a.stdin.(*os.File); ok && isTerminal(f) {
			fmt.Fprintln(a.stderr, "reading the secret's value from stdin; end it with Ctrl-D")
		}
		raw, err = io.ReadAll(io.LimitReader(a.stdin, api.MaxSecretBytes+2))
		if err != nil {
			return "", fmt.Errorf("read the secret's value from stdin: %w", err)
		}
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(raw), "\n"), "\r")
	switch {
	case v == "":
		return "", usagef("the secret's value is empty: give it on stdin or with --from-file")
	case len(v) > api.MaxSecretBytes:
		return "", usagef("the secret's value is longer than %d bytes", api.MaxSecretBytes)
	}
	return v, nil
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (a *app) secretCall(ctx context.Context, cfg clientConfig, method, path string, body []byte) ([]byte, error) {
	c, err := cfg.client()
	if err != nil {
		return nil, err
	}
	if body == nil {
		return c.call(ctx, method, path, nil, nil)
	}
	return c.callJSON(ctx, method, path, body)
}

// rotateKey rewraps every data key not yet under the new key.
func (a *app) rotateKey(ctx context.Context, cfg secretConfig) error {
	if cfg.NewKeyFile == "" {
		return usagef("--new-key-file is required")
	}
	oldKey, err := secret.LoadKey(cfg.KeyFile)
	if errors.Is(err, secret.ErrNoKey) {
		return usagef("the current key is needed: --secrets-key-file or GANTRY_SECRETS_KEY")
	}
	if err != nil {
		return err
	}
	newKey, err := secret.LoadKeyFile(cfg.NewKeyFile)
	if err != nil {
		return err
	}
	kr, err := secret.NewKeyring(newKey, oldKey)
	if err != nil {
		return err
	}
	return a.tokenStore(ctx, tokenConfig{DB: cfg.DB}, func(ctx context.Context, st store.Store) error {
		todo, err := st.SealedSecrets(ctx, kr.PrimaryID())
		if err != nil {
			return fmt.Errorf("rotate key: %w", err)
		}
		done, failed := 0, 0
		for _, sc := range todo {
			scope := secret.Scope{Project: sc.Project, Environment: sc.Environment, Name: sc.Name, Run: sc.Scope}
			sealed := secret.Sealed{KeyID: sc.KeyID, WrappedKey: sc.WrappedKey, Ciphertext: sc.Ciphertext}
			next, changed, err := kr.Rewrap(sealed, scope)
			if err != nil {
				failed++
				fmt.Fprintf(a.stderr, "secret %s of project %s: %v\n", sc.Name, sc.Project, err)
				continue
			}
			if !changed {
				continue
			}
			k := store.SecretKey{Project: sc.Project, Environment: sc.Environment, Scope: sc.Scope, Name: sc.Name}
			err = st.RewrapSecret(ctx, k, sc.KeyID, sc.WrappedKey, next.KeyID, next.WrappedKey)
			switch {
			case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
				// Set or deleted meanwhile, by a server that seals with the new key.
				continue
			case err != nil:
				return fmt.Errorf("rotate key: %w", err)
			}
			done++
		}
		fmt.Fprintf(a.stdout, "rewrapped %d secrets under key %s\n", done, kr.PrimaryID())
		sealed, rewrapped, hookFailed, err := kr.SealWebhookSecrets(ctx, st)
		if err != nil {
			return fmt.Errorf("rotate key: %w", err)
		}
		fmt.Fprintf(a.stdout, "rewrapped %d webhook secrets under key %s (sealed %d stored in plain text)\n", rewrapped, kr.PrimaryID(), sealed)
		if failed+hookFailed > 0 {
			return fmt.Errorf("rotate key: %d secrets and %d webhook secrets could not be opened with the current key; they are left as they were", failed, hookFailed)
		}
		return nil
	})
}

// secretsKeyring loads the server's secrets keys: --secrets-key-file (made first when
// CreateSecretsKey, as gantry up does in its data dir; gantry run's throwaway one gets
// a key in memory), else
// GANTRY_SECRETS_KEY; nil when neither is set, which leaves secrets off.
func (c *serverConfig) secretsKeyring(log *slog.Logger) (*secret.Keyring, error) {
	var key []byte
	var err error
	switch {
	case c.CreateSecretsKey && c.Throwaway:
		key, err = throwawayKey(*c, secret.KeySize)
	case c.SecretsKeyFile != "" && c.CreateSecretsKey:
		key, err = secret.EnsureKeyFile(c.SecretsKeyFile)
	default:
		key, err = secret.LoadKey(c.SecretsKeyFile)
	}
	if errors.Is(err, secret.ErrNoKey) {
		log.Info("no secrets key: secrets are off; set --secrets-key-file or GANTRY_SECRETS_KEY to use them")
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var old [][]byte
	for _, f := range c.SecretsOldKeyFiles {
		k, err := secret.LoadKeyFile(f)
		if err != nil {
			return nil, err
		}
		old = append(old, k)
	}
	kr, err := secret.NewKeyring(key, old...)
	if err != nil {
		return nil, err
	}
	log.Info("secrets on", "key_id", kr.PrimaryID(), "old_keys", len(old))
	return kr, nil
}

// parseSecretEnv reads --secret-env: NAME takes the value of the variable NAME of this
// process's environment, which keeps it off the command line; NAME=VALUE is accepted too.
func parseSecretEnv(list []string, lookupEnv func(string) (string, bool)) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if k == "" {
			return nil, usagef("--secret-env %q: want NAME or NAME=VALUE", kv)
		}
		if !ok {
			if v, ok = lookupEnv(k); !ok {
				return nil, usagef("--secret-env %s: no variable %s in the environment", k, k)
			}
		}
		out[k] = v
	}
	return out, nil
}
