package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/trigger"
	"github.com/google/uuid"
)

// codeInvalidWorkflow answers a workflow request whose fields are wrong.
const codeInvalidWorkflow = "invalid_workflow"

func (s *Server) workflowRoutes() {
	// createWorkflow checks developer on the project its body names.
	s.handle("POST /api/v1/workflows", users, s.createWorkflow)
	s.handle("GET /api/v1/workflows", users, s.listWorkflows)
	s.handle("GET /api/v1/workflows/{id}", on(thingWorkflow, store.RoleViewer), s.getWorkflow)
	s.handle("PATCH /api/v1/workflows/{id}", on(thingWorkflow, store.RoleDeveloper), s.updateWorkflow)
	s.handle("DELETE /api/v1/workflows/{id}", on(thingWorkflow, store.RoleDeveloper), s.deleteWorkflow)
	s.handle("POST /api/v1/workflows/{id}/dispatches", on(thingWorkflow, store.RoleDeveloper), s.dispatchWorkflow)
	s.handle("POST /api/v1/projects/{name}/dispatches", on(thingProject, store.RoleDeveloper), s.dispatchProject)
}

// workflowJSON is a workflow as the API shows it. Definition is only in the answers
// about one workflow, not in lists.
type workflowJSON struct {
	ID         string `json:"id"`
	Project    string `json:"project"`
	Name       string `json:"name"`
	Version    int    `json:"version"`
	Enabled    bool   `json:"enabled"`
	Definition string `json:"definition,omitempty"`
	// Inputs are the definition's on: dispatch inputs, what a dispatch form asks for.
	Inputs []pipeline.Input `json:"inputs"`
	// Schedules are the definition's on: schedule entries.
	Schedules []pipeline.Schedule `json:"schedules"`
	// WorkflowRun is the definition's on: workflow_run: the runs of the project whose
	// activity starts one of it.
	WorkflowRun *pipeline.WorkflowRunTrigger `json:"workflow_run,omitempty"`
	CreatedAt   string                       `json:"created_at"`
	UpdatedAt   string                       `json:"updated_at"`
}

func (s *Server) newWorkflowJSON(w *store.Workflow, withDefinition bool) workflowJSON {
	out := workflowJSON{
		ID: w.ID.String(), Project: w.Project, Name: w.Name, Version: w.Version, Enabled: w.Enabled,
		Inputs: []pipeline.Input{}, Schedules: []pipeline.Schedule{},
		CreatedAt: formatTime(w.CreatedAt), UpdatedAt: formatTime(w.UpdatedAt),
	}
	if withDefinition {
		out.Definition = string(w.Definition)
	}
	// A definition was valid when stored; one the limits now refuse shows no triggers.
	// Listing reads no other repository: only the triggers are shown.
	if plan, err := pipeline.Compile(w.Definition, pipeline.Options{Limits: s.limits, Workflows: pipeline.SkipWorkflows}); err == nil && plan.On != nil {
		if plan.On.Dispatch != nil {
			out.Inputs = append(out.Inputs, plan.On.Dispatch.Inputs...)
		}
		out.Schedules = append(out.Schedules, plan.On.Schedule...)
		out.WorkflowRun = plan.On.WorkflowRun
	}
	return out
}

// workflowRequest is the body of POST /api/v1/workflows and PATCH /api/v1/workflows/{id}.
type workflowRequest struct {
	Project    *string `json:"project"`
	Name       *string `json:"name"`
	Definition *string `json:"definition"`
	Enabled    *bool   `json:"enabled"`
	// Version (PATCH) is the version the change was made from: when the workflow has
	// moved on since, the change is refused (409) rather than overwrite the other.
	Version int `json:"version"`
}

func decodeWorkflowRequest(body []byte) (*workflowRequest, *requestError) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req workflowRequest
	if err := dec.Decode(&req); err != nil {
		return nil, badRequest("decode workflow request: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, badRequest("decode workflow request: unexpected data after the JSON object")
	}
	return &req, nil
}

