package scheduler

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/notify"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/source/sourcetest"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
	"github.com/google/uuid"
)

// The project's pipeline file, on its default branch, listens for the ends of runs of
// build on main; so does a registered workflow, and a disabled one would.
const (
	publishFile = `name: publish
on:
  workflow_run:
    workflows: [build]
    types: [completed]
    branches: [main, feature]
jobs:
  publish:
    if: workflow_run.conclusion == "success" && env.GANTRY_WORKFLOW_RUN_CONCLUSION == "success"
    steps:
      - run: ./publish --from ${{ workflow_run.id }}
`
	deployFlow = `on:
  workflow_run: { workflows: [build], types: [completed] }
jobs:
  deploy: { steps: [ { run: ./deploy } ] }
`
	buildDef = "name: build\njobs:\n  make: { steps: [ { run: make } ] }\n"
)

// endRun claims and completes every job of the store's queue with status.
func endRun(t *testing.T, st store.Store, status store.JobStatus) {
	t.Helper()
	for range 100 {
		cs, err := st.Claim(t.Context(), store.ClaimParams{WorkerID: "w", Max: 8, LeaseTTL: time.Minute, TimeoutGrace: time.Minute})
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		if len(cs) == 0 {
			return
		}
		for _, c := range cs {
			code := 0
			if status == store.JobFailed {
				code = 1
			}
			if _, err := st.CompleteJob(t.Context(), store.CompleteParams{LeaseRef: store.LeaseRef{JobID: c.Job.ID, Token: c.Lease.Token},
				Status: status, ExitCode: &code}); err != nil {
				t.Fatalf("CompleteJob: %v", err)
			}
		}
	}
	t.Fatal("jobs kept coming")
}

func workflowRunMessages(t *testing.T, st store.Store) []*store.OutboxMessage {
	t.Helper()
	ms, err := st.ListOutbox(t.Context(), store.ListOutboxParams{Topic: store.TopicWorkflowRun, State: store.OutboxPending})
	if err != nil {
		t.Fatalf("ListOutbox: %v", err)
	}
	return ms
}

func decodeWorkflowRun(t *testing.T, m *store.OutboxMessage) store.WorkflowRunMessage {
	t.Helper()
	var w store.WorkflowRunMessage
	if err := json.Unmarshal(m.Payload, &w); err != nil {
		t.Fatalf("decode %s: %v", m.Payload, err)
	}
	return w
}

