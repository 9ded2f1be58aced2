package cli

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// summaryWorkflow is a GitHub workflow whose job report has two steps that each write
// to $GITHUB_STEP_SUMMARY, and whose job quiet writes none.
const summaryWorkflow = `name: summaries
on: push
jobs:
  report:
    runs-on: ubuntu-latest
    steps:
      - name: first
        run: |
          echo '## First' >> "$GITHUB_STEP_SUMMARY"
          echo '' >> "$GITHUB_STEP_SUMMARY"
          echo '| suite | result |' >> "$GITHUB_STEP_SUMMARY"
          echo '|---|---|' >> "$GITHUB_STEP_SUMMARY"
          echo '| unit | pass |' >> "$GITHUB_STEP_SUMMARY"
      - name: second
        run: echo '## Second' >> "$GITHUB_STEP_SUMMARY"
  quiet:
    runs-on: ubuntu-latest
    steps:
      - run: echo nothing to summarise
`

const wantSummary = "## First\n\n| suite | result |\n|---|---|\n| unit | pass |\n\n## Second\n"

// TestSummaryEndToEnd: a coordinator and a worker, each a process of its own, run a
// workflow whose two steps append to $GITHUB_STEP_SUMMARY; the API answers the job's
// summary with both, in step order; gantry summary prints it, runs get says the job
// has one, and a job without one says so.
func TestSummaryEndToEnd(t *testing.T) {
	t.Parallel()
	srv := startServerProcess(t, "sqlite://"+filepath.Join(t.TempDir(), "gantry.db"))
	startChild(t, []string{"worker", "--server", srv.base, "--work-dir", t.TempDir()})
	run := submitRun(t, srv.base, summaryWorkflow)
	run = waitRun(t, srv.base, run.ID, func(r runDetails) bool { return runTerminal(r.Status) })
	if run.Status != "success" {
		t.Fatalf("run %s, want success: %+v", run.Status, run.Jobs)
	}
	var report jobView
	for _, j := range run.Jobs {
		if j.Key == "report" {
			report = j
		}
	}

	md := call(t, http.MethodGet, srv.base+"/api/v1/jobs/"+report.ID+"/summary", "")
	if md.status != http.StatusOK || md.body != wantSummary {
		t.Fatalf("GET summary: %d %q, want %q", md.status, md.body, wantSummary)
	}

	server := []string{"--server", srv.base}
	got := runCLI(t, invocation{args: append([]string{"summary", run.ID, "report"}, server...)})
	if got.code != exitOK || got.stdout != wantSummary {
		t.Errorf("gantry summary RUN report: exit %d, stdout %q, want %q; stderr %s", got.code, got.stdout, wantSummary, got.stderr)
	}
	got = runCLI(t, invocation{args: append([]string{"summary", run.ID, report.ID, "--html"}, server...)})
	if got.code != exitOK || !strings.Contains(got.stdout, "<h2>First</h2>") || !strings.Contains(got.stdout, "<td>pass</td>") ||
		strings.Index(got.stdout, "First") > strings.Index(got.stdout, "Second") {
		t.Errorf("gantry summary --html: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	got = runCLI(t, invocation{args: append([]string{"summary", run.ID}, server...)})
	if got.code != exitOK || got.stdout != "==> report <==\n"+wantSummary {
		t.Errorf("gantry summary RUN: exit %d, stdout %q", got.code, got.stdout)
	}
	got = runCLI(t, invocation{args: append([]string{"summary", run.ID, "quiet"}, server...)})
	if got.code != exitOK || got.stdout != "" || got.stderr != "job quiet (attempt 1) has no summary\n" {
		t.Errorf("gantry summary of a job without one: exit %d, stdout %q, stderr %q", got.code, got.stdout, got.stderr)
	}
	got = runCLI(t, invocation{args: append([]string{"summary", run.ID, "nosuch"}, server...)})
	if got.code != exitFailure || !strings.Contains(got.stderr, `has no job "nosuch" (its jobs: `) {
		t.Errorf("gantry summary of no job: exit %d, stderr %q", got.code, got.stderr)
	}
	got = runCLI(t, invocation{args: append([]string{"summary", run.ID, "--attempt", "1"}, server...)})
	if got.code != exitUsage {
		t.Errorf("--attempt without a job: exit %d, want %d", got.code, exitUsage)
	}

	tree := runCLI(t, invocation{args: append([]string{"runs", "get", run.ID}, server...)})
	// The blank line between the two parts is the reader's, not a step's.
	wantLine := "summaries (gantry summary RUN JOB prints one)\n  report  " + humanBytes(int64(len(wantSummary)-1)) + " from 2 steps\n"
	_, listed, _ := strings.Cut(tree.stdout, "summaries (")
	if tree.code != exitOK || !strings.Contains(tree.stdout, wantLine) || strings.Contains(listed, "quiet") {
		t.Errorf("runs get: exit %d, want it to hold, and no other job's summary\n%s\n%s%s", tree.code, wantLine, tree.stdout, tree.stderr)
	}
}
