package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestSubmitFollow submits pipelines with --follow to a real server and worker: every
// line of every job shows once with its job's prefix, and the exit code is the result.
func TestSubmitFollow(t *testing.T) {
	t.Parallel()
	base := startCluster(t)
	flaky := filepath.Join(t.TempDir(), "flaky")
	tests := []struct {
		name     string
		yaml     string
		wantCode int
		// wantLines are lines that must each show exactly once.
		wantLines []string
		// absent are job prefixes that must not show (the job never ran).
		absent      []string
		wantSummary string
	}{
		{
			name: "passing",
			// fast ends long before slow, and both before after starts: every job's
			// lines must still show, from the first.
			yaml: "name: lines\njobs:\n" +
				"  fast:\n    steps:\n      - run: for i in $(seq 1 50); do echo \"fast $i\"; done\n" +
				"  slow:\n    steps:\n      - run: for i in 1 2 3 4 5; do echo \"slow $i\"; sleep 0.1; done\n" +
				"  after:\n    needs: [fast, slow]\n    steps:\n      - run: seq 1 300 | sed 's/^/after /'\n" +
				"  shard:\n    matrix:\n      n: [1, 2]\n    steps:\n      - run: echo \"shard ${{ matrix.n }}\"\n",
			wantCode: exitOK,
			wantLines: append(append(append(
				seqLines("fast        | fast %d", 1, 50),
				seqLines("slow        | slow %d", 1, 5)...),
				seqLines("after       | after %d", 1, 300)...),
				"shard (n=1) | shard 1", "shard (n=2) | shard 2"),
			wantSummary: "success in ",
		},
		{
			name: "failing",
			yaml: "name: breaks\njobs:\n" +
				"  compile:\n    steps:\n      - run: echo compiled\n" +
				"  test:\n    needs: [compile]\n    steps:\n      - run: echo oops >&2; exit 3\n" +
				"  deploy:\n    needs: [test]\n    steps:\n      - run: echo never\n",
			wantCode:    exitFailure,
			wantLines:   []string{"compile | compiled", "test    | oops", "  not successful: test (exit 3)"},
			absent:      []string{"deploy  |"},
			wantSummary: "failed in ",
		},
		{
			name: "a retried job shows both attempts",
			yaml: "name: flaky\njobs:\n" +
				"  flaky:\n    retry: { max_attempts: 2, backoff: 100ms, on: [failure] }\n    steps:\n" +
				"      - run: if [ -f " + flaky + " ]; then echo second; else touch " + flaky + "; echo first; exit 1; fi\n",
			wantCode:    exitOK,
			wantLines:   []string{"flaky | first", "flaky | --- attempt 2 of 2 ---", "flaky | second"},
			wantSummary: "success in ",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			file := writePipeline(t, "pipeline.yml", tt.yaml)
			got := runCLI(t, invocation{args: []string{"submit", "--follow", file, "--server", base}})
			if got.code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", got.code, tt.wantCode, got.stdout, got.stderr)
			}
			for _, l := range tt.wantLines {
				if n := countLines(got.stdout, l); n != 1 {
					t.Errorf("line %q shows %d times, want once", l, n)
				}
			}
			for _, p := range tt.absent {
				if strings.Contains(got.stdout, "\n"+p) {
					t.Errorf("output has lines of %q, which never ran", p)
				}
			}
			if !strings.HasPrefix(got.stdout, "run ") || !strings.Contains(got.stdout, tt.wantSummary) {
				t.Errorf("no run id or summary %q:\n%s", tt.wantSummary, got.stdout)
			}
			if strings.Contains(got.stdout, "\x1b[") {
				t.Errorf("output that is not a terminal has escape codes:\n%q", got.stdout)
			}
			for l := range strings.SplitSeq(got.stdout, "\n") {
				if len([]rune(l)) > 80 && !strings.Contains(l, " | ") {
					t.Errorf("line wider than 80 columns: %q", l)
				}
			}
		})
	}

	t.Run("json", func(t *testing.T) {
		t.Parallel()
		file := writePipeline(t, "p.json", `{"name": "js", "jobs": {"a": {"steps": [{"run": "echo hi"}]}}}`)
		got := runCLI(t, invocation{args: []string{"submit", "-f", "--json", file, "--server", base}})
		if got.code != exitOK || !strings.HasPrefix(got.stdout, `{"id":"`) || !strings.Contains(got.stdout, `"status":"success"`) ||
			strings.Count(got.stdout, "\n") != 1 || countLines(got.stderr, "a | hi") != 1 {
			t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
		}
	})
}

