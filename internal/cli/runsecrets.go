package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"golang.org/x/term"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/trigger"
)

// The secrets, variables and on: of `gantry run`: what a forge and a project's settings
// would give a run, given on the command line instead.

// localProject is the project `gantry run` creates its run in (store.CreateRunParams
// with no project).
const localProject = "default"

// runSecrets gathers the secrets of `gantry run`: those of --secrets-file, then those of
// --secret, which win for a name given in both. --secret NAME takes the value of the
// environment variable NAME, else asks for it on a terminal, as act's -s does; --secret
// NAME=VALUE gives it on the command line.
func (a *app) runSecrets(cfg runConfig) (map[string]string, error) {
	out := map[string]string{}
	if cfg.SecretsFile != "" {
		f, err := os.Open(cfg.SecretsFile)
		if err != nil {
			return nil, usagef("--secrets-file: %v", err)
		}
		vals, err := parseDotenv(f)
		f.Close()
		if err != nil {
			return nil, usagef("--secrets-file %s: %v", cfg.SecretsFile, err)
		}
		for k, v := range vals {
			if err := checkRunSecret(k, v); err != nil {
				return nil, usagef("--secrets-file %s: %v", cfg.SecretsFile, err)
			}
			out[k] = v
		}
	}
	for _, arg := range cfg.Secrets {
		name, v, given := strings.Cut(arg, "=")
		if !pipeline.ValidSecretName(name) {
			return nil, usagef("--secret %q: %v", arg, errSecretName(name))
		}
		if !given {
			var ok bool
			if v, ok = a.lookupEnv(name); !ok {
				var err error
				if v, err = a.askSecret(name); err != nil {
					return nil, err
				}
			}
		}
		if err := checkRunSecret(name, v); err != nil {
			return nil, usagef("--secret %s: %v", name, err)
		}
		out[name] = v
	}
	return out, nil
}

func errSecretName(name string) error {
	return fmt.Errorf("secret name %q: use upper case letters, digits and _, not starting with a digit (at most %d bytes)",
		name, pipeline.MaxSecretNameLen)
}

// checkRunSecret says what the coordinator would refuse of a secret, before anything is
// started.
func checkRunSecret(name, v string) error {
	switch {
	case !pipeline.ValidSecretName(name):
		return errSecretName(name)
	case v == "":
		return fmt.Errorf("the value of %s is empty; Gantry keeps no empty secret, leave it out", name)
	case len(v) > api.MaxSecretBytes:
		return fmt.Errorf("the value of %s is %d bytes; the most is %d", name, len(v), api.MaxSecretBytes)
	}
	return nil
}

// askSecret reads a secret's value from the terminal without echoing it; with no terminal
// on stdin there is nobody to ask.
func (a *app) askSecret(name string) (string, error) {
	f, ok := a.stdin.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return "", usagef("--secret %s: the environment has no %s and there is no terminal to ask for it on; export %s, or give --secrets-file FILE",
			name, name, name)
	}
	fmt.Fprintf(a.stderr, "value of secret %s: ", name)
	b, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(a.stderr)
	if err != nil {
		return "", fmt.Errorf("--secret %s: read it from the terminal: %w", name, err)
	}
	return string(b), nil
}

