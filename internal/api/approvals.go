package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// MaxApprovalComment bounds an approver's comment.
const MaxApprovalComment = 4096

// approvalRoutes registers approve and reject. Any caller who reads may ask; the store
// decides against the job's environment whether they are one of its approvers (by token
// name or role). With auth off everyone is "anonymous" and may decide.
func (s *Server) approvalRoutes() {
	s.handle("POST /api/v1/jobs/{id}/approve", on(thingJob, store.RoleViewer), s.decideJob(store.Approved))
	s.handle("POST /api/v1/jobs/{id}/reject", on(thingJob, store.RoleViewer), s.decideJob(store.Rejected))
}

// approver is who the request acts as: its token's user (its name when it names none,
// its id when it has neither), or anonymous with auth off; and its role on the job's
// project.
func (s *Server) approver(r *http.Request, projectID uuid.UUID) (string, store.Role, error) {
	tk := tokenFrom(r.Context())
	if tk == nil {
		return store.ActorAnonymous, "", nil
	}
	role, err := s.roleOn(r.Context(), projectID, "")
	if err != nil {
		return "", "", err
	}
	if who := tk.Principal(); who != "" {
		return who, role, nil
	}
	return tk.ID.String(), role, nil
}

type decideRequest struct {
	Comment string `json:"comment"`
}

func (s *Server) decideJob(d store.Decision) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, rerr := pathID(r)
		if rerr != nil {
			writeRequestError(w, rerr)
			return
		}
		body, rerr := s.readBody(w, r)
		if rerr != nil {
			writeRequestError(w, rerr)
			return
		}
		var req decideRequest
		if len(bytes.TrimSpace(body)) > 0 {
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil {
				writeRequestError(w, badRequest(`decode request: %v; want {"comment": "..."} or no body`, err))
				return
			}
			if _, err := dec.Token(); !errors.Is(err, io.EOF) {
				writeRequestError(w, badRequest("decode request: unexpected data after the JSON object"))
				return
			}
		}
		if len(req.Comment) > MaxApprovalComment {
			writeRequestError(w, badRequest("the comment is %d bytes; the most is %d", len(req.Comment), MaxApprovalComment))
			return
		}
		job, err := s.store.GetJob(r.Context(), id)
		if err != nil {
			s.storeError(w, r, "get job", err)
			return
		}
		who, role, err := s.approver(r, job.ProjectID)
		if err != nil {
			s.storeError(w, r, "check access", err)
			return
		}
		job, err = s.store.DecideJob(r.Context(), store.DecideJobParams{JobID: id, Approver: who, Role: role, Anyone: !s.auth,
			Decision: d, Comment: req.Comment})
		if err != nil {
			s.storeError(w, r, "decide job", err)
			return
		}
		action := "approval.granted"
		if d == store.Rejected {
			action = "approval.rejected"
		}
		details := map[string]any{"job": job.Key, "run_id": job.RunID.String(), "status": string(job.Status)}
		if job.Spec != nil && job.Spec.Environment != nil {
			details["environment"] = job.Spec.Environment.Name
		}
		project := ""
		if run, err := s.store.GetRun(r.Context(), job.RunID); err == nil {
			project = run.Project
		}
		_ = s.audit(r, auditEvent{Action: action, Project: project, Target: job.ID.String(), Details: details})
		s.writeJob(w, r, id, http.StatusOK)
	}
}

// approvalJSON is where a job's approval stands: what its environment needs and who
// decided so far in its current wait.
type approvalJSON struct {
	Environment string         `json:"environment"`
	Required    int            `json:"required"`
	Approvers   []string       `json:"approvers"`
	Decisions   []decisionJSON `json:"decisions"`
}

type decisionJSON struct {
	Approver string `json:"approver"`
	Decision string `json:"decision"`
	Comment  string `json:"comment,omitempty"`
	At       string `json:"at"`
}

// approvalState reads the approval of a job naming an environment the project defines
// with required approvals; nil for any other job. A read that fails leaves it out.
func (s *Server) approvalState(ctx context.Context, j *store.Job) *approvalJSON {
	if j.Spec == nil || j.Spec.Environment == nil {
		return nil
	}
	env, err := s.store.GetEnvironment(ctx, j.ProjectID, j.Spec.Environment.Name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.WarnContext(ctx, "approval of a job: read its environment", "job", j.ID, "err", err)
		return nil
	}
	if (env == nil || env.RequiredApprovals == 0) && j.Status != store.JobWaitingApproval {
		return nil
	}
	as, err := s.store.ListApprovals(ctx, j.ID)
	if err != nil {
		s.log.WarnContext(ctx, "approval of a job: list its approvals", "job", j.ID, "err", err)
		return nil
	}
	out := &approvalJSON{Environment: j.Spec.Environment.Name, Required: 1, Approvers: []string{}, Decisions: []decisionJSON{}}
	if env != nil {
		out.Required = max(env.RequiredApprovals, 1)
		if env.Approvers != nil {
			out.Approvers = env.Approvers
		}
	}
	for _, a := range as {
		out.Decisions = append(out.Decisions, decisionJSON{Approver: a.Approver, Decision: string(a.Decision), Comment: a.Comment,
			At: formatTime(a.At)})
	}
	return out
}
