package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/source/sourcetest"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/trigger"
)

type workflowView struct {
	ID         string `json:"id"`
	Project    string `json:"project"`
	Name       string `json:"name"`
	Version    int    `json:"version"`
	Enabled    bool   `json:"enabled"`
	Definition string `json:"definition"`
	Inputs     []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"inputs"`
	Schedules []struct {
		Cron string `json:"cron"`
	} `json:"schedules"`
}

// dispatchPipeline declares one input of each kind that can go wrong.
const dispatchPipeline = `name: deploy
on:
  dispatch:
    inputs:
      environment: { type: choice, options: [staging, production], required: true }
      dry_run: { type: boolean, default: false }
      replicas: { type: number, default: 2 }
      note: { type: string }
jobs:
  deploy:
    steps:
      - run: ./deploy.sh
`

func (b *bundle) createWorkflow(t *testing.T, project, name, def string) workflowView {
	t.Helper()
	r := b.do(t, http.MethodPost, "/api/v1/workflows", "application/json",
		mustJSON(t, map[string]any{"project": project, "name": name, "definition": def}), nil)
	if r.status != http.StatusCreated {
		t.Fatalf("create workflow: status %d: %s", r.status, r.body)
	}
	var v workflowView
	r.decode(t, &v)
	return v
}

func (b *bundle) patchWorkflow(t *testing.T, id string, req map[string]any) response {
	t.Helper()
	return b.do(t, http.MethodPatch, "/api/v1/workflows/"+id, "application/json", mustJSON(t, req), nil)
}

func detailPaths(e errorView) []string {
	var out []string
	for _, d := range e.Error.Details {
		out = append(out, d.Path)
	}
	sort.Strings(out)
	return out
}

func TestWorkflowsCRUD(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := b.createWorkflow(t, "web", "deploy", dispatchPipeline)
	if wf.ID == "" || wf.Version != 1 || !wf.Enabled || wf.Project != "web" || wf.Definition != dispatchPipeline {
		t.Fatalf("created workflow = %+v", wf)
	}
	var inputs []string
	for _, in := range wf.Inputs {
		inputs = append(inputs, in.Name+":"+in.Type)
	}
	if !slices.Equal(inputs, []string{"environment:choice", "dry_run:boolean", "replicas:number", "note:string"}) {
		t.Errorf("inputs = %v, want the on: dispatch inputs in order", inputs)
	}

	// Validated like POST /api/v1/runs: every mistake, with its place.
	bad := "jobs:\n  a:\n    needs: [nope]\n    steps: []\n  b:\n    runs_on: 5\n"
	r := b.do(t, http.MethodPost, "/api/v1/workflows", "application/json",
		mustJSON(t, map[string]any{"project": "web", "name": "bad", "definition": bad}), nil)
	e := expectError(t, r, http.StatusUnprocessableEntity, "invalid_pipeline")
	if len(e.Error.Details) < 2 || e.Error.Details[0].Line == 0 {
		t.Errorf("invalid definition: details %+v; want every error with its line", e.Error.Details)
	}
	r = b.do(t, http.MethodPost, "/api/v1/workflows", "application/json", mustJSON(t, map[string]any{"project": "web", "definition": simplePipeline}), nil)
	expectError(t, r, http.StatusUnprocessableEntity, "invalid_workflow")
	r = b.do(t, http.MethodPost, "/api/v1/workflows", "application/json", mustJSON(t, map[string]any{"project": "web", "name": "empty"}), nil)
	expectError(t, r, http.StatusUnprocessableEntity, "invalid_workflow")
	r = b.do(t, http.MethodPost, "/api/v1/workflows", "application/json", `{"name": "x", "definiton": "typo"}`, nil)
	expectError(t, r, http.StatusBadRequest, "bad_request")
	r = b.do(t, http.MethodPost, "/api/v1/workflows", "application/json",
		mustJSON(t, map[string]any{"project": "web", "name": "deploy", "definition": simplePipeline}), nil)
	expectError(t, r, http.StatusConflict, "conflict")

	b.createWorkflow(t, "api", "nightly", simplePipeline)
	list := func(query string) []string {
		t.Helper()
		var v struct {
			Workflows []workflowView `json:"workflows"`
		}
		b.get(t, "/api/v1/workflows"+query).decode(t, &v)
		var out []string
		for _, w := range v.Workflows {
			if w.Definition != "" {
				t.Errorf("a listed workflow carries its definition")
			}
			out = append(out, w.Project+"/"+w.Name)
		}
		return out
	}
	if got := list(""); !slices.Equal(got, []string{"api/nightly", "web/deploy"}) {
		t.Errorf("list = %v", got)
	}
	if got := list("?project=web"); !slices.Equal(got, []string{"web/deploy"}) {
		t.Errorf("list ?project=web = %v", got)
	}

	// A new definition is a new version; the same one again is not.
	r = b.patchWorkflow(t, wf.ID, map[string]any{"definition": simplePipeline, "version": 1})
	var got workflowView
	if r.status != http.StatusOK {
		t.Fatalf("patch definition: %d %s", r.status, r.body)
	}
	r.decode(t, &got)
	if got.Version != 2 || got.Definition != simplePipeline || len(got.Inputs) != 0 {
		t.Errorf("after a new definition: %+v; want version 2 without inputs", got)
	}
	b.patchWorkflow(t, wf.ID, map[string]any{"definition": simplePipeline}).decode(t, &got)
	if got.Version != 2 {
		t.Errorf("the same definition again made version %d, want 2", got.Version)
	}
	// An edit made from version 1 does not overwrite version 2.
	expectError(t, b.patchWorkflow(t, wf.ID, map[string]any{"definition": dispatchPipeline, "version": 1}), http.StatusConflict, "conflict")
	expectError(t, b.patchWorkflow(t, wf.ID, map[string]any{"definition": bad}), http.StatusUnprocessableEntity, "invalid_pipeline")
	expectError(t, b.patchWorkflow(t, wf.ID, map[string]any{"name": "other"}), http.StatusUnprocessableEntity, "invalid_workflow")
	expectError(t, b.patchWorkflow(t, wf.ID, map[string]any{}), http.StatusBadRequest, "bad_request")
	b.patchWorkflow(t, wf.ID, map[string]any{"enabled": false}).decode(t, &got)
	if got.Enabled || got.Version != 2 {
		t.Errorf("after disabling: %+v", got)
	}
	b.get(t, "/api/v1/workflows/"+wf.ID).decode(t, &got)
	if got.Enabled || got.Version != 2 || got.Definition != simplePipeline {
		t.Errorf("GET after disabling: %+v", got)
	}

	if r := b.do(t, http.MethodDelete, "/api/v1/workflows/"+wf.ID, "", "", nil); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	expectError(t, b.get(t, "/api/v1/workflows/"+wf.ID), http.StatusNotFound, "not_found")
	expectError(t, b.get(t, "/api/v1/workflows/not-a-uuid"), http.StatusBadRequest, "bad_request")
	expectError(t, b.do(t, http.MethodDelete, "/api/v1/workflows/"+wf.ID, "", "", nil), http.StatusNotFound, "not_found")
}

func (b *bundle) dispatch(t *testing.T, path string, req map[string]any) response {
	t.Helper()
	return b.do(t, http.MethodPost, path, "application/json", mustJSON(t, req), nil)
}

func (b *bundle) storedRun(t *testing.T, id string) *store.Run {
	t.Helper()
	run, err := b.store.GetRun(t.Context(), mustUUID(t, id))
	if err != nil {
		t.Fatalf("GetRun: %v", err)
	}
	return run
}

func TestWorkflowDispatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := b.createWorkflow(t, "ops", "deploy", dispatchPipeline)
	path := "/api/v1/workflows/" + wf.ID + "/dispatches"

	r := b.dispatch(t, path, map[string]any{"inputs": map[string]any{"environment": "staging", "dry_run": true, "replicas": 1e1}})
	if r.status != http.StatusAccepted {
		t.Fatalf("dispatch: %d %s", r.status, r.body)
	}
	var run runView
	r.decode(t, &run)
	if run.Project != "ops" || run.Name != "deploy" || len(run.Jobs) != 1 || run.Jobs[0].Status != "queued" {
		t.Errorf("dispatched run = %+v", run)
	}
	stored := b.storedRun(t, run.ID)
	tr := stored.Trigger
	wantInputs := store.InputValues{"environment": "staging", "dry_run": "true", "replicas": "10", "note": ""}
	if tr.Event != "dispatch" || tr.WorkflowID != wf.ID || tr.WorkflowVersion != 1 || tr.Inputs == nil || !mapsEqual(*tr.Inputs, wantInputs) {
		t.Errorf("trigger = %+v (inputs %v); want event dispatch, workflow %s version 1, inputs %v", tr, tr.Inputs, wf.ID, wantInputs)
	}
	wantEnv := map[string]string{"GANTRY_INPUT_ENVIRONMENT": "staging", "GANTRY_INPUT_DRY_RUN": "true",
		"GANTRY_INPUT_REPLICAS": "10", "GANTRY_INPUT_NOTE": ""}
	if !mapsEqual(stored.Env, wantEnv) {
		t.Errorf("run env = %v, want %v", stored.Env, wantEnv)
	}

	// Every bad input is listed, each with its path.
	r = b.dispatch(t, path, map[string]any{"inputs": map[string]any{"environment": "prod", "replicas": "many", "colour": "blue", "dry_run": "maybe"}})
	e := expectError(t, r, http.StatusUnprocessableEntity, "invalid_inputs")
	if got := detailPaths(e); !slices.Equal(got, []string{"inputs.colour", "inputs.dry_run", "inputs.environment", "inputs.replicas"}) {
		t.Errorf("bad inputs listed %v; want colour, dry_run, environment, replicas", got)
	}
	e = expectError(t, b.dispatch(t, path, map[string]any{}), http.StatusUnprocessableEntity, "invalid_inputs")
	if !strings.Contains(e.Error.Message, "environment") || !strings.Contains(e.Error.Message, "required") {
		t.Errorf("missing required input: message %q", e.Error.Message)
	}
	expectError(t, b.dispatch(t, path, map[string]any{"inputs": map[string]any{"environment": []string{"x"}}}), http.StatusBadRequest, "bad_request")
	// No repository: no ref to run at.
	expectError(t, b.dispatch(t, path, map[string]any{"ref": "main", "inputs": map[string]any{"environment": "staging"}}),
		http.StatusUnprocessableEntity, "no_repository")

	// Disabled: refused, and nothing is created.
	b.patchWorkflow(t, wf.ID, map[string]any{"enabled": false})
	expectError(t, b.dispatch(t, path, map[string]any{"inputs": map[string]any{"environment": "staging"}}), http.StatusConflict, "disabled")
	runs, err := b.store.ListRuns(t.Context(), store.ListRunsParams{Project: "ops"})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs of ops = %d, %v; want only the first dispatch's", len(runs), err)
	}

	// Enabled again with a new version: the run is of the current one.
	r = b.patchWorkflow(t, wf.ID, map[string]any{"enabled": true, "definition": strings.Replace(dispatchPipeline, "./deploy.sh", "./deploy.sh --v2", 1)})
	if r.status != http.StatusOK {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	r = b.dispatch(t, path, map[string]any{"inputs": map[string]any{"environment": "production"}})
	if r.status != http.StatusAccepted {
		t.Fatalf("dispatch of version 2: %d %s", r.status, r.body)
	}
	r.decode(t, &run)
	def, err := b.store.RunDefinition(t.Context(), mustUUID(t, run.ID))
	if st := b.storedRun(t, run.ID); err != nil || st.Trigger.WorkflowVersion != 2 || !strings.Contains(string(def), "--v2") {
		t.Errorf("run of version %d with definition %q (%v); want version 2's", st.Trigger.WorkflowVersion, def, err)
	}
	expectError(t, b.dispatch(t, "/api/v1/workflows/"+store.NewID().String()+"/dispatches", nil), http.StatusNotFound, "not_found")
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestProjectDispatch(t *testing.T) {
	t.Parallel()
	b := hookSetup(t)
	repo := sourcetest.NewRepo(t)
	mainSHA := repo.Commit("refs/heads/main", map[string]string{".gantry.yml": dispatchPipeline})
	devSHA := repo.Commit("refs/heads/dev", map[string]string{".gantry.yml": pipelineNamed("no-dispatch")})
	b.createProject(t, map[string]any{"name": "app", "repo_url": repo.URL(), "provider": "generic", "default_branch": "main"})
	path := "/api/v1/projects/app/dispatches"

	r := b.dispatch(t, path, map[string]any{"inputs": map[string]any{"environment": "staging"}})
	if r.status != http.StatusAccepted {
		t.Fatalf("dispatch: %d %s", r.status, r.body)
	}
	var run runView
	r.decode(t, &run)
	tr := b.storedRun(t, run.ID).Trigger
	if tr.Event != "dispatch" || tr.SHA != mainSHA || tr.Ref != "refs/heads/main" || tr.Branch != "main" || tr.CloneURL != repo.URL() {
		t.Errorf("trigger = %+v; want dispatch of main at %s, cloned from %s", tr, mainSHA, repo.URL())
	}
	if tr.Inputs == nil || (*tr.Inputs)["environment"] != "staging" || (*tr.Inputs)["dry_run"] != "false" {
		t.Errorf("inputs = %v", tr.Inputs)
	}

	// The file at the ref decides: dev's has no on: dispatch.
	e := expectError(t, b.dispatch(t, path, map[string]any{"ref": "dev"}), http.StatusUnprocessableEntity, "no_dispatch")
	if !strings.Contains(e.Error.Message, "the pipeline has no on: dispatch") || !strings.Contains(e.Error.Message, devSHA) {
		t.Errorf("no_dispatch message %q", e.Error.Message)
	}
	// A commit id is a ref too.
	r = b.dispatch(t, path, map[string]any{"ref": mainSHA, "inputs": map[string]any{"environment": "production"}})
	if r.status != http.StatusAccepted {
		t.Fatalf("dispatch at a sha: %d %s", r.status, r.body)
	}
	r.decode(t, &run)
	if tr := b.storedRun(t, run.ID).Trigger; tr.SHA != mainSHA || tr.Branch != "" {
		t.Errorf("dispatch at a sha: trigger %+v", tr)
	}
	expectError(t, b.dispatch(t, path, map[string]any{"ref": "nope"}), http.StatusUnprocessableEntity, "ref_not_found")
	expectError(t, b.dispatch(t, path, map[string]any{"ref": "main~1"}), http.StatusUnprocessableEntity, "bad_request")
	e = expectError(t, b.dispatch(t, path, map[string]any{"inputs": map[string]any{"environment": "qa", "extra": "1"}}),
		http.StatusUnprocessableEntity, "invalid_inputs")
	if got := detailPaths(e); !slices.Equal(got, []string{"inputs.environment", "inputs.extra"}) {
		t.Errorf("bad inputs listed %v", got)
	}
	expectError(t, b.dispatch(t, "/api/v1/projects/nope/dispatches", nil), http.StatusNotFound, "not_found")
	b.createRun(t, "plain", "")
	expectError(t, b.dispatch(t, "/api/v1/projects/plain/dispatches", nil), http.StatusUnprocessableEntity, "no_repository")
	r = b.do(t, http.MethodPost, path, "application/json", `{"ref": "main", "input": {}}`, nil)
	expectError(t, r, http.StatusBadRequest, "bad_request")
}

// TestWorkflowAuth: with authentication on, a read token may list and read workflows
// but not register or dispatch one; a write token may, and the run names it as actor.
func TestWorkflowAuth(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) { c.Auth = true })
	reader, err := api.IssueToken(t.Context(), b.store, "dashboard", store.RoleRead, "")
	if err != nil {
		t.Fatal(err)
	}
	writer, err := api.IssueToken(t.Context(), b.store, "release-bot", store.RoleWrite, "")
	if err != nil {
		t.Fatal(err)
	}
	as := func(token string) map[string]string { return map[string]string{"Authorization": "Bearer " + token} }
	body := mustJSON(t, map[string]any{"project": "ops", "name": "deploy", "definition": dispatchPipeline})
	expectError(t, b.do(t, http.MethodPost, "/api/v1/workflows", "application/json", body, nil), http.StatusUnauthorized, "unauthorized")
	expectError(t, b.do(t, http.MethodPost, "/api/v1/workflows", "application/json", body, as(reader)), http.StatusForbidden, "forbidden")
	r := b.do(t, http.MethodPost, "/api/v1/workflows", "application/json", body, as(writer))
	if r.status != http.StatusCreated {
		t.Fatalf("create with a write token: %d %s", r.status, r.body)
	}
	var wf workflowView
	r.decode(t, &wf)
	if r := b.do(t, http.MethodGet, "/api/v1/workflows/"+wf.ID, "", "", as(reader)); r.status != http.StatusOK {
		t.Errorf("get with a read token: %d %s", r.status, r.body)
	}
	path := "/api/v1/workflows/" + wf.ID + "/dispatches"
	dispatch := mustJSON(t, map[string]any{"inputs": map[string]any{"environment": "staging"}})
	expectError(t, b.do(t, http.MethodPost, path, "application/json", dispatch, as(reader)), http.StatusForbidden, "forbidden")
	expectError(t, b.do(t, http.MethodPost, "/api/v1/projects/ops/dispatches", "application/json", dispatch, as(reader)), http.StatusForbidden, "forbidden")
	r = b.do(t, http.MethodPost, path, "application/json", dispatch, as(writer))
	if r.status != http.StatusAccepted {
		t.Fatalf("dispatch with a write token: %d %s", r.status, r.body)
	}
	var run runView
	r.decode(t, &run)
	if got := b.storedRun(t, run.ID).Trigger.Actor; got != "release-bot" {
		t.Errorf("actor = %q, want the token's name", got)
	}
}

// TestDispatchInputsReachConditions: a job's if: reads a dispatch input as
// env.GANTRY_INPUT_<NAME>.
func TestDispatchInputsReachConditions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wf := b.createWorkflow(t, "ops", "gated", `on:
  dispatch:
    inputs:
      target: { type: choice, options: [staging, production], required: true }
jobs:
  deploy:
    if: env.GANTRY_INPUT_TARGET == "production"
    steps: [ { run: ./deploy.sh } ]
`)
	for target, want := range map[string]string{"staging": "skipped", "production": "queued"} {
		r := b.dispatch(t, "/api/v1/workflows/"+wf.ID+"/dispatches", map[string]any{"inputs": map[string]any{"target": target}})
		if r.status != http.StatusAccepted {
			t.Fatalf("dispatch %s: %d %s", target, r.status, r.body)
		}
		var run runView
		r.decode(t, &run)
		if len(run.Jobs) != 1 || run.Jobs[0].Status != want {
			t.Errorf("target %s: jobs %+v, want deploy %s", target, run.Jobs, want)
		}
	}
}

// TestScheduledWorkflowsPerProjectCap: a project takes at most trigger.MaxScheduledWorkflows
// enabled workflows with on: schedule; one more is refused at registration, when enabled
// and when given a schedule, with a message naming the cap, and a definition with more
// distinct schedules than a definition may have is refused naming that cap.
func TestScheduledWorkflowsPerProjectCap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	scheduled := func(minute int) string {
		return fmt.Sprintf("on: { schedule: [ { cron: \"%d * * * *\" } ] }\njobs: { a: { steps: [ { run: \"true\" } ] } }\n", minute)
	}
	for i := range trigger.MaxScheduledWorkflows {
		b.createWorkflow(t, "ops", fmt.Sprintf("w%d", i), scheduled(i))
	}
	// Workflows without schedules, disabled ones and other projects' are not counted.
	manual := b.createWorkflow(t, "ops", "manual", simplePipeline)
	b.createWorkflow(t, "web", "nightly", scheduled(0))
	r := b.do(t, http.MethodPost, "/api/v1/workflows", "application/json",
		mustJSON(t, map[string]any{"project": "ops", "name": "off", "definition": scheduled(1), "enabled": false}), nil)
	if r.status != http.StatusCreated {
		t.Fatalf("create a disabled scheduled workflow: status %d: %s", r.status, r.body)
	}
	var off workflowView
	r.decode(t, &off)

	wantCap := func(what string, r response) {
		t.Helper()
		e := expectError(t, r, http.StatusUnprocessableEntity, "invalid_workflow")
		if want := fmt.Sprintf("already has %d enabled workflows with on: schedule, the most a project may have (%d)", trigger.MaxScheduledWorkflows, trigger.MaxScheduledWorkflows); !strings.Contains(e.Error.Message, want) {
			t.Errorf("%s: message %q; want it to contain %q", what, e.Error.Message, want)
		}
	}
	wantCap("one more", b.do(t, http.MethodPost, "/api/v1/workflows", "application/json",
		mustJSON(t, map[string]any{"project": "ops", "name": "extra", "definition": scheduled(30)}), nil))
	wantCap("enabling one", b.patchWorkflow(t, off.ID, map[string]any{"enabled": true}))
	wantCap("giving one a schedule", b.patchWorkflow(t, manual.ID, map[string]any{"definition": scheduled(31)}))
	// A workflow that already counts may still change.
	var list struct {
		Workflows []workflowView `json:"workflows"`
	}
	b.do(t, http.MethodGet, "/api/v1/workflows?project=ops", "", "", nil).decode(t, &list)
	for _, wf := range list.Workflows {
		if wf.Name == "w0" {
			if r := b.patchWorkflow(t, wf.ID, map[string]any{"definition": scheduled(45)}); r.status != http.StatusOK {
				t.Errorf("edit a counted workflow: status %d: %s", r.status, r.body)
			}
		}
	}

	var many strings.Builder
	many.WriteString("on:\n  schedule:\n")
	for i := range pipeline.MaxSchedules + 1 {
		fmt.Fprintf(&many, "    - cron: \"%d * * * *\"\n", i)
	}
	many.WriteString("jobs: { a: { steps: [ { run: \"true\" } ] } }\n")
	r = b.do(t, http.MethodPost, "/api/v1/workflows", "application/json",
		mustJSON(t, map[string]any{"project": "web", "name": "many", "definition": many.String()}), nil)
	e := expectError(t, r, http.StatusUnprocessableEntity, "invalid_pipeline")
	if want := fmt.Sprintf("at most %d distinct schedules, not %d", pipeline.MaxSchedules, pipeline.MaxSchedules+1); !strings.Contains(e.Error.Message, want) &&
		(len(e.Error.Details) == 0 || !strings.Contains(e.Error.Details[0].Message, want)) {
		t.Errorf("too many schedules: %+v; want %q", e.Error, want)
	}
}
