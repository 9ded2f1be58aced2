package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/source/sourcetest"
)

// send makes a JSON request and decodes the answer into out, failing the test unless the
// status is want.
func send(t *testing.T, method, url string, body any, want int, out any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, url, res.StatusCode, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, url, data, err)
		}
	}
}

// wfRunDetails is what the tests read of a run: its details and the cause of a run of
// workflow_run.
type wfRunDetails struct {
	runDetails
	Trigger struct {
		Event       string `json:"event"`
		SHA         string `json:"sha"`
		WorkflowRun *struct {
			RunID      string `json:"run_id"`
			Name       string `json:"name"`
			Action     string `json:"action"`
			Conclusion string `json:"conclusion"`
			Depth      int    `json:"depth"`
		} `json:"workflow_run"`
	} `json:"trigger"`
}

// projectRuns lists the runs of a project, newest first.
func projectRuns(t *testing.T, base, project string) []wfRunDetails {
	t.Helper()
	var list struct {
		Runs []wfRunDetails `json:"runs"`
	}
	getJSON(t, http.DefaultClient, base+"/api/v1/runs?project="+project, &list)
	return list.Runs
}

// waitProjectRuns waits until the project has n runs, every one of them finished.
func waitProjectRuns(t *testing.T, base, project string, n int) []wfRunDetails {
	t.Helper()
	var runs []wfRunDetails
	waitFor(t, project+"'s runs to finish", 60*time.Second, func() bool {
		runs = projectRuns(t, base, project)
		if len(runs) < n {
			return false
		}
		for _, r := range runs {
			if !runTerminal(r.Status) {
				return false
			}
		}
		return true
	})
	if len(runs) != n {
		t.Fatalf("project %s has %d runs, want %d", project, len(runs), n)
	}
	return runs
}

// jobLogOf returns the log of the run's only job.
func jobLogOf(t *testing.T, base, runID string) string {
	t.Helper()
	r := waitRun(t, base, runID, func(runDetails) bool { return true })
	if len(r.Jobs) != 1 {
		t.Fatalf("run %s has %d jobs", runID, len(r.Jobs))
	}
	return call(t, http.MethodGet, base+"/api/v1/jobs/"+r.Jobs[0].ID+"/logs", "").body
}

const buildWorkflow = `name: build
on: push
jobs:
  make:
    runs-on: ubuntu-latest
    steps:
      - run: mkdir -p out && echo built > out/report.txt
      - uses: actions/upload-artifact@v4
        with: {name: report, path: out/report.txt}
`

// publishWorkflow is started by the end of build's runs: it reads how build's run ended
// and takes the report it kept.
const publishWorkflow = `name: publish
on:
  workflow_run:
    workflows: [build]
    types: [completed]
jobs:
  publish:
    runs-on: ubuntu-latest
    if: github.event.workflow_run.conclusion == 'success'
    steps:
      - uses: actions/download-artifact@v4
        with:
          name: report
          path: got
          github-token: ${{ secrets.GITHUB_TOKEN }}
          run-id: ${{ github.event.workflow_run.id }}
      - run: |
          echo "event=${{ github.event_name }} conclusion=${{ github.event.workflow_run.conclusion }} id=${{ github.event.workflow_run.id }} report=$(cat got/report.txt)"
`

