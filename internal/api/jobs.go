package api

import (
	"net/http"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	id, rerr := pathID(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	s.writeJob(w, r, id, http.StatusOK)
}

func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) {
	id, rerr := pathID(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	if err := s.store.CancelJob(r.Context(), id); err != nil {
		s.storeError(w, r, "cancel job", err)
		return
	}
	if job, err := s.store.GetJob(r.Context(), id); err == nil {
		s.auditCancel(r, job.RunID, id)
	}
	s.writeJob(w, r, id, http.StatusAccepted)
}

// writeJob answers with the job and its steps.
func (s *Server) writeJob(w http.ResponseWriter, r *http.Request, id uuid.UUID, status int) {
	job, err := s.store.GetJob(r.Context(), id)
	if err != nil {
		s.storeError(w, r, "get job", err)
		return
	}
	steps, err := s.store.ListSteps(r.Context(), id)
	if err != nil {
		s.storeError(w, r, "list steps", err)
		return
	}
	run, err := s.store.GetRun(r.Context(), job.RunID)
	if err != nil {
		s.storeError(w, r, "get the job's run", err)
		return
	}
	out := newJobDetailJSON(job, steps)
	out.RunNumber, out.Project = run.Number, run.Project
	out.Waiting = s.waiting(r.Context(), []*store.Job{job}, nil)[0]
	out.Approval = s.approvalState(r.Context(), job)
	out.Attempts = s.attempts(r.Context(), job)
	writeJSON(w, status, out)
}

func (s *Server) listWorkers(w http.ResponseWriter, r *http.Request) {
	workers, err := s.store.ListWorkers(r.Context())
	if err != nil {
		s.storeError(w, r, "list workers", err)
		return
	}
	out := struct {
		Workers []workerJSON `json:"workers"`
	}{Workers: make([]workerJSON, len(workers))}
	now := s.clock.Now()
	for i, wk := range workers {
		out.Workers[i] = newWorkerJSON(wk)
		// What a worker last said stays true only while it keeps saying it.
		out.Workers[i].State = string(wk.StateAt(now, s.offlineAfter()))
	}
	writeJSON(w, http.StatusOK, out)
}
