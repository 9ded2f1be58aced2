package storetest

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var workflowRunTests = []test{
	{"ActivitiesInTheTransaction", testWorkflowRunReports},
	{"ListenersOfRegisteredWorkflows", testWorkflowRunListenersOfWorkflows},
	{"ChainEnds", testWorkflowRunChainEnds},
	{"InvalidListeners", testWorkflowRunInvalidListeners},
}

// workflowRuns returns the workflow_run messages enqueued so far, oldest first, with
// their ids.
func (b *bundle) workflowRuns() ([]store.WorkflowRunMessage, []uuid.UUID) {
	b.t.Helper()
	var out []store.WorkflowRunMessage
	var ids []uuid.UUID
	for _, m := range b.outbox(store.TopicWorkflowRun) {
		var w store.WorkflowRunMessage
		if err := json.Unmarshal(m.Payload, &w); err != nil {
			b.t.Fatalf("workflow_run payload %s: %v", m.Payload, err)
		}
		out = append(out, w)
		ids = append(ids, m.ID)
	}
	return out, ids
}

// activities says what the messages tell of which runs: "<run name> <action>
// [conclusion]".
func activities(ms []store.WorkflowRunMessage) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Workflow + " " + m.Action
		if m.Conclusion != "" {
			out[i] += " " + m.Conclusion
		}
	}
	return out
}

func (b *bundle) setListeners(projectID uuid.UUID, source string, listens ...store.WorkflowRunListen) {
	b.t.Helper()
	if err := b.s.SetWorkflowRunListeners(b.ctx, store.SetWorkflowRunListenersParams{ProjectID: projectID, Source: source, Listens: listens}); err != nil {
		b.t.Fatalf("SetWorkflowRunListeners: %v", err)
	}
}

func listen(workflow string, types ...string) []store.WorkflowRunListen {
	var out []store.WorkflowRunListen
	for _, ty := range types {
		out = append(out, store.WorkflowRunListen{Workflow: workflow, Type: ty})
	}
	return out
}

