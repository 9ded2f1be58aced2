package api

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// environmentRoutes registers the environment routes. Anyone who reads the project may
// read its environments (they hold no secret); changing who may deploy and who approves
// is an admin's.
func (s *Server) environmentRoutes() {
	s.handle("GET /api/v1/projects/{name}/environments", on(thingProject, store.RoleViewer), s.listEnvironments)
	s.handle("GET /api/v1/projects/{name}/environments/{env}", on(thingProject, store.RoleViewer), s.getEnvironment)
	s.handle("PUT /api/v1/projects/{name}/environments/{env}", on(thingProject, store.RoleMaintainer), s.putEnvironment)
	s.handle("DELETE /api/v1/projects/{name}/environments/{env}", on(thingProject, store.RoleMaintainer), s.deleteEnvironment)
}

// environmentJSON is an environment as the API shows it and takes it (PUT reads the
// rules; name, project and times come from the path and the store).
type environmentJSON struct {
	Project           string   `json:"project"`
	Name              string   `json:"name"`
	Branches          []string `json:"branches"`
	Tags              []string `json:"tags"`
	RequiredApprovals int      `json:"required_approvals"`
	Approvers         []string `json:"approvers"`
	// ApprovalTimeout is a Go duration ("24h", "90m"); the default when none was set.
	ApprovalTimeout string `json:"approval_timeout"`
	// PreventSelfReview: the user who started a run may not approve its jobs.
	PreventSelfReview bool   `json:"prevent_self_review"`
	CreatedAt         string `json:"created_at"`
	UpdatedAt         string `json:"updated_at"`
}

func newEnvironmentJSON(project string, e *store.Environment) environmentJSON {
	orEmpty := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	return environmentJSON{Project: project, Name: e.Name, Branches: orEmpty(e.Branches), Tags: orEmpty(e.Tags),
		RequiredApprovals: e.RequiredApprovals, Approvers: orEmpty(e.Approvers), ApprovalTimeout: e.Timeout().String(),
		PreventSelfReview: e.PreventSelfReview, CreatedAt: formatTime(e.CreatedAt), UpdatedAt: formatTime(e.UpdatedAt)}
}

// putEnvironmentRequest is the body of PUT: the whole rule set, replacing the old one.
type putEnvironmentRequest struct {
	Branches          []string `json:"branches"`
	Tags              []string `json:"tags"`
	RequiredApprovals int      `json:"required_approvals"`
	Approvers         []string `json:"approvers"`
	ApprovalTimeout   string   `json:"approval_timeout"`
	PreventSelfReview bool     `json:"prevent_self_review"`
}

// environmentInPath reads the project (loaded) and the environment's name from the path.
func (s *Server) environmentInPath(w http.ResponseWriter, r *http.Request) (*store.Project, string, bool) {
	name := r.PathValue("env")
	if !pipeline.EnvironmentNamePattern.Regexp().MatchString(name) {
		writeRequestError(w, badRequest("environment name %q: use letters, digits and _ . - (at most 100, starting with a letter or digit)", name))
		return nil, "", false
	}
	p, ok := s.projectInPath(w, r)
	return p, name, ok
}

// deliverNotices tells a claimed job's log what store.NoRules says of its environment:
// that its project does not define it, so it gates nothing.
func (s *Server) deliverNotices(r *http.Request, c *store.Claim, out *claimedJSON) {
	spec := c.Job.Spec
	if spec == nil || spec.Environment == nil {
		return
	}
	ctx := r.Context()
	run := c.Run
	if run == nil {
		return
	}
	env, err := s.store.GetEnvironment(ctx, run.ProjectID, spec.Environment.Name)
	if errors.Is(err, store.ErrNotFound) {
		env, err = nil, nil
	}
	if err != nil {
		s.log.ErrorContext(ctx, "read a claimed job's environment", "job", c.Job.ID, "err", err)
		return
	}
	if env == nil && run.Project == "" {
		// The claim's run carries no project name; only a notice needs it.
		if run, err = s.store.GetRun(ctx, run.ID); err != nil {
			s.log.ErrorContext(ctx, "read a claimed job's run", "job", c.Job.ID, "err", err)
			return
		}
	}
	if msg := store.NoRules(run.Project, spec.Environment.Name, env); msg != "" {
		out.Notices = append(out.Notices, msg)
	}
}

