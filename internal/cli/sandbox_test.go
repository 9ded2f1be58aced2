package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/executor"
)

// TestRunSandboxUnprivileged: `gantry run --executor sandbox` as root runs its steps as
// an unprivileged user (executor.DefaultSandboxUser) that can write its workspace, pass
// what it made to the next job, and cannot read a root-only file of /etc (a secrets key
// under /etc/gantry, the engine's /etc/docker/key.json), which the sandbox's read-only
// /etc still shows.
func TestRunSandboxUnprivileged(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("a root worker's sandbox needs root: run the tests as root")
	}
	nobody, err := executor.LookupUser(executor.DefaultSandboxUser)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("/etc", "gantry-run-sandbox-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "secrets.key")
	if err := os.WriteFile(key, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "pipeline.yml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(`name: sandboxed
jobs:
  make:
    steps:
      - run: |
          echo "uid=$(id -u)"
          cat %[1]s 2>/dev/null || echo "key: denied"
          echo made > out.txt
    artifacts: {paths: [out.txt]}
  use:
    needs: [make]
    steps: [{run: 'echo "got $(cat out.txt)"'}]
`, key)), 0o644); err != nil {
		t.Fatal(err)
	}
	got := runCLI(t, invocation{args: []string{"run", "--no-checkout", "--executor", "sandbox", "--docker", "off", file}})
	out := got.stdout + got.stderr
	for _, want := range []string{fmt.Sprintf("uid=%d", nobody.UID), "key: denied", "got made"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the run's output", want)
		}
	}
	if got.code != exitOK || strings.Contains(out, "s3cret") {
		t.Errorf("gantry run: exit %d\n%s", got.code, out)
	}
}
