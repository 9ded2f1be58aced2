package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/actions/actionstest"
)

// writeRepo writes files (path to content) under a new directory and returns it.
func writeRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestValidateReusableWorkflows: validate reads a called workflow of the file's own
// repository from the working tree and reports a mistake in it at its own file, line
// and source line; another repository's is read only with --resolve-actions, and
// without it only the calling job is checked, with a warning saying so.
func TestValidateReusableWorkflows(t *testing.T) {
	t.Parallel()
	repo := writeRepo(t, map[string]string{
		".github/workflows/ci.yml": "on: push\njobs:\n  build:\n    uses: ./.github/workflows/build.yml\n    with: {target: all}\n",
		".github/workflows/build.yml": "on:\n  workflow_call:\n    inputs: {target: {type: string, required: true}}\njobs:\n" +
			"  make:\n    runs-on: ubuntu-latest\n    steps:\n      - run: make ${{ inputs.target }}\n        shel: bash\n",
	})
	ci := filepath.Join(repo, ".github/workflows/ci.yml")
	got := runCLI(t, invocation{args: []string{"validate", ci}})
	called := filepath.Join(repo, ".github/workflows/build.yml")
	want := called + ":9:9: jobs.make.steps[0].shel: unknown key \"shel\" in a step; did you mean \"shell\"?\n        shel: bash\n        ^\n"
	if got.code != exitFailure || !strings.HasPrefix(got.stdout, want) {
		t.Fatalf("validate: exit %d\n%s%s\nwant it to start with\n%s", got.code, got.stdout, got.stderr, want)
	}
	got = runCLI(t, invocation{args: []string{"validate", "--json", ci}})
	var report validateReport
	if err := json.Unmarshal([]byte(got.stdout), &report); err != nil || len(report.Files) != 1 || len(report.Files[0].Errors) != 1 ||
		report.Files[0].Errors[0].File != called || report.Files[0].Errors[0].Line != 9 {
		t.Errorf("validate --json: %v\n%s", err, got.stdout)
	}

	// Another repository's workflow.
	src := t.TempDir()
	actionstest.Repo(t, src, "acme", "flows", map[string]string{
		".github/workflows/lint.yml": "on: workflow_call\njobs:\n  lint:\n    runs-on: ubuntu-latest\n    steps: [{run: lint}]\n",
	}, "v1")
	remote := writeRepo(t, map[string]string{
		".github/workflows/ci.yml": "on: push\njobs:\n  lint:\n    uses: acme/flows/.github/workflows/lint.yml@v1\n  after:\n    needs: lint\n    runs-on: x\n    steps: [{run: after}]\n",
	})
	rci := filepath.Join(remote, ".github/workflows/ci.yml")
	got = runCLI(t, invocation{args: []string{"validate", rci}})
	if got.code != exitOK || !strings.Contains(got.stdout, "warning: the reusable workflow acme/flows/.github/workflows/lint.yml@v1 was not read (give --resolve-actions") {
		t.Errorf("validate offline: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	mirrors := t.TempDir()
	got = runCLI(t, invocation{args: []string{"validate", "--actions-source", src, "--mirrors", mirrors, rci}})
	if got.code != exitOK || strings.Contains(got.stdout, "warning") || !strings.Contains(got.stdout, "ok (3 jobs)") {
		t.Errorf("validate --actions-source: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	got = runCLI(t, invocation{args: []string{"validate", "--actions-source", src, "--mirrors", mirrors,
		writeFiles(t, map[string]string{"ci.yml": "on: push\njobs:\n  lint:\n    uses: acme/flows/.github/workflows/lint.yml@v9\n"})["ci.yml"]}})
	if got.code != exitFailure || !strings.Contains(got.stdout, "acme/flows@v9 could not be resolved from file://"+src) {
		t.Errorf("validate of an unknown ref: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
}

// TestRunReusableWorkflows runs a workflow that calls a reusable workflow of its own
// repository and, for each value of a matrix, one of another repository, served over
// HTTP by git http-backend: each called job runs, and what a called job's step outputs
// reaches a job downstream of the call through the workflows' outputs. A called job that fails fails the call, and the
// job downstream says why it did not run.
func TestRunReusableWorkflows(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	actionstest.Repo(t, src, "acme", "flows", map[string]string{
		".github/workflows/greet.yml": `on:
  workflow_call:
    inputs:
      who: {type: string, required: true}
    secrets:
      token: {required: false}
    outputs:
      greeting:
        value: ${{ jobs.say.outputs.greeting }}
jobs:
  say:
    runs-on: ubuntu-latest
    outputs:
      greeting: ${{ steps.s.outputs.greeting }}
    steps:
      - id: s
        run: echo "greeting=hello ${{ inputs.who }} from acme" >> "$GITHUB_OUTPUT"
`,
	}, "v1")
	base := actionstest.Serve(t, src)
	repo := writeRepo(t, map[string]string{
		".github/workflows/ci.yml": `on: push
jobs:
  version:
    runs-on: ubuntu-latest
    outputs:
      v: ${{ steps.v.outputs.v }}
    steps:
      - id: v
        run: echo "v=1.2.3" >> "$GITHUB_OUTPUT"
  build:
    name: Build
    needs: version
    uses: ./.github/workflows/build.yml
    with:
      version: ${{ needs.version.outputs.v }}
      debug: true
  greet:
    strategy:
      matrix:
        who: [gantry, world]
    uses: acme/flows/.github/workflows/greet.yml@v1
    with:
      who: ${{ matrix.who }}
  report:
    needs: [build, greet]
    runs-on: ubuntu-latest
    steps:
      - run: echo "got [${{ needs.build.outputs.artifact }}] and [${{ needs.greet.outputs.greeting }}], build ${{ needs.build.result }}"
`,
		".github/workflows/build.yml": `on:
  workflow_call:
    inputs:
      version: {type: string, required: true}
      debug: {type: boolean, default: false}
    outputs:
      artifact:
        value: ${{ jobs.package.outputs.file }}
jobs:
  compile:
    runs-on: ubuntu-latest
    outputs:
      dir: ${{ steps.c.outputs.dir }}
    steps:
      - id: c
        run: echo "dir=out-${{ inputs.version }}" >> "$GITHUB_OUTPUT"
      - if: inputs.debug
        run: echo "debug build of ${{ inputs.version }}"
  package:
    needs: compile
    runs-on: ubuntu-latest
    outputs:
      file: ${{ steps.p.outputs.file }}
    steps:
      - id: p
        run: echo "file=${{ needs.compile.outputs.dir }}/app.tar" >> "$GITHUB_OUTPUT"
`,
	})
	ci := filepath.Join(repo, ".github/workflows/ci.yml")
	mirrors := t.TempDir()
	got := runCLI(t, invocation{args: []string{"run", "--no-checkout", "--actions-source", base, "--mirrors", mirrors, ci}})
	if got.code != exitOK {
		t.Fatalf("gantry run: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	// A matrix of calls: each combination calls the workflow, and the output is that of
	// the last combination that set it.
	for _, want := range []string{"debug build of 1.2.3", "greet (gantry) / say", "greet (world) / say", "got [out-1.2.3/app.tar] and [hello world from acme]"} {
		if !strings.Contains(got.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, got.stdout)
		}
	}
	if !strings.Contains(got.stdout, "Build / compile") || !strings.Contains(got.stdout, "Build / package") {
		t.Errorf("the called jobs are not shown as the caller's:\n%s", got.stdout)
	}

	// A called job that fails: the call fails, and what needs it is skipped, saying so.
	failing := writeRepo(t, map[string]string{
		".github/workflows/ci.yml": "on: push\njobs:\n  call:\n    uses: ./.github/workflows/f.yml\n  after:\n    needs: call\n    runs-on: ubuntu-latest\n    steps: [{run: echo after}]\n",
		".github/workflows/f.yml":  "on: workflow_call\njobs:\n  boom:\n    runs-on: ubuntu-latest\n    steps: [{run: exit 3}]\n",
	})
	got = runCLI(t, invocation{args: []string{"run", "--no-checkout", "--mirrors", mirrors, filepath.Join(failing, ".github/workflows/ci.yml")}})
	if got.code != exitFailure || !strings.Contains(got.stdout, "a job it needs (call) failed") || strings.Contains(got.stdout, "\nafter\n") {
		t.Errorf("a failing called job: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}

	// Another repository's workflow that cannot be resolved stops the run before it
	// starts, naming it and the source.
	bad := writeRepo(t, map[string]string{".github/workflows/ci.yml": "on: push\njobs:\n  x:\n    uses: acme/nothing/.github/workflows/x.yml@v1\n"})
	got = runCLI(t, invocation{args: []string{"run", "--no-checkout", "--actions-source", base, "--mirrors", mirrors, filepath.Join(bad, ".github/workflows/ci.yml")}})
	if got.code == exitOK || !strings.Contains(got.stderr, "acme/nothing@v1 could not be resolved from "+base) {
		t.Errorf("an unknown remote workflow: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
}

// TestValidateReusableOnItsOwn: a reusable workflow validated on its own is checked as a
// workflow calling it would have it checked: a runs-on reading its inputs is valid, with
// a warning at its line naming what is decided when it is called (in the text report,
// the JSON report and gantry plan's); gantry run, which runs it on its own with a
// dispatch's inputs, refuses it and says why.
func TestValidateReusableOnItsOwn(t *testing.T) {
	t.Parallel()
	repo := writeRepo(t, map[string]string{".github/workflows/build.yml": `on:
  workflow_call:
    inputs:
      goos: {type: string, required: true}
      runson: {type: string, required: true}
jobs:
  build:
    runs-on: ${{ inputs.runson }}
    name: Build ${{ inputs.goos }}
    steps:
      - run: GOOS=${{ inputs.goos }} go build ./...
`})
	file := filepath.Join(repo, ".github/workflows/build.yml")
	got := runCLI(t, invocation{args: []string{"validate", file}})
	want := file + ": ok (1 job)\n" +
		file + ":8:14: warning: jobs.build.runs-on: runs-on reads inputs.runson, known only when a workflow calls this one; what it comes to is checked then\n" +
		"    runs-on: ${{ inputs.runson }}\n             ^\n"
	if got.code != exitOK || got.stdout != want {
		t.Errorf("validate: exit %d\n%s%s\nwant exit 0 and\n%s", got.code, got.stdout, got.stderr, want)
	}
	got = runCLI(t, invocation{args: []string{"validate", "--json", file}})
	var report validateReport
	if err := json.Unmarshal([]byte(got.stdout), &report); err != nil || got.code != exitOK || len(report.Files) != 1 || !report.Files[0].Valid ||
		len(report.Files[0].Warnings) != 1 || !strings.HasPrefix(report.Files[0].Warnings[0], "jobs.build.runs-on: runs-on reads inputs.runson") {
		t.Errorf("validate --json: exit %d, %v\n%s", got.code, err, got.stdout)
	}
	got = runCLI(t, invocation{args: []string{"plan", file}})
	if got.code != exitOK || !strings.Contains(got.stderr, "warning: jobs.build.runs-on: runs-on reads inputs.runson") || !strings.Contains(got.stdout, "build") {
		t.Errorf("plan: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	got = runCLI(t, invocation{args: []string{"run", "--force", "--no-checkout", "--mirrors", t.TempDir(), file}})
	if got.code != exitFailure || !strings.Contains(got.stderr, "8:14: jobs.build.runs-on: ${{ inputs.runson }} is known only when a run is created") ||
		!strings.Contains(got.stderr, "run on its own this reusable workflow (on: workflow_call) has a dispatch's inputs") {
		t.Errorf("run: exit %d, want 1 and why\n%s%s", got.code, got.stdout, got.stderr)
	}
}