// TestFollowEndedRun follows a run whose jobs all ended before it started: each
// attempt's log is read whole, with no stream, and every line of both attempts of a
// retried job shows once. A read the coordinator fails (503) is taken up by a stream
// from where it stopped.
func TestFollowEndedRun(t *testing.T) {
	t.Parallel()
	base := startCluster(t)
	flaky := filepath.Join(t.TempDir(), "flaky")
	run := submitRun(t, base, "jobs:\n  a:\n    steps:\n      - run: seq 1 300 | sed 's/^/a /'\n"+
		"  b:\n    retry: { max_attempts: 2, backoff: 10ms, on: [failure] }\n    steps:\n"+
		"      - run: if [ -f "+flaky+" ]; then echo second; else touch "+flaky+"; echo first; exit 1; fi\n")
	waitRun(t, base, run.ID, func(r runDetails) bool { return runTerminal(r.Status) })
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, failFirst := range []bool{false, true} {
		t.Run(fmt.Sprint("read fails ", failFirst), func(t *testing.T) {
			t.Parallel()
			var streams, reads atomic.Int64
			proxy := httputil.NewSingleHostReverseProxy(target)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case strings.HasSuffix(r.URL.Path, "/logs/stream"):
					streams.Add(1)
				case strings.HasSuffix(r.URL.Path, "/logs"):
					if reads.Add(1) == 1 && failFirst {
						http.Error(w, `{"error": {"code": "unavailable", "message": "try again"}}`, http.StatusServiceUnavailable)
						return
					}
				}
				proxy.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			out := followSuccess(t, srv.URL, run.ID, false)
			got := out.String()
			for _, l := range append(seqLines("a | a %d", 1, 300), "b | first", "b | --- attempt 2 of 2 ---", "b | second") {
				if n := countLines(got, l); n != 1 {
					t.Errorf("line %q shows %d times, want once", l, n)
				}
			}
			if want := map[bool]int64{false: 0, true: 1}[failFirst]; streams.Load() != want || reads.Load() != 3 {
				t.Errorf("%d streams and %d reads of the three attempts' logs, want %d and 3", streams.Load(), reads.Load(), want)
			}
		})
	}
}

