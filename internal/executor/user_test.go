package executor_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/executor"
)

// TestStepUser runs a step as nobody with each executor: it has nobody's uid, gid and
// groups (none of root's), and can write the workspace it was given.
func TestStepUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("running steps as another user needs root: run the tests as root")
	}
	u, err := executor.LookupUser("nobody")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := executor.LookupUser("gantry-no-such-user"); err == nil {
		t.Error("LookupUser of a user that does not exist succeeded")
	}
	if byID, err := executor.LookupUser(strconv.Itoa(int(u.UID))); err != nil || byID.Name != u.Name {
		t.Errorf("LookupUser(%d) = %+v, %v; want %s", u.UID, byID, err, u.Name)
	}
	type preparer interface {
		executor.Executor
		PrepareWorkspace(string) error
	}
	for _, tc := range []struct {
		name string
		ex   preparer
	}{
		{"shell", executor.Shell{User: u}},
		{"sandbox", executor.Sandbox{User: u}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.name == "sandbox" {
				needBwrap(t)
			}
			root := t.TempDir()
			if err := u.CanReach(root); err == nil {
				t.Errorf("CanReach(%s) = nil, want an error: it is root's, mode 0700", root)
			}
			for _, d := range []string{filepath.Dir(root), root} {
				if err := os.Chmod(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			ws := filepath.Join(root, "ws")
			if err := os.MkdirAll(filepath.Join(ws, "input"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := tc.ex.PrepareWorkspace(ws); err != nil {
				t.Fatal(err)
			}
			if err := u.CanReach(filepath.Join(ws, "input")); err != nil {
				t.Errorf("CanReach after PrepareWorkspace: %v", err)
			}
			var out bytes.Buffer
			res, err := tc.ex.Run(t.Context(), executor.Step{Dir: ws, Env: []string{"PATH=" + os.Getenv("PATH")}, Stdout: &out, Stderr: &out,
				Script: "id -u; id -g; id -G; echo x > input/f && echo wrote"})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("Run: %+v, %v, output %q", res, err, out.String())
			}
			want := strings.Join([]string{strconv.Itoa(int(u.UID)), strconv.Itoa(int(u.GID)), groups(u), "wrote"}, "\n") + "\n"
			if out.String() != want {
				t.Errorf("output %q, want %q", out.String(), want)
			}
		})
	}
}

func groups(u *executor.User) string {
	var s []string
	for _, g := range u.Groups {
		s = append(s, strconv.Itoa(int(g)))
	}
	return strings.Join(s, " ")
}
