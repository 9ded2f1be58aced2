package api

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/markdown"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// Step summaries are the Markdown a job's steps wrote to $GANTRY_STEP_SUMMARY
// ($GITHUB_STEP_SUMMARY). The worker sends each step's after the step, fenced by its
// lease like every report; readers get an attempt's parts joined in step order, as
// Markdown or rendered to HTML that holds nothing that runs (internal/markdown). Each
// part is rendered on its own, as GitHub isolates its steps' summaries, so that a step's
// unclosed code fence cannot swallow the next step's summary.

func (s *Server) summaryRoutes() {
	s.handle("POST /api/v1/agent/jobs/{id}/summary", agentAccess, s.putSummary)
	s.handle("GET /api/v1/jobs/{id}/summary", on(thingJob, store.RoleViewer), s.jobSummary)
	s.handle("GET /api/v1/runs/{id}/summaries", on(thingRun, store.RoleViewer), s.runSummaries)
}

// maxSummaryBody bounds a summary report: the largest summary JSON can make of it (a
// control character is six bytes, \u0001) and room for the rest.
const maxSummaryBody = 6*store.MaxSummaryBytes + 64<<10

type summaryRequest struct {
	Token    string `json:"token"`
	Step     *int   `json:"step"`
	Markdown string `json:"markdown"`
}

func (r *summaryRequest) token() string { return r.Token }

// putSummary keeps what one step of the job wrote to its summary file; a step's summary
// sent again replaces the one kept, so a retried report keeps one.
func (s *Server) putSummary(w http.ResponseWriter, r *http.Request) {
	var req summaryRequest
	if rerr := decodeJSONUpTo(w, r, &req, maxSummaryBody); rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	ref, ok := s.leaseRef(w, r, req.Token)
	if !ok {
		return
	}
	if req.Step == nil || *req.Step < 0 {
		writeError(w, http.StatusBadRequest, codeBadRequest, "step is required: a whole number from 0", nil)
		return
	}
	// Masked here too, as a log batch is: the worker masks what it sends, and the
	// coordinator does not count on it. The store checks the lease again as it keeps it.
	attempt, err := s.store.LeaseAttempt(r.Context(), ref)
	if err != nil {
		s.agentError(w, r, "put step summary", err)
		return
	}
	text, err := s.logs.MaskText(r.Context(), logs.Key{Job: ref.JobID, Attempt: attempt}, req.Markdown)
	if err != nil {
		s.storeError(w, r, "mask step summary", err)
		return
	}
	err = s.store.PutSummary(r.Context(), store.PutSummaryParams{LeaseRef: ref, Step: *req.Step, Markdown: text})
	if err != nil {
		s.agentError(w, r, "put step summary", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"step": *req.Step, "bytes": len(text)})
}

// summaryJSON is a job attempt's summary as the API shows it. Markdown and HTML are left
// out of a run's list unless asked for (include=).
type summaryJSON struct {
	JobID    uuid.UUID         `json:"job_id"`
	Job      string            `json:"job,omitempty"` // the job's key, in a run's list
	Attempt  int               `json:"attempt"`
	Bytes    int               `json:"bytes"`
	Parts    []summaryPartJSON `json:"parts"`
	Markdown *string           `json:"markdown,omitempty"`
	HTML     *string           `json:"html,omitempty"`
}

// summaryPartJSON is one step's part of a summary.
type summaryPartJSON struct {
	Step      int    `json:"step"`
	Bytes     int    `json:"bytes"`
	CreatedAt string `json:"created_at"`
}

