package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/scheduler"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/trigger"
)

// runEvents are the events --event may name: those a pipeline's on: and if: know.
var runEvents = []string{"push", "tag", "pull_request", "schedule", "dispatch", "workflow_run"}

// localRun is what `gantry run` starts its run with: the trigger a push would give it and
// the run's env (dispatch inputs), and a line saying what is checked out.
type localRun struct {
	trigger store.Trigger
	env     map[string]string
	note    string
}

// localTrigger works out the run's trigger from the flags and, unless --no-checkout, the
// git repository FILE lies in: its top level as a file:// URL, HEAD (or --sha, or with
// --dirty a commit of the uncommitted changes), and the branch checked out.
func localTrigger(ctx context.Context, cfg runConfig, plan *pipeline.Plan) (localRun, error) {
	var lr localRun
	if !slices.Contains(runEvents, cfg.Event) {
		return lr, usagef("--event %q: want one of %s", cfg.Event, strings.Join(runEvents, ", "))
	}
	if cfg.Dirty && cfg.NoCheckout {
		return lr, usagef("--dirty and --no-checkout: choose one")
	}
	if cfg.Dirty && cfg.SHA != "" {
		return lr, usagef("--dirty runs the working tree's changes on HEAD; it does not go with --sha")
	}
	// A local run's store is its user's alone: whoever runs it is its admin, so the ref
	// it is given counts as an admin's would on a server.
	tr := store.Trigger{Event: cfg.Event, Ref: cfg.Ref, SHA: cfg.SHA, Verified: store.RefFromAdmin}
	inputs, err := dispatchInputs(cfg, plan)
	if err != nil {
		return lr, err
	}
	vars, err := runVars(cfg.Vars)
	if err != nil {
		return lr, err
	}
	if vars != nil {
		tr.Vars = &vars
	}
	if len(inputs) > 0 {
		// On the trigger, as a dispatch puts them, for if: inputs.X and ${{ inputs.X }}.
		iv := store.InputValues(inputs)
		tr.Inputs = &iv
		lr.env = map[string]string{}
		for k, v := range inputs {
			lr.env[inputEnvName(k)] = v
		}
	}

	var top string
	if !cfg.NoCheckout && cfg.File != "-" {
		top, err = gitTopLevel(ctx, filepath.Dir(cfg.File))
		if err != nil {
			return lr, err
		}
	}
	if top == "" && cfg.Dirty {
		return lr, usagef("--dirty: %s is not in a git work tree", cfg.File)
	}
	if top != "" {
		g := gitIn(top)
		rev, what := "HEAD", "HEAD"
		if cfg.SHA != "" {
			rev, what = cfg.SHA, cfg.SHA
		}
		sha, err := g.run(ctx, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
		if err != nil {
			if cfg.SHA != "" {
				return lr, usagef("--sha %q: no such commit in %s", cfg.SHA, top)
			}
			return lr, fmt.Errorf("%s has no commit to check out yet; commit first, or run with --no-checkout", top)
		}
		if cfg.Dirty {
			// A commit of the working tree's changes to tracked files, on HEAD, written to
			// the object store and referenced by nothing: the tree, the index and the
			// branch are left as they are.
			stash, err := g.withIdentity().run(ctx, "stash", "create", "gantry run --dirty")
			if err != nil {
				return lr, fmt.Errorf("--dirty: record the uncommitted changes: %w", err)
			}
			if stash != "" {
				sha, what = stash, "HEAD with the uncommitted changes to tracked files"
			} else {
				what = "HEAD (no uncommitted changes to tracked files)"
			}
		}
		tr.SHA = sha
		// The commit's subject line and author, for the runs list; a --dirty stash's
		// are the stash's own, so HEAD's stand for them.
		if out, err := g.run(ctx, "log", "-1", "--format=%an%x00%B", "--end-of-options", rev+"^{commit}"); err == nil {
			author, msg, _ := strings.Cut(out, "\x00")
			tr.SetCommit(msg, author)
		}
		tr.CloneURL = (&url.URL{Scheme: "file", Path: filepath.ToSlash(top)}).String()
		if tr.Ref == "" {
			if ref, err := g.run(ctx, "symbolic-ref", "--quiet", "HEAD"); err == nil {
				tr.Ref = ref
			}
		}
		lr.note = fmt.Sprintf("checking out %s at %s (%s); --no-checkout turns this off", top, shortSHA(sha), what)
	}
	switch {
	case strings.HasPrefix(tr.Ref, "refs/heads/"):
		tr.Branch = strings.TrimPrefix(tr.Ref, "refs/heads/")
	case strings.HasPrefix(tr.Ref, "refs/tags/"):
		tr.Tag = strings.TrimPrefix(tr.Ref, "refs/tags/")
		if !cfg.eventSet {
			tr.Event = "tag" // a tag pushed is a tag event, as a forge's webhook says
		}
	}
	if tr.Event == "pull_request" {
		// A pull request's run has no branch, as one from a webhook: its head may be any
		// branch of any fork. It is taken to be opened into the branch of --ref (the
		// branch checked out by default), github.base_ref; its head is not known.
		tr.Branch = ""
		if b, ok := strings.CutPrefix(tr.Ref, "refs/heads/"); ok {
			tr.BaseRef = b
		}
	}
	if tr.Event == string(trigger.KindWorkflowRun) {
		note := localWorkflowRun(&tr, plan)
		if lr.env == nil {
			lr.env = map[string]string{}
		}
		maps.Copy(lr.env, scheduler.WorkflowRunEnv(tr.WorkflowRun))
		if lr.note != "" {
			lr.note += "\ngantry: " // one line each, as the note is printed
		}
		lr.note += note
	}
	lr.trigger = tr
	return lr, nil
}

// dispatchInputs checks --input against the pipeline's on: dispatch inputs; a dispatch
// event takes their defaults even with none given.
func dispatchInputs(cfg runConfig, plan *pipeline.Plan) (map[string]string, error) {
	if len(cfg.Inputs) == 0 && cfg.Event != "dispatch" {
		return nil, nil
	}
	given := map[string]string{}
	for _, kv := range cfg.Inputs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("--input %q: want NAME=VALUE", kv)
		}
		given[k] = v
	}
	var spec *pipeline.DispatchTrigger
	if plan.On != nil {
		spec = plan.On.Dispatch
	}
	out, errs := trigger.ValidateInputs(spec, given)
	if len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		return nil, usagef("--input: %s", strings.Join(msgs, "; "))
	}
	return out, nil
}

