package cli

import (
	"context"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestWaitNotes: a job's reason to wait is told once it has waited waitGrace for it, once
// per reason; needs and queue turns are never told; a retry is told once per attempt
// however its countdown moves.
func TestWaitNotes(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	job := func(id, code, msg string, attempt int) jobView {
		j := jobView{ID: id, Key: id, Attempt: attempt}
		if code != "" {
			j.Waiting = &waitingView{Code: code, Message: msg}
		}
		return j
	}
	var n waitNotes
	step := func(at time.Duration, jobs ...jobView) (tell, noWorker []string) {
		t.Helper()
		tj, nj := n.observe(runDetails{Jobs: jobs}, t0.Add(at))
		for _, j := range tj {
			tell = append(tell, j.ID+": "+j.Waiting.Message)
		}
		for _, j := range nj {
			noWorker = append(noWorker, j.ID)
		}
		return tell, noWorker
	}
	want := func(name string, got []string, want ...string) {
		t.Helper()
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	win := job("win", "no_worker", "waiting: no worker has labels [windows-latest]", 0)
	needs := job("deploy", "needs", "waiting for win", 0)
	turn := job("lint", "backlog", "queued with 3 other jobs in lane normal or higher", 0)
	retry := func(in string, attempt int) jobView {
		return job("flaky", "retry", "retry in "+in+" (attempt 2 of 3)", attempt)
	}

	tell, nw := step(0, win, needs, turn, retry("30s", 1))
	want("at once", tell)
	want("no worker at once", nw)
	tell, nw = step(time.Second, win, needs, turn, retry("29s", 1))
	want("before the grace", tell)
	want("no worker before the grace", nw)
	tell, nw = step(2*time.Second, win, needs, turn, retry("28s", 1))
	want("after the grace", tell, "win: waiting: no worker has labels [windows-latest]", "flaky: retry in 28s (attempt 2 of 3)")
	want("no worker after the grace", nw, "win")
	tell, nw = step(3*time.Second, win, needs, turn, retry("27s", 1))
	want("told already", tell)
	want("still no worker", nw, "win")

	// A new attempt of flaky, a new reason for win: each told again after its own grace.
	otherWin := job("win", "concurrency", "waiting: concurrency group production is held by run r (job deploy)", 0)
	tell, nw = step(4*time.Second, otherWin, needs, turn, retry("5s", 2))
	want("new reasons, before their grace", tell)
	want("no worker gone", nw)
	tell, _ = step(6*time.Second, otherWin, needs, turn, retry("3s", 2))
	want("new reasons after their grace", tell, "win: waiting: concurrency group production is held by run r (job deploy)",
		"flaky: retry in 3s (attempt 2 of 3)")
	// A job that stops waiting and waits again for the same reason starts over.
	step(7*time.Second, job("win", "", "", 1))
	tell, _ = step(8*time.Second, otherWin)
	want("waiting again, before the grace", tell)
}

// TestSubmitFollowWaiting: submit --follow says why a job no worker can take waits,
// once, while the run goes on waiting.
func TestSubmitFollowWaiting(t *testing.T) {
	t.Parallel()
	base := startCluster(t)
	file := writePipeline(t, "p.yml", "name: w\njobs:\n  build: {runs_on: [windows-latest], steps: [{run: echo never}]}\n  ok: {steps: [{run: echo fine}]}\n")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- Run(ctx, []string{"submit", "--follow", file, "--server", base}, strings.NewReader(""), &stdout, &stderr)
	}()
	const note = "build | --- waiting: no worker has labels [windows-latest] ---"
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stdout.String(), note) {
		select {
		case code := <-exit:
			t.Fatalf("submit --follow ended (exit %d) before saying why build waits:\n%s%s", code, stdout.String(), stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no note of why build waits:\n%s%s", stdout.String(), stderr.String())
		}
	}
	// Wait for the healthy job to finish as well, so that the follow polled several
	// more times with build's reason unchanged.
	for !strings.Contains(stdout.String(), "ok    | fine") {
		if time.Now().After(deadline) {
			t.Fatalf("ok did not run:\n%s%s", stdout.String(), stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if code := <-exit; code != exitFailure {
		t.Errorf("exit %d after Ctrl-C, want %d", code, exitFailure)
	}
	if n := strings.Count(stdout.String(), "waiting: no worker"); n != 1 {
		t.Errorf("the reason shows %d times, want once:\n%s", n, stdout.String())
	}
	var run runDetails
	for _, l := range strings.Split(stdout.String(), "\n") {
		if id, ok := strings.CutPrefix(l, "run "); ok && run.ID == "" {
			run.ID = strings.Fields(id)[0]
		}
	}
	c, err := (&clientConfig{Server: base}).client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.call(t.Context(), http.MethodPost, "/api/v1/runs/"+strings.TrimSuffix(run.ID, ":")+"/cancel", nil, nil); err != nil {
		t.Errorf("cancel the waiting run: %v", err)
	}
}

// TestRunLocalNoWorker: `gantry run` of a job its own workers cannot take cancels the run
// and exits 1 at once, saying why and how to give the workers the label.
func TestRunLocalNoWorker(t *testing.T) {
	t.Parallel()
	file := writePipeline(t, "win.yml", "name: win\njobs:\n  build: {runs_on: [windows-latest], steps: [{run: echo never}]}\n"+
		"  slow: {steps: [{run: 'echo started; sleep 300'}]}\n")
	// Without the fail-fast the run would wait forever: the context bounds the test, and
	// its Ctrl-C would end the run without the reason.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var stdout, stderr syncBuffer
	start := time.Now()
	code := Run(ctx, []string{"run", "--workers", "2", file}, strings.NewReader(""), &stdout, &stderr)
	took := time.Since(start)
	got := outcome{code: code, stdout: stdout.String(), stderr: stderr.String()}
	if got.code != exitFailure {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", got.code, exitFailure, got.stdout, got.stderr)
	}
	const want = "gantry: job build cannot run here: no worker has labels [windows-latest]; add --labels windows-latest to give this run's workers those labels\n"
	if !strings.Contains(got.stderr, want) {
		t.Errorf("stderr does not say %q:\n%s", want, got.stderr)
	}
	if !strings.Contains(got.stdout, "build | --- waiting: no worker has labels [windows-latest] ---") {
		t.Errorf("stdout does not say why build waits:\n%s", got.stdout)
	}
	// The slow job is cancelled with the run rather than waited for: its sleep is far longer
	// than this bound, which is loose so that a loaded machine does not fail the test.
	if took > time.Minute {
		t.Errorf("gantry run took %s to give up: it waited for the slow job", took)
	}
}

// TestCannotRun: `gantry run` gives up on a job only for labels its workers do not carry;
// a job whose labels they carry waits for them to show they are alive.
func TestCannotRun(t *testing.T) {
	t.Parallel()
	local := []string{"linux", "amd64"}
	job := func(msg string, labels ...string) jobView {
		return jobView{Key: "build", Waiting: &waitingView{Code: "no_worker", Message: msg, Labels: labels}}
	}
	tests := []struct {
		name string
		job  jobView
		want string // "" for no error
	}{
		{"a label the workers lack", job("waiting: no worker has labels [windows-latest]", "windows-latest"),
			"job build cannot run here: no worker has labels [windows-latest]; add --labels windows-latest to give this run's workers those labels"},
		{"labels the workers carry, workers not seen", job("waiting: no worker is online (it needs labels [linux])", "linux"), ""},
		{"no labels, workers not seen", job("waiting: no worker is online"), ""},
		{"another system", job("waiting: no worker has labels [windows]", "windows"),
			"job build cannot run here: no worker has labels [windows]; it runs on windows and this machine is " + runtime.GOOS + ": run it on a worker of that system"},
		{"another system and a label", job("waiting: no worker has labels [macos, gpu]", "macos", "gpu"),
			"job build cannot run here: no worker has labels [macos, gpu]; it runs on macos and this machine is " + runtime.GOOS + ": run it on a worker of that system; add --labels gpu to give this run's workers those labels"},
		{"one of two labels lacking", job("waiting: no worker has labels [gpu, tpu]", "gpu", "tpu"),
			"job build cannot run here: no worker has labels [gpu, tpu]; add --labels gpu,tpu to give this run's workers those labels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := cannotRun(tt.job, local)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("cannotRun = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRunLocalWorkflowOtherSystem: a workflow's job for Windows waits for a Windows worker,
// saying which label it lacks, instead of running on this machine and reporting success;
// gantry run, whose workers are this machine's, gives up on it saying so.
func TestRunLocalWorkflowOtherSystem(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("the machine running the test is the system the job asks for")
	}
	file := writePipeline(t, "win.yml", "on: push\njobs:\n  build:\n    runs-on: ${{ matrix.os }}\n"+
		"    strategy: {matrix: {os: [windows-latest]}}\n    steps:\n      - run: echo never on ${{ matrix.os }}\n")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var stdout, stderr syncBuffer
	code := Run(ctx, []string{"run", "--workers", "1", file}, strings.NewReader(""), &stdout, &stderr)
	if code != exitFailure {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitFailure, stdout.String(), stderr.String())
	}
	want := "gantry: job build (os=windows-latest) cannot run here: no worker has labels [windows]; it runs on windows and this machine is " +
		runtime.GOOS + ": run it on a worker of that system\n"
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
	}
	if !strings.Contains(stdout.String(), "--- waiting: no worker has labels [windows] ---") {
		t.Errorf("stdout does not say why the job waits:\n%s", stdout.String())
	}
	if strings.Contains(stdout.String(), "never on") {
		t.Errorf("the Windows job ran here:\n%s", stdout.String())
	}
}
