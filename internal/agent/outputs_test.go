package agent

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// jobByKey is the run's job with that key, as GetJob has it (outputs included).
func (b *bundle) jobByKey(t *testing.T, run uuid.UUID, key string) (*store.Job, []*store.Step) {
	t.Helper()
	jobs, err := b.st.ListJobs(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Key != key {
			continue
		}
		full, err := b.st.GetJob(t.Context(), j.ID)
		if err != nil {
			t.Fatal(err)
		}
		steps, err := b.st.ListSteps(t.Context(), j.ID)
		if err != nil {
			t.Fatal(err)
		}
		return full, steps
	}
	t.Fatalf("no job %q", key)
	return nil, nil
}

// TestOutputsReachDependants: a step's $GANTRY_OUTPUT lines (both forms) become the
// job's declared outputs, which a dependant reads in env, run and if:, and $GANTRY_ENV and
// $GANTRY_PATH carry to the job's later steps.
func TestOutputsReachDependants(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 2)
	run := b.submit(t, `
jobs:
  build:
    outputs:
      version: ${{ steps.ver.outputs.version }}
      notes: ${{ steps.ver.outputs.notes }}
    steps:
      - id: ver
        run: |
          echo "version=1.2.3" >> "$GANTRY_OUTPUT"
          printf 'notes<<EOF\nline one\nline two\nEOF\n' >> "$GANTRY_OUTPUT"
          echo "unused=x" >> "$GANTRY_OUTPUT"
      - run: |
          echo "GREETING=hello there" >> "$GANTRY_ENV"
          mkdir -p tools && printf '#!/bin/sh\necho tool ran\n' > tools/mytool && chmod +x tools/mytool
          echo "$PWD/tools" >> "$GANTRY_PATH"
      - run: test "$GREETING" = "hello there" && test "$(mytool)" = "tool ran"
  deploy:
    needs: [build]
    if: needs.build.outputs.version == "1.2.3"
    env:
      VERSION: ${{ needs.build.outputs.version }}
    steps:
      - run: test "$VERSION" = 1.2.3 && test "${{ needs.build.outputs.version }}" = 1.2.3
      - run: test "$(printf '%s' "$NOTES" | wc -l)" = 1
        env: {NOTES: "${{ needs.build.outputs.notes }}"}
  never:
    needs: [build]
    if: needs.build.outputs.version == "9"
    steps: [{run: "false"}]
`)
	b.wantSuccess(t, run)
	build, _ := b.jobByKey(t, run, "build")
	want := map[string]string{"version": "1.2.3", "notes": "line one\nline two"}
	if !maps.Equal(build.Outputs, want) {
		t.Errorf("build outputs %q, want %q (only the declared ones)", build.Outputs, want)
	}
	if never, _ := b.jobByKey(t, run, "never"); never.Status != store.JobSkipped {
		t.Errorf("never: %s, want skipped by its if: on the output", never.Status)
	}
}

// TestUndeclaredOutputs: a job that declares no outputs leaves every output its steps
// wrote, a later step's value winning.
func TestUndeclaredOutputs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 1)
	run := b.submit(t, `
jobs:
  a:
    steps:
      - run: echo "x=1" >> "$GANTRY_OUTPUT"; echo "y=2" >> "$GANTRY_OUTPUT"
      - run: echo "x=3" >> "$GANTRY_OUTPUT"
`)
	b.wantSuccess(t, run)
	a, _ := b.jobByKey(t, run, "a")
	if want := map[string]string{"x": "3", "y": "2"}; !maps.Equal(a.Outputs, want) {
		t.Errorf("outputs %q, want %q", a.Outputs, want)
	}
}

