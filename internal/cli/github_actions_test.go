package cli

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// workflowDir holds GitHub Actions workflows written for the tests in the style of real
// projects; the pipeline package's tests read them too.
const workflowDir = "../pipeline/testdata/gha"

// TestRunGitHubWorkflows runs each workflow end to end with gantry run, as it is, and
// compares the outcome with what GitHub documents for it: which jobs run, which are
// skipped and why, which fail, and what their steps print.
func TestRunGitHubWorkflows(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file string
		args       []string
		code       int
		// summary lines gantry run prints at the end, each exactly once.
		summary []string
		// printed and notPrinted are lines of the jobs' output.
		printed, notPrinted []string
	}{
		{
			// On main: every job runs but report, whose if: asks for a failed deploy.
			// The deploy job has no checkout step, so its workspace holds only the
			// artifact of build, downloaded by name.
			name: "ci on main", file: "ci.yml", args: []string{"--ref", "refs/heads/main"}, code: exitOK,
			summary: []string{"  jobs: 6 success, 1 skipped", `  skipped: report (if: always() && needs.deploy.result == "failed" was false)`},
			printed: []string{"vet on Linux for", "go 1.25 on ubuntu-latest (1.25) hello", "go 1.26 on ubuntu-24.04 (1.26) hello",
				"app built with token-build", "deploying main to production",
				// coverage is a key only the include entry adds: "" elsewhere, as on GitHub.
				"coverage=true for 1.26", "coverage= for 1.25"},
			notPrinted: []string{"go 1.25 on ubuntu-24.04"},
		},
		{
			// On a feature branch the deploy's if: is false: it and what needs it are
			// skipped, and the run still succeeds. on.push.branches leaves feature out,
			// so gantry run needs --force to run it at all (TestRunWorkflowOn).
			name: "ci on a branch", file: "ci.yml", args: []string{"--ref", "refs/heads/feature", "--force"}, code: exitOK,
			summary:    []string{"  jobs: 5 success, 2 skipped", `  skipped: deploy (if: ref == "refs/hea…" && event != "pull_request" was false)`},
			notPrinted: []string{"deploying"},
		},
		{
			// fail-fast: false lets every instance finish; the failing one fails the
			// run; continue-on-error keeps lint green; always() and failure() jobs run
			// after the failure, success() and plain needs are skipped.
			name: "matrix with a failing instance", file: "matrix.yml", code: exitFailure,
			summary: []string{"  jobs: 6 success, 1 failed, 3 skipped",
				"  skipped: docs (a job it needs (test) failed)",
				"  skipped: on-success (if: success() was false)",
				`  skipped: only-dispatch (if: event == "dispatch" was false)`},
			printed: []string{"testing python 3.11", "testing python 3.12", "python 3.13 breaks", "lint finds problems", "lint job goes on",
				"summary runs whatever happened", "telling someone the tests failed", "push job ran"},
			notPrinted: []string{"never printed", "docs built"},
		},
		{
			// Outputs through $GITHUB_OUTPUT, a variable through $GITHUB_ENV, a step
			// that fails on one target followed by failure() and always() steps, the
			// release skipped after it and the report run.
			name: "outputs and step conditions", file: "outputs.yml", code: exitFailure,
			summary: []string{"  jobs: 3 success, 1 failed, 1 skipped",
				"  skipped: release (a job it needs (build) failed)"},
			printed: []string{"mode is release for 1.4.2", "compiling 1.4.2 for linux", "compiling 1.4.2 for darwin",
				"collecting logs for darwin", "packaged linux", "cleanup linux", "cleanup darwin", "build failed for 1.4.2"},
			notPrinted: []string{"collecting logs for linux", "packaged darwin", "releasing"},
		},
		{
			name: "release dispatched for real", file: "release.yml", code: exitOK,
			args:       []string{"--event", "dispatch", "--input", "version=1.2.3", "--input", "dry-run=false"},
			summary:    []string{"  jobs: 2 success, 1 skipped", `  skipped: dry-run (if: inputs["dry-run"] was false)`},
			printed:    []string{"built 1.2.3", "publishing 1.2.3"},
			notPrinted: []string{"would publish"},
		},
		{
			// actions/setup-go picks the newest Go installed that the range or the
			// version file asks for (the Go running this test is one); a version that
			// is not installed fails the step naming what was found.
			name: "setup-go versions", file: "toolchains.yml", code: exitFailure,
			summary: []string{"  jobs: 2 success, 1 failed"},
			printed: []string{"setup-go chose " + strings.TrimPrefix(runtime.Version(), "go") + ", go runs " + runtime.Version(),
				"go.mod asked for " + goMinor(runtime.Version()) + ", setup-go chose " + strings.TrimPrefix(runtime.Version(), "go"),
				"actions/setup-go: Go ^1.99 is not installed here (found: ",
				"Gantry does not download toolchains: install Go ^1.99 on the worker or in the job's image"},
			notPrinted: []string{"| after a missing Go"},
		},
		{
			// perl {0} and python {0} run the step's script; a shell the worker does not
			// have fails its step, naming the program.
			name: "custom shells", file: "shells.yml", code: exitFailure,
			summary: []string{"  jobs: 3 success, 1 failed"},
			printed: []string{"perl from a file ends in script", "bash again", "python 3 says hello", "| marker-in-sub",
				`gantry: shell "gantry-no-such-shell {0}": gantry-no-such-shell is not installed here`},
		},
		{
			name: "release dry run by default", file: "release.yml", code: exitOK,
			args:    []string{"--event", "dispatch"},
			summary: []string{"  jobs: 2 success, 1 skipped", `  skipped: publish (if: !inputs["dry-run"] was false)`},
			printed: []string{"would publish 0.0.1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"run", "--workers", "2", "--no-checkout"}, tc.args...)
			got := runCLI(t, invocation{args: append(args, filepath.Join(workflowDir, tc.file))})
			if got.code != tc.code {
				t.Fatalf("gantry run %s: exit %d, want %d\n%s%s", tc.file, got.code, tc.code, got.stdout, got.stderr)
			}
			for _, line := range tc.summary {
				if n := countLines(got.stdout, line); n != 1 {
					t.Errorf("the summary shows %q %d times, want once:\n%s", line, n, got.stdout)
				}
			}
			for _, s := range tc.printed {
				if !strings.Contains(got.stdout, s) {
					t.Errorf("output lacks %q:\n%s", s, got.stdout)
				}
			}
			for _, s := range tc.notPrinted {
				if strings.Contains(got.stdout, s) {
					t.Errorf("output has %q:\n%s", s, got.stdout)
				}
			}
		})
	}
}

