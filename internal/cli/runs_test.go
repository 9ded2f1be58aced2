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
	if len(rows) != 3 || !strings.HasPrefix(rows[0], "RUN        NAME      STATUS     REF       SHA      EVENT") ||
		!strings.HasPrefix(rows[1], "default#2  a-p…lumn  running    -         -        api ") ||
		!strings.HasPrefix(rows[2], "default#1  quick     failed     -         -        api ") {
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
	if !strings.Contains(next.stdout, "default#1 ") || strings.Contains(next.stdout, "default#2 ") {
		t.Errorf("runs --cursor:\n%s", next.stdout)
	}

	tree := runCLI(t, invocation{args: append([]string{"runs", "get", done.ID}, srv...)})
	if tree.code != exitOK || !strings.HasPrefix(tree.stdout, "quick default#1 "+done.ID+"\nfailed · 2/2 jobs done") ||
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
	if cancel.code != exitOK || (cancel.stdout != "run default#2: cancelling (its running jobs are being stopped)\n" &&
		cancel.stdout != "run default#2: cancelled\n") {
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
	if retry.code != exitOK || retry.stdout != "run default#1: 1 job runs again\n" {
		t.Errorf("retry: exit %d\n%s%s", retry.code, retry.stdout, retry.stderr)
	}
	r = waitRun(t, base, done.ID, statusIs("failed"))
	if r.Jobs[1].Attempt != 3 {
		t.Errorf("after two retries job b is on attempt %d, want 3", r.Jobs[1].Attempt)
	}

	// A run whose job no worker can take says it is queued, not running.
	waiting := submitRun(t, base, "name: nowhere\njobs:\n  a:\n    runs_on: [no-such-label]\n    steps:\n      - run: echo a\n")
	list = runCLI(t, invocation{args: append([]string{"runs", "--limit", "1"}, srv...)})
	if rows := strings.Split(list.stdout, "\n"); len(rows) < 2 || !strings.HasPrefix(strings.Join(strings.Fields(rows[1]), " "), "default#3 nowhere queued ") {
		t.Errorf("runs with a run no worker takes: exit %d\n%s%s", list.code, list.stdout, list.stderr)
	}
	if r := runCLI(t, invocation{args: append([]string{"cancel", waiting.ID}, srv...)}); r.code != exitOK {
		t.Errorf("cancel the waiting run: exit %d: %s", r.code, r.stderr)
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

// TestRunNumbersCLI: runs are named PROJECT#NUMBER or by a unique start of their id
// wherever a command takes a run; gantry runs lists number, ref, commit and event;
// runs get cuts nothing a user needs at 80 columns; a cancelled job reads cancelled;
// gantry logs shows one step.
func TestRunNumbersCLI(t *testing.T) {
	t.Parallel()
	base := startCluster(t)
	srv := []string{"--server", base}
	submit := func(project, ref, yaml string) runDetails {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"pipeline": yaml, "project": project, "ref": ref,
			"sha": "abcdef0123456789abcdef0123456789abcdef01", "event": "push"})
		res, err := http.Post(base+"/api/v1/runs", "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var run runDetails
		if err := json.NewDecoder(res.Body).Decode(&run); err != nil || res.StatusCode != http.StatusAccepted {
			t.Fatalf("submit: %d %v", res.StatusCode, err)
		}
		return run
	}
	const ref = "refs/heads/feature/a-branch-with-a-rather-long-name-indeed"
	first := submit("web", ref, "name: steps\njobs:\n  a:\n    steps:\n      - {name: one, run: echo first-step-line}\n"+
		"      - {name: two, run: echo second-step-line}\n      - {name: three, run: echo third-step-line}\n")
	waitRun(t, base, first.ID, statusIs("success"))
	long := submit("web", ref, "name: sleeper\njobs:\n  sleep:\n    steps:\n      - run: sleep 30\n"+
		"  after-the-sleeper-with-a-long-name:\n    needs: [sleep]\n    steps:\n      - run: 'true'\n"+
		"  deploy:\n    if: branch == \"release/a-branch-name-long-enough-that-the-reason-overflows-the-line\"\n"+
		"    steps:\n      - run: 'true'\n")
	other := submit("api", "refs/heads/main", "name: other\njobs:\n  a:\n    steps:\n      - run: 'true'\n")
	if first.Number != 1 || long.Number != 2 || other.Number != 1 {
		t.Fatalf("numbers %d, %d, %d; want 1, 2, 1", first.Number, long.Number, other.Number)
	}
	r := waitRun(t, base, long.ID, func(r runDetails) bool { return r.Jobs[0].Status == "running" })
	waitStepRunning(t, base, r.Jobs[0].ID)

	cancel := runCLI(t, invocation{args: append([]string{"cancel", "web#2"}, srv...)})
	if cancel.code != exitOK || !strings.HasPrefix(cancel.stdout, "run web#2: cancel") {
		t.Errorf("cancel web#2: exit %d\n%s%s", cancel.code, cancel.stdout, cancel.stderr)
	}
	waitRun(t, base, long.ID, statusIs("cancelled"))

	list := runCLI(t, invocation{args: append([]string{"runs", "--project", "web"}, srv...)})
	rows := strings.Split(strings.TrimSuffix(list.stdout, "\n"), "\n")
	if list.code != exitOK || len(rows) != 3 ||
		!strings.HasPrefix(rows[0], "RUN    NAME        STATUS     REF         SHA      EVENT  ACTOR") ||
		!strings.HasPrefix(rows[1], "web#2  sleeper     cancelled  feat…ndeed  abcdef0  push   -") ||
		!strings.HasPrefix(rows[2], "web#1  steps       success    feat…ndeed  abcdef0  push   -") {
		t.Errorf("runs --project web: exit %d\n%s%s", list.code, list.stdout, list.stderr)
	}
	for _, row := range rows {
		if n := len([]rune(row)); n > 80 {
			t.Errorf("runs row of %d columns: %q", n, row)
		}
	}

	// At 80 columns (not a terminal) nothing is cut: project, ref and reason in full.
	tree := runCLI(t, invocation{args: append([]string{"runs", "get", "web#2"}, srv...)})
	for _, want := range []string{"sleeper web#2 " + long.ID + "\n", "project web", ref + "@abcdef0123456789abcdef0123456789abcdef01",
		"push", "sleep                               cancelled", "after-the-sleeper-with-a-long-name  cancelled"} {
		if !strings.Contains(tree.stdout, want) {
			t.Errorf("runs get web#2 lacks %q:\n%s", want, tree.stdout)
		}
	}
	if strings.Contains(tree.stdout, "exit -1") || strings.Contains(tree.stdout, "…") {
		t.Errorf("runs get web#2 cuts a line or says exit -1 of a cancelled job:\n%s", tree.stdout)
	}
	var got runDetails
	getJSON(t, http.DefaultClient, base+"/api/v1/runs/"+long.ID, &got)
	reason := ""
	for _, j := range got.Jobs {
		if j.Key == "deploy" {
			reason = j.Reason
		}
	}
	if reason == "" || !strings.Contains(tree.stdout, "\n       "+reason+"\n") {
		t.Errorf("runs get web#2 does not show the reason %q in full on its own line:\n%s", reason, tree.stdout)
	}
	for _, line := range strings.Split(tree.stdout, "\n") {
		// Only what cannot be cut without losing it runs past the width.
		if n := len([]rune(line)); n > 80 && !strings.Contains(line, ref) && !strings.Contains(line, reason) {
			t.Errorf("runs get line of %d columns: %q", n, line)
		}
	}

	// A unique start of an id names its run; an ambiguous one says so. Runs created one
	// after the other share the start of their ids (their time).
	hex := strings.ReplaceAll(first.ID, "-", "")
	common := 0
	for common < len(long.ID) && long.ID[common] == other.ID[common] {
		common++
	}
	if common < minRunPrefix {
		t.Fatalf("ids %s and %s share less than %d digits", long.ID, other.ID, minRunPrefix)
	}
	shared := long.ID[:common]
	for _, c := range []struct {
		arg      string
		code     int
		out, err string
	}{
		{"web#1", exitOK, "steps web#1 " + first.ID, ""},
		{"api#1", exitOK, "other api#1 " + other.ID, ""},
		{first.ID, exitOK, "steps web#1 " + first.ID, ""},
		{hex[:24], exitOK, "steps web#1 " + first.ID, ""},
		{shared, exitUsage, "", "more than one run's id starts with " + shared + " (api#1, web#2, ...)"},
		{"web#3", exitFailure, "", "404"},
		{"ffffffff", exitFailure, "", "no run's id starts with ffffffff"},
		{"web#two", exitUsage, "", "want PROJECT#NUMBER"},
		{"#2", exitUsage, "", "want PROJECT#NUMBER"},
		{"xyz", exitUsage, "", "is not a run id"},
	} {
		r := runCLI(t, invocation{args: append([]string{"runs", "get", c.arg}, srv...)})
		if r.code != c.code || !strings.HasPrefix(r.stdout, c.out) || !strings.Contains(r.stderr, c.err) {
			t.Errorf("runs get %s: exit %d, want %d\n%s%s", c.arg, r.code, c.code, r.stdout, r.stderr)
		}
	}

	// gantry logs: a run's job by name, and one step of it by number or name.
	for _, c := range []struct {
		args     []string
		has, not []string
	}{
		{[]string{"logs", "web#1", "a"}, []string{"first-step-line", "second-step-line", "third-step-line"}, nil},
		{[]string{"logs", "web#1", "a", "--step", "2"}, []string{"step two", "second-step-line"}, []string{"first-step-line", "third-step-line", "step three"}},
		{[]string{"logs", hex[:24], "a", "--step", "one"}, []string{"first-step-line"}, []string{"second-step-line", "step two"}},
		{[]string{"logs", "web#1", "a", "--step", "three"}, []string{"third-step-line"}, []string{"second-step-line"}},
	} {
		r := runCLI(t, invocation{args: append(c.args, srv...)})
		if r.code != exitOK {
			t.Errorf("%v: exit %d: %s", c.args, r.code, r.stderr)
		}
		for _, s := range c.has {
			if !strings.Contains(r.stdout, s) {
				t.Errorf("%v lacks %q:\n%s", c.args, s, r.stdout)
			}
		}
		for _, s := range c.not {
			if strings.Contains(r.stdout, s) {
				t.Errorf("%v has %q:\n%s", c.args, s, r.stdout)
			}
		}
	}
	for args, want := range map[string]string{
		"logs web#1 a --step 4":    "the job has 3 steps, numbered from 1",
		"logs web#1 a --step four": `no step so named; its steps: 1 one, 2 two, 3 three`,
		"logs web#1 nope":          `has no job "nope"`,
	} {
		r := runCLI(t, invocation{args: append(strings.Fields(args), srv...)})
		if r.code == exitOK || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: exit %d, stderr %q, want it to say %q", args, r.code, r.stderr, want)
		}
	}
}
