package api

import (
	"errors"
	"net/http"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// inboxRoutes registers the approvals inbox: what waits for the caller's approval.
func (s *Server) inboxRoutes() {
	s.handle("GET /api/v1/approvals", users, s.listInbox)
}

// inboxItemJSON is a job waiting for the caller's approval, with its run.
type inboxItemJSON struct {
	Job         jobJSON `json:"job"`
	RunID       string  `json:"run_id"`
	RunName     string  `json:"run_name"`
	RunNumber   int     `json:"run_number"`
	Project     string  `json:"project"`
	Ref         string  `json:"ref,omitempty"`
	Author      string  `json:"author,omitempty"`
	Environment string  `json:"environment"`
	Required    int     `json:"required"`
	Approved    int     `json:"approved"`
	// SelfReview: the caller started the run and the environment prevents self-review;
	// they may reject it, not approve it.
	SelfReview bool `json:"self_review,omitempty"`
}

// listInbox lists the jobs waiting for approval, of the projects the caller sees, that
// the caller may decide on (the environment names them or a role they hold) and has not
// approved yet, those whose wait ends first first.
func (s *Server) listInbox(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ids, all, err := s.visibleProjects(ctx)
	if err != nil {
		s.storeError(w, r, "list visible projects", err)
		return
	}
	p := store.ListWaitingApprovalParams{}
	if !all {
		p.ProjectIDs = ids
	}
	jobs, err := s.store.ListWaitingApproval(ctx, p)
	if err != nil {
		s.storeError(w, r, "list jobs waiting for approval", err)
		return
	}
	who := actorName(r)
	type envKey struct {
		project uuid.UUID
		name    string
	}
	envs := map[envKey]*store.Environment{}
	roles := map[uuid.UUID]store.Role{}
	runs := map[uuid.UUID]*store.Run{}
	out := []inboxItemJSON{}
	for _, j := range jobs {
		if j.Spec == nil || j.Spec.Environment == nil {
			continue
		}
		k := envKey{j.ProjectID, j.Spec.Environment.Name}
		env, seen := envs[k]
		if !seen {
			env, err = s.store.GetEnvironment(ctx, k.project, k.name)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				s.storeError(w, r, "read environment", err)
				return
			}
			envs[k] = env
		}
		role, seen := roles[j.ProjectID]
		if !seen {
			if role, err = s.roleOn(ctx, j.ProjectID, ""); err != nil {
				s.storeError(w, r, "check access", err)
				return
			}
			roles[j.ProjectID] = role
		}
		// The rule DecideJob applies.
		if s.auth && !(env != nil && env.MayApprove(who, role)) && !(env == nil && role == store.RoleAdmin) {
			continue
		}
		decisions, err := s.store.ListApprovals(ctx, j.ID)
		if err != nil {
			s.storeError(w, r, "list approvals", err)
			return
		}
		approved, mine := 0, false
		for _, d := range decisions {
			if d.Decision == store.Approved {
				approved++
				mine = mine || d.Approver == who
			}
		}
		if mine {
			continue // waiting for others now
		}
		run, seen := runs[j.RunID]
		if !seen {
			if run, err = s.store.GetRun(ctx, j.RunID); err != nil {
				s.storeError(w, r, "get run", err)
				return
			}
			runs[j.RunID] = run
		}
		item := inboxItemJSON{Job: newJobJSON(j), RunID: run.ID.String(), RunName: run.Name, RunNumber: run.Number, Project: run.Project,
			Ref: run.Trigger.Ref, Author: run.Trigger.Author(), Environment: k.name, Required: 1, Approved: approved,
			SelfReview: env.SelfReview(store.Approved, who, run.Trigger)}
		if env != nil {
			item.Required = max(env.RequiredApprovals, 1)
		}
		out = append(out, item)
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": out})
}
