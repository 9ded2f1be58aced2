package sourcetest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestBigRepo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	extra := map[string]string{".gantry.yml": "name: x\n", "ci/b.txt": "b\n"}
	sha, err := BigRepo(t.Context(), filepath.Join(dir, "a.git"), 5, 3, extra)
	if err != nil {
		t.Fatal(err)
	}
	gitOut := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Env = Env(dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	bare := filepath.Join(dir, "a.git")
	if got := gitOut("-C", bare, "rev-list", "--count", sha); got != "5" {
		t.Errorf("%s commits, want 5", got)
	}
	files := strings.Split(gitOut("-C", bare, "ls-tree", "-r", "--name-only", sha), "\n")
	if len(files) != 5*3+1+2 {
		t.Errorf("%d files at the head, want 18 (15, README and 2 extra):\n%s", len(files), strings.Join(files, "\n"))
	}
	if got := gitOut("-C", bare, "show", sha+":.gantry.yml"); got != "name: x" {
		t.Errorf(".gantry.yml at the head is %q", got)
	}
	if got := gitOut("-C", bare, "show", sha+":README"); got != "changed in 4" {
		t.Errorf("README at the head is %q", got)
	}
	// The same sizes make the same commits, so numbers stay comparable across runs.
	again, err := BigRepo(t.Context(), filepath.Join(dir, "b.git"), 5, 3, extra)
	if err != nil || again != sha {
		t.Errorf("a second build: %s, %v; want %s", again, err, sha)
	}
	if _, err := BigRepo(t.Context(), bare, 5, 3, nil); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("building over an existing repository: %v", err)
	}
	if _, err := BigRepo(t.Context(), filepath.Join(dir, "c.git"), 0, 3, nil); err == nil {
		t.Error("a repository of no commits was made")
	}
}
