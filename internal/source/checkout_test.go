package source_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/source"
)

// readTree maps every file under dir, outside .git, to its content.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" { // a repository's, or a submodule's pointer file
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() || d.Type()&os.ModeSymlink != 0 {
			rel, _ := filepath.Rel(dir, p)
			if d.Type()&os.ModeSymlink != 0 {
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				files[filepath.ToSlash(rel)] = "-> " + target
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func assertFiles(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	got := readTree(t, dir)
	if len(got) != len(want) {
		t.Errorf("checkout holds %d files %v, want %d", len(got), got, len(want))
	}
	for name, content := range want {
		if got[name] != content {
			t.Errorf("%s = %q, want %q", name, got[name], content)
		}
	}
}

// assertDetached checks HEAD is detached at sha and origin is the real remote.
func assertDetached(t *testing.T, env []string, dir, sha, url string) {
	t.Helper()
	if head := gitCmd(t, env, dir, "rev-parse", "HEAD"); head != sha {
		t.Errorf("HEAD = %s, want %s", head, sha)
	}
	if ref := gitCmd(t, env, dir, "rev-parse", "--symbolic-full-name", "HEAD"); ref != "HEAD" {
		t.Errorf("HEAD is on %s, want detached", ref)
	}
	if origin := gitCmd(t, env, dir, "remote", "get-url", "origin"); origin != url {
		t.Errorf("origin = %s, want %s", origin, url)
	}
	if status := gitCmd(t, env, dir, "status", "--porcelain"); status != "" {
		t.Errorf("the checkout is not clean:\n%s", status)
	}
}

func TestCheckout(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	r := newRemote(t, t.TempDir(), "co")
	old := r.commit("one", map[string]string{"README": "v1\n", "src/main.go": "package main\n", "gone.txt": "g"})
	if err := os.Symlink("README", filepath.Join(r.work, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.work, "run.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, r.env, r.work, "add", "link", "run.sh")
	mid := r.commit("two", map[string]string{"README": "v2\n", "gone.txt": ""})
	r.commit("three", map[string]string{"README": "v3\n"})
	r.push("refs/heads/main", false)
	m := openMirror(t, t.TempDir(), r.fileURL(), source.Credentials{})
	want := map[string]string{"README": "v2\n", "src/main.go": "package main\n", "link": "-> README", "run.sh": "#!/bin/sh\n"}

	tests := []struct {
		name  string
		opts  source.CheckoutOptions
		check func(t *testing.T, repo string)
	}{
		{name: "shared", check: func(t *testing.T, repo string) {
			if n := gitCmd(t, r.env, repo, "rev-list", "--count", "HEAD"); n != "2" {
				t.Errorf("history holds %s commits, want 2", n)
			}
			// The older commit is there too: a job can diff against it.
			if got := gitCmd(t, r.env, repo, "show", old+":gone.txt"); got != "g" {
				t.Errorf("old content = %q", got)
			}
		}},
		{name: "self-contained", opts: source.CheckoutOptions{SelfContained: true}, check: func(t *testing.T, repo string) {
			if _, err := os.Stat(filepath.Join(repo, ".git", "objects", "info", "alternates")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a self-contained checkout borrows objects (alternates: %v)", err)
			}
			// Without alternates, git can only have read its own objects.
			gitCmd(t, r.env, repo, "fsck", "--no-progress", "--connectivity-only")
		}},
		{name: "shallow", opts: source.CheckoutOptions{Depth: 1}, check: func(t *testing.T, repo string) {
			if n := gitCmd(t, r.env, repo, "rev-list", "--count", "HEAD"); n != "1" {
				t.Errorf("depth 1 history holds %s commits", n)
			}
			if s := gitCmd(t, r.env, repo, "rev-parse", "--is-shallow-repository"); s != "true" {
				t.Errorf("depth 1 checkout is not shallow")
			}
		}},
		{name: "subdirectory", opts: source.CheckoutOptions{Path: "src/app"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			if err := source.Checkout(ctx, m, mid, ws, tc.opts); err != nil {
				t.Fatalf("Checkout: %v", err)
			}
			repo := filepath.Join(ws, tc.opts.Path)
			assertFiles(t, repo, want)
			st, err := os.Stat(filepath.Join(repo, "run.sh"))
			if err != nil || st.Mode().Perm()&0o100 == 0 {
				t.Errorf("run.sh lost its executable bit: %v %v", st, err)
			}
			assertDetached(t, r.env, repo, mid, r.fileURL())
			if tc.check != nil {
				tc.check(t, repo)
			}
		})
	}
}

// TestSparseCheckout: a cone of directories keeps them and the files at the top; patterns
// keep what they match; either way from a shared or a shallow clone. A pattern that
// git would read as an option is refused.
func TestSparseCheckout(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	r := newRemote(t, t.TempDir(), "sparse")
	sha := r.commit("one", map[string]string{"README": "r\n", "docs/a.md": "a", "src/main.go": "m", "src/deep/x.go": "x"})
	r.push("refs/heads/main", false)
	m := openMirror(t, t.TempDir(), r.fileURL(), source.Credentials{})
	for _, tc := range []struct {
		name string
		opts source.CheckoutOptions
		want map[string]string
	}{
		{"cone", source.CheckoutOptions{Sparse: []string{"src"}}, map[string]string{"README": "r\n", "src/main.go": "m", "src/deep/x.go": "x"}},
		{"cone shallow", source.CheckoutOptions{Sparse: []string{"docs"}, Depth: 1}, map[string]string{"README": "r\n", "docs/a.md": "a"}},
		{"patterns", source.CheckoutOptions{Sparse: []string{"/src/*.go"}, SparseNoCone: true}, map[string]string{"src/main.go": "m"}},
	} {
		ws := t.TempDir()
		if err := source.Checkout(ctx, m, sha, ws, tc.opts); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		assertFiles(t, ws, tc.want)
	}
	err := source.Checkout(ctx, m, sha, t.TempDir(), source.CheckoutOptions{Sparse: []string{"--stdin"}})
	if !errors.Is(err, source.ErrInvalid) {
		t.Errorf("a pattern that reads as an option: %v, want ErrInvalid", err)
	}
}

func TestCheckoutRefusals(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	r := newRemote(t, t.TempDir(), "ref")
	sha := r.commit("one", map[string]string{"a": "1"})
	r.push("refs/heads/main", false)
	m := openMirror(t, t.TempDir(), r.fileURL(), source.Credentials{})

	// A non-empty target is refused and left as it was.
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "artifact.bin"), []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := source.Checkout(ctx, m, sha, ws, source.CheckoutOptions{}); !errors.Is(err, source.ErrNotEmpty) {
		t.Fatalf("Checkout into a non-empty directory: err = %v, want ErrNotEmpty", err)
	}
	assertFiles(t, ws, map[string]string{"artifact.bin": "keep me"})
	if err := source.Checkout(ctx, m, sha, filepath.Join(ws, "artifact.bin"), source.CheckoutOptions{}); !errors.Is(err, source.ErrNotEmpty) {
		t.Fatalf("Checkout onto a file: err = %v, want ErrNotEmpty", err)
	}
	assertFiles(t, ws, map[string]string{"artifact.bin": "keep me"})
	// Beside it, in a subdirectory, works: artifacts from needs and the repository coexist.
	if err := source.Checkout(ctx, m, sha, ws, source.CheckoutOptions{Path: "repo"}); err != nil {
		t.Fatalf("Checkout into a subdirectory beside an artifact: %v", err)
	}
	assertFiles(t, filepath.Join(ws, "repo"), map[string]string{"a": "1"})

	// A commit the remote never had: a clear error, and nothing left behind.
	missing := strings.Repeat("0123456789", 4)
	target := filepath.Join(t.TempDir(), "ws")
	err := source.Checkout(ctx, m, missing, target, source.CheckoutOptions{})
	if !errors.Is(err, source.ErrCommitNotFound) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Checkout of a commit the remote lacks: err = %v, want ErrCommitNotFound naming it", err)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed checkout left %s behind (%v)", target, err)
	}

	for _, tc := range []struct {
		name string
		sha  string
		opts source.CheckoutOptions
	}{
		{"branch name", "main", source.CheckoutOptions{}},
		{"path outside", sha, source.CheckoutOptions{Path: "../escape"}},
		{"absolute path", sha, source.CheckoutOptions{Path: "/tmp/x"}},
		{"negative depth", sha, source.CheckoutOptions{Depth: -1}},
	} {
		if err := source.Checkout(ctx, m, tc.sha, t.TempDir(), tc.opts); !errors.Is(err, source.ErrInvalid) {
			t.Errorf("Checkout with %s: err = %v, want ErrInvalid", tc.name, err)
		}
	}
}

func TestCheckoutFetchesAndSubmodulesOverHTTP(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	root := t.TempDir()
	const token = "tok_submodule_secret"
	srv := newGitServer(t, root, "x-access-token", token)

	lib := newRemote(t, root, "lib")
	libSHA := lib.commit("lib", map[string]string{"lib.go": "package lib\n"})
	lib.push("refs/heads/main", false)

	app := newRemote(t, root, "app")
	app.commit("app", map[string]string{"main.go": "package main\n"})
	// A relative URL resolves against origin, the real remote, on the same authenticated host.
	gitCmd(t, app.env, app.work, "-c", "protocol.file.allow=always", "submodule", "add", "--quiet", lib.fileURL(), "third_party/lib")
	gitCmd(t, app.env, app.work, "config", "-f", ".gitmodules", "submodule.third_party/lib.url", "../lib.git")
	gitCmd(t, app.env, app.work, "add", ".gitmodules")
	sha := app.commit("add lib", nil)
	app.push("refs/heads/main", false)

	// The mirror is cold: Checkout fetches the commit first.
	m := openMirror(t, t.TempDir(), srv.url("app"), source.Credentials{Token: token, AllowPlainHTTP: true})
	ws := t.TempDir()
	if err := source.Checkout(ctx, m, sha, ws, source.CheckoutOptions{Submodules: true}); err != nil {
		t.Fatalf("Checkout with submodules: %v", err)
	}
	assertFiles(t, ws, map[string]string{"main.go": "package main\n", ".gitmodules": readTree(t, app.work)[".gitmodules"], "third_party/lib/lib.go": "package lib\n"})
	if got := gitCmd(t, app.env, filepath.Join(ws, "third_party/lib"), "rev-parse", "HEAD"); got != libSHA {
		t.Fatalf("submodule at %s, want %s", got, libSHA)
	}
	assertDetached(t, app.env, ws, sha, srv.url("app"))
	// The token is in no file of the workspace.
	err := filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), token) {
			t.Errorf("%s holds the token", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Without the submodule option the submodule stays an empty directory.
	ws2 := t.TempDir()
	if err := source.Checkout(ctx, m, sha, ws2, source.CheckoutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ws2, "third_party/lib/lib.go")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("submodule checked out without being asked (%v)", err)
	}
}

