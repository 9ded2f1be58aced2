package store

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Reruns gives finished jobs new attempts on a user's request and keeps every attempt.
type Reruns interface {
	// Rerun gives jobs of a run a new attempt, keeping each attempt that ended
	// (ListJobAttempts). With p.JobID: that job, which must be terminal (a success too),
	// and every job downstream of it, whatever it ended as. With p.RunID: of a finished
	// run, the failed, cancelled and skipped jobs (RerunFailed) or every job (RerunAll),
	// and every job downstream of them. The jobs go back to pending and are queued once
	// their needs succeed (a job naming an environment is approved anew); the run is
	// running again and its status comes from its jobs' latest attempts. A job is never
	// given a new attempt while one is queued, waiting or running: ErrConflict when the
	// job is not terminal, when a job downstream of it is neither terminal nor pending,
	// when the run has not finished (p.RunID) or has nothing to re-run. It returns the
	// reopened jobs' ids.
	Rerun(ctx context.Context, p RerunParams) ([]uuid.UUID, error)
	// ListJobAttempts lists, by attempt, the job's attempts that ended before its current
	// one (Status set) and the one about to start or running when a retry or a re-run
	// started it (Status ""; Cause and StartedBy say who). The first attempt of a job has
	// no entry until it ends and another begins.
	ListJobAttempts(ctx context.Context, jobID uuid.UUID) ([]*JobAttempt, error)
}

// RerunParams name what to re-run: one job (JobID) or a run's jobs (RunID and Jobs), and
// who asked (By, kept as the new attempts' StartedBy).
type RerunParams struct {
	RunID uuid.UUID
	Jobs  RerunSet
	JobID uuid.UUID
	By    string
}

// RerunSet is which of a run's jobs a re-run of the run starts again.
type RerunSet string

// The sets of a run's re-run.
const (
	RerunFailed RerunSet = "failed"
	RerunAll    RerunSet = "all"
)

// AttemptCause says what started a job's attempt.
type AttemptCause string

// Attempt causes.
const (
	// CauseRun: the run did (the job's first attempt).
	CauseRun AttemptCause = ""
	// CauseRetry: the job's retry policy, or the redelivery of an attempt lost with its
	// worker.
	CauseRetry AttemptCause = "retry"
	// CauseRerun: a user re-ran it (StartedBy).
	CauseRerun AttemptCause = "rerun"
)

// JobAttempt is one attempt of a job as it ended, or as it was started when it has not.
type JobAttempt struct {
	JobID   uuid.UUID
	Attempt int
	// Status is how the attempt ended (for an attempt that was retried, failed); ""
	// while it is the job's current attempt.
	Status      JobStatus
	FailureKind FailureKind
	ExitCode    *int
	Reason      string
	Cause       AttemptCause
	StartedBy   string
	QueuedAt    time.Time
	StartedAt   time.Time
	FinishedAt  time.Time
	// Steps are the steps as the attempt left them.
	Steps []*Step
}

// ApprovalInbox finds the jobs waiting for someone's approval.
type ApprovalInbox interface {
	// ListWaitingApproval lists jobs waiting for approval (JobWaitingApproval), with their
	// Spec, those whose wait ends first first. Who may decide on each is the caller's
	// to filter (Environment.MayApprove).
	ListWaitingApproval(ctx context.Context, p ListWaitingApprovalParams) ([]*Job, error)
}

// ListWaitingApprovalParams filter ListWaitingApproval.
type ListWaitingApprovalParams struct {
	// ProjectIDs, when not nil, keeps only jobs of these projects (none when empty).
	ProjectIDs []uuid.UUID
	Limit      int // default 200, at most 1000
}