// joinSummary is the Markdown of an attempt's parts, each on lines of its own and a
// blank line between two, so that a part that ends in a table or a list does not take
// in the next one's first lines where the whole is read as one document.
func joinSummary(ps []*store.SummaryPart) string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Markdown)
		if !strings.HasSuffix(p.Markdown, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// renderSummary is the HTML of an attempt's parts, each rendered on its own.
func renderSummary(ps []*store.SummaryPart) (string, error) {
	var b strings.Builder
	for _, p := range ps {
		if err := markdown.Render(&b, []byte(p.Markdown)); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

// newSummaryJSON is the summary of the attempt ps are of; markdown and html say what of
// its text to fill in.
func newSummaryJSON(jobID uuid.UUID, attempt int, ps []*store.SummaryPart, withMarkdown, withHTML bool) (summaryJSON, error) {
	out := summaryJSON{JobID: jobID, Attempt: attempt, Parts: make([]summaryPartJSON, len(ps))}
	for i, p := range ps {
		out.Bytes += p.Bytes
		out.Parts[i] = summaryPartJSON{Step: p.Step, Bytes: p.Bytes, CreatedAt: formatTime(p.CreatedAt)}
	}
	if withMarkdown {
		md := joinSummary(ps)
		out.Markdown = &md
	}
	if withHTML {
		h, err := renderSummary(ps)
		if err != nil {
			return out, err
		}
		out.HTML = &h
	}
	return out, nil
}

// jobSummary answers a job attempt's summary (?attempt=N; its current one unless asked):
// its Markdown (text/markdown), rendered (Accept: text/html), or both with its parts
// (Accept: application/json). A job whose steps wrote none has an empty one.
func (s *Server) jobSummary(w http.ResponseWriter, r *http.Request) {
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
	if attempt == 0 {
		job, err := s.store.GetJob(r.Context(), id)
		if err != nil {
			s.storeError(w, r, "get job", err)
			return
		}
		attempt = job.Attempt
	}
	ps, err := s.store.ListSummaries(r.Context(), store.ListSummariesParams{JobID: id, Attempt: attempt, Markdown: true})
	if err != nil {
		s.storeError(w, r, "list summaries", err)
		return
	}
	accept := r.Header.Get("Accept")
	switch {
	case strings.Contains(accept, "application/json"):
		out, err := newSummaryJSON(id, attempt, ps, true, true)
		if err != nil {
			s.renderError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	case strings.Contains(accept, "text/html"):
		h, err := renderSummary(ps)
		if err != nil {
			s.renderError(w, r, err)
			return
		}
		// A browser that opens the route shows the fragment in an origin of its own,
		// where nothing may run, should anything that could ever get through.
		w.Header().Set("Content-Security-Policy", "sandbox; default-src 'none'; img-src 'self' data:")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write([]byte(h))
	default:
		w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write([]byte(joinSummary(ps)))
	}
}

// runSummaries lists the summaries of the current attempt of every job of a run that
// has one, in plan order, each with its job's key; include=markdown,html adds their text.
func (s *Server) runSummaries(w http.ResponseWriter, r *http.Request) {
	id, rerr := pathID(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	var withMarkdown, withHTML bool
	for _, v := range r.URL.Query()["include"] {
		for part := range strings.SplitSeq(v, ",") {
			switch strings.TrimSpace(part) {
			case "markdown":
				withMarkdown = true
			case "html":
				withHTML = true
			case "":
			default:
				writeRequestError(w, badRequest("include %q: want markdown, html or both", part))
				return
			}
		}
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
	ps, err := s.store.ListSummaries(r.Context(), store.ListSummariesParams{RunID: id, Markdown: withMarkdown || withHTML})
	if err != nil {
		s.storeError(w, r, "list summaries", err)
		return
	}
	out := []summaryJSON{}
	for start := 0; start < len(ps); {
		end := start + 1
		for end < len(ps) && ps[end].JobID == ps[start].JobID {
			end++
		}
		sj, err := newSummaryJSON(ps[start].JobID, ps[start].Attempt, ps[start:end], withMarkdown, withHTML)
		if err != nil {
			s.renderError(w, r, err)
			return
		}
		sj.Job = keys[sj.JobID]
		out = append(out, sj)
		start = end
	}
	writeJSON(w, http.StatusOK, out)
}

// renderError answers a summary that could not be rendered: goldmark fails only when
// writing fails, which a strings.Builder never does, so this is a bug.
func (s *Server) renderError(w http.ResponseWriter, r *http.Request, err error) {
	s.log.ErrorContext(r.Context(), "render summary", "err", err)
	writeError(w, http.StatusInternalServerError, codeInternal, "render summary: internal error", nil)
}
