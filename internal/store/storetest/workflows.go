package storetest

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var workflowTests = []test{
	{"CreateGetList", testWorkflowCRUD},
	{"VersionsAndEnable", testWorkflowUpdate},
	{"Delete", testWorkflowDelete},
}

var scheduleTests = []test{
	{"SkipTickMovesForwardOnly", testSkipTick},
	{"RunTakesItsTick", testRunTakesTick},
	{"ConcurrentFiringsOfOneTick", testConcurrentTick},
}

const workflowYAML = `jobs: { a: { steps: [ { run: "true" } ] } }`

func (b *bundle) createWorkflow(project, name, def string) *store.Workflow {
	b.t.Helper()
	w := &store.Workflow{Project: project, Name: name, Definition: []byte(def)}
	if err := b.s.CreateWorkflow(b.ctx, w); err != nil {
		b.t.Fatalf("CreateWorkflow(%s/%s): %v", project, name, err)
	}
	return w
}

func testWorkflowCRUD(t *testing.T, h Harness) {
	_, b := setup(t, h)
	w := b.createWorkflow("web", "nightly", workflowYAML)
	if w.ID == uuid.Nil || w.ProjectID == uuid.Nil || w.Version != 1 || !w.Enabled {
		t.Fatalf("CreateWorkflow left %+v; want an id, a project id, version 1, enabled", w)
	}
	wantTime(t, "CreatedAt", w.CreatedAt, b.clk.Now())
	got, err := b.s.GetWorkflow(b.ctx, w.ID)
	if err != nil {
		t.Fatalf("GetWorkflow: %v", err)
	}
	if got.Project != "web" || got.Name != "nightly" || got.Version != 1 || !got.Enabled ||
		string(got.Definition) != workflowYAML || got.ProjectID != w.ProjectID {
		t.Errorf("GetWorkflow = %+v", got)
	}
	wantTime(t, "read UpdatedAt", got.UpdatedAt, b.clk.Now())

	err = b.s.CreateWorkflow(b.ctx, &store.Workflow{Project: "web", Name: "nightly", Definition: []byte(workflowYAML)})
	wantErr(t, "CreateWorkflow of a taken name", err, store.ErrConflict)
	wantErr(t, "CreateWorkflow without a definition", b.s.CreateWorkflow(b.ctx, &store.Workflow{Project: "web", Name: "x"}), store.ErrInvalid)
	wantErr(t, "CreateWorkflow without a name", b.s.CreateWorkflow(b.ctx, &store.Workflow{Project: "web", Definition: []byte(workflowYAML)}), store.ErrInvalid)
	_, err = b.s.GetWorkflow(b.ctx, store.NewID())
	wantErr(t, "GetWorkflow of an unknown id", err, store.ErrNotFound)

	// The same name in another project is another workflow.
	other := b.createWorkflow("api", "nightly", workflowYAML)
	b.createWorkflow("web", "deploy", workflowYAML)
	names := func(p store.ListWorkflowsParams) []string {
		t.Helper()
		list, err := b.s.ListWorkflows(b.ctx, p)
		if err != nil {
			t.Fatalf("ListWorkflows(%+v): %v", p, err)
		}
		var out []string
		for _, w := range list {
			out = append(out, w.Project+"/"+w.Name)
		}
		return out
	}
	if got := names(store.ListWorkflowsParams{}); !slices.Equal(got, []string{"api/nightly", "web/deploy", "web/nightly"}) {
		t.Errorf("ListWorkflows = %v, want by project then name", got)
	}
	if got := names(store.ListWorkflowsParams{Project: "web"}); !slices.Equal(got, []string{"web/deploy", "web/nightly"}) {
		t.Errorf("ListWorkflows(web) = %v", got)
	}
	off := false
	if _, err := b.s.UpdateWorkflow(b.ctx, store.UpdateWorkflowParams{ID: other.ID, Enabled: &off}); err != nil {
		t.Fatalf("UpdateWorkflow(disable): %v", err)
	}
	if got := names(store.ListWorkflowsParams{EnabledOnly: true}); !slices.Equal(got, []string{"web/deploy", "web/nightly"}) {
		t.Errorf("ListWorkflows(enabled only) = %v", got)
	}
}

