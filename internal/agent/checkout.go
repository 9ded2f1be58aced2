package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/source"
)

// jobTrigger is what started the job's run, as the claim answer tells it (store.Trigger):
// the commit the workspace gets and the GANTRY_* variables its steps see.
type jobTrigger struct {
	Ref        string `json:"ref"`
	Branch     string `json:"branch"`
	SHA        string `json:"sha"`
	Event      string `json:"event"`
	Tag        string `json:"tag"`
	Repository string `json:"repository"`
	PRNumber   int    `json:"pr_number"`
	CloneURL   string `json:"clone_url"`
	// Fork and Inputs are read by steps' if: (pr.fork, inputs.X).
	Fork   bool              `json:"fork"`
	Inputs map[string]string `json:"inputs"`
	// Payload is the webhook payload of the run's event (github.event); Actor who
	// started the run (github.actor).
	Payload json.RawMessage `json:"payload"`
	Actor   string          `json:"actor"`
	// Vars are the configuration variables the job reads (vars.NAME): the run's, with
	// its environment's over them.
	Vars map[string]string `json:"vars"`
	// BaseRef and HeadRef are a pull request's base and head branches (github.base_ref,
	// github.head_ref).
	BaseRef string `json:"base_ref"`
	HeadRef string `json:"head_ref"`
	// WorkflowRun is the run that started this one (event workflow_run), which a step's
	// if: reads as workflow_run.X; nil for other runs.
	WorkflowRun *struct {
		RunID      string `json:"run_id"`
		Name       string `json:"name"`
		Number     int    `json:"number"`
		Action     string `json:"action"`
		Conclusion string `json:"conclusion"`
		Branch     string `json:"branch"`
		SHA        string `json:"sha"`
	} `json:"workflow_run"`
}

// repoCredentials is the credential of the run's private repository, as the claim answer
// gives it to the lease holder of a job that checks the repository out.
type repoCredentials struct {
	Token      string `json:"token"`
	Username   string `json:"username"`
	SSHKey     string `json:"ssh_key"`
	KnownHosts string `json:"known_hosts"`
	// AllowPlainHTTP is the coordinator admin's allowance to send Token to the
	// repository's http:// host; without it the checkout refuses to send it there.
	AllowPlainHTTP bool `json:"allow_plain_http"`
}

func (c *repoCredentials) source() source.Credentials {
	if c == nil {
		return source.Credentials{}
	}
	out := source.Credentials{Token: c.Token, Username: c.Username, KnownHosts: []byte(c.KnownHosts), AllowPlainHTTP: c.AllowPlainHTTP}
	if c.SSHKey != "" {
		out.SSHKey = []byte(c.SSHKey)
	}
	return out
}

// mirrorsDir is where the worker keeps its mirror cache: --mirrors, or beside the
// workspaces in the work directory, so that the jobs of a worker (and workers sharing a
// work directory) fetch each commit once.
func (a *Agent) mirrorsDir() string {
	if a.cfg.Mirrors != "" {
		return a.cfg.Mirrors
	}
	if tmp, err := filepath.Abs(os.TempDir()); err == nil && tmp == a.cfg.WorkDir {
		// The temp dir is shared by every user of the machine: one cache each.
		return filepath.Join(tmp, fmt.Sprintf("gantry-mirrors-%d", os.Geteuid()))
	}
	return filepath.Join(a.cfg.WorkDir, "mirrors")
}

// ownCacheDir makes the mirror cache private to the worker's user, or checks that the one
// there is a directory of that user: whoever could write to it could change the source of
// every job this worker checks out (another user of a shared temp dir who made it first).
func ownCacheDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create the mirror cache: %w", err)
	}
	// A symbolic link is followed (a configured cache may live elsewhere): what it leads to
	// must pass the same checks.
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("mirror cache: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("mirror cache %s is not a directory; choose another with --mirrors", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("mirror cache %s belongs to uid %d, not to this worker's user; choose another with --mirrors", dir, st.Uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("mirror cache %s can be written by other users (mode %o); chmod go-w it or choose another with --mirrors", dir, fi.Mode().Perm())
	}
	return nil
}

// checkout puts the run's commit into the job's workspace before its first step, unless the
// run names no repository and commit or the job says checkout: false. What it did, or why
// it could not, goes to the job's log; an error fails the job.
func (a *Agent) checkout(ctx context.Context, log *slog.Logger, j claimedJob, ws string, rec *logs.Recorder) error {
	tr := j.Trigger
	opts := j.Spec.Checkout
	if c := j.RepoCredentials; c != nil {
		// Masked like a secret before anything can print it; source keeps it off
		// command lines and out of its errors, and steps never see it.
		for _, v := range []string{c.Token, c.SSHKey} {
			if v != "" {
				rec.MaskSecret(v)
			}
		}
	}
	if tr.CloneURL == "" || tr.SHA == "" || (opts != nil && opts.Skip) {
		return nil
	}
	err := a.checkoutInto(ctx, log, j, ws, rec)
	if err != nil {
		log.Error("check out the run's commit", "repository", tr.CloneURL, "sha", tr.SHA, "err", err)
		with, note := "", ""
		switch {
		case j.RepoCredentials != nil:
			// A refused credential reads as git's "could not read Username": say whose it was.
			with = " with the repository credential from the project's secrets"
		case j.RepoCredentialsWithheld != "":
			with = " without a credential"
			note = "; " + j.RepoCredentialsWithheld + "; a private repository cannot be checked out without one"
		}
		rec.System(fmt.Sprintf("checkout %s at %s%s failed: %v%s", tr.CloneURL, tr.SHA, with, err, note))
	}
	return err
}