// inputEnvName is the variable a step reads a dispatch input from: GANTRY_INPUT_ and the
// name in capitals, '-' as '_'.
func inputEnvName(name string) string {
	return "GANTRY_INPUT_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

func shortSHA(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// gitTopLevel is the top level of the work tree dir lies in, or "" when it lies in none
// (or git is not installed: then there is nothing to check out either).
func gitTopLevel(ctx context.Context, dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if _, err := exec.LookPath("git"); err != nil {
		return "", nil
	}
	out, err := gitIn(abs).run(ctx, "rev-parse", "--show-toplevel")
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return "", nil // not a work tree (or inside .git)
	}
	if err != nil {
		return "", err
	}
	return out, nil
}

// gitCmd runs git in the user's repository, with the user's own configuration (it is
// their repository), but never a prompt.
type gitCmd struct {
	dir string
	env []string
}

func gitIn(dir string) gitCmd {
	return gitCmd{dir: dir, env: append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")}
}

// withIdentity names the author of the throwaway commit --dirty makes, so it works where
// no user.name is configured; nobody ever sees it but the run.
func (g gitCmd) withIdentity() gitCmd {
	env := append([]string(nil), g.env...)
	env = append(env, "GIT_AUTHOR_NAME=gantry run", "GIT_AUTHOR_EMAIL=gantry@localhost",
		"GIT_COMMITTER_NAME=gantry run", "GIT_COMMITTER_EMAIL=gantry@localhost")
	return gitCmd{dir: g.dir, env: env}
}

// run returns git's trimmed standard output; an error carries its standard error.
func (g gitCmd) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir, cmd.Env = g.dir, g.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(errOut.String()); msg != "" {
			return "", fmt.Errorf("git %s: %w: %s", args[0], err, msg)
		}
		return "", fmt.Errorf("git %s: %w", args[0], err)
	}
	return strings.TrimSpace(out.String()), nil
}

// localWorkflowRun makes tr the trigger of a run of workflow_run as gantry run simulates
// one: started by the successful end of a run of the first workflow the pipeline's
// on.workflow_run names, for the branch and commit being run. That run is not one of the
// local coordinator's: github.event.workflow_run.id names no run, and a download of its
// artifacts finds none. It returns the line that says so.
func localWorkflowRun(tr *store.Trigger, plan *pipeline.Plan) string {
	name := ""
	if plan.On != nil && plan.On.WorkflowRun != nil && len(plan.On.WorkflowRun.Workflows) > 0 {
		name = plan.On.WorkflowRun.Workflows[0]
	}
	src := &store.Run{ID: store.NewID(), Name: name, Trigger: *tr}
	src.Trigger.Event = string(trigger.KindPush)
	src.CreatedAt = time.Now()
	m := store.WorkflowRunMessage{RunID: src.ID, Workflow: name, Action: pipeline.WorkflowRunCompleted, Conclusion: "success",
		Attempt: 1, At: src.CreatedAt}
	tr.WorkflowRun = &store.WorkflowRunCause{RunID: src.ID, Name: name, Action: m.Action, Conclusion: m.Conclusion,
		Branch: tr.Branch, SHA: tr.SHA, Depth: 1}
	if b, err := json.Marshal(scheduler.WorkflowRunEvent(src, m, tr.Repository, "")); err == nil {
		raw := json.RawMessage(b)
		tr.Payload = &raw
	}
	at := "with no commit"
	if tr.SHA != "" {
		at = "at " + shortSHA(tr.SHA)
		if tr.Branch != "" {
			at = "on " + tr.Branch + " " + at
		}
	}
	of := "a run of " + strconv.Quote(name)
	if name == "" {
		of = "a run (on: names no workflow_run)"
	}
	return fmt.Sprintf("--event workflow_run: run as started by the successful end of %s %s; that run is not one of this "+
		"machine's, so github.event.workflow_run.id names no run and a download-artifact step with run-id finds nothing", of, at)
}
