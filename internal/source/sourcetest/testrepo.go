package sourcetest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// TB is the part of testing.TB a Repo uses, so this package does not bring the testing
// package into the binary `gantry bench` is part of.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	TempDir() string
}

// Repo is a bare repository on disk that a test pushes to from a work clone with the git
// binary, and that a project or mirror reaches over file://.
type Repo struct {
	t    TB
	Bare string   // the bare repository, default branch main
	Work string   // the work clone commits are made in
	Env  []string // what git runs with: Env of a home of the repository's own
}

// NewRepo makes an empty bare repository named app.git in a directory of the test's own,
// and an empty work clone; both are removed when the test ends.
func NewRepo(t TB) *Repo {
	t.Helper()
	home := t.TempDir()
	r := &Repo{t: t, Bare: filepath.Join(t.TempDir(), "app.git"), Work: filepath.Join(home, "work"), Env: Env(home)}
	r.Git("", "init", "--quiet", "--bare", "-b", "main", r.Bare)
	r.Git("", "init", "--quiet", "-b", "main", r.Work)
	return r
}

// URL is the bare repository's file:// URL.
func (r *Repo) URL() string { return "file://" + r.Bare }

// Git runs git in dir (the current directory when empty) and returns its trimmed output,
// failing the test with git's own error output when it fails.
func (r *Repo) Git(dir string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, r.Env
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(out.String())
}

// Commit writes files in the work clone (an empty value deletes one), commits everything,
// even nothing, force-pushes the commit to ref and returns its id.
func (r *Repo) Commit(ref string, files map[string]string) string {
	r.t.Helper()
	for name, content := range files {
		p := filepath.Join(r.Work, name)
		if content == "" {
			if err := os.Remove(p); err != nil {
				r.t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	r.Git(r.Work, "add", "-A")
	r.Git(r.Work, "commit", "--quiet", "--allow-empty", "-m", "change")
	sha := r.Git(r.Work, "rev-parse", "HEAD")
	r.Git(r.Work, "push", "--quiet", "--force", r.Bare, "HEAD:"+ref)
	return sha
}