// testWorkflowRunReports: a run whose name a definition of its project listens for with
// on: workflow_run puts in the outbox, in the transaction that makes each happen, the
// activities listened for: requested with the run, in_progress with the claim that
// starts it, completed with the job that ends it (exactly once), with GitHub's words for
// how it ended. What is listened for is read when the run is created; runs of other
// names, and of other projects, report nothing.
func testWorkflowRunReports(t *testing.T, h Harness) {
	_, b := setup(t, h)
	if err := b.s.CreateProject(b.ctx, connected("web")); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	p, err := b.s.GetProjectByName(b.ctx, "web")
	if err != nil {
		t.Fatalf("GetProjectByName: %v", err)
	}
	const build = "name: build\njobs:\n  a:\n    steps: [{run: 'true'}]\n  b:\n    needs: [a]\n    steps: [{run: 'true'}]\n"
	before, _ := b.createRun(build, store.CreateRunParams{Project: "web", Trigger: reportTrigger})
	b.setListeners(p.ID, store.ListenerFile, listen("build", pipeline.WorkflowRunCompleted)...)
	b.drive(before.ID, nil)
	b.wantRunDone(before.ID, store.RunSuccess)
	if ms, _ := b.workflowRuns(); len(ms) != 0 {
		t.Fatalf("a run made before its project listened reported %v", activities(ms))
	}

	// Only completed is listened for: one message, when the last job ends.
	run, _ := b.createRun(build, store.CreateRunParams{Project: "web", Trigger: reportTrigger})
	other, _ := b.createRun("name: lint\njobs:\n  a:\n    steps: [{run: 'true'}]\n", store.CreateRunParams{Project: "web", Trigger: reportTrigger})
	elsewhere, _ := b.createRun(build, store.CreateRunParams{Project: "api", Trigger: reportTrigger})
	c := b.claimOne()
	if ms, _ := b.workflowRuns(); len(ms) != 0 {
		t.Fatalf("before any run ended: %v", activities(ms))
	}
	b.complete(c, store.JobSuccess)
	b.drive(run.ID, nil)
	b.drive(other.ID, nil)
	b.drive(elsewhere.ID, nil)
	b.wantRunDone(run.ID, store.RunSuccess)
	ms, _ := b.workflowRuns()
	if got := activities(ms); !slices.Equal(got, []string{"build completed success"}) {
		t.Fatalf("messages = %v, want the completion of run %s alone", got, run.ID)
	}
	if m := ms[0]; m.RunID != run.ID || m.ProjectID != p.ID || m.Project != "web" || m.Attempt != 1 || !m.At.Equal(b.clk.Now()) {
		t.Errorf("message %+v", m)
	}

	// Every type listened for, by two definitions at once: each activity is one message.
	b.setListeners(p.ID, store.ListenerFile, listen("build", pipeline.WorkflowRunTypes...)...)
	b.setListeners(p.ID, store.WorkflowListenerSource(store.NewID()), listen("build", pipeline.WorkflowRunCompleted)...)
	failing, _ := b.createRun(build, store.CreateRunParams{Project: "web", Trigger: reportTrigger})
	if ms, _ := b.workflowRuns(); !slices.Equal(activities(ms[1:]), []string{"build requested"}) {
		t.Fatalf("after CreateRun: %v", activities(ms))
	}
	c = b.claimOne()
	if err := b.s.StartJob(b.ctx, ref(c)); err != nil {
		t.Fatalf("StartJob: %v", err)
	}
	b.complete(c, store.JobFailed)
	b.drive(failing.ID, nil)
	b.wantRunDone(failing.ID, store.RunFailed)
	ms, _ = b.workflowRuns()
	if got := activities(ms[1:]); !slices.Equal(got, []string{"build requested", "build in_progress", "build completed failure"}) {
		t.Fatalf("messages = %v", got)
	}

	// A retry is a new attempt: requested, in progress at once (the run had started),
	// and completed again.
	if err := b.s.RetryRun(b.ctx, failing.ID); err != nil {
		t.Fatalf("RetryRun: %v", err)
	}
	b.drive(failing.ID, nil)
	b.wantRunDone(failing.ID, store.RunSuccess)
	ms, _ = b.workflowRuns()
	if got := activities(ms[4:]); !slices.Equal(got, []string{"build requested", "build in_progress", "build completed success"}) {
		t.Fatalf("after a retry: messages = %v", got)
	}
	if last := ms[len(ms)-1]; last.Attempt != 2 || last.RunID != failing.ID {
		t.Errorf("the retry's completion: %+v, want attempt 2", last)
	}

	// Cancelled; every job skipped; a run that failed before it had jobs.
	cancelled, _ := b.createRun(build, store.CreateRunParams{Project: "web", Trigger: reportTrigger})
	if err := b.s.CancelRun(b.ctx, cancelled.ID); err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	b.wantRunDone(cancelled.ID, store.RunCancelled)
	skipped, _ := b.createRun("name: build\njobs:\n  a:\n    if: \"false\"\n    steps: [{run: 'true'}]\n",
		store.CreateRunParams{Project: "web", Trigger: reportTrigger})
	b.wantRunDone(skipped.ID, store.RunSuccess)
	broken, created, err := b.s.CreateFailedRun(b.ctx, store.CreateFailedRunParams{Project: "web", Name: "build", Trigger: reportTrigger,
		Definition: []byte("name: build\njobs: 3\n"), Errors: []store.RunError{{Message: "jobs: expected a mapping"}}})
	if err != nil || !created {
		t.Fatalf("CreateFailedRun: %v, created %v", err, created)
	}
	ms, _ = b.workflowRuns()
	want := []string{"build requested", "build completed cancelled", "build requested", "build completed skipped",
		"build requested", "build completed failure"}
	if got := activities(ms[7:]); !slices.Equal(got, want) {
		t.Fatalf("messages = %v, want %v", got, want)
	}
	for i, id := range []uuid.UUID{cancelled.ID, cancelled.ID, skipped.ID, skipped.ID, broken.ID, broken.ID} {
		if ms[7+i].RunID != id {
			t.Errorf("message %d is of run %s, want %s", 7+i, ms[7+i].RunID, id)
		}
	}

	// Listening no more: new runs report nothing.
	b.setListeners(p.ID, store.ListenerFile)
	n := len(ms)
	quiet, _ := b.createRun(build, store.CreateRunParams{Project: "web", Trigger: reportTrigger})
	b.drive(quiet.ID, nil)
	if ms, _ := b.workflowRuns(); len(ms) != n+1 || activities(ms[n:])[0] != "build completed success" {
		t.Fatalf("after the file stopped listening, with a workflow still listening for completed: %v", activities(ms[n:]))
	}
}

