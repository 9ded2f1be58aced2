package source

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// MaxExportBytes bounds the tree Export writes: an action's code with its bundled
// dependencies is a few megabytes; this is far beyond any.
const MaxExportBytes = 1 << 30

// Export writes the files of directory dir ("" for the root) of commit sha into target,
// which must not exist yet or be empty: the plain files, with their executable bits, and
// symbolic links that stay inside target; no .git. It fetches the commit first when the
// mirror lacks it. Export writes into a temporary directory beside target and renames it
// into place, so a reader never sees half a tree; when target already holds a tree (an
// export that raced this one) that one is kept.
func (m *Mirror) Export(ctx context.Context, sha, dir, target string) error {
	if err := checkSHA(sha); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	tree := strings.ToLower(sha)
	if dir != "" {
		p, err := cleanPath(dir)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		tree += ":" + p
	}
	if err := m.EnsureCommit(ctx, sha); err != nil {
		return fmt.Errorf("export %s: %w", tree, err)
	}
	var out bytes.Buffer
	if _, err := m.git.runWith(ctx, runOpts{dir: m.dir, stdout: &out, limit: MaxExportBytes}, "archive", "--format=tar", tree); err != nil {
		if exitCode(err) > 0 && dir != "" {
			return fmt.Errorf("export %s: the commit has no directory %s: %w", sha, dir, ErrNotFound)
		}
		return fmt.Errorf("export %s: %w", tree, err)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(target), ".export-")
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := untar(&out, tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("export %s: %w", tree, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("export: %w", err)
	}
	if err := os.Rename(tmp, target); err != nil {
		_ = os.RemoveAll(tmp)
		if _, serr := os.Stat(filepath.Join(target)); serr == nil {
			return nil
		}
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

// untar writes what git archive made into dir.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(h.Name)
		if name == "." || h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("archive entry %q leaves the tree", h.Name)
		}
		dst := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			mode := os.FileMode(0o644)
			if h.Mode&0o111 != 0 {
				mode = 0o755
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			// A link is kept only when it points inside the tree.
			target := h.Linkname
			if path.IsAbs(target) {
				continue
			}
			if resolved := path.Join(path.Dir(name), target); resolved == ".." || strings.HasPrefix(resolved, "../") {
				continue
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(target, dst); err != nil {
				return err
			}
		}
		// Submodules (commit entries) and anything else are left out.
	}
}
