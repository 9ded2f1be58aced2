package api

import (
	"net/http"
	"strings"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// variableRoutes registers the routes of a project's configuration variables, which a
// workflow reads as vars.NAME. They are the project maintainers' business, as secrets
// are, but they are not secret: every answer gives the value.
func (s *Server) variableRoutes() {
	s.handle("GET /api/v1/projects/{name}/variables", on(thingProject, store.RoleMaintainer), s.listVariables)
	s.handle("PUT /api/v1/projects/{name}/variables/{variable}", on(thingProject, store.RoleMaintainer), s.putVariable)
	s.handle("GET /api/v1/projects/{name}/variables/{variable}", on(thingProject, store.RoleMaintainer), s.getVariable)
	s.handle("DELETE /api/v1/projects/{name}/variables/{variable}", on(thingProject, store.RoleMaintainer), s.deleteVariable)
}

type variableJSON struct {
	Project     string `json:"project"`
	Name        string `json:"name"`
	Environment string `json:"environment"`
	Value       string `json:"value"`
	CreatedAt   string `json:"created_at"`
	UpdatedAt   string `json:"updated_at"`
}

func newVariableJSON(v *store.Variable) variableJSON {
	return variableJSON{Project: v.Project, Name: v.Name, Environment: v.Environment, Value: v.Value,
		CreatedAt: formatTime(v.CreatedAt), UpdatedAt: formatTime(v.UpdatedAt)}
}

// variablePath reads the project and the variable's name from the path. Names are
// case-insensitive, as on GitHub, and kept in upper case: one variable has one spelling
// in every answer.
func variablePath(r *http.Request) (project, name string, rerr *requestError) {
	project, rerr = pathProject(r)
	if rerr != nil {
		return "", "", rerr
	}
	name = r.PathValue("variable")
	if !pipeline.ValidVariableName(name) {
		return "", "", badRequest("variable name %q: use %s", name, pipeline.VariableNameRule)
	}
	return project, strings.ToUpper(name), nil
}

type putVariableRequest struct {
	Value       *string `json:"value"`
	Environment string  `json:"environment"`
}

func (s *Server) putVariable(w http.ResponseWriter, r *http.Request) {
	project, name, rerr := variablePath(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	var req putVariableRequest
	if rerr := s.decodeJSON(w, r, &req); rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	switch {
	case req.Value == nil:
		writeRequestError(w, badRequest(`"value" is required: {"value": "...", "environment": "..."}`))
		return
	case len(*req.Value) > store.MaxVariableBytes:
		writeRequestError(w, badRequest("the value is %d bytes; the most is %d", len(*req.Value), store.MaxVariableBytes))
		return
	}
	if msg := checkEnvironmentName(req.Environment); msg != "" {
		writeRequestError(w, badRequest("environment: %s", msg))
		return
	}
	if rerr := s.ensureProject(r.Context(), project); rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	v := &store.Variable{Project: project, Environment: req.Environment, Name: name, Value: *req.Value}
	// The value is not secret, but it may be large: the audit log keeps where, not what.
	created, err := s.store.PutVariable(withAudit(r, auditEvent{Action: "variable.set", Project: project, Target: name,
		Details: map[string]any{"environment": req.Environment}}), v)
	if err != nil {
		s.storeError(w, r, "put variable", err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, newVariableJSON(v))
}

func (s *Server) listVariables(w http.ResponseWriter, r *http.Request) {
	project, rerr := pathProject(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	list, err := s.store.ListVariables(r.Context(), project)
	if err != nil {
		s.storeError(w, r, "list variables", err)
		return
	}
	out := make([]variableJSON, len(list))
	for i, v := range list {
		out[i] = newVariableJSON(v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"variables": out})
}

func (s *Server) getVariable(w http.ResponseWriter, r *http.Request) {
	project, name, rerr := variablePath(r)
	if rerr == nil {
		var env string
		if env, rerr = environmentParam(r); rerr == nil {
			v, err := s.store.GetVariable(r.Context(), store.VariableKey{Project: project, Environment: env, Name: name})
			if err != nil {
				s.storeError(w, r, "get variable", err)
				return
			}
			writeJSON(w, http.StatusOK, newVariableJSON(v))
			return
		}
	}
	writeRequestError(w, rerr)
}

func (s *Server) deleteVariable(w http.ResponseWriter, r *http.Request) {
	project, name, rerr := variablePath(r)
	if rerr == nil {
		var env string
		if env, rerr = environmentParam(r); rerr == nil {
			ctx := withAudit(r, auditEvent{Action: "variable.deleted", Project: project, Target: name,
				Details: map[string]any{"environment": env}})
			if err := s.store.DeleteVariable(ctx, store.VariableKey{Project: project, Environment: env, Name: name}); err != nil {
				s.storeError(w, r, "delete variable", err)
				return
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	writeRequestError(w, rerr)
}