// TestFollowStreamsWhatRuns: an attempt still under way once it has been seen so for
// streamAfter is followed on a stream, its lines shown while it runs; it does not wait for
// the attempt's end to be read whole. While nothing changes the run is not polled.
func TestFollowStreamsWhatRuns(t *testing.T) {
	t.Parallel()
	base := startCluster(t)
	release := filepath.Join(t.TempDir(), "release")
	run := submitRun(t, base, "jobs:\n  a:\n    steps:\n      - run: echo before; while [ ! -f "+release+" ]; do sleep 0.02; done; echo after\n")
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var streams, reads atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/logs/stream"):
			streams.Add(1)
		case r.URL.Path == "/api/v1/runs/"+run.ID:
			reads.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := (&clientConfig{Server: srv.URL}).client()
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	type result struct {
		status string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		status, err := followRun(t.Context(), c, run.ID, &out, false)
		done <- result{status, err}
	}()
	// The job waits for the file: its first line can show only through a stream.
	deadline := time.After(30 * time.Second)
	for !strings.Contains(out.String(), "a | before") {
		select {
		case r := <-done:
			t.Fatalf("following ended (%q, %v) before the job was released:\n%s", r.status, r.err, out.String())
		case <-deadline:
			t.Fatalf("the running job's first line did not show within 30s:\n%s", out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	// While the job runs and nothing of the run changes, the follower's read waits on
	// the coordinator: over 2 s it reads the run at most twice, where polling every
	// 250 ms read it eight times.
	before := reads.Load()
	select {
	case r := <-done:
		t.Fatalf("following ended (%q, %v) before the job was released:\n%s", r.status, r.err, out.String())
	case <-time.After(2 * time.Second):
	}
	if n := reads.Load() - before; n > 2 {
		t.Errorf("%d reads of the run in 2 s while nothing changed, want at most 2", n)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.status != "success" {
		t.Fatalf("followRun = %q, %v", r.status, r.err)
	}
	if n := countLines(out.String(), "a | after"); n != 1 || streams.Load() != 1 {
		t.Errorf("%q shows %d times over %d streams, want once over one:\n%s", "a | after", n, streams.Load(), out.String())
	}
}

// followSuccess follows run id on the coordinator at base until it ends, which must be
// in success, and returns what following printed.
func followSuccess(t *testing.T, base, id string, tty bool) *syncBuffer {
	t.Helper()
	c, err := (&clientConfig{Server: base}).client()
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	status, err := followRun(t.Context(), c, id, &out, tty)
	if err != nil || status != "success" {
		t.Fatalf("followRun = %q, %v", status, err)
	}
	return &out
}

func seqLines(format string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf(format, i))
	}
	return out
}

// TestFollowRunTerminal: on a terminal the prefixes are coloured and a status line is
// drawn and cleared before the summary.
func TestFollowRunTerminal(t *testing.T) {
	t.Parallel()
	base := startCluster(t)
	run := submitRun(t, base, "jobs:\n  a:\n    steps:\n      - run: echo one\n  b:\n    needs: [a]\n    steps:\n      - run: echo two\n")
	out := followSuccess(t, base, run.ID, true)
	s := out.String()
	for _, want := range []string{jobColours[0] + "a" + ansiReset + " | one\n", jobColours[1] + "b" + ansiReset + " | two\n",
		ansiClearLine + "run " + run.ID + " " + ansiGreen + "success" + ansiReset + " in "} {
		if !strings.Contains(s, want) {
			t.Errorf("output does not contain %q:\n%q", want, s)
		}
	}
}

func TestPrintRunTree(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	exit2 := 2
	run := runDetails{
		ID: "0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b", Status: "failed", Project: "web", Name: "web-app",
		StartedAt: at("2026-05-01T12:00:00Z"), FinishedAt: at("2026-05-01T12:03:10Z"), JobsTotal: 4, JobsFinished: 4,
		Jobs: []jobView{
			{Key: "lint", Status: "success", Attempt: 1, MaxAttempts: 1, StartedAt: at("2026-05-01T12:00:00Z"), FinishedAt: at("2026-05-01T12:00:04Z")},
			{Key: "test (go=1.26, shard=2, race=true, os=linux-amd64-with-a-long-name)", Status: "failed", Attempt: 2, MaxAttempts: 3, ExitCode: &exit2,
				StartedAt: at("2026-05-01T12:00:04Z"), FinishedAt: at("2026-05-01T12:02:10Z"), Needs: []string{"lint"}},
			{Key: "build", Status: "success", Attempt: 1, MaxAttempts: 1, StartedAt: at("2026-05-01T12:00:00Z"), FinishedAt: at("2026-05-01T12:00:01.5Z")},
			{Key: "deploy", Status: "skipped", Needs: []string{"test (go=1.26, shard=2, race=true, os=linux-amd64-with-a-long-name)", "build"}},
		},
	}
	run.Trigger.Ref = "refs/heads/main"
	var b strings.Builder
	printRunTree(&b, run, 80)
	want := `web-app 0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b
failed · 4/4 jobs done · 3m10s · project web · refs/heads/main
wave 1
  ├─ lint                                success       4.0s
  └─ build                               success       1.5s
wave 2
  └─ test (go=1.26, s…with-a-long-name)  failed       2m06s  attempt 2/3, exit 2
wave 3
  └─ deploy                              skipped          -
`
	if b.String() != want {
		t.Errorf("printRunTree =\n%s\nwant\n%s", b.String(), want)
	}
	for l := range strings.SplitSeq(b.String(), "\n") {
		if n := len([]rune(l)); n > 80 {
			t.Errorf("line of %d columns: %q", n, l)
		}
	}

	// A ref the server did not verify says so; one from a server that does not say is
	// shown as it always was.
	for _, tt := range []struct {
		verified *bool
		want     string
	}{
		{new(false), "refs/heads/main (unverified)\n"},
		{new(true), "refs/heads/main\n"},
		{nil, "refs/heads/main\n"},
	} {
		run.RefVerified = tt.verified
		b.Reset()
		printRunTree(&b, run, 80)
		if line := strings.SplitN(b.String(), "\n", 3)[1] + "\n"; !strings.HasSuffix(line, " · "+tt.want) {
			t.Errorf("ref_verified %v: second line %q; want it to end %q", tt.verified, line, tt.want)
		}
	}

	// A run of workflow_run says which run started it.
	run.RefVerified = nil
	run.Trigger.Event, run.Trigger.Actor = "workflow_run", "lin"
	run.Trigger.WorkflowRun = &struct {
		Name       string `json:"name"`
		Number     int    `json:"number"`
		Action     string `json:"action"`
		Conclusion string `json:"conclusion"`
	}{Name: "build", Number: 12, Action: "completed", Conclusion: "success"}
	b.Reset()
	printRunTree(&b, run, 120)
	if line := strings.SplitN(b.String(), "\n", 3)[1]; !strings.HasSuffix(line, " · workflow_run of build #12 completed success by lin") {
		t.Errorf("a run of workflow_run: second line %q", line)
	}
}

// TestSubmitFollowInterrupted: Ctrl-C stops the following, not the run.
func TestSubmitFollowInterrupted(t *testing.T) {
	t.Parallel()
	base := startCluster(t)
	file := writePipeline(t, "p.yml", "jobs:\n  sleeper:\n    steps:\n      - run: echo started; sleep 20\n")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncBuffer
	a := &app{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
		lookupEnv: func(string) (string, bool) { return "", false }, maxRead: defaultMaxRead}
	exit := make(chan int, 1)
	go func() { exit <- a.run(ctx, []string{"submit", "-f", file, "--server", base}) }()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stdout.String(), "sleeper | started\n") {
		if time.Now().After(deadline) {
			t.Fatalf("the job's first line never showed:\n%s%s", stdout.String(), stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if code := <-exit; code != exitFailure || !strings.Contains(stderr.String(), "stopped following run") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
	id := strings.TrimSuffix(strings.Fields(stdout.String())[1], ":")
	// The worker drains when the test ends: leave it no job to wait for.
	defer func() {
		runCLI(t, invocation{args: []string{"cancel", id, "--server", base}})
		waitRun(t, base, id, statusIs("cancelled"))
	}()
	var r runDetails
	getJSON(t, http.DefaultClient, base+"/api/v1/runs/"+id, &r)
	if r.Status != "running" {
		t.Errorf("the run is %s after Ctrl-C, want it still running", r.Status)
	}
}

// TestFollowWaitsForClaimedName: a read of the run can show a job claimed before the
// coordinator named it (its name: reads its needs); its lines, here already stored, show
// under the name the next read gives, not under the name unevaluated.
func TestFollowWaitsForClaimedName(t *testing.T) {
	t.Parallel()
	const runID, jobID = "01a24fe8-9285-752c-878f-3f3d602977c5", "01a24fe8-9285-7542-9c47-0bb055398396"
	job := func(name, status string) string {
		return fmt.Sprintf(`{"id": %q, "key": "publish", "display_name": %q, "status": %q, "attempt": 1, "max_attempts": 1}`, jobID, name, status)
	}
	var reads atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/runs/" + runID:
			w.Header().Set("Content-Type", "application/json")
			if reads.Add(1) <= 2 {
				fmt.Fprintf(w, `{"id": %q, "status": "running", "seq": 1, "jobs": [%s]}`, runID, job("Publish ${{ needs.prepare.outputs.version }}", "running"))
				return
			}
			fmt.Fprintf(w, `{"id": %q, "status": "success", "seq": 2, "jobs": [%s]}`, runID, job("Publish 1.2.3", "success"))
		case "/api/v1/jobs/" + jobID + "/logs/stream":
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("X-Gantry-Attempt", "1")
			fmt.Fprint(w, "id: 1\nevent: line\ndata: {\"seq\": 1, \"ts\": 1, \"stream\": \"stdout\", \"text\": \"publishing now\"}\n\n"+
				"event: end\ndata: {\"attempt\": 1, \"status\": \"success\", \"latest_attempt\": 1}\n\n")
		case "/api/v1/jobs/" + jobID + "/logs":
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("X-Gantry-Attempt", "1")
			fmt.Fprint(w, "{\"seq\": 1, \"ts\": 1, \"stream\": \"stdout\", \"text\": \"publishing now\"}\n")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	out := followSuccess(t, srv.URL, runID, false)
	n := 0
	for l := range strings.SplitSeq(out.String(), "\n") {
		if strings.HasSuffix(l, " | publishing now") {
			n++
			if !strings.HasPrefix(l, "Publish 1.2.3 ") {
				t.Errorf("the line shows as %q, want it under the name as evaluated", l)
			}
		}
	}
	if n != 1 {
		t.Errorf("the line shows %d times, want once:\n%s", n, out.String())
	}
}