// checkWorkflowName says what is wrong with a workflow name, or "": the rules of project
// names, and not empty.
func checkWorkflowName(name string) string {
	if strings.TrimSpace(name) == "" {
		return "is required"
	}
	return checkProjectName(name)
}

// compileDefinition compiles a workflow's definition as POST /api/v1/runs would.
func (s *Server) compileDefinition(ctx context.Context, def string) (*pipeline.Plan, *apiError) {
	if strings.TrimSpace(def) == "" {
		return nil, &apiError{status: http.StatusUnprocessableEntity, code: codeInvalidWorkflow,
			msg:     "definition: is required: the pipeline as YAML or JSON text",
			details: []errorDetail{{Path: "definition", Message: "is required", Code: codeInvalidWorkflow}}}
	}
	gitCtx, cancel := context.WithTimeout(ctx, s.hooks.fetchTimeout)
	defer cancel()
	plan, err := pipeline.Compile([]byte(def), pipeline.Options{Limits: s.limits, Workflows: s.workflows(gitCtx, nil)})
	if err != nil {
		return nil, invalidPipeline(err)
	}
	return plan, nil
}

// hasSchedules says whether a workflow's definition has schedules, compiled as the
// schedule loop compiles it: one stored under looser limits that no longer compiles has
// none.
func hasSchedules(def []byte, limits pipeline.Limits) bool {
	plan, err := pipeline.Compile(def, pipeline.Options{Limits: limits, Workflows: pipeline.SkipWorkflows})
	return err == nil && plan.On != nil && len(plan.On.Schedule) > 0
}

// roomForSchedules answers 422 and returns false when the project already has
// trigger.MaxScheduledWorkflows enabled workflows with schedules other than except, the
// one being written, which is to have schedules.
func (s *Server) roomForSchedules(w http.ResponseWriter, r *http.Request, project string, except uuid.UUID) bool {
	flows, err := s.store.ListWorkflows(r.Context(), store.ListWorkflowsParams{Project: project, EnabledOnly: true})
	if err != nil {
		s.storeError(w, r, "list workflows", err)
		return false
	}
	n := 0
	for _, wf := range flows {
		if wf.ID == except {
			continue
		}
		if hasSchedules(wf.Definition, s.limits) {
			n++
		}
	}
	if n < trigger.MaxScheduledWorkflows {
		return true
	}
	msg := fmt.Sprintf("project %s already has %d enabled workflows with on: schedule, the most a project may have (%d); "+
		"disable or delete one, or give this one no schedule", project, n, trigger.MaxScheduledWorkflows)
	writeError(w, http.StatusUnprocessableEntity, codeInvalidWorkflow, msg,
		[]errorDetail{{Path: "definition", Message: msg, Code: codeInvalidWorkflow}})
	return false
}