func (a *Agent) checkoutInto(ctx context.Context, log *slog.Logger, j claimedJob, ws string, rec *logs.Recorder) error {
	tr := j.Trigger
	var o source.CheckoutOptions
	if c := j.Spec.Checkout; c != nil {
		o = source.CheckoutOptions{Depth: c.Depth, Submodules: c.Submodules, LFS: c.LFS, Path: c.Path}
	}
	o.SelfContained = a.isolatedSteps()
	start := time.Now()
	dir := a.mirrorsDir()
	if err := ownCacheDir(dir); err != nil {
		return err
	}
	if j.RepoCredentialsWithheld != "" {
		// The shared mirror may hold what a credential fetched: a job that was refused the
		// credential reads only what the repository gives anyone, so a public repository
		// checks out and a private one fails, whatever this worker fetched before.
		dir = filepath.Join(dir, "anonymous")
		if err := ownCacheDir(dir); err != nil {
			return err
		}
	}
	m, err := source.Open(ctx, source.Config{Dir: dir, URL: tr.CloneURL, Credentials: j.RepoCredentials.source(), Logger: log})
	if err != nil {
		return err
	}
	defer m.Close()
	warm := hasCommit(ctx, m.Dir(), tr.SHA)
	if err := source.Checkout(ctx, m, tr.SHA, ws, o); err != nil {
		if errors.Is(err, source.ErrCommitNotFound) {
			return fmt.Errorf("the repository has no commit %s (never pushed, or force-pushed away)", tr.SHA)
		}
		return err
	}
	if o.SelfContained {
		// A local clone hard-links the mirror's object files: a step (or the chown to the
		// step user) must not be able to change the cache other jobs read.
		target := filepath.Join(ws, filepath.FromSlash(o.Path))
		if err := unlinkObjects(filepath.Join(target, ".git", "objects")); err != nil {
			return fmt.Errorf("copy the repository's objects into the workspace: %w", err)
		}
	}
	state := "cold"
	if warm {
		state = "warm"
	}
	took := time.Since(start)
	log.Info("checked out the run's commit", "repository", tr.CloneURL, "sha", tr.SHA, "took", took, "mirror", state)
	rec.System(fmt.Sprintf("checkout %s at %s (%d ms, mirror %s)", tr.CloneURL, tr.SHA, took.Milliseconds(), state))
	return nil
}

// isolatedSteps says whether steps cannot, or must not, read the worker's mirror cache,
// so a workspace needs its own copy of the objects rather than borrowing the mirror's: the
// sandbox shows a step its workspace and the system only, and a step user must not read
// the mirrors of other projects' repositories (the cache stays the worker's alone).
func (a *Agent) isolatedSteps() bool {
	switch e := a.cfg.Executor.(type) {
	case executor.Sandbox:
		return true
	case executor.Shell:
		return e.User != nil
	}
	return false
}

// hasCommit says whether the mirror holds the commit already, so no fetch is needed: the
// log tells a warm mirror from a cold one. It reads only, with git's own configuration
// kept out as the mirror's own commands do; any doubt is "no".
func hasCommit(ctx context.Context, gitDir, sha string) bool {
	if _, err := os.Stat(filepath.Join(gitDir, "HEAD")); err != nil {
		return false
	}
	cmd := exec.CommandContext(ctx, "git", "--git-dir", gitDir, "cat-file", "-e", sha+"^{commit}")
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0")
	return cmd.Run() == nil
}

// unlinkObjects replaces every file under dir that has other hard links by a copy of its
// own.
func unlinkObjects(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Nlink < 2 {
			return nil
		}
		return copyOver(p, fi.Mode().Perm())
	})
}

func copyOver(p string, mode fs.FileMode) error {
	src, err := os.Open(p)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(p), ".gantry-copy-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, src)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), mode)
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}

// insideWorkspace refuses an artifact path that would be written through a symbolic link:
// once a repository is checked out the workspace holds files of the pushed commit, and a
// link there (dist -> /etc) must not lead the worker to write outside the workspace.
func insideWorkspace(ws, name string) error {
	dir := ws
	parts := strings.Split(filepath.Dir(filepath.FromSlash(name)), string(filepath.Separator))
	for _, part := range parts {
		if part == "." || part == "" {
			continue
		}
		dir = filepath.Join(dir, part)
		fi, err := os.Lstat(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // made by the download, as a directory
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			rel, _ := filepath.Rel(ws, dir)
			return fmt.Errorf("%s in the workspace is a symbolic link; an artifact is not written through it", filepath.ToSlash(rel))
		}
	}
	return nil
}

// triggerEnv is the GANTRY_* variables that describe the run's trigger; those without a
// value are left out rather than set empty.
func triggerEnv(tr jobTrigger) map[string]string {
	repo := tr.Repository
	if repo == "" {
		repo = tr.CloneURL
	}
	vars := map[string]string{
		"GANTRY_SHA": tr.SHA, "GANTRY_REF": tr.Ref, "GANTRY_BRANCH": tr.Branch, "GANTRY_TAG": tr.Tag,
		"GANTRY_EVENT": tr.Event, "GANTRY_REPOSITORY": repo,
	}
	if tr.PRNumber > 0 {
		vars["GANTRY_PR_NUMBER"] = strconv.Itoa(tr.PRNumber)
	}
	for k, v := range vars {
		if v == "" {
			delete(vars, k)
		}
	}
	return vars
}