func TestCheckoutLFS(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	r := newRemote(t, t.TempDir(), "lfs")
	gitCmd(t, r.env, r.work, "lfs", "install", "--local")
	gitCmd(t, r.env, r.work, "lfs", "track", "*.bin")
	content := strings.Repeat("large binary content\n", 500)
	gitCmd(t, r.env, r.work, "add", ".gitattributes")
	sha := r.commit("lfs", map[string]string{"model.bin": content, "small.txt": "s"})
	// git-lfs pushes the content beside the repository for a file:// remote.
	gitCmd(t, r.env, r.work, "push", "--quiet", r.fileURL(), "HEAD:refs/heads/main")
	m := openMirror(t, t.TempDir(), r.fileURL(), source.Credentials{})

	ws := t.TempDir()
	if err := source.Checkout(ctx, m, sha, ws, source.CheckoutOptions{LFS: true}); err != nil {
		t.Fatalf("Checkout with LFS: %v", err)
	}
	if got := readTree(t, ws)["model.bin"]; got != content {
		t.Fatalf("model.bin holds %.80q, want the LFS content", got)
	}
	assertDetached(t, r.env, ws, sha, r.fileURL())

	// Without the option the pointer file stays, and nothing is downloaded.
	ws2 := t.TempDir()
	if err := source.Checkout(ctx, m, sha, ws2, source.CheckoutOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := readTree(t, ws2)["model.bin"]; !strings.HasPrefix(got, "version https://git-lfs.github.com/spec/v1") {
		t.Fatalf("without LFS, model.bin = %.80q, want the pointer", got)
	}
}
