package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRunShowsClaimedName: gantry run of a workflow whose job's name: reads what the job
// it needs left prefixes that job's log lines with the name as it came out, and its
// environment's url is what its step printed.
func TestRunShowsClaimedName(t *testing.T) {
	t.Parallel()
	repo := writeRepo(t, map[string]string{".github/workflows/release.yml": `on: push
jobs:
  prepare:
    runs-on: ubuntu-latest
    outputs:
      version: ${{ steps.v.outputs.version }}
    steps:
      - id: v
        run: echo "version=1.2.3" >> "$GITHUB_OUTPUT"
  publish:
    needs: prepare
    name: Publish ${{ needs.prepare.outputs.version }}
    runs-on: ubuntu-latest
    environment:
      name: pages
      url: ${{ steps.deployment.outputs.page_url }}
    steps:
      - id: deployment
        run: |
          echo "publishing now"
          echo "page_url=https://example.org/v1.2.3/" >> "$GITHUB_OUTPUT"
`})
	got := runCLI(t, invocation{args: []string{"run", "--no-checkout", "--mirrors", t.TempDir(), filepath.Join(repo, ".github/workflows/release.yml")}})
	if got.code != exitOK {
		t.Fatalf("gantry run: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	var line string
	for l := range strings.SplitSeq(got.stdout, "\n") {
		if strings.HasSuffix(l, "publishing now") {
			line = l
		}
	}
	if !strings.HasPrefix(line, "Publish 1.2.3") {
		t.Errorf("publish's log line is %q, want it under its name as evaluated:\n%s", line, got.stdout)
	}
}

// TestCalledJobNameFromNeeds: a called workflow's job whose name: reads an input the
// caller fills from what a job it needs left is named when it is claimed, as GitHub
// names it when it starts: a project's run, dispatched to a real coordinator and its
// workers, shows the job under its evaluated name in the API and in its log lines.
func TestCalledJobNameFromNeeds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base, _ := startUp(t, filepath.Join(dir, "data"))
	srv := []string{"--server", base}
	work := writeRepo(t, map[string]string{
		".github/workflows/ci.yml": `on: workflow_dispatch
jobs:
  pick:
    runs-on: ubuntu-latest
    outputs:
      who: ${{ steps.p.outputs.who }}
    steps:
      - id: p
        run: echo "who=alice" >> "$GITHUB_OUTPUT"
  call:
    name: Greet
    needs: [pick]
    uses: ./.github/workflows/called.yml
    with:
      who: ${{ needs.pick.outputs.who }}
`,
		".github/workflows/called.yml": `on:
  workflow_call:
    inputs:
      who: {type: string, required: true}
jobs:
  build:
    name: build ${{ inputs.who }}
    runs-on: ubuntu-latest
    steps:
      - run: echo "hello from the called job"
`})
	bare := filepath.Join(dir, "app.git")
	env := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+t.TempDir(),
		"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@gantry.invalid", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@gantry.invalid")
	for _, args := range [][]string{{"init", "--quiet", "--bare", "-b", "main", bare}, {"-C", work, "init", "--quiet", "-b", "main"},
		{"-C", work, "add", "-A"}, {"-C", work, "commit", "--quiet", "-m", "x"}, {"-C", work, "push", "--quiet", bare, "HEAD:refs/heads/main"}} {
		cmd := exec.Command("git", args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if got := runCLI(t, invocation{args: append([]string{"project", "create", "app", "--repo", "file://" + bare, "--provider", "generic",
		"--pipeline", ".github/workflows/ci.yml"}, srv...)}); got.code != exitOK {
		t.Fatalf("project create: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	got := runCLI(t, invocation{args: append([]string{"dispatch", "app", "--follow"}, srv...)})
	if got.code != exitOK {
		t.Fatalf("dispatch --follow: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	fields := strings.Fields(got.stdout)
	if len(fields) < 2 || fields[0] != "run" {
		t.Fatalf("dispatch printed no run:\n%s", got.stdout)
	}
	run := waitRun(t, base, fields[1], statusIs("success"))
	var names []string
	for _, j := range run.Jobs {
		names = append(names, j.Key+"="+j.DisplayName)
		if j.Key == "call-build" && j.DisplayName != "Greet / build alice" {
			t.Errorf("the API shows call-build as %q, want Greet / build alice", j.DisplayName)
		}
	}
	if !slices.Contains(names, "call-build=Greet / build alice") {
		t.Errorf("jobs %q, want call-build named Greet / build alice", names)
	}
	var line string
	for l := range strings.SplitSeq(got.stdout, "\n") {
		if strings.HasSuffix(l, "hello from the called job") {
			line = l
		}
	}
	if !strings.HasPrefix(line, "Greet / build alice") {
		t.Errorf("the called job's log line is %q, want it under its evaluated name:\n%s", line, got.stdout)
	}
}