// testWorkflowRunListenersOfWorkflows: a registered workflow's listeners are written with
// its definition and go with a new definition and with the workflow.
func testWorkflowRunListenersOfWorkflows(t *testing.T, h Harness) {
	_, b := setup(t, h)
	wf := &store.Workflow{Project: "ops", Name: "deploy", Definition: []byte("x"), Listens: listen("build", pipeline.WorkflowRunCompleted)}
	if err := b.s.CreateWorkflow(b.ctx, wf); err != nil {
		t.Fatalf("CreateWorkflow: %v", err)
	}
	const build = "name: build\njobs:\n  a:\n    steps: [{run: 'true'}]\n"
	endOne := func() []string {
		t.Helper()
		n := len(activitiesNow(b))
		run, _ := b.createRun(build, store.CreateRunParams{Project: "ops"})
		b.drive(run.ID, nil)
		return activitiesNow(b)[n:]
	}
	if got := endOne(); !slices.Equal(got, []string{"build completed success"}) {
		t.Fatalf("with the workflow listening: %v", got)
	}
	// Enabling or disabling changes no listener: the dispatcher reads whether it is
	// enabled when it delivers.
	if _, err := b.s.UpdateWorkflow(b.ctx, store.UpdateWorkflowParams{ID: wf.ID, Enabled: new(bool)}); err != nil {
		t.Fatalf("UpdateWorkflow: %v", err)
	}
	if got := endOne(); len(got) != 1 {
		t.Fatalf("a disabled workflow's listeners: %v", got)
	}
	if _, err := b.s.UpdateWorkflow(b.ctx, store.UpdateWorkflowParams{ID: wf.ID, Definition: []byte("y"),
		Listens: listen("build", pipeline.WorkflowRunRequested)}); err != nil {
		t.Fatalf("UpdateWorkflow: %v", err)
	}
	if got := endOne(); !slices.Equal(got, []string{"build requested"}) {
		t.Fatalf("after a new definition listening for requested: %v", got)
	}
	if _, err := b.s.UpdateWorkflow(b.ctx, store.UpdateWorkflowParams{ID: wf.ID, Definition: []byte("z")}); err != nil {
		t.Fatalf("UpdateWorkflow: %v", err)
	}
	if got := endOne(); len(got) != 0 {
		t.Fatalf("after a new definition without workflow_run: %v", got)
	}
	if _, err := b.s.UpdateWorkflow(b.ctx, store.UpdateWorkflowParams{ID: wf.ID, Definition: []byte("w"),
		Listens: listen("build", pipeline.WorkflowRunCompleted)}); err != nil {
		t.Fatalf("UpdateWorkflow: %v", err)
	}
	if err := b.s.DeleteWorkflow(b.ctx, wf.ID); err != nil {
		t.Fatalf("DeleteWorkflow: %v", err)
	}
	if got := endOne(); len(got) != 0 {
		t.Fatalf("after the workflow was deleted: %v", got)
	}
}

func activitiesNow(b *bundle) []string {
	ms, _ := b.workflowRuns()
	return activities(ms)
}