func testWorkflowUpdate(t *testing.T, h Harness) {
	_, b := setup(t, h)
	w := b.createWorkflow("web", "nightly", workflowYAML)
	b.clk.Advance(time.Minute)
	def2 := `jobs: { b: { steps: [ { run: "false" } ] } }`
	got, err := b.s.UpdateWorkflow(b.ctx, store.UpdateWorkflowParams{ID: w.ID, Definition: []byte(def2)})
	if err != nil {
		t.Fatalf("UpdateWorkflow(new definition): %v", err)
	}
	if got.Version != 2 || string(got.Definition) != def2 || !got.Enabled {
		t.Errorf("after a new definition: version %d, definition %q, enabled %v; want 2, the new one, true", got.Version, got.Definition, got.Enabled)
	}
	wantTime(t, "UpdatedAt", got.UpdatedAt, b.clk.Now())
	wantTime(t, "CreatedAt kept", got.CreatedAt, w.CreatedAt)

	// The same definition again is no new version.
	if got, err = b.s.UpdateWorkflow(b.ctx, store.UpdateWorkflowParams{ID: w.ID, Definition: []byte(def2)}); err != nil || got.Version != 2 {
		t.Errorf("UpdateWorkflow(same definition) = version %v, %v; want 2", got, err)
	}
	off := false
	if got, err = b.s.UpdateWorkflow(b.ctx, store.UpdateWorkflowParams{ID: w.ID, Enabled: &off}); err != nil || got.Enabled || got.Version != 2 {
		t.Fatalf("UpdateWorkflow(disable) = %+v, %v; want disabled at version 2", got, err)
	}
	if read, err := b.s.GetWorkflow(b.ctx, w.ID); err != nil || read.Enabled || read.Version != 2 || string(read.Definition) != def2 {
		t.Errorf("GetWorkflow after disable = %+v, %v", read, err)
	}
	// An editor who read version 1 does not overwrite version 2.
	_, err = b.s.UpdateWorkflow(b.ctx, store.UpdateWorkflowParams{ID: w.ID, Definition: []byte(workflowYAML), IfVersion: 1})
	wantErr(t, "UpdateWorkflow with a stale IfVersion", err, store.ErrConflict)
	if read, _ := b.s.GetWorkflow(b.ctx, w.ID); read == nil || read.Version != 2 {
		t.Errorf("a refused update changed the workflow: %+v", read)
	}
	on := true
	if got, err = b.s.UpdateWorkflow(b.ctx, store.UpdateWorkflowParams{ID: w.ID, Definition: []byte(workflowYAML), Enabled: &on, IfVersion: 2}); err != nil ||
		got.Version != 3 || !got.Enabled {
		t.Errorf("UpdateWorkflow(IfVersion 2) = %+v, %v; want version 3, enabled", got, err)
	}
	_, err = b.s.UpdateWorkflow(b.ctx, store.UpdateWorkflowParams{ID: store.NewID(), Enabled: &on})
	wantErr(t, "UpdateWorkflow of an unknown id", err, store.ErrNotFound)
	_, err = b.s.UpdateWorkflow(b.ctx, store.UpdateWorkflowParams{ID: w.ID, Definition: []byte{}})
	wantErr(t, "UpdateWorkflow to an empty definition", err, store.ErrInvalid)
}

func testWorkflowDelete(t *testing.T, h Harness) {
	_, b := setup(t, h)
	w := b.createWorkflow("web", "nightly", workflowYAML)
	if err := b.s.DeleteWorkflow(b.ctx, w.ID); err != nil {
		t.Fatalf("DeleteWorkflow: %v", err)
	}
	_, err := b.s.GetWorkflow(b.ctx, w.ID)
	wantErr(t, "GetWorkflow after delete", err, store.ErrNotFound)
	wantErr(t, "DeleteWorkflow again", b.s.DeleteWorkflow(b.ctx, w.ID), store.ErrNotFound)
	// The name is free again.
	b.createWorkflow("web", "nightly", workflowYAML)
	// A project with workflows and no runs can still be deleted, and takes them along.
	if err := b.s.DeleteProject(b.ctx, "web"); err != nil {
		t.Fatalf("DeleteProject of a project with a workflow: %v", err)
	}
	if list, err := b.s.ListWorkflows(b.ctx, store.ListWorkflowsParams{}); err != nil || len(list) != 0 {
		t.Errorf("ListWorkflows after DeleteProject = %d workflows, %v; want none", len(list), err)
	}
}

func (b *bundle) projectID(name string) uuid.UUID {
	b.t.Helper()
	p, err := b.s.GetProjectByName(b.ctx, name)
	if err != nil {
		b.t.Fatalf("GetProjectByName(%s): %v", name, err)
	}
	return p.ID
}

func testSkipTick(t *testing.T, h Harness) {
	_, b := setup(t, h)
	if err := b.s.CreateProject(b.ctx, connected("web")); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	id := b.projectID("web")
	t1 := epoch.Add(time.Hour)
	skip := func(key string, at time.Time, want bool) {
		t.Helper()
		got, err := b.s.SkipTick(b.ctx, id, store.ScheduleTick{Key: key, At: at})
		if err != nil || got != want {
			t.Errorf("SkipTick(%s, %s) = %v, %v; want %v", key, at.Format(time.RFC3339), got, err, want)
		}
	}
	skip("a", t1, true)
	skip("a", t1, false)                   // handled already
	skip("a", t1.Add(-time.Minute), false) // never backwards
	skip("b", t1.Add(-time.Minute), true)  // keys are independent
	skip("a", t1.Add(time.Minute), true)
	ticks, err := b.s.ScheduleTicks(b.ctx, id)
	if err != nil {
		t.Fatalf("ScheduleTicks: %v", err)
	}
	if len(ticks) != 2 {
		t.Errorf("ScheduleTicks = %v, want a and b", ticks)
	}
	wantTime(t, "tick of a", ticks["a"], t1.Add(time.Minute))
	wantTime(t, "tick of b", ticks["b"], t1.Add(-time.Minute))
	if other, err := b.s.ScheduleTicks(b.ctx, store.NewID()); err != nil || len(other) != 0 {
		t.Errorf("ScheduleTicks of another project = %v, %v; want none", other, err)
	}
	_, err = b.s.SkipTick(b.ctx, id, store.ScheduleTick{Key: "", At: t1})
	wantErr(t, "SkipTick without a key", err, store.ErrInvalid)
}

