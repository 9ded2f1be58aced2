package api

import (
	"context"

	"github.com/gantry-ci/gantry/internal/store"
)

// attemptJSON is one attempt of a job: an earlier one as it ended, or the current one.
type attemptJSON struct {
	Attempt int `json:"attempt"`
	// Status is how the attempt ended, or the job's status for the current one; "" for an
	// earlier attempt Gantry kept nothing of (one that ended before attempts were kept).
	Status      string `json:"status"`
	FailureKind string `json:"failure_kind,omitempty"`
	ExitCode    *int   `json:"exit_code,omitempty"`
	Reason      string `json:"reason,omitempty"`
	// Cause is what started it: "run" (the first attempt), "retry" (the retry policy, or
	// a lost attempt's redelivery) or "rerun" (StartedBy re-ran it).
	Cause      string `json:"cause"`
	StartedBy  string `json:"started_by,omitempty"`
	QueuedAt   string `json:"queued_at,omitempty"`
	StartedAt  string `json:"started_at,omitempty"`
	FinishedAt string `json:"finished_at,omitempty"`
	Current    bool   `json:"current,omitempty"`
	// Steps are an earlier attempt's steps as it left them; the current attempt's are
	// the job's.
	Steps []stepJSON `json:"steps,omitempty"`
}

func causeName(c store.AttemptCause) string {
	if c == store.CauseRun {
		return "run"
	}
	return string(c)
}

// attempts lists every attempt of the job, the current one last: the job after a re-run
// or a retry waits at its next attempt, which the store counts only once claimed. A
// read that fails leaves the list out.
func (s *Server) attempts(ctx context.Context, job *store.Job) []attemptJSON {
	kept, err := s.store.ListJobAttempts(ctx, job.ID)
	if err != nil {
		s.log.WarnContext(ctx, "attempts of a job", "job", job.ID, "err", err)
		return nil
	}
	byNumber := make(map[int]*store.JobAttempt, len(kept))
	for _, a := range kept {
		byNumber[a.Attempt] = a
	}
	current := max(job.Attempt, 1)
	if a := byNumber[job.Attempt]; a != nil && a.Status != "" {
		current = job.Attempt + 1
	}
	out := make([]attemptJSON, 0, current)
	for n := 1; n < current; n++ {
		a := byNumber[n]
		if a == nil {
			out = append(out, attemptJSON{Attempt: n, Cause: "run"})
			continue
		}
		aj := attemptJSON{Attempt: n, Status: string(a.Status), FailureKind: string(a.FailureKind), ExitCode: a.ExitCode,
			Reason: a.Reason, Cause: causeName(a.Cause), StartedBy: a.StartedBy, QueuedAt: formatTime(a.QueuedAt),
			StartedAt: formatTime(a.StartedAt), FinishedAt: formatTime(a.FinishedAt), Steps: make([]stepJSON, len(a.Steps))}
		for i, st := range a.Steps {
			aj.Steps[i] = newStepJSON(st)
		}
		out = append(out, aj)
	}
	cur := attemptJSON{Attempt: current, Status: string(job.Status), Cause: "run", Current: true}
	if current == job.Attempt || job.Attempt == 0 {
		cur.FailureKind, cur.ExitCode, cur.Reason = string(job.FailureKind), job.ExitCode, job.Reason
		cur.QueuedAt, cur.StartedAt, cur.FinishedAt = formatTime(job.QueuedAt), formatTime(job.StartedAt), formatTime(job.FinishedAt)
	}
	if a := byNumber[current]; a != nil {
		cur.Cause, cur.StartedBy = causeName(a.Cause), a.StartedBy
	}
	return append(out, cur)
}