// TestWorkflowRunEndToEnd: on a coordinator with workers (gantry up), a run of the
// workflow build that ends starts a run of the registered workflow publish of its
// project, whose job reads github.event.workflow_run and downloads the artifact build's
// run kept by its run id; a job of another project that asks for that run's artifacts
// fails, saying it is not its project's run; a workflow that its own runs start stops
// after three levels, as on GitHub.
func TestWorkflowRunEndToEnd(t *testing.T) {
	t.Parallel()
	base, _ := startUp(t, filepath.Join(t.TempDir(), "data"))
	send(t, http.MethodPost, base+"/api/v1/workflows", map[string]any{"project": "demo", "name": "publish", "definition": publishWorkflow},
		http.StatusCreated, nil)
	var build runDetails
	send(t, http.MethodPost, base+"/api/v1/runs", map[string]any{"project": "demo", "pipeline": buildWorkflow}, http.StatusAccepted, &build)
	if r := waitRun(t, base, build.ID, func(r runDetails) bool { return runTerminal(r.Status) }); r.Status != "success" {
		t.Fatalf("build's run ended %s", r.Status)
	}
	runs := waitProjectRuns(t, base, "demo", 2)
	pub := runs[0]
	if pub.Name != "publish" || pub.Status != "success" {
		t.Fatalf("the run build's end started: %s %s", pub.Name, pub.Status)
	}
	if w := pub.Trigger.WorkflowRun; pub.Trigger.Event != "workflow_run" || w == nil || w.RunID != build.ID || w.Name != "build" ||
		w.Action != "completed" || w.Conclusion != "success" || w.Depth != 1 {
		t.Errorf("publish's trigger: %+v", pub.Trigger)
	}
	log := jobLogOf(t, base, pub.ID)
	if want := "event=workflow_run conclusion=success id=" + build.ID + " report=built"; !strings.Contains(log, want) {
		t.Errorf("publish's log lacks %q:\n%s", want, log)
	}

	// Another project's job gets nothing of build's run.
	thief := strings.Replace(strings.Replace(publishWorkflow, "${{ github.event.workflow_run.id }}", build.ID, 1),
		"on:\n  workflow_run:\n    workflows: [build]\n    types: [completed]\n", "on: push\n", 1)
	thief = strings.Replace(thief, "    if: github.event.workflow_run.conclusion == 'success'\n", "", 1)
	var stolen runDetails
	send(t, http.MethodPost, base+"/api/v1/runs", map[string]any{"project": "other", "pipeline": thief}, http.StatusAccepted, &stolen)
	if r := waitRun(t, base, stolen.ID, func(r runDetails) bool { return runTerminal(r.Status) }); r.Status != "failed" {
		t.Fatalf("another project's download of build's run ended %s, want failed", r.Status)
	}
	if log := jobLogOf(t, base, stolen.ID); !strings.Contains(log, "run "+build.ID+" is not a run of project other") ||
		strings.Contains(log, "report=built") {
		t.Errorf("another project's download:\n%s", log)
	}

	// A workflow started by its own runs: dispatched once, then three levels, then no more.
	const loop = `name: loop
on:
  workflow_dispatch:
  workflow_run: {workflows: [loop], types: [completed]}
jobs:
  a:
    runs-on: ubuntu-latest
    steps: [{run: "echo level"}]
`
	var wf struct{ ID string }
	send(t, http.MethodPost, base+"/api/v1/workflows", map[string]any{"project": "chain", "name": "loop", "definition": loop}, http.StatusCreated, &wf)
	send(t, http.MethodPost, base+"/api/v1/workflows/"+wf.ID+"/dispatches", map[string]any{}, http.StatusAccepted, nil)
	// The run of the third level reports to no one (decided when it is made): once the
	// four runs have ended and the outbox holds nothing for them, no fifth can come.
	var outbox struct {
		Messages []struct {
			State   string `json:"state"`
			Payload struct {
				Project string `json:"project"`
			} `json:"payload"`
		} `json:"messages"`
	}
	var chain []wfRunDetails
	waitFor(t, "the chain to end", 60*time.Second, func() bool {
		chain = projectRuns(t, base, "chain")
		for _, r := range chain {
			if !runTerminal(r.Status) {
				return false
			}
		}
		getJSON(t, http.DefaultClient, base+"/api/v1/outbox?topic=workflow_run&state=pending", &outbox)
		for _, m := range outbox.Messages {
			if m.Payload.Project == "chain" {
				return false
			}
		}
		return len(chain) >= 4
	})
	if len(chain) != 4 {
		t.Fatalf("the chain made %d runs, want the dispatched one and three levels", len(chain))
	}
	for i, r := range chain {
		depth := len(chain) - 1 - i // newest first
		got := 0
		if r.Trigger.WorkflowRun != nil {
			got = r.Trigger.WorkflowRun.Depth
		}
		if r.Status != "success" || got != depth || (depth > 0 && r.Trigger.WorkflowRun.RunID != chain[i+1].ID) {
			t.Errorf("run %d of the chain: %s, depth %d, cause %+v; want depth %d started by the run before it", i, r.Status, got, r.Trigger.WorkflowRun, depth)
		}
	}
	getJSON(t, http.DefaultClient, base+"/api/v1/outbox?topic=workflow_run", &outbox)
	n := 0
	for _, m := range outbox.Messages {
		if m.Payload.Project == "chain" {
			n++
			if m.State != "delivered" {
				t.Errorf("a message of the chain is %s", m.State)
			}
		}
	}
	if n != 3 {
		t.Errorf("the chain's runs put %d messages in the outbox, want 3: the third level's run reports nothing", n)
	}
}

// TestWorkflowRunSurvivesCoordinatorCrash: the end of a run that a registered workflow
// listens for is kept in the outbox with the run's end; while the project's repository
// cannot be reached, its delivery fails and is retried; the coordinator is SIGKILLed
// between the run's end and the start of the run it calls for; a new coordinator on the
// same store starts that run once the repository is back, exactly once.
func TestWorkflowRunSurvivesCoordinatorCrash(t *testing.T) {
	t.Parallel()
	onBothStores(t, testWorkflowRunCrash)
}