// parseDotenv reads a file of NAME=VALUE lines, as docker's --env-file and act's
// --secret-file take them: blank lines and lines starting with # are skipped, an export
// before the name is allowed, a value in double quotes may hold \n, \t, \" and \\, one in
// single quotes is taken as it is, and an unquoted value is trimmed and ends at " #".
// Errors name the line.
func parseDotenv(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), api.MaxSecretBytes+1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if n == 1 {
			line = strings.TrimPrefix(line, "\ufeff")
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		name, v, ok := strings.Cut(line, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("line %d: want NAME=VALUE", n)
		}
		v, err := dotenvValue(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("line %d: %s: %v", n, name, err)
		}
		out[name] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func dotenvValue(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	switch q := v[0]; q {
	case '"', '\'':
		end := closingQuote(v, q)
		if end < 0 {
			return "", fmt.Errorf("the value's %c is not closed on its line", q)
		}
		if rest := strings.TrimSpace(v[end+1:]); rest != "" && !strings.HasPrefix(rest, "#") {
			return "", fmt.Errorf("text after the quoted value: %q", clipText(rest, 20))
		}
		if q == '\'' {
			return v[1:end], nil
		}
		return unescapeDotenv(v[1:end]), nil
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = strings.TrimSpace(v[:i])
	}
	return v, nil
}

// closingQuote is the index of the quote that closes the one v starts with, -1 when none.
func closingQuote(v string, q byte) int {
	for i := 1; i < len(v); i++ {
		switch {
		case q == '"' && v[i] == '\\':
			i++
		case v[i] == q:
			return i
		}
	}
	return -1
}

func unescapeDotenv(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '"', '\\', '$':
			b.WriteByte(s[i])
		default:
			b.WriteByte('\\')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func clipText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// runVars reads --var NAME=VALUE.
func runVars(vars []string) (store.Variables, error) {
	if len(vars) == 0 {
		return nil, nil
	}
	out := store.Variables{}
	for _, kv := range vars {
		name, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, usagef("--var %q: want NAME=VALUE", kv)
		}
		if !pipeline.ValidVariableName(name) {
			return nil, usagef("--var %q: a variable's name is %s", kv, pipeline.VariableNameRule)
		}
		out[name] = v
	}
	return out, nil
}

// putRunSecrets stores secrets as the local project's named secrets, which the jobs
// reading ${{ secrets.NAME }} are given when claimed and whose values their logs mask.
// The returned func deletes them again: in a --data directory they would outlive the run.
func putRunSecrets(ctx context.Context, base string, secrets map[string]string) (func(context.Context) error, error) {
	c := &apiClient{base: base, http: http.DefaultClient}
	var stored []string
	drop := func(ctx context.Context) error {
		var errs []error
		for _, name := range stored {
			if _, err := c.call(ctx, http.MethodDelete, secretPath(name), nil, nil); err != nil {
				errs = append(errs, fmt.Errorf("delete secret %s: %w", name, err))
			}
		}
		return errors.Join(errs...)
	}
	for _, name := range slices.Sorted(maps.Keys(secrets)) {
		body, err := json.Marshal(map[string]string{"value": secrets[name]})
		if err != nil {
			return drop, err
		}
		if _, err := c.callJSON(ctx, http.MethodPut, secretPath(name), body); err != nil {
			return drop, fmt.Errorf("store secret %s for the run: %w", name, err)
		}
		stored = append(stored, name)
	}
	return drop, nil
}

func secretPath(name string) string {
	return "/api/v1/projects/" + url.PathEscape(localProject) + "/secrets/" + name
}

// checkWorkflowOn refuses a workflow whose on: would not start a run for the event
// `gantry run` simulates, as GitHub would not run it: the reason says which filter, and
// how to run it all the same. Paths are not known, so path filters never refuse.
func checkWorkflowOn(plan *pipeline.Plan, tr store.Trigger) error {
	ev := trigger.Event{Kind: trigger.Kind(tr.Event), Branch: tr.Branch, Tag: tr.Tag, ChangedPathsIncomplete: true}
	if w := tr.WorkflowRun; w != nil {
		ev.Workflow, ev.Action = w.Name, w.Action
	}
	if ev.Kind == trigger.KindPullRequest {
		// A pull request is taken to be opened into the branch of --ref (the branch
		// checked out by default: localTrigger's BaseRef).
		ev.Action = pipeline.PullRequestOpened
		ev.BaseBranch = tr.BaseRef
	}
	if ev.Kind == trigger.KindPush && ev.Branch == "" && plan.On != nil && plan.On.Push != nil &&
		(len(plan.On.Push.Branches) > 0 || len(plan.On.Push.BranchesIgnore) > 0) {
		return errors.New("this workflow runs on pushes to some branches only (on.push.branches), and the run has no branch " +
			"(HEAD is on none and no --ref names one); give --ref refs/heads/NAME, or --force to run it anyway")
	}
	ok, reason := trigger.Match(plan.On, ev)
	if ok {
		return nil
	}
	msg := reason + ", so GitHub would not run this workflow"
	if plan.On != nil && plan.On.Dispatch != nil && ev.Kind != trigger.KindDispatch {
		msg += "; --event dispatch runs it as started by hand"
	}
	return errors.New(msg + "; --force runs it anyway")
}
