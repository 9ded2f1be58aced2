package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestArtifactsCommands: a real server keeps the diamond example's artifact in its
// default blob store, and `gantry artifacts list` and `get` read it back.
func TestArtifactsCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base, stop := startServer(t, "--db", "sqlite://"+filepath.Join(dir, "data", "gantry.db"))
	defer stop()
	workerCtx, stopWorker := context.WithCancel(t.Context())
	workerDone := make(chan int, 1)
	go func() {
		var out syncBuffer
		workerDone <- Run(workerCtx, []string{"worker", "--server", base, "--max-jobs", "2", "--work-dir", t.TempDir()}, strings.NewReader(""), &out, &out)
	}()
	defer func() { stopWorker(); <-workerDone }()

	run := waitRun(t, base, submitFile(t, base, "../../examples/diamond.yml"), func(r runDetails) bool { return runTerminal(r.Status) })
	if run.Status != "success" {
		t.Fatalf("run is %s, want success", run.Status)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "blobs", "signing.key")); err != nil {
		t.Errorf("the default blob store is not next to the database: %v", err)
	}

	list := runCLI(t, invocation{args: []string{"artifacts", "list", run.ID, "--server", base}})
	if list.code != exitOK || !strings.Contains(list.stdout, "out/app") || !strings.Contains(list.stdout, "stored") ||
		!strings.Contains(list.stdout, "16 B") || !strings.Contains(list.stdout, "build") {
		t.Fatalf("artifacts list: exit %d\n%s%s", list.code, list.stdout, list.stderr)
	}
	js := runCLI(t, invocation{args: []string{"artifacts", "list", run.ID, "--server", base, "--json"}})
	var as []artifactView
	if err := json.Unmarshal([]byte(js.stdout), &as); err != nil || len(as) != 1 {
		t.Fatalf("artifacts list --json: %v\n%s", err, js.stdout)
	}
	out := filepath.Join(t.TempDir(), "app")
	get := runCLI(t, invocation{args: []string{"artifacts", "get", as[0].ID, "-o", out, "--server", base}})
	if got, err := os.ReadFile(out); get.code != exitOK || err != nil || string(got) != "binary for demo\n" {
		t.Fatalf("artifacts get: exit %d, file %q %v\n%s", get.code, got, err, get.stderr)
	}
	stdout := runCLI(t, invocation{args: []string{"artifacts", "get", as[0].ID, "-o", "-", "--server", base}})
	if stdout.stdout != "binary for demo\n" {
		t.Errorf("artifacts get -o - printed %q", stdout.stdout)
	}

	missing := runCLI(t, invocation{args: []string{"artifacts", "get", "0190f3c2-0000-7000-8000-000000000000", "-o", out, "--server", base}})
	if missing.code != exitFailure || !strings.Contains(missing.stderr, "not_found") {
		t.Errorf("get of an unknown artifact: exit %d, stderr %q", missing.code, missing.stderr)
	}
	for _, args := range [][]string{
		{"artifacts", "get", "not-a-uuid"},
		{"artifacts", "list"},
		{"artifacts", "list", run.ID, "--server", "ftp://x"},
	} {
		if r := runCLI(t, invocation{args: args}); r.code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, r.code, exitUsage)
		}
	}
}

// TestArtifactsGetByName: gantry artifacts get RUN NAME downloads the files of the
// artifacts that NAME names (the job's artifacts: name, or a directory of paths), each
// at its path under -o DIR with its mode; a name nothing has fails, listing what there is.
func TestArtifactsGetByName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base, stop := startServer(t, "--db", "sqlite://"+filepath.Join(dir, "data", "gantry.db"))
	defer stop()
	workerCtx, stopWorker := context.WithCancel(t.Context())
	workerDone := make(chan int, 1)
	go func() {
		var out syncBuffer
		workerDone <- Run(workerCtx, []string{"worker", "--server", base, "--work-dir", t.TempDir()}, strings.NewReader(""), &out, &out)
	}()
	defer func() { stopWorker(); <-workerDone }()
	file := filepath.Join(t.TempDir(), "named.yml")
	if err := os.WriteFile(file, []byte(`
jobs:
  build:
    steps:
      - run: mkdir -p bin/sub && printf 'run me\n' > bin/app && chmod 755 bin/app && printf 'doc\n' > bin/sub/readme && chmod 640 bin/sub/readme
    artifacts: {name: binaries, paths: ["bin/**"]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	run := waitRun(t, base, submitFile(t, base, file), func(r runDetails) bool { return runTerminal(r.Status) })
	if run.Status != "success" {
		t.Fatalf("run is %s, want success", run.Status)
	}
	for _, name := range []string{"binaries", "bin", "bin/sub"} {
		out := t.TempDir()
		got := runCLI(t, invocation{args: []string{"artifacts", "get", run.ID, name, "-o", out, "--server", base}})
		if got.code != exitOK {
			t.Fatalf("artifacts get %s: exit %d\n%s", name, got.code, got.stderr)
		}
		want := map[string]os.FileMode{"bin/app": 0o755, "bin/sub/readme": 0o640}
		if name == "bin/sub" {
			delete(want, "bin/app")
			if _, err := os.Stat(filepath.Join(out, "bin/app")); err == nil {
				t.Errorf("get bin/sub wrote bin/app too")
			}
		}
		for p, mode := range want {
			fi, err := os.Stat(filepath.Join(out, p))
			if err != nil {
				t.Errorf("get %s: %v", name, err)
				continue
			}
			if fi.Mode().Perm() != mode {
				t.Errorf("get %s: %s has mode %v, want %v", name, p, fi.Mode().Perm(), mode)
			}
		}
	}
	none := runCLI(t, invocation{args: []string{"artifacts", "get", run.ID, "nothing", "-o", t.TempDir(), "--server", base}})
	if none.code != exitFailure || !strings.Contains(none.stderr, "has no artifact named nothing (artifacts: bin/app, bin/sub/readme)") {
		t.Errorf("get of a name nothing has: exit %d, stderr %q", none.code, none.stderr)
	}
}
