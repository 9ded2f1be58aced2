package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gatedJob is a job of a conditions test: its if:, and whether its step must run. Every
// step touches a file named after its job, which tells whether it ran.
type gatedJob struct {
	name, extra string
	runs        bool
	// reason is the reason shown for a job that does not run.
	reason string
}

// gatedPipeline writes a pipeline of jobs whose steps touch dir/<job>.
func gatedPipeline(t *testing.T, dir string, jobs []gatedJob) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("name: gated\njobs:\n")
	for _, j := range jobs {
		b.WriteString("  " + j.name + ":\n")
		if j.extra != "" {
			b.WriteString("    " + strings.ReplaceAll(j.extra, "\n", "\n    ") + "\n")
		}
		b.WriteString("    steps:\n      - run: touch " + filepath.Join(dir, "ran-"+j.name) + "; echo ran\n")
	}
	return writePipeline(t, "gated.yml", b.String())
}

// checkGated checks which steps ran and that the output shows each skipped job with its
// reason.
func checkGated(t *testing.T, dir, stdout string, jobs []gatedJob) {
	t.Helper()
	for _, j := range jobs {
		_, err := os.Stat(filepath.Join(dir, "ran-"+j.name))
		if ran := err == nil; ran != j.runs {
			t.Errorf("job %s: step ran = %v, want %v", j.name, ran, j.runs)
		}
		if j.runs {
			continue
		}
		if n := countLines(stdout, "  skipped: "+j.name+" ("+j.reason+")"); n != 1 {
			t.Errorf("the summary shows %q %d times, want once", "skipped: "+j.name+" ("+j.reason+")", n)
		}
	}
}

// TestRunSkipsGatedRootJobs: `gantry run` never runs the step of a job without needs
// whose if: is false, nor of the jobs that need it, and says why each was skipped.
func TestRunSkipsGatedRootJobs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	jobs := []gatedJob{
		{name: "build", runs: true},
		{name: "never", extra: `if: "false"`, reason: "if: false was false"},
		// gantry run starts its runs as a push (--event) would, here on no branch: the file
		// is in no git work tree.
		{name: "mainonly", extra: `if: branch == "main"`, reason: `if: branch == "main" was false`},
		{name: "pushonly", extra: `if: event == "push"`, runs: true},
		{name: "apionly", extra: `if: event == "api"`, reason: `if: event == "api" was false`},
		{name: "after", extra: "needs: [never]", reason: "a job it needs (never) was skipped"},
		{name: "cleanup", extra: "needs: [never]\nif: always()", runs: true},
	}
	file := gatedPipeline(t, dir, jobs)
	got := runCLI(t, invocation{args: []string{"run", "--workers", "2", file}})
	if got.code != exitOK {
		t.Fatalf("gantry run: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", got.code, exitOK, got.stdout, got.stderr)
	}
	checkGated(t, dir, got.stdout, jobs)
	if !strings.Contains(got.stdout, "jobs: 3 success, 4 skipped") {
		t.Errorf("summary does not count 3 success, 4 skipped:\n%s", got.stdout)
	}
	// The job list printed when the run starts already has the root job's reason.
	if !strings.Contains(got.stdout, "never     skipped  if: false was false\n") {
		t.Errorf("the submitted run's job list does not say why never was skipped:\n%s", got.stdout)
	}
	if strings.Contains(got.stdout, "never    | ran") || strings.Contains(got.stdout, "after    | ran") {
		t.Errorf("a skipped job's step printed output:\n%s", got.stdout)
	}

	// A run in which nothing runs ends at once, as a success.
	none := t.TempDir()
	jobs = []gatedJob{{name: "only", extra: `if: "false"`, reason: "if: false was false"}}
	got = runCLI(t, invocation{args: []string{"run", gatedPipeline(t, none, jobs)}})
	if got.code != exitOK || !strings.Contains(got.stdout, "jobs: 1 skipped") {
		t.Fatalf("gantry run of a pipeline that runs nothing: exit %d\nstdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
	}
	checkGated(t, none, got.stdout, jobs)
}