func (s *Server) createWorkflow(w http.ResponseWriter, r *http.Request) {
	body, rerr := s.readBody(w, r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	req, rerr := decodeWorkflowRequest(body)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	var problems []errorDetail
	add := func(field, msg string) {
		problems = append(problems, errorDetail{Path: field, Message: msg, Code: codeInvalidWorkflow})
	}
	wf := &store.Workflow{}
	if req.Name == nil {
		add("name", "is required")
	} else if msg := checkWorkflowName(*req.Name); msg != "" {
		add("name", msg)
	} else {
		wf.Name = *req.Name
	}
	if req.Project != nil {
		if msg := checkProjectName(*req.Project); msg != "" {
			add("project", msg)
		}
		wf.Project = *req.Project
	}
	if req.Version != 0 {
		add("version", "is for updates; a new workflow is version 1")
	}
	if len(problems) > 0 {
		msg := problems[0].Path + ": " + problems[0].Message
		if len(problems) > 1 {
			msg = fmt.Sprintf("the workflow has %d problems", len(problems))
		}
		writeError(w, http.StatusUnprocessableEntity, codeInvalidWorkflow, msg, problems)
		return
	}
	def := ""
	if req.Definition != nil {
		def = *req.Definition
	}
	plan, aerr := s.compileDefinition(r.Context(), def)
	if aerr != nil {
		aerr.write(w)
		return
	}
	wf.Definition = []byte(def)
	wf.Listens = store.WorkflowRunListens(plan.On)
	if !s.mayOnName(w, r, wf.Project, store.RoleDeveloper) {
		return
	}
	if s.refuseNewProjectName(w, r, wf.Project) {
		return
	}
	if (req.Enabled == nil || *req.Enabled) && plan.On != nil && len(plan.On.Schedule) > 0 {
		if !s.roomForSchedules(w, r, wf.Project, uuid.Nil) {
			return
		}
	}
	if err := s.store.CreateWorkflow(r.Context(), wf); err != nil {
		s.storeError(w, r, "create workflow", err)
		return
	}
	if req.Enabled != nil && !*req.Enabled {
		updated, err := s.store.UpdateWorkflow(r.Context(), store.UpdateWorkflowParams{ID: wf.ID, Enabled: req.Enabled})
		if err != nil {
			s.storeError(w, r, "disable workflow", err)
			return
		}
		wf = updated
	}
	w.Header().Set("Location", "/api/v1/workflows/"+wf.ID.String())
	writeJSON(w, http.StatusCreated, s.newWorkflowJSON(wf, true))
}

func (s *Server) listWorkflows(w http.ResponseWriter, r *http.Request) {
	project := r.URL.Query().Get("project")
	if msg := checkProjectName(project); msg != "" {
		writeError(w, http.StatusBadRequest, codeBadRequest, "project: "+msg, nil)
		return
	}
	list, err := s.store.ListWorkflows(r.Context(), store.ListWorkflowsParams{Project: project})
	if err != nil {
		s.storeError(w, r, "list workflows", err)
		return
	}
	out := make([]workflowJSON, 0, len(list))
	for _, wf := range list {
		if ok, err := s.canSee(r.Context(), wf.ProjectID, wf.Project); err != nil {
			s.storeError(w, r, "list workflows", err)
			return
		} else if ok {
			out = append(out, s.newWorkflowJSON(wf, false))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"workflows": out})
}

// pathWorkflow reads the workflow named by the {id} path value.
func (s *Server) pathWorkflow(w http.ResponseWriter, r *http.Request) (*store.Workflow, bool) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, codeBadRequest, fmt.Sprintf("workflow id %q is not a UUID", r.PathValue("id")), nil)
		return nil, false
	}
	wf, err := s.store.GetWorkflow(r.Context(), id)
	if err != nil {
		s.storeError(w, r, "get workflow", err)
		return nil, false
	}
	return wf, true
}

func (s *Server) getWorkflow(w http.ResponseWriter, r *http.Request) {
	wf, ok := s.pathWorkflow(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.newWorkflowJSON(wf, true))
}

