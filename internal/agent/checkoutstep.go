package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/source"
)

// checkoutStep does what actions/checkout does, where a workflow's step uses it for more
// than the job's one checkout of its commit: another ref or repository, a path of its
// own, a second checkout, or one under an if:. The run's repository is fetched with the
// run's credential; another repository of the same forge (repository: owner/name) from
// beside it, without one. Its outputs are GitHub's: ref and commit.
func (r *actionRunner) checkoutStep(ctx context.Context, with map[string]string) stepRun {
	tr := r.j.Trigger
	in := func(name string) string { return strings.TrimSpace(with[name]) }
	repo, ref, path := in("repository"), in("ref"), in("path")
	depth := 1
	if v := in("fetch-depth"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return r.checkoutFailed(fmt.Errorf("fetch-depth %q is not a number of commits (0 for all)", v))
		}
		depth = n
	}
	opts := source.CheckoutOptions{Depth: depth, Path: path, SelfContained: r.a.isolatedSteps(),
		Submodules: in("submodules") == "true" || in("submodules") == "recursive", LFS: in("lfs") == "true",
		Sparse: inputLines(with["sparse-checkout"]), SparseNoCone: strings.EqualFold(in("sparse-checkout-cone-mode"), "false")}
	same := repo == "" || strings.EqualFold(repo, tr.Repository)
	url, creds := tr.CloneURL, r.j.RepoCredentials.source()
	if !same {
		url, creds = siblingRepository(tr.CloneURL, tr.Repository, repo), source.Credentials{}
	}
	if url == "" {
		return r.checkoutFailed(errors.New("the run names no repository to check out (it was not started from one)"))
	}
	dir := r.a.mirrorsDir()
	if r.j.RepoCredentialsWithheld != "" || !same {
		dir = filepath.Join(dir, "anonymous")
	}
	if err := ownCacheDir(dir); err != nil {
		return r.checkoutFailed(err)
	}
	began := time.Now()
	m, err := source.Open(ctx, source.Config{Dir: dir, URL: url, Credentials: creds, Logger: r.log})
	if err != nil {
		return r.checkoutFailed(err)
	}
	defer m.Close()
	sha := tr.SHA
	if !same || ref != "" {
		if ref == "" {
			if ref, err = m.DefaultBranch(ctx); err != nil {
				return r.checkoutFailed(fmt.Errorf("find the default branch of %s: %w", url, err))
			}
		}
		res, err := m.ResolveRef(ctx, ref)
		if err != nil {
			return r.checkoutFailed(fmt.Errorf("%s has no branch, tag or commit %q: %w", url, ref, err))
		}
		sha = res.SHA
	}
	if err := r.checkoutInto(ctx, m, sha, opts); err != nil {
		return r.checkoutFailed(err)
	}
	if opts.SelfContained {
		if err := unlinkObjects(filepath.Join(r.ws, filepath.FromSlash(path), ".git", "objects")); err != nil {
			return r.checkoutFailed(fmt.Errorf("copy the repository's objects into the workspace: %w", err))
		}
	}
	r.rec.System(fmt.Sprintf("checkout %s at %s into %s (%d ms)", url, sha, pathOrRoot(path), time.Since(began).Milliseconds()))
	return stepRun{outputs: map[string]string{"ref": ref, "commit": sha}}
}

func (r *actionRunner) checkoutFailed(err error) stepRun {
	r.rec.System("actions/checkout: " + err.Error())
	return stepRun{res: executor.Result{ExitCode: 1}}
}

func pathOrRoot(p string) string {
	if p == "" {
		return "the workspace"
	}
	return p
}

// siblingRepository is the URL of repository (owner/name) on the forge of the run's
// repository: cloneURL with its owner/name replaced, .git kept as cloneURL has it; "" when
// cloneURL does not end in the run's repository's name.
func siblingRepository(cloneURL, runRepo, repository string) string {
	base := strings.TrimSuffix(strings.TrimSuffix(cloneURL, "/"), ".git")
	suffix := strings.TrimSuffix(cloneURL, "/")[len(base):]
	if runRepo == "" || !strings.HasSuffix(strings.ToLower(base), "/"+strings.ToLower(runRepo)) {
		return ""
	}
	return base[:len(base)-len(runRepo)] + repository + suffix
}

// checkoutInto checks sha out at opts.Path of the workspace. A directory that holds files
// already (what earlier steps left, or, in a container's workspace, Gantry's own step and
// runner files) is emptied first, Gantry's files kept, as actions/checkout cleans it: the
// commit is checked out beside it and moved in.
func (r *actionRunner) checkoutInto(ctx context.Context, m *source.Mirror, sha string, opts source.CheckoutOptions) error {
	target := filepath.Join(r.ws, filepath.FromSlash(opts.Path))
	if !filepath.IsLocal(opts.Path) && opts.Path != "" {
		return fmt.Errorf("path %q is not inside the workspace", opts.Path)
	}
	entries, err := os.ReadDir(target)
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(entries) == 0 {
		return source.Checkout(ctx, m, sha, r.ws, opts)
	}
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(r.files.runner, "checkout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	into := opts
	into.Path = ""
	if err := source.Checkout(ctx, m, sha, tmp, into); err != nil {
		return err
	}
	for _, e := range entries {
		if name := e.Name(); name == stepFilesInWorkspace || name == runnerDirInWorkspace {
			continue
		}
		if err := os.RemoveAll(filepath.Join(target, e.Name())); err != nil {
			return fmt.Errorf("empty %s for the checkout: %w", pathOrRoot(opts.Path), err)
		}
	}
	got, err := os.ReadDir(tmp)
	if err != nil {
		return err
	}
	for _, e := range got {
		if err := os.Rename(filepath.Join(tmp, e.Name()), filepath.Join(target, e.Name())); err != nil {
			return fmt.Errorf("move the checkout into %s: %w", pathOrRoot(opts.Path), err)
		}
	}
	return nil
}