// goMinor is the Go line of a version: go1.26.8 is 1.26.
func goMinor(v string) string {
	parts := strings.SplitN(strings.TrimPrefix(v, "go"), ".", 3)
	return parts[0] + "." + parts[1]
}

// TestConvertWorkflow: gantry convert prints a definition that validate reads as Gantry's
// own and that plans as the workflow does; an invalid workflow gets validate's report,
// and a file that is no workflow is a usage error.
func TestConvertWorkflow(t *testing.T) {
	t.Parallel()
	src := filepath.Join(workflowDir, "matrix.yml")
	got := runCLI(t, invocation{args: []string{"convert", src}})
	if got.code != exitOK || got.stderr != "" {
		t.Fatalf("gantry convert: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	if strings.Contains(got.stdout, "runs-on") || !strings.Contains(got.stdout, "if: event == \"dispatch\"") {
		t.Errorf("convert did not print Gantry's form:\n%s", got.stdout)
	}
	converted := writePipeline(t, "converted.yml", got.stdout)
	a := runCLI(t, invocation{args: []string{"plan", "--format", "json", src}})
	b := runCLI(t, invocation{args: []string{"plan", "--format", "json", converted}})
	if a.code != exitOK || a.stdout != b.stdout {
		t.Errorf("plans differ: workflow (exit %d):\n%s\nconverted (exit %d):\n%s", a.code, a.stdout, b.code, b.stdout)
	}

	bad := writePipeline(t, "bad.yml", "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: some/action\n")
	got = runCLI(t, invocation{args: []string{"convert", bad}})
	if got.code != exitFailure || !strings.Contains(got.stdout, "bad.yml:6:15: jobs.a.steps[0].uses: uses \"some/action\": an action needs a version after @") {
		t.Errorf("gantry convert of an action without a version: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	gantry := writePipeline(t, "gantry.yml", "jobs: {a: {steps: [{run: x}]}}\n")
	got = runCLI(t, invocation{args: []string{"convert", gantry}})
	if got.code != exitUsage || !strings.Contains(got.stderr, pipeline.ErrNotWorkflow.Error()) {
		t.Errorf("gantry convert of a Gantry definition: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
}

// TestValidateWorkflowByPath: a file under .github/workflows is read as a workflow
// whatever it holds, so its mistakes are told in GitHub's terms.
func TestValidateWorkflowByPath(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), ".github", "workflows")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "ci.yml")
	if err := os.WriteFile(file, []byte("jobs:\n  a:\n    runs_on: x\n    steps: [{run: x}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := runCLI(t, invocation{args: []string{"validate", file}})
	if got.code != exitFailure || !strings.Contains(got.stdout, `unknown key "runs_on" in job a; did you mean "runs-on"?`) {
		t.Errorf("gantry validate %s: exit %d\n%s%s", file, got.code, got.stdout, got.stderr)
	}
}
