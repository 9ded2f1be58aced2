package docker_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/executor"
)

// TestHomeCopy: files copied into a job's home land in the HOME its steps get, owned by
// its user, and come back out under the name of the path asked for; a path that is not
// there is fs.ErrNotExist.
func TestHomeCopy(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	for _, c := range []struct{ user, home, owner string }{{"", "/root", "0"}, {"gantry", "/home/gantry", "1000"}, {"2000:2000", "/tmp/home", "2000"}} {
		t.Run("user "+c.user, func(t *testing.T) {
			t.Parallel()
			j := job(b, t)
			j.User = c.user
			s := begin(t, d, j)
			hc, ok := s.(executor.HomeCopier)
			if !ok {
				t.Fatal("the session is no HomeCopier")
			}
			var in bytes.Buffer
			tw := tar.NewWriter(&in)
			_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: ".cache/", Mode: 0o755})
			_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: ".cache/tool/", Mode: 0o755})
			_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: ".cache/tool/state", Mode: 0o644, Size: 3})
			_, _ = tw.Write([]byte("in\n"))
			_ = tw.Close()
			if err := hc.CopyToHome(t.Context(), &in); err != nil {
				t.Fatalf("CopyToHome: %v", err)
			}
			res, out := run(t, s, executor.Step{Script: `echo "$HOME $(cat ~/.cache/tool/state) $(stat -c %u ~/.cache/tool/state)"; echo out > ~/.cache/tool/state`})
			if want := c.home + " in " + c.owner; res.ExitCode != 0 || out != want {
				t.Errorf("the step: exit %d, %q; want %q", res.ExitCode, out, want)
			}
			rc, err := hc.CopyFromHome(t.Context(), ".cache/tool")
			if err != nil {
				t.Fatalf("CopyFromHome: %v", err)
			}
			defer rc.Close()
			tr := tar.NewReader(rc)
			var names []string
			state := ""
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, strings.TrimSuffix(h.Name, "/"))
				if h.Name == "tool/state" {
					b, _ := io.ReadAll(tr)
					state = string(b)
				}
			}
			if strings.Join(names, " ") != "tool tool/state" || state != "out\n" {
				t.Errorf("copied out: %v, state %q; want tool and tool/state, out", names, state)
			}
			if _, err := hc.CopyFromHome(t.Context(), ".cache/none"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("CopyFromHome of a missing path: %v, want fs.ErrNotExist", err)
			}
		})
	}
}
