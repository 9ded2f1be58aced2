package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrNotEmpty: the checkout target already holds files.
var ErrNotEmpty = errors.New("checkout target is not empty")

// CheckoutOptions tune Checkout. The zero value is a full checkout at the workspace's root.
type CheckoutOptions struct {
	// Depth > 0 makes a shallow repository with that many commits of history; objects are
	// then copied, not borrowed from the mirror.
	Depth int
	// Submodules initialises and updates submodules, recursively, from their own remotes.
	Submodules bool
	// LFS replaces Git LFS pointer files with their content (needs git-lfs installed).
	LFS bool
	// Path is a subdirectory of the workspace to check out into, relative and inside it.
	Path string
	// SelfContained makes a repository that does not read the mirror's objects at run time
	// (hard links on the same file system, copies otherwise), for a workspace mounted where
	// the mirror is not visible, such as a container. Without it the workspace borrows the
	// mirror's objects (git clone --shared), which costs nothing however large the history.
	SelfContained bool
	// Sparse, when not empty, checks out only these directories (cone mode, with the
	// files at the top) or, with SparseNoCone, the paths these gitignore-style patterns
	// match (git sparse-checkout).
	Sparse       []string
	SparseNoCone bool
}

// Checkout puts the repository at exactly commit sha into dir (or dir/opts.Path), from the
// mirror: the commit is fetched when the mirror lacks it, HEAD is detached at sha, and
// origin names the real remote, so git commands in a job behave as in a clone of it. The
// target must be missing or empty. On failure, what Checkout created is removed.
func Checkout(ctx context.Context, m *Mirror, sha, dir string, opts CheckoutOptions) error {
	if err := checkSHA(sha); err != nil {
		return fmt.Errorf("checkout: %w", err)
	}
	sha = strings.ToLower(sha)
	if opts.Depth < 0 {
		return fmt.Errorf("checkout: depth %d is negative: %w", opts.Depth, ErrInvalid)
	}
	for _, p := range opts.Sparse {
		if p == "" || strings.HasPrefix(p, "-") || strings.ContainsAny(p, "\n\r") {
			return fmt.Errorf("checkout: sparse pattern %q: want a path or pattern, not empty, not starting with -: %w", p, ErrInvalid)
		}
	}
	target := dir
	if opts.Path != "" {
		if !filepath.IsLocal(opts.Path) {
			return fmt.Errorf("checkout: path %q is not inside the workspace: %w", opts.Path, ErrInvalid)
		}
		target = filepath.Join(dir, opts.Path)
	}
	target, err := filepath.Abs(target)
	if err != nil {
		return fmt.Errorf("checkout: %w", err)
	}
	existed, err := emptyTarget(target)
	if err != nil {
		return fmt.Errorf("checkout %s into %s: %w", sha, target, err)
	}
	if err := m.EnsureCommit(ctx, sha); err != nil {
		return fmt.Errorf("checkout %s: %w", sha, err)
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return fmt.Errorf("checkout %s: %w", sha, err)
	}
	if err := checkout(ctx, m, sha, target, opts); err != nil {
		// Leave the target as it was found: gone, or empty.
		if existed {
			clearDir(target)
		} else {
			_ = os.RemoveAll(target)
		}
		return fmt.Errorf("checkout %s into %s: %w", sha, target, err)
	}
	return nil
}

// emptyTarget checks that target is missing or an empty directory, and says which.
func emptyTarget(target string) (existed bool, err error) {
	f, err := os.Open(target)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return true, err
	}
	if !st.IsDir() {
		return true, fmt.Errorf("%s is a file: %w", target, ErrNotEmpty)
	}
	switch _, err := f.Readdirnames(1); {
	case errors.Is(err, io.EOF):
		return true, nil
	case err != nil:
		return true, err
	}
	return true, ErrNotEmpty
}

func clearDir(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

func checkout(ctx context.Context, m *Mirror, sha, target string, opts CheckoutOptions) error {
	g := m.git
	if opts.Depth > 0 {
		// A local clone ignores --depth; fetching the one commit over file:// honours it.
		steps := [][]string{
			{"init", "--quiet", target},
			{"fetch", "--quiet", "--no-progress", "--no-tags", "--no-write-fetch-head", "--depth", strconv.Itoa(opts.Depth),
				"file://" + filepath.ToSlash(m.dir), sha},
			{"remote", "add", "origin", m.url},
		}
		for i, args := range steps {
			d := target
			if i == 0 {
				d = ""
			}
			if _, err := g.run(ctx, d, args...); err != nil {
				return err
			}
		}
	} else {
		mode := "--shared"
		if opts.SelfContained {
			mode = "--local"
		}
		if _, err := g.run(ctx, "", "clone", mode, "--no-checkout", "--quiet", m.dir, target); err != nil {
			return err
		}
		if _, err := g.run(ctx, target, "remote", "set-url", "origin", m.url); err != nil {
			return err
		}
	}
	if len(opts.Sparse) > 0 {
		args := []string{"sparse-checkout", "set", "--cone"}
		if opts.SparseNoCone {
			args[2] = "--no-cone"
		}
		if _, err := g.run(ctx, target, append(args, opts.Sparse...)...); err != nil {
			return err
		}
	}
	if _, err := g.run(ctx, target, "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", sha); err != nil {
		return err
	}
	if opts.Submodules {
		args := []string{"submodule", "update", "--init", "--recursive", "--quiet"}
		if opts.Depth > 0 {
			args = append(args, "--depth", strconv.Itoa(opts.Depth))
		}
		if _, err := g.run(ctx, target, args...); err != nil {
			return fmt.Errorf("submodules: %w", err)
		}
	}
	if opts.LFS {
		if _, err := g.run(ctx, target, "lfs", "version"); err != nil {
			return fmt.Errorf("lfs: git-lfs is not installed or does not run: %w", err)
		}
		// The clean environment has no global config, so the LFS filters are set up in the
		// workspace itself (a job's own git commands then see content, not pointers); then
		// pull fetches from origin the content of this commit only.
		if _, err := g.run(ctx, target, "lfs", "install", "--local"); err != nil {
			return fmt.Errorf("lfs: %w", err)
		}
		if _, err := g.run(ctx, target, "lfs", "pull"); err != nil {
			return fmt.Errorf("lfs: %w", err)
		}
	}
	return nil
}