// testWorkflowRunChainEnds: a run started by workflow_run at the end of a chain
// (pipeline.MaxWorkflowRunDepth) reports nothing; one above it does.
func testWorkflowRunChainEnds(t *testing.T, h Harness) {
	_, b := setup(t, h)
	first, _ := b.create("name: loop\njobs:\n  a:\n    steps: [{run: 'true'}]\n")
	p, err := b.s.GetProjectByName(b.ctx, "default")
	if err != nil {
		t.Fatalf("GetProjectByName: %v", err)
	}
	b.drive(first.ID, nil)
	b.setListeners(p.ID, store.ListenerFile, listen("loop", pipeline.WorkflowRunCompleted)...)
	for depth := 1; depth <= pipeline.MaxWorkflowRunDepth; depth++ {
		n := len(activitiesNow(b))
		tr := store.Trigger{Event: "workflow_run", WorkflowRun: &store.WorkflowRunCause{RunID: first.ID, Name: "loop",
			Action: pipeline.WorkflowRunCompleted, Conclusion: "success", Depth: depth}}
		run, _ := b.createRun("name: loop\njobs:\n  a:\n    steps: [{run: 'true'}]\n", store.CreateRunParams{Trigger: tr})
		b.drive(run.ID, nil)
		got := activitiesNow(b)[n:]
		if depth < pipeline.MaxWorkflowRunDepth && len(got) != 1 {
			t.Errorf("a run of depth %d: %v, want its completion", depth, got)
		}
		if depth == pipeline.MaxWorkflowRunDepth && len(got) != 0 {
			t.Errorf("a run of depth %d, the end of the chain: %v, want nothing", depth, got)
		}
		if back := b.getRun(run.ID); back.Trigger.WorkflowRunDepth() != depth || back.Trigger.WorkflowRun.RunID != first.ID {
			t.Errorf("the run keeps its cause: %+v", back.Trigger.WorkflowRun)
		}
	}
}

func testWorkflowRunInvalidListeners(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create("jobs:\n  a:\n    steps: [{run: 'true'}]\n")
	p, err := b.s.GetProjectByName(b.ctx, "default")
	if err != nil {
		t.Fatalf("GetProjectByName: %v", err)
	}
	wantErr(t, "no source", b.s.SetWorkflowRunListeners(b.ctx, store.SetWorkflowRunListenersParams{ProjectID: p.ID,
		Listens: listen("a", pipeline.WorkflowRunCompleted)}), store.ErrInvalid)
	wantErr(t, "unknown type", b.s.SetWorkflowRunListeners(b.ctx, store.SetWorkflowRunListenersParams{ProjectID: p.ID,
		Source: store.ListenerFile, Listens: listen("a", "finished")}), store.ErrInvalid)
	wantErr(t, "no workflow", b.s.SetWorkflowRunListeners(b.ctx, store.SetWorkflowRunListenersParams{ProjectID: p.ID,
		Source: store.ListenerFile, Listens: listen("", pipeline.WorkflowRunCompleted)}), store.ErrInvalid)
	wantErr(t, "CreateWorkflow with an unknown type", b.s.CreateWorkflow(b.ctx, &store.Workflow{Name: "w", Definition: []byte("x"),
		Listens: listen("a", "finished")}), store.ErrInvalid)
	// The same listener twice is one; they are listed by workflow, then type.
	b.setListeners(p.ID, store.ListenerFile, append(listen("b", pipeline.WorkflowRunCompleted, pipeline.WorkflowRunRequested),
		listen("a", pipeline.WorkflowRunCompleted, pipeline.WorkflowRunCompleted)...)...)
	got, err := b.s.ListWorkflowRunListeners(b.ctx, p.ID, store.ListenerFile)
	want := append(listen("a", pipeline.WorkflowRunCompleted), listen("b", pipeline.WorkflowRunCompleted, pipeline.WorkflowRunRequested)...)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("ListWorkflowRunListeners = %v, %v; want %v", got, err, want)
	}
	if got, err := b.s.ListWorkflowRunListeners(b.ctx, p.ID, "workflow:"+store.NewID().String()); err != nil || len(got) != 0 {
		t.Errorf("ListWorkflowRunListeners of a source with none = %v, %v", got, err)
	}
}