func testWorkflowRunCrash(t *testing.T, db string) {
	repo := sourcetest.NewRepo(t)
	tip := repo.Commit("refs/heads/main", map[string]string{"README": "app"})
	// The repository is away until the first coordinator is gone.
	away := repo.Bare + ".away"
	if err := os.Rename(repo.Bare, away); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--outbox-backoff", "100ms", "--outbox-hold", "2s", "--mirrors", t.TempDir()}
	first := startServerProcess(t, db, flags...)
	send(t, http.MethodPost, first.base+"/api/v1/projects", map[string]any{"name": "web", "repo_url": repo.URL(), "default_branch": "main"},
		http.StatusCreated, nil)
	send(t, http.MethodPost, first.base+"/api/v1/workflows", map[string]any{"project": "web", "name": "publish",
		"definition": "on:\n  workflow_run: {workflows: [build], types: [completed]}\njobs:\n  p: {steps: [{run: 'true'}]}\n"}, http.StatusCreated, nil)
	var build runDetails
	send(t, http.MethodPost, first.base+"/api/v1/runs", map[string]any{"project": "web",
		"pipeline": "name: build\njobs:\n  a: {steps: [{run: 'true'}]}\n"}, http.StatusAccepted, &build)
	// No worker: cancelling ends the run, which is what publish listens for.
	send(t, http.MethodPost, first.base+"/api/v1/runs/"+build.ID+"/cancel", map[string]any{}, http.StatusAccepted, nil)
	var outbox struct {
		Messages []struct {
			ID        string `json:"id"`
			State     string `json:"state"`
			Attempts  int    `json:"attempts"`
			LastError string `json:"last_error"`
		} `json:"messages"`
	}
	waitFor(t, "a failed attempt to start publish's run", 20*time.Second, func() bool {
		getJSON(t, http.DefaultClient, first.base+"/api/v1/outbox?topic=workflow_run&state=failed", &outbox)
		return len(outbox.Messages) == 1
	})
	if m := outbox.Messages[0]; !strings.Contains(m.LastError, "web") {
		t.Errorf("the failed attempt's error does not name the project: %q", m.LastError)
	}
	first.kill(t)
	second := startServerProcess(t, db, flags...)
	if n := len(projectRuns(t, second.base, "web")); n != 1 {
		t.Fatalf("before the repository is back the project has %d runs, want build's alone", n)
	}
	if err := os.Rename(away, repo.Bare); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the message to be delivered", 30*time.Second, func() bool {
		getJSON(t, http.DefaultClient, second.base+"/api/v1/outbox?topic=workflow_run&state=delivered", &outbox)
		return len(outbox.Messages) == 1
	})
	runs := projectRuns(t, second.base, "web")
	if len(runs) != 2 {
		t.Fatalf("the project has %d runs after the delivery, want build's and one of publish", len(runs))
	}
	pub := runs[0]
	if w := pub.Trigger.WorkflowRun; pub.Name != "publish" || w == nil || w.RunID != build.ID || w.Conclusion != "cancelled" || w.Depth != 1 ||
		pub.Trigger.SHA != tip {
		t.Errorf("the run started after the restart: %s %+v (sha %s, want %s)", pub.Name, pub.Trigger, pub.Trigger.SHA, tip)
	}
}

// TestRunLocalWorkflowRun: gantry run --event workflow_run runs a workflow as started by
// the successful end of a run of the first workflow it names, and says that that run is
// not one of this machine's; a workflow whose on: would not take that is refused with
// the reason, as for any other event.
func TestRunLocalWorkflowRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, ".github", "workflows", "after.yml")
	write := func(content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`name: after
on:
  workflow_run: {workflows: [build, docs], types: [completed]}
jobs:
  a:
    runs-on: ubuntu-latest
    if: github.event.workflow_run.conclusion == 'success'
    steps:
      - run: echo "event=${{ github.event_name }} of=${{ github.event.workflow_run.name }} env=$GANTRY_WORKFLOW_RUN_NAME/$GANTRY_WORKFLOW_RUN_CONCLUSION"
`)
	got := runCLI(t, invocation{args: []string{"run", "--workers", "1", "--no-checkout", "--event", "workflow_run", file}})
	if got.code != exitOK || !strings.Contains(got.stdout, "event=workflow_run of=build env=build/success") {
		t.Fatalf("gantry run --event workflow_run: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	if !strings.Contains(got.stderr, `gantry: --event workflow_run: run as started by the successful end of a run of "build"`) ||
		!strings.Contains(got.stderr, "a download-artifact step with run-id finds nothing") {
		t.Errorf("gantry run does not say what it simulates:\n%s", got.stderr)
	}
	// The default event, push, is not one the workflow takes.
	got = runCLI(t, invocation{args: []string{"run", "--workers", "1", "--no-checkout", file}})
	if got.code == exitOK || !strings.Contains(got.stderr, "on: has no push (it lists workflow_run)") {
		t.Errorf("gantry run of a workflow_run workflow as a push: exit %d\n%s", got.code, got.stderr)
	}
	write("name: after\non:\n  workflow_run: {workflows: [build], types: [requested]}\njobs:\n  a: {runs-on: x, steps: [{run: 'true'}]}\n")
	got = runCLI(t, invocation{args: []string{"run", "--workers", "1", "--no-checkout", "--event", "workflow_run", file}})
	if got.code == exitOK || !strings.Contains(got.stderr, "type completed is not in types [requested]") || !strings.Contains(got.stderr, "--force") {
		t.Errorf("gantry run of a workflow that takes requested only: exit %d\n%s", got.code, got.stderr)
	}
}
