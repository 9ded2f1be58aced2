package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/pipeline"
)

// containedShell is the shell executor as a worker with cgroup containment has it: every
// process of a step ends with the step (the containment itself is tested in executor).
type containedShell struct{ executor.Shell }

func (containedShell) Contained() bool { return true }

// TestHostJobDirsReused: a worker whose steps are contained gives a job the step-file and
// runner directories of the job before it when that job left them as they were made, and
// new ones when it left anything in either; a worker whose steps may outlive them never
// reuses them. Whatever is reused is empty, and nothing is left when the worker stops.
func TestHostJobDirsReused(t *testing.T) {
	t.Parallel()
	// Each job prints its directories, and then checks that it was given them empty:
	// the step files, RUNNER_TEMP, and the runner directory's event file alone.
	const show = `
          echo "dirs $(dirname "$GANTRY_OUTPUT") $(dirname "$RUNNER_TEMP")"
          for f in "$GANTRY_OUTPUT" "$GANTRY_ENV" "$GANTRY_PATH" "$GANTRY_STEP_SUMMARY"; do
            test ! -s "$f" || { echo "not empty: $f"; exit 1; }
          done
          test -z "$(ls -A "$RUNNER_TEMP")" || { echo "RUNNER_TEMP not empty"; exit 1; }
          test "$(ls "$(dirname "$GANTRY_OUTPUT")" | tr '\n' ' ')" = "env output path summary " || { echo "files dir holds more"; exit 1; }
`
	job := func(key, needs, script string) string {
		y := "  " + key + ":\n"
		if needs != "" {
			y += "    needs: [" + needs + "]\n"
		}
		return y + "    steps:\n      - run: |" + show + "          " + script + "\n"
	}
	pipeline := "jobs:\n" +
		// a writes every step file, which its step's collection empties.
		job("a", "", `echo x=1 >> "$GANTRY_OUTPUT"; echo Y=2 >> "$GANTRY_ENV"; echo /opt >> "$GANTRY_PATH"; echo "# a" >> "$GANTRY_STEP_SUMMARY"`) +
		"      - run: test \"$Y\" = 2\n" +
		// b leaves a file in RUNNER_TEMP: c gets other directories.
		job("b", "a", `touch "$RUNNER_TEMP/left"`) +
		// c leaves a file beside the step files: d gets other directories.
		job("c", "b", `touch "$(dirname "$GANTRY_OUTPUT")/extra"`) +
		job("d", "c", "true")
	dirsLine := regexp.MustCompile(`dirs (/\S+) (/\S+)`)
	for _, tt := range []struct {
		name      string
		exec      Executor
		contained bool
	}{
		{"contained", containedShell{}, true},
		{"not contained", executor.Shell{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			work := t.TempDir()
			drain, stop := context.WithCancel(context.Background())
			defer stop()
			a := New(Config{Server: b.url, Name: "reuser", MaxJobs: 1, WorkDir: work, Executor: tt.exec})
			done := make(chan error, 1)
			go func() { done <- a.Run(drain, drain) }()
			run := b.submit(t, pipeline)
			b.wantSuccess(t, run)
			files, runner := map[string]string{}, map[string]string{}
			for _, key := range []string{"a", "b", "c", "d"} {
				m := dirsLine.FindStringSubmatch(b.jobLog(t, run, key))
				if m == nil {
					t.Fatalf("job %s printed no directories:\n%s", key, b.jobLog(t, run, key))
				}
				files[key], runner[key] = m[1], m[2]
			}
			same := func(what string, got map[string]string, x, y string, want bool) {
				if (got[x] == got[y]) != want {
					t.Errorf("%s of %s (%s) and %s (%s): same %v, want %v", what, x, got[x], y, got[y], got[x] == got[y], want)
				}
			}
			// The two are kept as a pair: a job that left something in either gets neither
			// reused.
			same("step files", files, "a", "b", tt.contained)
			same("runner directory", runner, "a", "b", tt.contained)
			same("runner directory", runner, "b", "c", false) // b left a file in RUNNER_TEMP
			same("step files", files, "b", "c", false)
			same("step files", files, "c", "d", false) // c left a file beside them
			same("runner directory", runner, "c", "d", false)
			stopWorker(t, stop, done)
			entries, err := os.ReadDir(work)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), "gantry-files-") || strings.HasPrefix(e.Name(), "gantry-runner-") {
					t.Errorf("left in the work directory when the worker stopped: %s", e.Name())
				}
			}
		})
	}
}

// TestPristineDirs: a directory is kept for the next job only as it was made: anything
// a job left in it, took from it or changed of its modes makes it be removed instead.
func TestPristineDirs(t *testing.T) {
	t.Parallel()
	makeFiles := func(t *testing.T) string {
		f, err := newStepFiles(t.TempDir(), "", false)
		if err != nil {
			t.Fatal(err)
		}
		return f.dir
	}
	makeRunner := func(t *testing.T) string {
		f := &stepFiles{}
		if err := makeRunnerDir(f, t.TempDir(), "", "", false, claimedJob{Spec: &pipeline.Job{Name: "j"}}); err != nil {
			t.Fatal(err)
		}
		return f.runner
	}
	for _, tt := range []struct {
		name   string
		runner bool
		change func(dir string) error
		want   bool
	}{
		{"step files as made", false, func(string) error { return nil }, true},
		{"a step file not empty", false, func(d string) error { return os.WriteFile(filepath.Join(d, "output"), []byte("x=1\n"), 0o666) }, false},
		{"a step file removed", false, func(d string) error { return os.Remove(filepath.Join(d, "env")) }, false},
		{"a step file a symlink", false, func(d string) error {
			p := filepath.Join(d, "path")
			return errors.Join(os.Remove(p), os.Symlink("/etc/passwd", p))
		}, false},
		{"a step file's mode", false, func(d string) error { return os.Chmod(filepath.Join(d, "summary"), 0o600) }, false},
		{"a file beside them", false, func(d string) error { return os.WriteFile(filepath.Join(d, "zz"), nil, 0o666) }, false},
		{"the directory's mode", false, func(d string) error { return os.Chmod(d, 0o777) }, false},
		{"runner as made", true, func(string) error { return nil }, true},
		{"a file in RUNNER_TEMP", true, func(d string) error { return os.WriteFile(filepath.Join(d, "tmp", "x"), nil, 0o600) }, false},
		{"RUNNER_TEMP's mode", true, func(d string) error { return os.Chmod(filepath.Join(d, "tmp"), 0o755) }, false},
		{"the event a symlink", true, func(d string) error {
			p := filepath.Join(d, "event.json")
			return errors.Join(os.Remove(p), os.Symlink("/etc/passwd", p))
		}, false},
		{"an action fetched", true, func(d string) error { return os.Mkdir(filepath.Join(d, "actions"), 0o755) }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir, pristine := makeFiles(t), pristineFiles
			if tt.runner {
				dir, pristine = makeRunner(t), pristineRunner
			}
			if err := tt.change(dir); err != nil {
				t.Fatal(err)
			}
			if got := pristine(dir); got != tt.want {
				t.Errorf("pristine: %v, want %v", got, tt.want)
			}
		})
	}
}