func (b *bundle) countRuns(project string) int {
	b.t.Helper()
	runs, err := b.s.ListRuns(b.ctx, store.ListRunsParams{Project: project, Limit: 500})
	if err != nil {
		b.t.Fatalf("ListRuns: %v", err)
	}
	return len(runs)
}

func testRunTakesTick(t *testing.T, h Harness) {
	_, b := setup(t, h)
	t1 := epoch.Add(time.Hour)
	tick := &store.ScheduleTick{Key: "file:.gantry.yml 0 * * * * UTC", At: t1}
	run, _ := b.createRun(workflowYAML, store.CreateRunParams{Project: "web", Tick: tick, Trigger: store.Trigger{Event: "schedule"}})
	ticks, err := b.s.ScheduleTicks(b.ctx, run.ProjectID)
	if err != nil {
		t.Fatalf("ScheduleTicks: %v", err)
	}
	wantTime(t, "tick after the run", ticks[tick.Key], t1)

	_, _, created, err := b.s.CreateRun(b.ctx, store.CreateRunParams{Project: "web", Tick: tick, Plan: compile(t, workflowYAML)})
	wantErr(t, "CreateRun of a tick taken", err, store.ErrConflict)
	if created {
		t.Error("CreateRun of a tick taken says created")
	}
	// A tick given up cannot fire afterwards either.
	t2 := t1.Add(time.Hour)
	if ok, err := b.s.SkipTick(b.ctx, run.ProjectID, store.ScheduleTick{Key: tick.Key, At: t2}); !ok || err != nil {
		t.Fatalf("SkipTick(t2) = %v, %v", ok, err)
	}
	_, _, _, err = b.s.CreateRun(b.ctx, store.CreateRunParams{Project: "web", Plan: compile(t, workflowYAML),
		Tick: &store.ScheduleTick{Key: tick.Key, At: t2}})
	wantErr(t, "CreateRun of a tick given up", err, store.ErrConflict)
	if n := b.countRuns("web"); n != 1 {
		t.Errorf("runs = %d, want 1: a refused tick created a run", n)
	}
	b.createRun(workflowYAML, store.CreateRunParams{Project: "web", Tick: &store.ScheduleTick{Key: tick.Key, At: t2.Add(time.Hour)}})
	if n := b.countRuns("web"); n != 2 {
		t.Errorf("runs = %d, want 2 after a later tick", n)
	}
}

// testConcurrentTick: replicas racing to fire one tick, each through its own store on
// one database, make exactly one run.
func testConcurrentTick(t *testing.T, h Harness) {
	dsn := h.NewDSN(t)
	ctx := t.Context()
	const replicas, tries = 3, 4
	stores := make([]store.Store, replicas)
	for i := range stores {
		s, err := h.Open(ctx, dsn, clock.NewFake(epoch))
		if err != nil {
			t.Fatalf("open replica %d: %v", i, err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
		stores[i] = s
	}
	// The project exists before the race, as a scheduled project does.
	if err := stores[0].CreateProject(ctx, connected("web")); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	plan := compile(t, workflowYAML)
	for round := range 3 {
		tick := &store.ScheduleTick{Key: "nightly", At: epoch.Add(time.Duration(round+1) * time.Hour)}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var created []uuid.UUID
		var errs []error
		start := make(chan struct{})
		for i := range replicas * tries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				run, _, ok, err := stores[i%replicas].CreateRun(ctx, store.CreateRunParams{Project: "web", Plan: plan, Tick: tick,
					Trigger: store.Trigger{Event: "schedule"}})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil && ok:
					created = append(created, run.ID)
				case err != nil && !errors.Is(err, store.ErrConflict):
					errs = append(errs, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("round %d: CreateRun failed otherwise than ErrConflict: %v", round, errs)
		}
		if len(created) != 1 {
			t.Fatalf("round %d: %d runs created for one tick (%v); want exactly 1", round, len(created), created)
		}
	}
	runs, err := stores[1].ListRuns(ctx, store.ListRunsParams{Project: "web"})
	if err != nil || len(runs) != 3 {
		t.Fatalf("ListRuns = %d runs, %v; want 3, one per tick", len(runs), err)
	}
}
