package agent

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/actions/actionstest"
	"github.com/gantry-ci/gantry/internal/ghaexpr"
	"github.com/gantry-ci/gantry/internal/store"
)

// TestActionPre: the pres of the actions a job's steps use run at the job's start, before
// its first step, in the order of the steps: a run: step before them sees what they made.
// A pre runs whatever its step's if: says, only when its pre-if holds, reads its with:
// as the job's start has it (steps.* empty), and its state reaches its main and its post,
// which runs even when its main did not. An action a composite action of a repository
// uses has its pre run too; a local action has none, as on GitHub.
func TestActionPre(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is needed for JavaScript actions: install nodejs (scripts/deps.sh does)")
	}
	dir := t.TempDir()
	actionstest.Repo(t, dir, "acme", "prep", actionstest.Prep, "v1")
	actionstest.Repo(t, dir, "acme", "tools", actionstest.Wrap, "v1")
	b, r := actionsBundle(t, dir)
	_, run := b.submitActions(t, r, `on: push
jobs:
  t:
    runs-on: ubuntu-latest
    steps:
      - id: early
        name: before the actions
        run: |
          test "$(cat first)" = "made by the pre"
          test -f never-runs && test -f nested-w && test ! -e skipped
          echo "v=known later" >> "$GITHUB_OUTPUT"
      - uses: acme/prep@v1
        with: {marker: first, late: '${{ steps.early.outputs.v }}'}
      - uses: acme/prep@v1
        env: {SKIP_PRE: 'true'}
        with: {marker: skipped}
      - if: github.actor == 'someone-else'
        uses: acme/prep@v1
        with: {marker: never-runs}
      - uses: acme/tools/wrap@v1
        with: {marker: w}
      - name: make a local action with a pre
        run: |
          mkdir -p local
          printf 'runs:\n  using: node20\n  pre: pre.js\n  main: main.js\n' > local/action.yml
          echo "require('fs').writeFileSync('local-pre-ran', '')" > local/pre.js
          echo "console.log('local main ran')" > local/main.js
      - uses: ./local
      - run: test ! -e local-pre-ran && test ! -e skipped
`)
	id := uuidOf(t, run)
	b.wantSuccess(t, id)
	_, steps := b.jobByKey(t, id, "t")
	if steps[3].Status != store.StepSkipped {
		t.Errorf("the step with if: false is %s, want skipped", steps[3].Status)
	}
	log := b.jobLog(t, id, "t")
	wantLog(t, log,
		"step Pre Run acme/prep@v1\n",
		"pre of prep: first, late=[]",
		"main of prep: first, late=[known later], from_pre=first",
		"step Pre Run acme/prep@v1: skipped, pre-if: runner.os == 'Linux' && env.SKIP_PRE != 'true' was false",
		"main of prep: skipped, late=[], from_pre=-",
		"step Pre Run acme/tools/wrap@v1 (acme/prep@v1)",
		"main of prep: nested-w, late=[], from_pre=nested-w",
		"action ./local: its pre is not run",
		"local main ran",
	)
	if strings.Contains(log, "main of prep: never-runs") {
		t.Errorf("the main of a step whose if: is false ran:\n%s", log)
	}
	// The pres before the first step; the posts after the last, the last registered
	// first: a post is registered when its action's pre runs, else when its main does.
	order := []string{
		"pre of prep: first",
		"pre of prep: never-runs",
		"pre of prep: nested-w",
		"step before the actions",
		"step test ! -e local-pre-ran",
		"post of prep: from_pre=-, from_main=skipped",
		"post of prep: from_pre=nested-w, from_main=nested-w",
		"post of prep: from_pre=never-runs, from_main=-",
		"post of prep: from_pre=first, from_main=first",
	}
	at := -1
	for _, s := range order {
		i := strings.Index(log, s)
		if i < at {
			t.Errorf("%q is not after %q:\n%s", s, order[0], log)
		}
		at = max(at, i)
	}
}

// TestActionPreFails: a pre that fails fails the job with its exit code, before any step
// runs: the steps that run only while the job succeeds are skipped, a later pre whose
// pre-if holds after a failure still runs, an if: always() step runs, and the post of
// the action whose pre failed runs at the job's end (its post-if, which calls no status
// function, holds after a failure, as on GitHub).
func TestActionPreFails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	actionstest.Repo(t, dir, "acme", "prep", actionstest.Prep, "v1")
	b, r := actionsBundle(t, dir)
	_, run := b.submitActions(t, r, `on: push
jobs:
  t:
    runs-on: ubuntu-latest
    steps:
      - run: echo "the first step ran"
      - uses: acme/prep@v1
        with: {marker: m, fail-pre: 'true'}
      - uses: acme/prep@v1
        with: {marker: second}
      - if: always()
        run: test -f m && test -f second && echo "an always() step ran"
`)
	id := uuidOf(t, run)
	if r := b.waitRun(t, id); r.Status != store.RunFailed {
		t.Fatalf("run %s, want failed:\n%s", r.Status, b.jobLog(t, id, "t"))
	}
	job, steps := b.jobByKey(t, id, "t")
	log := b.jobLog(t, id, "t")
	if job.ExitCode == nil || *job.ExitCode != 5 {
		t.Errorf("job exit code %v, want the pre's 5:\n%s", job.ExitCode, log)
	}
	for i, want := range []store.StepStatus{store.StepSkipped, store.StepSkipped, store.StepSkipped, store.StepSuccess} {
		if steps[i].Status != want {
			t.Errorf("step %d is %s, want %s:\n%s", i, steps[i].Status, want, log)
		}
	}
	wantLog(t, log,
		"pre failing as asked",
		"step Pre Run acme/prep@v1 failed with exit code 5",
		"pre of prep: second",
		"an always() step ran",
		"post of prep: from_pre=m, from_main=-",
		"post of prep: from_pre=second, from_main=-",
	)
	if strings.Contains(log, "\nthe first step ran") || strings.Contains(log, "main of prep") {
		t.Errorf("a step ran after its job's pre failed:\n%s", log)
	}
}

// TestActionCondition: a pre-if or post-if is read as it is, with no success() && in
// front of it: after a failure, one that calls no status function still holds.
func TestActionCondition(t *testing.T) {
	t.Parallel()
	failed := &ghaexpr.Context{Values: map[string]any{"runner": map[string]any{"os": "Linux"}},
		Status: func(name string) bool { return statusHolds(name, "failed") }}
	for cond, want := range map[string]bool{
		"runner.os == 'Linux'":         true,
		"${{ runner.os == 'Linux' }}":  true,
		"runner.os == 'macOS'":         false,
		"success()":                    false,
		"${{ success() }}":             false,
		"failure() && runner.os != ''": true,
		"always()":                     true,
	} {
		got, err := actionCondition(cond, failed)
		if err != nil || got != want {
			t.Errorf("actionCondition(%q) after a failure = %v, %v; want %v", cond, got, err, want)
		}
	}
	if _, err := actionCondition("runner.os ==", failed); err == nil {
		t.Error("a condition that does not parse is not an error")
	}
}
