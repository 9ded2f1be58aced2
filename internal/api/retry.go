package api

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// rerunRoutes registers the re-runs. POST /runs/{id}/retry and /jobs/{id}/retry are the
// older names: a run's retry re-runs its failed jobs, a job's retry is its re-run.
func (s *Server) rerunRoutes() {
	s.handle("POST /api/v1/runs/{id}/rerun", on(thingRun, store.RoleDeveloper), s.rerunRun)
	s.handle("POST /api/v1/jobs/{id}/rerun", on(thingJob, store.RoleDeveloper), s.rerunJob)
}

type rerunRequest struct {
	Jobs store.RerunSet `json:"jobs"`
}

// retryRun re-runs the failed, cancelled and skipped jobs of a finished run.
func (s *Server) retryRun(w http.ResponseWriter, r *http.Request) {
	s.rerun(w, r, store.RerunFailed)
}

// rerunRun re-runs a finished run's failed jobs or all of them, as the body says.
func (s *Server) rerunRun(w http.ResponseWriter, r *http.Request) {
	var req rerunRequest
	if rerr := s.decodeJSON(w, r, &req); rerr != nil {
		rerr.msg += `; want {"jobs": "failed"} or {"jobs": "all"}`
		writeRequestError(w, rerr)
		return
	}
	if req.Jobs != store.RerunFailed && req.Jobs != store.RerunAll {
		writeRequestError(w, badRequest(`jobs is %q; want "failed" (the failed, cancelled and skipped jobs and what needs them) or "all"`, req.Jobs))
		return
	}
	s.rerun(w, r, req.Jobs)
}

func (s *Server) rerun(w http.ResponseWriter, r *http.Request, which store.RerunSet) {
	id, rerr := pathID(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	ids, err := s.store.Rerun(r.Context(), store.RerunParams{RunID: id, Jobs: which, By: actorName(r)})
	if err != nil {
		s.storeError(w, r, "re-run run", err)
		return
	}
	s.auditRerun(r, "run.rerun", id, id, ids, map[string]any{"jobs": string(which)})
	out, ok := s.runView(w, r, id, runFeed{since: -1})
	if !ok {
		return
	}
	// The reopened jobs, said apart from the run as it now is: a worker may have run
	// them to the end already.
	out.Reopened = make([]string, len(ids))
	for i, j := range ids {
		out.Reopened[i] = j.String()
	}
	writeJSON(w, http.StatusAccepted, out)
}

// retryJob and rerunJob re-run a finished job (a success too) and every job downstream
// of it.
func (s *Server) retryJob(w http.ResponseWriter, r *http.Request) { s.rerunJob(w, r) }

func (s *Server) rerunJob(w http.ResponseWriter, r *http.Request) {
	id, rerr := pathID(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	// No body is asked for; one that is sent must be an empty object.
	body, rerr := s.readBody(w, r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	if len(bytes.TrimSpace(body)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		var none struct{}
		if err := dec.Decode(&none); err != nil {
			writeRequestError(w, badRequest("decode request: %v; a job's re-run takes no options: send no body or {}", err))
			return
		}
	}
	ids, err := s.store.Rerun(r.Context(), store.RerunParams{JobID: id, By: actorName(r)})
	if err != nil {
		s.storeError(w, r, "re-run job", err)
		return
	}
	if job, err := s.store.GetJob(r.Context(), id); err == nil {
		s.auditRerun(r, "job.rerun", job.RunID, id, ids, map[string]any{"job": job.Key})
	}
	s.writeJob(w, r, id, http.StatusAccepted)
}

// actorName names who a request acts for, as approvals and attempts name them: its token's
// user (its name when it names none), or anonymous with auth off.
func actorName(r *http.Request) string {
	tk := tokenFrom(r.Context())
	if tk == nil {
		return store.ActorAnonymous
	}
	if who := tk.Principal(); who != "" {
		return who
	}
	return tk.ID.String()
}

// auditRerun records a re-run with what it reopened.
func (s *Server) auditRerun(r *http.Request, action string, runID, target uuid.UUID, ids []uuid.UUID, details map[string]any) {
	project := ""
	if run, err := s.store.GetRun(r.Context(), runID); err == nil {
		project = run.Project
	}
	details["run_id"] = runID.String()
	details["jobs_reopened"] = len(ids)
	_ = s.audit(r, auditEvent{Action: action, Project: project, Target: target.String(), Details: details})
}
