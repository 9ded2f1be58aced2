package store

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Annotations keeps the errors, warnings and notices a job's steps raised with the
// workflow commands ::error::, ::warning:: and ::notice:: (the log keeps the lines; an
// annotation is the message with where it points, listed with the job).
type Annotations interface {
	// AddAnnotations records annotations of the attempt p.Attempt of job p.JobID and
	// returns how many it added. Each is keyed by its Seq, the log line that raised it:
	// one already recorded is skipped, so a re-sent log batch adds nothing twice. Of each
	// level, at most MaxAnnotationsPerStep are kept per step and MaxAnnotationsPerJob per
	// attempt (Step -1, not known, counts only against the attempt's bound); the rest are
	// dropped, as GitHub drops them. ErrNotFound when the job does not exist; ErrInvalid
	// for an unknown level or a seq below 1.
	AddAnnotations(ctx context.Context, p AddAnnotationsParams) (added int, err error)
	// ListAnnotations lists annotations in job plan order, then attempt and seq: those of
	// p.JobID's attempt p.Attempt when JobID is set (Attempt 0: the job's current one), or
	// those of the current attempt of every job of p.RunID. ErrInvalid when neither is set.
	ListAnnotations(ctx context.Context, p ListAnnotationsParams) ([]*Annotation, error)
}

// Bounds of AddAnnotations, per level: GitHub keeps 10 annotations of a level per step
// and 50 per job.
const (
	MaxAnnotationsPerStep = 10
	MaxAnnotationsPerJob  = 50
)

// Levels of an annotation.
const (
	AnnotationError   = "error"
	AnnotationWarning = "warning"
	AnnotationNotice  = "notice"
)

// Annotation is one error, warning or notice a step raised.
type Annotation struct {
	JobID   uuid.UUID
	RunID   uuid.UUID // filled in by the store
	Attempt int
	Seq     int64 // the log line that raised it
	Step    int   // the step's index; -1 when not known
	Level   string
	Message string
	Title   string
	// Where it points, each optional (zero when not said).
	File      string
	Line      int
	Col       int
	EndLine   int
	EndColumn int
	CreatedAt time.Time
}

// AddAnnotationsParams are annotations of one job attempt; their own JobID and Attempt
// are ignored.
type AddAnnotationsParams struct {
	JobID       uuid.UUID
	Attempt     int
	Annotations []*Annotation
}

// ListAnnotationsParams select annotations: of one job (and attempt), or of a run.
type ListAnnotationsParams struct {
	RunID   uuid.UUID
	JobID   uuid.UUID
	Attempt int
}