// TestStepConditions: a failed step skips the steps after it unless their if: says
// otherwise; steps.<id>.outcome, .conclusion and .outputs read what ran before; every
// step that did not run is skipped in the store and says why in the log.
func TestStepConditions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 1)
	run := b.submit(t, `
jobs:
  a:
    steps:
      - id: first
        run: echo "n=7" >> "$GANTRY_OUTPUT"
      - id: flaky
        run: exit 4
        continue_on_error: true
      - run: test "${{ steps.flaky.outcome }}/${{ steps.flaky.conclusion }}" = failed/success && test "${{ steps.first.outputs.n }}" = 7
      - if: steps.first.outputs.n == "8"
        run: "false"
      - id: broken
        run: exit 2
      - name: not after a failure
        run: "true"
      - name: on failure
        if: failure() && steps.broken.outcome == "failed"
        run: echo "cleanup ran"
      - name: always
        if: always()
        run: echo "always ran"
      - name: only on success
        if: success()
        run: "true"
`)
	if r := b.waitRun(t, run); r.Status != store.RunFailed {
		t.Fatalf("run %s, want failed", r.Status)
	}
	job, steps := b.jobByKey(t, run, "a")
	if job.ExitCode == nil || *job.ExitCode != 2 {
		t.Errorf("job exit code %v, want 2, the first failure's", job.ExitCode)
	}
	want := []store.StepStatus{store.StepSuccess, store.StepFailed, store.StepSuccess, store.StepSkipped, store.StepFailed,
		store.StepSkipped, store.StepSuccess, store.StepSuccess, store.StepSkipped}
	for i, s := range steps {
		if s.Status != want[i] {
			t.Errorf("step %d (%s): %s, want %s", i, s.Name, s.Status, want[i])
		}
	}
	log := b.jobLog(t, run, "a")
	for _, line := range []string{"cleanup ran", "always ran", `step not after a failure: skipped, a step before it failed`,
		`skipped, if: steps.first.outputs.n == "8" was false`} {
		if !strings.Contains(log, line) {
			t.Errorf("log lacks %q:\n%s", line, log)
		}
	}
	v := b.jobView(t, job.ID)
	if v.Steps[5].Status != "skipped" {
		t.Errorf("API shows the skipped step as %s", v.Steps[5].Status)
	}
}

// TestBadStepFiles: what a step writes wrongly to its files fails it with a message that
// names the file, and nothing of it is taken.
func TestBadStepFiles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 1)
	for _, tc := range []struct{ name, run, want string }{
		{"no equals", `echo "justtext" >> "$GANTRY_OUTPUT"`, `$GANTRY_OUTPUT: line 1: "justtext" is neither NAME=VALUE nor NAME<<DELIMITER`},
		{"unclosed", `printf 'x<<EOF\nabc\n' >> "$GANTRY_OUTPUT"`, `$GANTRY_OUTPUT: x<<EOF is not closed by a line EOF`},
		{"reserved env", `echo "GANTRY_JOB_ID=x" >> "$GANTRY_ENV"`, `$GANTRY_ENV: GANTRY_JOB_ID: variable names starting with GANTRY_ are reserved`},
		{"reference", `printf 'v=\044{{ secrets.X }}\n' >> "$GANTRY_OUTPUT"`, `output v holds ${{`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			run := b.submit(t, "jobs:\n  a:\n    steps:\n      - run: '"+strings.ReplaceAll(tc.run, "'", "''")+"'\n")
			if r := b.waitRun(t, run); r.Status != store.RunFailed {
				t.Fatalf("run %s, want failed", r.Status)
			}
			if log := b.jobLog(t, run, "a"); !strings.Contains(log, tc.want) {
				t.Errorf("log lacks %q:\n%s", tc.want, log)
			}
			if a, _ := b.jobByKey(t, run, "a"); len(a.Outputs) != 0 {
				t.Errorf("outputs %q kept", a.Outputs)
			}
		})
	}
	// A step file replaced with a symlink is not followed: the worker neither reads nor
	// empties what it points to.
	t.Run("symlink", func(t *testing.T) {
		t.Parallel()
		victim := filepath.Join(t.TempDir(), "victim")
		if err := os.WriteFile(victim, []byte("stolen=yes\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		run := b.submit(t, "jobs:\n  a:\n    steps:\n      - run: 'rm \"$GANTRY_OUTPUT\" && ln -s "+victim+" \"$GANTRY_OUTPUT\"'\n")
		if r := b.waitRun(t, run); r.Status != store.RunFailed {
			t.Fatalf("run %s, want failed", r.Status)
		}
		if log := b.jobLog(t, run, "a"); !strings.Contains(log, "$GANTRY_OUTPUT: it is a symlink") {
			t.Errorf("log lacks why:\n%s", log)
		}
		if a, _ := b.jobByKey(t, run, "a"); len(a.Outputs) != 0 {
			t.Errorf("outputs %q read through the symlink", a.Outputs)
		}
		if got, err := os.ReadFile(victim); err != nil || string(got) != "stolen=yes\n" {
			t.Errorf("the symlink's target is now %q, %v", got, err)
		}
	})
}

// TestRunEnvOverridesFile: the run's env (gantry submit --env) overrides the pipeline's,
// the job's and the step's env in what the step sees.
func TestRunEnvOverridesFile(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 1)
	p, err := pipeline.Compile([]byte(`
env: {A: file, B: file}
jobs:
  a:
    env: {C: job}
    steps:
      - run: test "$A/$B/$C/$D" = "cli/file/cli/cli"
        env: {D: step}
`), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run, _, _, err := b.st.CreateRun(t.Context(), store.CreateRunParams{Plan: p, Env: map[string]string{"A": "cli", "C": "cli", "D": "cli"}})
	if err != nil {
		t.Fatal(err)
	}
	b.wantSuccess(t, run.ID)
}
