package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunLocal: `gantry run` runs a pipeline with no server: every job's lines appear once,
// prefixed by their job, artifacts pass between jobs, and the exit code is the result.
func TestRunLocal(t *testing.T) {
	t.Parallel()
	got := runCLI(t, invocation{args: []string{"run", "--workers", "2", "--no-checkout", "../../examples/diamond.yml"}})
	if got.code != exitOK {
		t.Fatalf("gantry run diamond.yml: exit %d\nstdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
	}
	for _, want := range []string{"linting demo", "testing demo", "packaged binary for demo"} {
		if n := strings.Count(got.stdout, want); n != 1 {
			t.Errorf("%q appears %d times in the output, want once:\n%s", want, n, got.stdout)
		}
	}
	for _, line := range strings.Split(got.stdout, "\n") {
		if strings.Contains(line, "packaged binary for demo") && !strings.HasPrefix(strings.TrimSpace(line), "package") {
			t.Errorf("the package job's line is not prefixed by its job: %q", line)
		}
	}

	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(bad, []byte("name: bad\njobs:\n  a: {steps: [{run: 'echo about to fail; exit 3'}]}\n  b: {needs: [a], steps: [{run: echo never}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got = runCLI(t, invocation{args: []string{"run", "--workers", "1", bad}})
	if got.code != exitFailure || !strings.Contains(got.stdout, "about to fail") || strings.Contains(got.stdout, "never") {
		t.Errorf("gantry run of a failing pipeline: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}

	invalid := filepath.Join(dir, "invalid.yml")
	if err := os.WriteFile(invalid, []byte("name: x\njobs:\n  a: {needs: [nope], steps: [{run: 'true'}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got = runCLI(t, invocation{args: []string{"run", invalid}})
	if got.code != exitFailure || !strings.Contains(got.stderr, "nope") {
		t.Errorf("gantry run of an invalid pipeline: exit %d, stderr %q", got.code, got.stderr)
	}
	if got := runCLI(t, invocation{args: []string{"run", filepath.Join(dir, "missing.yml")}}); got.code != exitUsage {
		t.Errorf("gantry run of a missing file: exit %d, want %d", got.code, exitUsage)
	}
}

// TestRunLocalCancel: Ctrl-C during `gantry run` cancels the run: the running step is
// stopped and the exit code is 1.
func TestRunLocalCancel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "slow.yml")
	if err := os.WriteFile(file, []byte("name: slow\njobs:\n  a: {steps: [{run: 'echo started; sleep 120'}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncBuffer
	exit := make(chan int, 1)
	go func() { exit <- Run(ctx, []string{"run", file}, strings.NewReader(""), &stdout, &stderr) }()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stdout.String(), "started") {
		if time.Now().After(deadline) {
			t.Fatalf("the step did not start:\n%s%s", stdout.String(), stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	cancel()
	select {
	case code := <-exit:
		if code != exitFailure {
			t.Errorf("exit %d after Ctrl-C, want %d", code, exitFailure)
		}
		t.Logf("stopped %s after Ctrl-C", time.Since(start))
	case <-time.After(30 * time.Second):
		t.Fatalf("gantry run did not stop after Ctrl-C:\n%s%s", stdout.String(), stderr.String())
	}
}

// TestRunExamples: every example pipeline in examples/ runs to success with `gantry run`
// on this machine.
func TestRunExamples(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../examples/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 8 {
		t.Fatalf("found %d example files in examples/, want all of them", len(files))
	}
	exampleImages(t) // containers.yml runs in them
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			// --no-checkout: the examples lie in Gantry's repository, which their jobs
			// do not need; TestRunChecksOutTheRepository tries the checkout.
			got := runCLI(t, invocation{args: []string{"run", "--workers", "2", "--no-checkout", f}})
			if got.code != exitOK {
				t.Errorf("gantry run %s: exit %d\n%s%s", f, got.code, got.stdout, got.stderr)
			}
		})
	}
}