func (s *Server) updateWorkflow(w http.ResponseWriter, r *http.Request) {
	body, rerr := s.readBody(w, r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	req, rerr := decodeWorkflowRequest(body)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	wf, ok := s.pathWorkflow(w, r)
	if !ok {
		return
	}
	var problems []errorDetail
	if req.Name != nil && *req.Name != wf.Name {
		problems = append(problems, errorDetail{Path: "name", Code: codeInvalidWorkflow,
			Message: "a workflow cannot be renamed: create one under the new name and delete this one"})
	}
	if req.Project != nil && *req.Project != wf.Project {
		problems = append(problems, errorDetail{Path: "project", Code: codeInvalidWorkflow,
			Message: "a workflow cannot move to another project"})
	}
	if len(problems) > 0 {
		writeError(w, http.StatusUnprocessableEntity, codeInvalidWorkflow, problems[0].Path+": "+problems[0].Message, problems)
		return
	}
	if req.Definition == nil && req.Enabled == nil {
		writeError(w, http.StatusBadRequest, codeBadRequest, "nothing to change: give a definition or enabled", nil)
		return
	}
	p := store.UpdateWorkflowParams{ID: wf.ID, Enabled: req.Enabled, IfVersion: req.Version}
	def := wf.Definition
	if req.Definition != nil {
		plan, aerr := s.compileDefinition(r.Context(), *req.Definition)
		if aerr != nil {
			aerr.write(w)
			return
		}
		p.Definition = []byte(*req.Definition)
		p.Listens = store.WorkflowRunListens(plan.On)
		def = p.Definition
	}
	enabled := wf.Enabled
	if req.Enabled != nil {
		enabled = *req.Enabled
	}
	// Only a workflow that starts to count among the project's scheduled ones is
	// checked: one that already counted may still be edited in a project over the cap.
	if enabled && !(wf.Enabled && hasSchedules(wf.Definition, s.limits)) && hasSchedules(def, s.limits) {
		if !s.roomForSchedules(w, r, wf.Project, wf.ID) {
			return
		}
	}
	updated, err := s.store.UpdateWorkflow(r.Context(), p)
	if err != nil {
		s.storeError(w, r, "update workflow", err)
		return
	}
	writeJSON(w, http.StatusOK, s.newWorkflowJSON(updated, true))
}

func (s *Server) deleteWorkflow(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, codeBadRequest, fmt.Sprintf("workflow id %q is not a UUID", r.PathValue("id")), nil)
		return
	}
	if err := s.store.DeleteWorkflow(r.Context(), id); err != nil {
		s.storeError(w, r, "delete workflow", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// dispatchWorkflow starts a run of a workflow's current version: POST
// /api/v1/workflows/{id}/dispatches. A registered workflow is always dispatchable (that
// is what it is registered for); its on: dispatch, when it has one, declares the inputs.
// In a project connected to a repository the run checks out ref (default: the default
// branch); elsewhere there is no ref to give.
func (s *Server) dispatchWorkflow(w http.ResponseWriter, r *http.Request) {
	body, rerr := s.readBody(w, r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	ref, given, rerr := decodeDispatch(body)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	wf, ok := s.pathWorkflow(w, r)
	if !ok {
		return
	}
	if !wf.Enabled {
		writeError(w, http.StatusConflict, codeDisabled,
			fmt.Sprintf("workflow %s (%s/%s) is disabled: enable it with PATCH {\"enabled\": true}", wf.ID, wf.Project, wf.Name), nil)
		return
	}
	plan, aerr := s.compileDefinition(r.Context(), string(wf.Definition))
	if aerr != nil {
		aerr.write(w)
		return
	}
	values, aerr := checkInputs(plan.On, given)
	if aerr != nil {
		aerr.write(w)
		return
	}
	proj, err := s.store.GetProjectByName(r.Context(), wf.Project)
	if err != nil {
		s.storeError(w, r, "get project", err)
		return
	}
	var at *atRef
	switch {
	case proj.RepoURL != "":
		if at, aerr = s.resolveProjectRef(r.Context(), proj, ref, false); aerr != nil {
			aerr.write(w)
			return
		}
	case ref != "":
		writeError(w, http.StatusUnprocessableEntity, codeNoRepository,
			fmt.Sprintf("ref: project %q is not connected to a repository, so there is no ref to run at", proj.Name), nil)
		return
	}
	if plan.Name == "" {
		plan.Name = wf.Name
	}
	// The commit is the ref's in the mirror, but the steps are the workflow's, which
	// whoever registered it wrote: the ref counts only when an admin dispatches.
	tr := dispatchTrigger(r.Context(), proj, at, values, adminRef(r.Context()))
	tr.WorkflowID, tr.WorkflowVersion = wf.ID.String(), wf.Version
	s.dispatchRun(w, r, store.CreateRunParams{
		Project: wf.Project, Trigger: tr, Definition: wf.Definition, Plan: plan, Env: inputEnv(values),
	})
}
