package cli

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRunCommands: runs, runs get, cancel, retry and workers against a real server and
// worker, as people read them and as scripts do.
func TestRunCommands(t *testing.T) {
	t.Parallel()
	base := startCluster(t)
	srv := []string{"--server", base}
	done := submitRun(t, base, "name: quick\njobs:\n  a:\n    steps:\n      - run: echo a\n  b:\n    needs: [a]\n    steps:\n      - run: exit 4\n")
	waitRun(t, base, done.ID, statusIs("failed"))
	long := submitRun(t, base, "name: a-pipeline-with-a-name-far-too-long-for-its-column\njobs:\n  sleeper:\n    steps:\n      - run: sleep 30\n")
	r := waitRun(t, base, long.ID, func(r runDetails) bool { return r.Jobs[0].Status == "running" })
	// A claim makes its job running as it commits; the worker may still give it back if
	// the answer does not reach it. Its step running is the sign the worker has it.
	waitStepRunning(t, base, r.Jobs[0].ID)

	list := runCLI(t, invocation{args: append([]string{"runs"}, srv...)})
	if list.code != exitOK {
		t.Fatalf("runs: exit %d: %s", list.code, list.stderr)
	}
	rows := strings.Split(strings.TrimSuffix(list.stdout, "\n"), "\n")
	if len(rows) != 3 || !strings.HasPrefix(rows[0], "ID ") ||
		!strings.HasPrefix(rows[1], long.ID+"  a-pipe…-column  running") ||
		!strings.HasPrefix(rows[2], done.ID+"  quick           failed") {
		t.Errorf("runs:\n%s", list.stdout)
	}
	for _, r := range rows {
		if n := len([]rune(r)); n > 80 {
			t.Errorf("runs row of %d columns: %q", n, r)
		}
	}

	page := runCLI(t, invocation{args: append([]string{"runs", "--limit", "1", "--status", "failed", "--json"}, srv...)})
	var got struct {
		Runs       []runDetails `json:"runs"`
		NextCursor string       `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(page.stdout), &got); err != nil || len(got.Runs) != 1 || got.Runs[0].ID != done.ID || got.NextCursor != done.ID {
		t.Errorf("runs --limit 1 --status failed --json: %v\n%s", err, page.stdout)
	}
	more := runCLI(t, invocation{args: append([]string{"runs", "--limit", "1"}, srv...)})
	if more.stderr != "more: gantry runs --cursor "+long.ID+"\n" {
		t.Errorf("a full page says %q on stderr", more.stderr)
	}
	next := runCLI(t, invocation{args: append([]string{"runs", "--cursor", long.ID}, srv...)})
	if !strings.Contains(next.stdout, done.ID) || strings.Contains(next.stdout, long.ID) {
		t.Errorf("runs --cursor:\n%s", next.stdout)
	}

	tree := runCLI(t, invocation{args: append([]string{"runs", "get", done.ID}, srv...)})
	if tree.code != exitOK || !strings.HasPrefix(tree.stdout, "quick "+done.ID+"\nfailed · 2/2 jobs done") ||
		!strings.Contains(tree.stdout, "wave 2\n  └─ b  failed ") || !strings.Contains(tree.stdout, "exit 4\n") {
		t.Errorf("runs get: exit %d\n%s%s", tree.code, tree.stdout, tree.stderr)
	}
	// Why it failed: the job, the step and the exit code, and where to read the log.
	if !strings.Contains(tree.stdout, "why it failed\n  b: step ") || !strings.Contains(tree.stdout, "failed with exit code 4\n") ||
		!strings.Contains(tree.stdout, "  log: gantry logs "+done.Jobs[1].ID+"\n") {
		t.Errorf("runs get says not why the run failed:\n%s", tree.stdout)
	}
	js := runCLI(t, invocation{args: append([]string{"runs", "show", done.ID, "--json"}, srv...)})
	var run runDetails
	if err := json.Unmarshal([]byte(js.stdout), &run); err != nil || run.ID != done.ID || len(run.Jobs) != 2 || run.Jobs[1].Status != "failed" {
		t.Errorf("runs show --json: %v\n%s", err, js.stdout)
	}

	workers := runCLI(t, invocation{args: append([]string{"workers"}, srv...)})
	if workers.code != exitOK || !strings.HasPrefix(workers.stdout, "NAME ") || !strings.Contains(workers.stdout, "         4      -          -") {
		t.Errorf("workers: exit %d\n%s%s", workers.code, workers.stdout, workers.stderr)
	}

	cancel := runCLI(t, invocation{args: append([]string{"cancel", long.ID}, srv...)})
	// The answer tells the run as it stands after the request: its worker may already have
	// stopped the job and reported it by then.
	if cancel.code != exitOK || (cancel.stdout != "run "+long.ID+": cancelling (its running jobs are being stopped)\n" &&
		cancel.stdout != "run "+long.ID+": cancelled\n") {
		t.Errorf("cancel: exit %d\n%s%s", cancel.code, cancel.stdout, cancel.stderr)
	}
	waitRun(t, base, long.ID, statusIs("cancelled"))
	again := runCLI(t, invocation{args: append([]string{"cancel", long.ID}, srv...)})
	if again.code != exitFailure || !strings.Contains(again.stderr, "409 conflict") || !strings.Contains(again.stderr, "already cancelled") {
		t.Errorf("cancel of a cancelled run: exit %d, stderr %q", again.code, again.stderr)
	}

	retry := runCLI(t, invocation{args: append([]string{"retry", done.ID, "--json"}, srv...)})
	if err := json.Unmarshal([]byte(retry.stdout), &run); retry.code != exitOK || err != nil || run.Jobs[1].Status == "failed" {
		t.Errorf("retry --json: exit %d, %v\n%s%s", retry.code, err, retry.stdout, retry.stderr)
	}
	waitRun(t, base, done.ID, statusIs("failed"))
	retry = runCLI(t, invocation{args: append([]string{"retry", done.ID}, srv...)})
	if retry.code != exitOK || retry.stdout != "run "+done.ID+": 1 job runs again\n" {
		t.Errorf("retry: exit %d\n%s%s", retry.code, retry.stdout, retry.stderr)
	}
	r = waitRun(t, base, done.ID, statusIs("failed"))
	if r.Jobs[1].Attempt != 3 {
		t.Errorf("after two retries job b is on attempt %d, want 3", r.Jobs[1].Attempt)
	}
}

// TestSubmitRejected: a pipeline the server rejects is shown mistake by mistake with its
// line, column and source, and exits 1.
func TestSubmitRejected(t *testing.T) {
	t.Parallel()
	base, stop := startServer(t, "--db", "sqlite://"+t.TempDir()+"/gantry.db")
	defer stop()
	file := writePipeline(t, "bad.yml", "jobs:\n  a:\n    needs: [b]\n    stepz: []\n")
	got := runCLI(t, invocation{args: []string{"submit", file, "--server", base}})
	want := file + `:2:3: jobs.a.steps: job "a" has no steps
  a:
  ^
` + file + `:3:13: jobs.a.needs[0]: needs "b", but there is no such job; did you mean "a"?
    needs: [b]
            ^
` + file + `:4:5: jobs.a.stepz: unknown key "stepz" in job a; did you mean "steps"?
    stepz: []
    ^
gantry: the server rejected ` + file + `: the pipeline has 3 errors
`
	if got.code != exitFailure || got.stderr != want || got.stdout != "" {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant:\n%s", got.code, got.stdout, got.stderr, want)
	}

	ok := runCLI(t, invocation{args: []string{"submit", "-", "--server", base, "--project", "web", "--env", "A=1", "--idempotency-key", "k1"},
		stdin: "name: fine\njobs:\n  x:\n    steps:\n      - run: echo x\n"})
	if ok.code != exitOK || !strings.HasPrefix(ok.stdout, "run ") || !strings.Contains(ok.stdout, "(fine): 1 job\n") ||
		!strings.Contains(ok.stdout, "  x  queued\n") {
		t.Errorf("submit -: exit %d\n%s%s", ok.code, ok.stdout, ok.stderr)
	}
	replay := runCLI(t, invocation{args: []string{"submit", "-", "--server", base, "--project", "web", "--idempotency-key", "k1", "--json"},
		stdin: "name: fine\njobs:\n  x:\n    steps:\n      - run: echo x\n"})
	var run runDetails
	if err := json.Unmarshal([]byte(replay.stdout), &run); err != nil || run.Project != "web" || !strings.Contains(ok.stdout, run.ID) {
		t.Errorf("a replayed submission: %v\n%s\nfirst:\n%s", err, replay.stdout, ok.stdout)
	}
}

// waitStepRunning waits until the job's first step is running: the worker holds the job.
func waitStepRunning(t *testing.T, base, jobID string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var job struct {
			Steps []struct {
				Status string `json:"status"`
			} `json:"steps"`
		}
		getJSON(t, http.DefaultClient, base+"/api/v1/jobs/"+jobID, &job)
		if len(job.Steps) > 0 && job.Steps[0].Status == "running" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: its first step never ran: %+v", jobID, job.Steps)
		}
		time.Sleep(20 * time.Millisecond) // polling the API with a deadline
	}
}