func (s *Server) listEnvironments(w http.ResponseWriter, r *http.Request) {
	p, ok := s.projectInPath(w, r)
	if !ok {
		return
	}
	list, err := s.store.ListEnvironments(r.Context(), p.ID)
	if err != nil {
		s.storeError(w, r, "list environments", err)
		return
	}
	out := make([]environmentJSON, len(list))
	for i, e := range list {
		out[i] = newEnvironmentJSON(p.Name, e)
	}
	writeJSON(w, http.StatusOK, map[string]any{"environments": out})
}

func (s *Server) getEnvironment(w http.ResponseWriter, r *http.Request) {
	p, name, ok := s.environmentInPath(w, r)
	if !ok {
		return
	}
	e, err := s.store.GetEnvironment(r.Context(), p.ID, name)
	if err != nil {
		s.storeError(w, r, "get environment", err)
		return
	}
	writeJSON(w, http.StatusOK, newEnvironmentJSON(p.Name, e))
}

func (s *Server) putEnvironment(w http.ResponseWriter, r *http.Request) {
	project, rerr := pathProject(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	name := r.PathValue("env")
	if !pipeline.EnvironmentNamePattern.Regexp().MatchString(name) {
		writeRequestError(w, badRequest("environment name %q: use letters, digits and _ . - (at most 100, starting with a letter or digit)", name))
		return
	}
	var req putEnvironmentRequest
	if rerr := s.decodeJSON(w, r, &req); rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	e := &store.Environment{Name: name, Branches: req.Branches, Tags: req.Tags,
		RequiredApprovals: req.RequiredApprovals, Approvers: req.Approvers, PreventSelfReview: req.PreventSelfReview}
	if req.ApprovalTimeout != "" {
		d, err := time.ParseDuration(req.ApprovalTimeout)
		if err != nil || d <= 0 {
			writeRequestError(w, badRequest("approval_timeout %q: give a positive duration such as 24h or 90m", req.ApprovalTimeout))
			return
		}
		e.ApprovalTimeout = d
	}
	if err := e.Validate(); err != nil {
		writeRequestError(w, badRequest("%v", err))
		return
	}
	// An environment may be defined before the project's first run, as a secret may: a
	// caller allowed on every project (the access check let it this far) makes the
	// project on first use, as a run does.
	if rerr := s.ensureProject(r.Context(), project); rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	p, ok := s.projectInPath(w, r)
	if !ok {
		return
	}
	e.ProjectID = p.ID
	if err := s.store.PutEnvironment(r.Context(), e); err != nil {
		s.storeError(w, r, "put environment", err)
		return
	}
	_ = s.audit(r, auditEvent{Action: "environment.set", Project: p.Name, Target: name, Details: map[string]any{
		"required_approvals": e.RequiredApprovals, "approvers": e.Approvers, "branches": e.Branches, "tags": e.Tags,
		"approval_timeout": e.Timeout().String(), "prevent_self_review": e.PreventSelfReview}})
	writeJSON(w, http.StatusOK, newEnvironmentJSON(p.Name, e))
}

func (s *Server) deleteEnvironment(w http.ResponseWriter, r *http.Request) {
	p, name, ok := s.environmentInPath(w, r)
	if !ok {
		return
	}
	if err := s.store.DeleteEnvironment(r.Context(), p.ID, name); err != nil {
		s.storeError(w, r, fmt.Sprintf("delete environment %s", name), err)
		return
	}
	_ = s.audit(r, auditEvent{Action: "environment.deleted", Project: p.Name, Target: name})
	w.WriteHeader(http.StatusNoContent)
}
