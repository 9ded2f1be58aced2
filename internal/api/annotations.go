package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// Annotations are the errors, warnings and notices a job's steps raised with the
// workflow commands ::error::, ::warning:: and ::notice::. They arrive with the log: a
// worker marks the line that raised one (logs.Line.Annotation), and the log service hands
// such lines to keepAnnotations before it stores the batch.

func (s *Server) annotationRoutes() {
	s.handle("GET /api/v1/jobs/{id}/annotations", on(thingJob, store.RoleViewer), s.jobAnnotations)
	s.handle("GET /api/v1/runs/{id}/annotations", on(thingRun, store.RoleViewer), s.runAnnotations)
}

// keepAnnotations records the annotations of a batch of attempt k's log lines.
func (s *Server) keepAnnotations(ctx context.Context, k logs.Key, lines []logs.Line) error {
	as := make([]*store.Annotation, 0, len(lines))
	for _, l := range lines {
		a := l.Annotation
		as = append(as, &store.Annotation{Seq: l.Seq, Step: a.Step, Level: l.Level, Message: l.Text, Title: a.Title,
			File: a.File, Line: a.Line, Col: a.Col, EndLine: a.EndLine, EndColumn: a.EndColumn})
	}
	_, err := s.store.AddAnnotations(ctx, store.AddAnnotationsParams{JobID: k.Job, Attempt: k.Attempt, Annotations: as})
	return err
}

// annotationJSON is an annotation as the API shows it; step is left out when not known,
// and so are the properties the command did not set.
type annotationJSON struct {
	JobID     uuid.UUID `json:"job_id"`
	Job       string    `json:"job,omitempty"` // the job's key, in a run's list
	Attempt   int       `json:"attempt"`
	Seq       int64     `json:"seq"`
	Step      *int      `json:"step,omitempty"`
	Level     string    `json:"level"`
	Message   string    `json:"message"`
	Title     string    `json:"title,omitempty"`
	File      string    `json:"file,omitempty"`
	Line      int       `json:"line,omitempty"`
	Col       int       `json:"col,omitempty"`
	EndLine   int       `json:"end_line,omitempty"`
	EndColumn int       `json:"end_column,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

func toAnnotationJSON(a *store.Annotation, job string) annotationJSON {
	out := annotationJSON{JobID: a.JobID, Job: job, Attempt: a.Attempt, Seq: a.Seq, Level: a.Level, Message: a.Message,
		Title: a.Title, File: a.File, Line: a.Line, Col: a.Col, EndLine: a.EndLine, EndColumn: a.EndColumn,
		CreatedAt: a.CreatedAt.UTC()}
	if a.Step >= 0 {
		step := a.Step
		out.Step = &step
	}
	return out
}

// jobAnnotations lists the annotations of a job's attempt (?attempt=N; its current one
// unless asked).
func (s *Server) jobAnnotations(w http.ResponseWriter, r *http.Request) {
	id, rerr := pathID(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	attempt := 0
	if v := r.URL.Query().Get("attempt"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeRequestError(w, badRequest("attempt must be a whole number from 1, not %q", v))
			return
		}
		attempt = n
	}
	as, err := s.store.ListAnnotations(r.Context(), store.ListAnnotationsParams{JobID: id, Attempt: attempt})
	if err != nil {
		s.storeError(w, r, "list annotations", err)
		return
	}
	out := make([]annotationJSON, len(as))
	for i, a := range as {
		out[i] = toAnnotationJSON(a, "")
	}
	writeJSON(w, http.StatusOK, out)
}

// runAnnotations lists the annotations of the current attempt of every job of a run, in
// plan order, each with its job's key.
func (s *Server) runAnnotations(w http.ResponseWriter, r *http.Request) {
	id, rerr := pathID(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	jobs, err := s.store.ListJobs(r.Context(), id)
	if err != nil {
		s.storeError(w, r, "list the run's jobs", err)
		return
	}
	keys := make(map[uuid.UUID]string, len(jobs))
	for _, j := range jobs {
		keys[j.ID] = j.Key
	}
	as, err := s.store.ListAnnotations(r.Context(), store.ListAnnotationsParams{RunID: id})
	if err != nil {
		s.storeError(w, r, "list annotations", err)
		return
	}
	out := make([]annotationJSON, len(as))
	for i, a := range as {
		out[i] = toAnnotationJSON(a, keys[a.JobID])
	}
	writeJSON(w, http.StatusOK, out)
}
