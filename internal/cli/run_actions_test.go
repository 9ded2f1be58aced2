package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/actions/actionstest"
)

// TestRunActions: gantry run resolves the actions a workflow uses in --actions-source,
// keeps their mirrors in --mirrors between runs, and runs them; an action that cannot
// be resolved stops the run before it starts, naming it and the source.
func TestRunActions(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	actionstest.Repo(t, src, "acme", "greet", actionstest.Greet, "v1")
	actionstest.Repo(t, src, "acme", "tools", actionstest.Shout, "v1")
	dir := t.TempDir()
	wf := filepath.Join(dir, "ci.yml")
	if err := os.WriteFile(wf, []byte(`on: push
jobs:
  greet:
    runs-on: ubuntu-latest
    steps:
      - id: s
        uses: acme/tools/shout@v1
        with:
          text: local run
      - run: echo "got ${{ steps.s.outputs.loud }}"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	mirrors := filepath.Join(t.TempDir(), "mirrors")
	args := []string{"run", "--no-checkout", "--actions-source", src, "--mirrors", mirrors, wf}
	got := runCLI(t, invocation{args: args})
	if got.code != exitOK {
		t.Fatalf("gantry run: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	for _, want := range []string{"got HELLO, LOCAL RUN FROM ", "post of greet: greeted local run"} {
		if !strings.Contains(got.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, got.stdout)
		}
	}
	if entries, err := os.ReadDir(mirrors); err != nil || len(entries) == 0 {
		t.Errorf("--mirrors %s holds nothing after the run (%v): the actions' mirrors are not kept", mirrors, err)
	}

	bad := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(bad, []byte("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: acme/nothing@v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got = runCLI(t, invocation{args: []string{"run", "--no-checkout", "--actions-source", src, "--mirrors", mirrors, bad}})
	if got.code == exitOK || !strings.Contains(got.stderr, "acme/nothing@v1 could not be resolved from file://"+src) {
		t.Errorf("gantry run of an unknown action: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	got = runCLI(t, invocation{args: []string{"run", "--actions-source", "ftp://x/{owner}/{repo}", bad}})
	if got.code != exitUsage || !strings.Contains(got.stderr, "--actions-source") {
		t.Errorf("gantry run --actions-source ftp://...: exit %d\n%s", got.code, got.stderr)
	}
}

// TestRunWorkflowVars: --var NAME=VALUE is what a workflow reads as vars.NAME, in a
// step's text and in an if:, and a variable nobody gave reads as "", as on GitHub.
func TestRunWorkflowVars(t *testing.T) {
	t.Parallel()
	wf := filepath.Join(t.TempDir(), "vars.yml")
	if err := os.WriteFile(wf, []byte(`on: push
jobs:
  deploy:
    if: vars.DEPLOY == 'yes'
    runs-on: ubuntu-latest
    steps:
      - run: echo "region ${{ vars.REGION || 'none' }} missing [${{ vars.MISSING }}]"
      - if: vars.REGION == 'eu-west-1'
        run: echo "in europe"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	got := runCLI(t, invocation{args: []string{"run", "--no-checkout", "--var", "DEPLOY=yes", "--var", "REGION=eu-west-1", wf}})
	if got.code != exitOK || !strings.Contains(got.stdout, "region eu-west-1 missing []") || !strings.Contains(got.stdout, "in europe") {
		t.Errorf("gantry run --var: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	got = runCLI(t, invocation{args: []string{"run", "--no-checkout", wf}})
	if got.code != exitOK || strings.Contains(got.stdout, "region") || !strings.Contains(got.stdout, "vars.DEPLOY == 'yes' was false") {
		t.Errorf("gantry run without --var: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
}