// TestSubmitSkipsGatedRootJobs: `gantry submit` decides root jobs' conditions from its
// --ref, --sha and --env, and the run's matrix values; `gantry runs get` shows why each
// skipped job was skipped.
func TestSubmitSkipsGatedRootJobs(t *testing.T) {
	t.Parallel()
	base := startCluster(t)
	dir := t.TempDir()
	jobs := []gatedJob{
		{name: "onmain", extra: `if: branch == "main"`, reason: `if: branch == "main" was false`},
		{name: "ondev", extra: `if: branch == "dev"`, runs: true},
		{name: "bysha", extra: `if: sha startsWith "abc"`, runs: true},
		{name: "othersha", extra: `if: sha == "fff"`, reason: `if: sha == "fff" was false`},
		{name: "byenv", extra: `if: env.DEPLOY == "yes"`, runs: true},
		// --env overrides the file's env, the job's own included.
		{name: "jobenv", extra: "env: {DEPLOY: \"no\"}\nif: env.DEPLOY == \"yes\"", runs: true},
		{name: "jobonly", extra: "env: {ONLY: \"job\"}\nif: env.ONLY == \"cli\"", reason: `if: env.ONLY == "cli" was false`},
		{name: "onpush", extra: `if: event == "push"`, reason: `if: event == "push" was false`},
		{name: "later", extra: "needs: [onmain]", reason: "a job it needs (onmain) was skipped"},
	}
	file := gatedPipeline(t, dir, jobs)
	// The matrix job's instances touch files of their own.
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text = append(text, []byte("  os:\n    matrix: {os: [linux, mac]}\n    if: matrix.os == \"linux\"\n"+
		"    steps:\n      - run: touch "+filepath.Join(dir, "ran-os-${{ matrix.os }}")+"\n")...)
	if err := os.WriteFile(file, text, 0o644); err != nil {
		t.Fatal(err)
	}

	got := runCLI(t, invocation{args: []string{"submit", "--follow", "--ref", "refs/heads/dev", "--sha", "abc123",
		"--env", "DEPLOY=yes", file, "--server", base}})
	if got.code != exitOK {
		t.Fatalf("gantry submit --follow: exit %d\nstdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
	}
	checkGated(t, dir, got.stdout, jobs)
	if _, err := os.Stat(filepath.Join(dir, "ran-os-linux")); err != nil {
		t.Errorf("os (os=linux) did not run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran-os-mac")); err == nil {
		t.Error("os (os=mac) ran though its if: was false")
	}
	if n := countLines(got.stdout, `  skipped: os (os=mac) (if: matrix.os == "linux" was false)`); n != 1 {
		t.Errorf("the summary does not say why os (os=mac) was skipped:\n%s", got.stdout)
	}

	id := strings.Fields(got.stdout)[1]
	tree := runCLI(t, invocation{args: []string{"runs", "get", id, "--server", base}})
	if tree.code != exitOK {
		t.Fatalf("gantry runs get: exit %d: %s", tree.code, tree.stderr)
	}
	for _, j := range append(jobs, gatedJob{name: "os (os=mac)", reason: `if: matrix.os == "linux" was false`}) {
		if j.runs {
			continue
		}
		found := false
		for l := range strings.SplitSeq(tree.stdout, "\n") {
			f := strings.Fields(l)
			if len(f) > 2 && strings.HasPrefix(strings.TrimLeft(l, " ├└─"), j.name+" ") && strings.Contains(l, " skipped ") &&
				strings.HasSuffix(l, j.reason) {
				found = true
			}
		}
		if !found {
			t.Errorf("runs get does not show %s skipped with %q:\n%s", j.name, j.reason, tree.stdout)
		}
	}
}
