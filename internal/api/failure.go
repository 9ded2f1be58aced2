package api

import (
	"context"
	"net/http"

	"github.com/gantry-ci/gantry/internal/failure"
	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// failureSource is what failure.Explain reads: the store, and the tails of logs.
type failureSource struct {
	store.Store
	logs *logs.Service
}

func (f failureSource) LogTail(ctx context.Context, jobID uuid.UUID, attempt, n int) ([]logs.Line, error) {
	return f.logs.Tail(ctx, logs.Key{Job: jobID, Attempt: attempt}, n)
}

// explainFailure says why run failed, reading all its jobs when jobs is nil; nil when it
// has not failed. A read that fails is logged, and the run is shown with what could be
// read of its failure (without its error lines when only the log could not be read).
func (s *Server) explainFailure(ctx context.Context, run *store.Run, jobs []*store.Job) *failure.Failure {
	if run.Status != store.RunFailed && run.Status != store.RunCancelled {
		return nil
	}
	if jobs == nil && run.JobsTotal > 0 {
		var err error
		if jobs, err = s.store.ListJobs(ctx, run.ID); err != nil {
			s.log.ErrorContext(ctx, "explain the failure of a run", "run", run.ID, "err", err)
			return nil
		}
	}
	f, err := failure.Explain(ctx, failureSource{Store: s.store, logs: s.logs}, run, jobs)
	if err != nil {
		s.log.ErrorContext(ctx, "explain the failure of a run", "run", run.ID, "err", err)
	}
	return f
}

// auditCancel records who cancelled a run (or, with job set, one of its jobs): the run's
// failure names them. The cancel is done; a failure to record it is logged by audit.
func (s *Server) auditCancel(r *http.Request, runID, job uuid.UUID) {
	run, err := s.store.GetRun(r.Context(), runID)
	if err != nil {
		s.log.ErrorContext(r.Context(), "record who cancelled", "run", runID, "err", err)
		return
	}
	ev := auditEvent{Action: failure.ActionRunCancelled, Project: run.Project, Target: runID.String()}
	if job != uuid.Nil {
		ev.Action, ev.Target = failure.ActionJobCancelled, job.String()
	}
	_ = s.audit(r, ev)
}
