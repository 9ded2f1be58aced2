package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/gantry-ci/gantry/internal/stepsummary"
)

// Summaries keeps what a job attempt's steps wrote to their summary files
// ($GANTRY_STEP_SUMMARY, which workflows know as $GITHUB_STEP_SUMMARY): Markdown, one part
// per step, which read in step order are the attempt's summary.
type Summaries interface {
	// PutSummary records the summary step p.Step of the attempt that holds the lease
	// p.LeaseRef wrote. A step's summary put again replaces the one kept, so a report
	// sent twice keeps one part. ErrLeaseLost (ErrNotFound for a job that does not exist)
	// when p.Token is not the lease of an assigned or running job; ErrInvalid for a
	// negative step, an empty text, one over MaxSummaryBytes, or one that is not UTF-8
	// or holds NUL; ErrConflict when the attempt already keeps the summaries of
	// MaxSummarySteps other steps.
	PutSummary(ctx context.Context, p PutSummaryParams) error
	// ListSummaries lists summary parts in job plan order, then step: those of p.JobID's
	// attempt p.Attempt when JobID is set (Attempt 0: the job's current one), or those
	// of the current attempt of every job of p.RunID. Each part's Markdown is filled
	// only when p.Markdown is set; Bytes always is. ErrNotFound for a job that does not
	// exist; ErrInvalid when neither JobID nor RunID is set.
	ListSummaries(ctx context.Context, p ListSummariesParams) ([]*SummaryPart, error)
	// DeleteSummariesBefore deletes the parts put before t and returns how many
	// (retention, with the logs').
	DeleteSummariesBefore(ctx context.Context, t time.Time) (int, error)
}

// Bounds of PutSummary, GitHub's: a step's summary is at most 1 MiB, and a job shows the
// summaries of at most 20 steps.
const (
	MaxSummaryBytes = stepsummary.MaxBytes
	MaxSummarySteps = stepsummary.MaxSteps
)

// SummaryPart is what one step of a job attempt wrote to its summary file.
type SummaryPart struct {
	JobID   uuid.UUID
	RunID   uuid.UUID // filled in by the store
	Attempt int
	// Step is the step's index; the pre and the post of an action a step used (run
	// before and after the job's steps) count on after the last step, in the order they
	// ran.
	Step      int
	Markdown  string
	Bytes     int
	CreatedAt time.Time
}

// PutSummaryParams is one step's summary from the worker holding the job's lease.
type PutSummaryParams struct {
	LeaseRef
	Step     int
	Markdown string
}

// ListSummariesParams select summary parts: of one job (and attempt), or of a run.
type ListSummariesParams struct {
	RunID   uuid.UUID
	JobID   uuid.UUID
	Attempt int
	// Markdown reads the parts' text too; without it only their sizes.
	Markdown bool
}
