package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// dispatchable is a pipeline started by hand: its one job prints an input and the commit.
const dispatchable = `name: greet
on:
  dispatch:
    inputs:
      greeting: { type: string, required: true }
      loud: { type: boolean, default: false }
jobs:
  hello:
    steps:
      - run: echo "said $GANTRY_INPUT_GREETING loud=$GANTRY_INPUT_LOUD at $GANTRY_SHA by $GANTRY_EVENT"
`

// TestDispatchCommands: gantry dispatch of a repository project's file and of a
// registered workflow, against a real coordinator with workers, following the runs to
// their end; bad inputs are listed one by one; gantry workflow manages the workflow.
func TestDispatchCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base, _ := startUp(t, filepath.Join(dir, "data"))
	srv := []string{"--server", base}

	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@gantry.invalid", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@gantry.invalid"}
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	bare, work := filepath.Join(dir, "app.git"), filepath.Join(home, "work")
	git("", "init", "--quiet", "--bare", "-b", "main", bare)
	git("", "init", "--quiet", "-b", "main", work)
	if err := os.WriteFile(filepath.Join(work, ".gantry.yml"), []byte(dispatchable), 0o644); err != nil {
		t.Fatal(err)
	}
	git(work, "add", "-A")
	git(work, "commit", "--quiet", "-m", "x")
	sha := git(work, "rev-parse", "HEAD")
	git(work, "push", "--quiet", bare, "HEAD:refs/heads/main")
	if got := runCLI(t, invocation{args: append([]string{"project", "create", "app", "--repo", "file://" + bare, "--provider", "generic"}, srv...)}); got.code != exitOK {
		t.Fatalf("project create: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}

	got := runCLI(t, invocation{args: append([]string{"dispatch", "app", "--input", "greeting=hi", "--input", "loud=TRUE", "--follow"}, srv...)})
	if got.code != exitOK || !strings.Contains(got.stdout, "said hi loud=true at "+sha+" by dispatch") {
		t.Fatalf("dispatch --follow: exit %d, want 0 and the job's line\n%s%s", got.code, got.stdout, got.stderr)
	}

	got = runCLI(t, invocation{args: append([]string{"dispatch", "app", "--input", "greting=hi", "--input", "loud=maybe"}, srv...)})
	if got.code != exitFailure || !strings.Contains(got.stderr, "invalid_inputs") ||
		!strings.Contains(got.stderr, "inputs.greeting: is required") || !strings.Contains(got.stderr, "inputs.loud: expected true or false") ||
		!strings.Contains(got.stderr, "inputs.greting: this pipeline declares no such input") {
		t.Errorf("dispatch with bad inputs: exit %d, want 1 and each bad input\n%s", got.code, got.stderr)
	}
	// One bad input is said once: the answer's message is that detail.
	got = runCLI(t, invocation{args: append([]string{"dispatch", "app", "--input", "greeting=hi", "--input", "loud=maybe"}, srv...)})
	if got.code != exitFailure || strings.Count(got.stderr, "inputs.loud: expected true or false") != 1 {
		t.Errorf("dispatch with one bad input: exit %d, want 1 and the input said once\n%s", got.code, got.stderr)
	}
	if got := runCLI(t, invocation{args: append([]string{"dispatch", "app", "--ref", "nope"}, srv...)}); got.code != exitFailure ||
		!strings.Contains(got.stderr, "ref_not_found") {
		t.Errorf("dispatch of an unknown ref: exit %d\n%s", got.code, got.stderr)
	}
	if got := runCLI(t, invocation{args: append([]string{"dispatch", "app", "--input", "novalue"}, srv...)}); got.code != exitUsage {
		t.Errorf("dispatch --input without =: exit %d, want usage", got.code)
	}

	// A registered workflow of the project: it runs at the default branch, and records
	// its version.
	file := filepath.Join(dir, "greet.yml")
	if err := os.WriteFile(file, []byte(strings.Replace(dispatchable, "said", "workflow said", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := runCLI(t, invocation{args: append([]string{"workflow", "create", "app", "greet", file}, srv...)}); got.code != exitOK ||
		!strings.Contains(got.stdout, "workflow greet of project app created: version 1") || !strings.Contains(got.stdout, "input:     greeting (string, required)") {
		t.Fatalf("workflow create: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	got = runCLI(t, invocation{args: append([]string{"dispatch", "app", "--workflow", "greet", "--input", "greeting=yo", "--follow"}, srv...)})
	if got.code != exitOK || !strings.Contains(got.stdout, "workflow said yo loud=false at "+sha) {
		t.Fatalf("dispatch --workflow --follow: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	list := runCLI(t, invocation{args: append([]string{"workflow", "list", "--project", "app"}, srv...)})
	if rows := strings.Split(strings.TrimSpace(list.stdout), "\n"); list.code != exitOK || len(rows) != 2 ||
		!strings.HasPrefix(strings.Join(strings.Fields(rows[1]), " "), "app greet 1 enabled 0 ") {
		t.Errorf("workflow list: exit %d\n%s%s", list.code, list.stdout, list.stderr)
	}
	if got := runCLI(t, invocation{args: append([]string{"workflow", "update", "app", "greet", "--disable"}, srv...)}); got.code != exitOK ||
		!strings.Contains(got.stdout, "state:     disabled") {
		t.Errorf("workflow update --disable: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	if got := runCLI(t, invocation{args: append([]string{"dispatch", "app", "--workflow", "greet", "--input", "greeting=yo"}, srv...)}); got.code != exitFailure ||
		!strings.Contains(got.stderr, "is disabled") {
		t.Errorf("dispatch of a disabled workflow: exit %d\n%s", got.code, got.stderr)
	}
	if got := runCLI(t, invocation{args: append([]string{"dispatch", "app", "--workflow", "nope"}, srv...)}); got.code != exitFailure ||
		!strings.Contains(got.stderr, `no workflow named "nope" (it has greet)`) {
		t.Errorf("dispatch of an unknown workflow: exit %d\n%s", got.code, got.stderr)
	}
	if got := runCLI(t, invocation{args: append([]string{"workflow", "delete", "app", "greet"}, srv...)}); got.code != exitOK {
		t.Errorf("workflow delete: exit %d\n%s", got.code, got.stderr)
	}
}
