package cli

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPodFiles: gantry pod-files writes the step files of --dir as a tar stream on
// stdout and empties them; without --dir it is a usage error.
func TestPodFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, content := range map[string]string{"output": "v=1\n", "env": "A=b\n", "path": ""} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	r := runCLI(t, invocation{args: []string{"pod-files", "--dir", dir}})
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	got := map[string]string{}
	tr := tar.NewReader(strings.NewReader(r.stdout))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(b)
	}
	if len(got) != 3 || got["output"] != "v=1\n" || got["env"] != "A=b\n" || got["path"] != "" {
		t.Errorf("stream %q", got)
	}
	for _, name := range []string{"output", "env"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() != 0 {
			t.Errorf("%s not emptied: %v, %v", name, fi, err)
		}
	}
	if r := runCLI(t, invocation{args: []string{"pod-files"}}); r.code != exitUsage || !strings.Contains(r.stderr, "--dir is required") {
		t.Errorf("without --dir: exit %d, stderr %q", r.code, r.stderr)
	}
}