// TestWorkflowRunStartsListeners: a run of build that ends starts a run of each
// definition listening for it (the default branch's file, an enabled registered
// workflow), at the default branch's tip, whose trigger and github.event tell the run
// that ended; delivering the message again, as after a coordinator died before it could
// record the delivery, makes no second run; the dispatcher then records it delivered.
func TestWorkflowRunStartsListeners(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(t.Context(), sqlitetest.Path(t), sqlite.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	repo := sourcetest.NewRepo(t)
	tip := repo.Commit("refs/heads/main", map[string]string{".gantry.yml": publishFile})
	feature := repo.Commit("refs/heads/feature", map[string]string{".gantry.yml": buildDef})
	p := connect(t, st, "app", repo.URL())
	deploy := &store.Workflow{Project: "app", Name: "deploy", Definition: []byte(deployFlow)}
	plan, err := pipeline.Compile(deploy.Definition, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	deploy.Listens = store.WorkflowRunListens(plan.On)
	off := &store.Workflow{Project: "app", Name: "off", Definition: []byte(deployFlow), Listens: deploy.Listens}
	for _, wf := range []*store.Workflow{deploy, off} {
		if err := st.CreateWorkflow(t.Context(), wf); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.UpdateWorkflow(t.Context(), store.UpdateWorkflowParams{ID: off.ID, Enabled: new(bool)}); err != nil {
		t.Fatal(err)
	}
	c := NewCron(CronConfig{Store: st, Clock: clk, Logger: testLog(t), MirrorsDir: t.TempDir(), PublicURL: "https://ci.example.com/"})

	// The schedule loop's pass records what the default branch's file listens for.
	if r := c.Pass(t.Context()); r.Err != nil {
		t.Fatalf("Pass: %v", r.Err)
	}
	got, err := st.ListWorkflowRunListeners(t.Context(), p.ID, store.ListenerFile)
	if want := []store.WorkflowRunListen{{Workflow: "build", Type: "completed"}}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("the file's listeners = %v, %v; want %v", got, err, want)
	}

	buildPlan, err := pipeline.Compile([]byte(buildDef), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src, _, _, err := st.CreateRun(t.Context(), store.CreateRunParams{Project: "app", Plan: buildPlan, Definition: []byte(buildDef),
		Trigger: store.Trigger{Event: "push", Ref: "refs/heads/feature", Branch: "feature", SHA: feature, Actor: "lin",
			Repository: "acme/app", CloneURL: repo.URL(), Verified: store.RefFromWebhook}})
	if err != nil {
		t.Fatal(err)
	}
	endRun(t, st, store.JobSuccess)
	ms := workflowRunMessages(t, st)
	if len(ms) != 1 {
		t.Fatalf("%d workflow_run messages, want the end of run %s", len(ms), src.ID)
	}
	m := decodeWorkflowRun(t, ms[0])

	// A first delivery that makes the runs and dies before its outcome is recorded.
	first, err := c.startWorkflowRuns(t.Context(), ms[0].ID, m)
	if err != nil || len(first) != 2 {
		t.Fatalf("startWorkflowRuns = %v, %v; want the runs of the file and of deploy", first, err)
	}
	d := notify.New(notify.Config{Store: st, Clock: clk, Logger: testLog(t), WorkflowRuns: c})
	// The commit statuses of the project's runs are due too; only the workflow_run
	// message matters here.
	if _, err := d.DeliverDue(t.Context()); err != nil {
		t.Fatalf("DeliverDue: %v", err)
	}
	if left := workflowRunMessages(t, st); len(left) != 0 {
		t.Fatalf("the message is still pending after its delivery: %+v", left[0])
	}
	if done, err := st.GetOutbox(t.Context(), ms[0].ID); err != nil || done.DeliveredAt.IsZero() {
		t.Fatalf("the message after its delivery: %+v, %v", done, err)
	}
	runs := runsOf(t, st, "app")
	if len(runs) != 3 {
		t.Fatalf("the project has %d runs, want build's and the two it started once each", len(runs))
	}
	for _, id := range first {
		run, err := st.GetRun(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		tr := run.Trigger
		if tr.Event != "workflow_run" || tr.SHA != tip || tr.Ref != "refs/heads/main" || tr.Branch != "main" || tr.CloneURL != repo.URL() ||
			tr.Repository != "acme/app" || tr.Actor != "lin" {
			t.Errorf("run %s (%s): trigger %+v; want the default branch's tip", run.ID, run.Name, tr)
		}
		if w := tr.WorkflowRun; w == nil || w.RunID != src.ID || w.Name != "build" || w.Number != src.Number || w.Action != "completed" ||
			w.Conclusion != "success" || w.Depth != 1 {
			t.Errorf("run %s (%s): cause %+v", run.ID, run.Name, tr.WorkflowRun)
		}
		if run.Env["GANTRY_WORKFLOW_RUN_ID"] != src.ID.String() || run.Env["GANTRY_WORKFLOW_RUN_CONCLUSION"] != "success" ||
			run.Env["GANTRY_WORKFLOW_RUN_SHA"] != feature || run.Env["GANTRY_WORKFLOW_RUN_BRANCH"] != "feature" {
			t.Errorf("run %s (%s): env %v", run.ID, run.Name, run.Env)
		}
		switch run.Name {
		case "publish":
			if tr.Verified != store.RefFromRepository || tr.WorkflowID != "" {
				t.Errorf("the file's run: verified %q, workflow %q; want read from the repository", tr.Verified, tr.WorkflowID)
			}
			jobs, err := st.ListJobs(t.Context(), run.ID)
			if err != nil {
				t.Fatal(err)
			}
			if j := jobs[0]; j.Status != store.JobQueued || j.Spec.Steps[0].Run != "./publish --from "+src.ID.String() {
				t.Errorf("publish's job: %s, run %q; want queued (its if: read workflow_run.conclusion), reading workflow_run.id",
					j.Status, j.Spec.Steps[0].Run)
			}
		case "deploy":
			if tr.Verified != "" || tr.WorkflowID != deploy.ID.String() {
				t.Errorf("deploy's run: verified %q, workflow %q; want a registered workflow's, unverified", tr.Verified, tr.WorkflowID)
			}
		default:
			t.Errorf("a run of %q was started", run.Name)
		}
		var ev struct {
			Action      string `json:"action"`
			WorkflowRun struct {
				ID             string `json:"id"`
				Name           string `json:"name"`
				Conclusion     string `json:"conclusion"`
				Status         string `json:"status"`
				HeadBranch     string `json:"head_branch"`
				HeadSHA        string `json:"head_sha"`
				Event          string `json:"event"`
				HTMLURL        string `json:"html_url"`
				RunNumber      int    `json:"run_number"`
				RunAttempt     int    `json:"run_attempt"`
				HeadRepository struct {
					FullName string `json:"full_name"`
				} `json:"head_repository"`
			} `json:"workflow_run"`
		}
		if tr.Payload == nil || json.Unmarshal(*tr.Payload, &ev) != nil {
			t.Fatalf("run %s has no github.event: %v", run.ID, tr.Payload)
		}
		w := ev.WorkflowRun
		if ev.Action != "completed" || w.ID != src.ID.String() || w.Name != "build" || w.Conclusion != "success" || w.Status != "completed" ||
			w.HeadBranch != "feature" || w.HeadSHA != feature || w.Event != "push" || w.RunNumber != src.Number || w.RunAttempt != 1 ||
			w.HTMLURL != "https://ci.example.com/runs/"+src.ID.String() || w.HeadRepository.FullName != "acme/app" {
			t.Errorf("github.event = %s", *tr.Payload)
		}
	}
}

// TestWorkflowRunMessagesThatStartNothing: a run at the end of a chain, a run that no
// longer exists, and an activity no definition's filters take start nothing, and say
// so without an error, so that the message is done.
func TestWorkflowRunMessagesThatStartNothing(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(t.Context(), sqlitetest.Path(t), sqlite.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	wf := &store.Workflow{Project: "ops", Name: "again", Definition: []byte("name: again\n" + deployFlow),
		Listens: []store.WorkflowRunListen{{Workflow: "build", Type: "completed"}}}
	if err := st.CreateWorkflow(t.Context(), wf); err != nil {
		t.Fatal(err)
	}
	c := NewCron(CronConfig{Store: st, Clock: clk, Logger: testLog(t), MirrorsDir: t.TempDir()})
	buildPlan, err := pipeline.Compile([]byte(buildDef), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	deep, _, _, err := st.CreateRun(t.Context(), store.CreateRunParams{Project: "ops", Plan: buildPlan,
		Trigger: store.Trigger{Event: "workflow_run", WorkflowRun: &store.WorkflowRunCause{RunID: uuid.New(), Name: "x", Action: "completed",
			Depth: pipeline.MaxWorkflowRunDepth}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		m    store.WorkflowRunMessage
	}{
		{"end of a chain", store.WorkflowRunMessage{RunID: deep.ID, Project: "ops", Workflow: "build", Action: "completed", Conclusion: "success"}},
		{"run gone", store.WorkflowRunMessage{RunID: uuid.New(), Project: "ops", Workflow: "build", Action: "completed"}},
		{"type not listened for", store.WorkflowRunMessage{RunID: deep.ID, Project: "ops", Workflow: "build", Action: "requested"}},
	} {
		if tc.name == "type not listened for" {
			// Not at the end of a chain: the filters decide.
			shallow, _, _, err := st.CreateRun(t.Context(), store.CreateRunParams{Project: "ops", Plan: buildPlan})
			if err != nil {
				t.Fatal(err)
			}
			tc.m.RunID = shallow.ID
		}
		started, err := c.startWorkflowRuns(t.Context(), uuid.New(), tc.m)
		if err != nil || len(started) != 0 {
			t.Errorf("%s: started %v, %v; want nothing and no error", tc.name, started, err)
		}
	}
}
