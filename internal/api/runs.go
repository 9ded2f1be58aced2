package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gantry-ci/gantry/internal/failure"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// envelope is the JSON form of POST /api/v1/runs that carries options with the pipeline.
// A JSON body is an envelope when its top-level "pipeline" key holds a string; otherwise
// the body is the pipeline itself.
type envelope struct {
	Pipeline string            `json:"pipeline"`
	Project  string            `json:"project"`
	Ref      string            `json:"ref"`
	Branch   string            `json:"branch"`
	SHA      string            `json:"sha"`
	Event    string            `json:"event"`
	Env      map[string]string `json:"env"`
	Priority string            `json:"priority"`
	// SecretEnv is run env whose values are stored sealed like secrets (see secrets.go).
	SecretEnv map[string]string `json:"secret_env"`
}

// requestError is a client mistake found while reading a request, with its answer.
type requestError struct {
	status int
	code   string
	msg    string
}

func (e *requestError) Error() string { return e.msg }

func badRequest(format string, args ...any) *requestError {
	return &requestError{status: http.StatusBadRequest, code: codeBadRequest, msg: fmt.Sprintf(format, args...)}
}

func writeRequestError(w http.ResponseWriter, e *requestError) {
	writeError(w, e.status, e.code, e.msg, nil)
}

// readBody reads the whole body up to the server's limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *requestError) {
	return readBodyMax(w, r, s.maxBody)
}

// readBodyMax reads a request body of at most limit bytes.
func readBodyMax(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *requestError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &requestError{status: http.StatusRequestEntityTooLarge, code: codePayloadTooLarge,
				msg: fmt.Sprintf("request body is larger than %d bytes", tooBig.Limit)}
		}
		return nil, badRequest("read request body: %v", err)
	}
	return body, nil
}

// parseSubmission turns a POST /api/v1/runs request body into the definition and the
// run's parameters (without the plan).
func parseSubmission(contentType string, body []byte) ([]byte, store.CreateRunParams, *requestError) {
	var p store.CreateRunParams
	mediaType := ""
	if contentType != "" {
		mt, _, err := mime.ParseMediaType(contentType)
		if err != nil {
			return nil, p, badRequest("bad Content-Type %q: %v", contentType, err)
		}
		mediaType = mt
	}
	switch mediaType {
	case "", "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml":
		p.Trigger.Event = "api"
		return body, p, nil
	case "application/json":
	default:
		return nil, p, &requestError{status: http.StatusUnsupportedMediaType, code: codeUnsupportedMedia,
			msg: fmt.Sprintf("Content-Type %q is not accepted; use application/yaml or application/json", mediaType)}
	}
	if !isEnvelope(body) {
		p.Trigger.Event = "api"
		return body, p, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var env envelope
	if err := dec.Decode(&env); err != nil {
		return nil, p, badRequest("decode run request: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, p, badRequest("decode run request: unexpected data after the JSON object")
	}
	switch pipeline.Priority(env.Priority) {
	case "", pipeline.PriorityCritical, pipeline.PriorityHigh, pipeline.PriorityNormal, pipeline.PriorityLow:
	default:
		return nil, p, badRequest("unknown priority %q: want critical, high, normal or low", env.Priority)
	}
	if msg := checkProjectName(env.Project); msg != "" {
		return nil, p, badRequest("project: %s", msg)
	}
	p.Project = env.Project
	p.Env = env.Env
	p.Priority = pipeline.Priority(env.Priority)
	p.Trigger = store.Trigger{Ref: env.Ref, Branch: env.Branch, SHA: env.SHA, Event: env.Event}
	if p.Trigger.Event == "" {
		p.Trigger.Event = "api"
	}
	if p.Trigger.Branch == "" {
		if b, ok := strings.CutPrefix(p.Trigger.Ref, "refs/heads/"); ok {
			p.Trigger.Branch = b
		}
	}
	return []byte(env.Pipeline), p, nil
}

// MaxRunsTotal bounds the total a list of runs tells: counting stops there, so that a list
// of a large store costs a bounded read on every refresh.
const MaxRunsTotal = 10_000

// maxFilter bounds a runs list filter: a name, not a document.
const maxFilter = 500

// checkFilter says what is wrong with a filter's value, or "" when nothing is.
func checkFilter(v string) string {
	switch {
	case len(v) > maxFilter:
		return fmt.Sprintf("the value is %d bytes long; the most is %d", len(v), maxFilter)
	case !utf8.ValidString(v):
		return "the value is not valid UTF-8"
	case strings.ContainsFunc(v, unicode.IsControl):
		return "the value holds a control character"
	}
	return ""
}

// MaxProjectName is the longest project name accepted, in bytes.
const MaxProjectName = 100

// checkProjectName says what is wrong with a project name, or "" when nothing is (empty
// means the default project). Names end up in URLs, log lines, metrics labels and
// terminals, so they hold no control characters, and their length is bounded.
func checkProjectName(name string) string {
	switch {
	case len(name) > MaxProjectName:
		return fmt.Sprintf("the name is %d bytes long; the most is %d", len(name), MaxProjectName)
	case !utf8.ValidString(name):
		return "the name is not valid UTF-8"
	case strings.ContainsFunc(name, unicode.IsControl):
		return fmt.Sprintf("the name %q holds a control character (NUL, CR, LF, tab...)", name)
	}
	return ""
}

// ProjectNameRule is what a new project's name must be; names of projects made before it
// keep working.
const ProjectNameRule = "a new project's name is 1 to 100 characters: lower-case letters a-z, digits, '.', '_' and '-', starting with a letter or a digit"

// validNewProjectName reports whether name may name a new project: [a-z0-9][a-z0-9._-]*,
// at most MaxProjectName bytes. Such a name is the same in a URL path, a file name, a
// terminal and a metrics label, cannot climb out of a directory, and cannot pass for
// another by case or by invisible and reordering characters.
func validNewProjectName(name string) bool {
	if name == "" || len(name) > MaxProjectName {
		return false
	}
	for i, c := range []byte(name) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// newProjectNameError is the answer for a name no new project may have: 400, saying the
// rule.
func newProjectNameError(name string) *requestError {
	return badRequest("project name %q: %s", name, ProjectNameRule)
}

// refuseNewProjectName answers, and returns true, when name would make a project on first
// use (no project has it) and breaks ProjectNameRule; a project that has it already, made
// before the rule, keeps taking runs. "" is the default project.
func (s *Server) refuseNewProjectName(w http.ResponseWriter, r *http.Request, name string) bool {
	if name == "" || validNewProjectName(name) {
		return false
	}
	_, err := s.store.GetProjectByName(r.Context(), name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeRequestError(w, newProjectNameError(name))
		return true
	case err != nil:
		s.storeError(w, r, "get project", err)
		return true
	}
	return false
}

// isEnvelope reports whether a JSON body is a run request envelope: its first value is an
// object whose "pipeline" key holds a string. A pipeline never has a top-level
// "pipeline" key, so the two cannot be confused.
func isEnvelope(body []byte) bool {
	var top map[string]json.RawMessage
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&top); err != nil {
		return false
	}
	raw, ok := top["pipeline"]
	return ok && len(raw) > 0 && raw[0] == '"'
}

func (s *Server) createRun(w http.ResponseWriter, r *http.Request) {
	body, rerr := s.readBody(w, r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	def, params, rerr := parseSubmission(r.Header.Get("Content-Type"), body)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	if !s.mayOnName(w, r, params.Project, store.RoleDeveloper) {
		return
	}
	if s.refuseNewProjectName(w, r, params.Project) {
		return
	}
	// A definition sent on its own has no repository: only other repositories' reusable
	// workflows can be read for it.
	gitCtx, cancel := context.WithTimeout(r.Context(), s.hooks.fetchTimeout)
	plan, err := s.compileSubmitted(def, s.workflows(gitCtx, nil))
	cancel()
	if err != nil {
		details := pipelineDetails(err)
		msg := fmt.Sprintf("the pipeline has %d errors", len(details))
		if len(details) == 1 {
			msg = "the pipeline has 1 error"
		}
		writeError(w, http.StatusUnprocessableEntity, codeInvalidPipeline, msg, details)
		return
	}
	if plan, err = s.pinActions(r.Context(), plan); err != nil {
		writeError(w, http.StatusUnprocessableEntity, codeInvalidPipeline, err.Error(), pipelineDetails(err))
		return
	}
	params.Plan = plan
	params.Definition = def
	params.IdempotencyKey = r.Header.Get("Idempotency-Key")
	// The definition is the caller's, and so are the ref and commit it names: they count
	// for environments, caches and statuses only when the caller is the admin.
	params.Trigger.Verified, params.Trigger.User = adminRef(r.Context()), principal(r.Context())
	dropSecretEnv, rerr := s.sealSecretEnv(r.Context(), &params, decodeSecretEnv(r.Header.Get("Content-Type"), body))
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	run, jobs, created, err := s.store.CreateRun(r.Context(), params)
	if err != nil || !created {
		dropSecretEnv(r.Context()) // no run of this request refers to them
	}
	if err != nil {
		s.storeError(w, r, "create run", err)
		return
	}
	s.answerCreatedRun(w, r, run, jobs, created)
}

// answerCreatedRun answers a CreateRun, from POST /api/v1/runs or a dispatch, alike: 202
// with the new run, or 200 and Idempotent-Replay when the Idempotency-Key named a run made
// before, which is neither counted nor traced again.
func (s *Server) answerCreatedRun(w http.ResponseWriter, r *http.Request, run *store.Run, jobs []*store.Job, created bool) {
	status := http.StatusAccepted
	if created {
		s.metrics.JobsCreated.Add(float64(len(jobs)))
		traceRunCreated(r.Context(), run.ID)
	} else {
		w.Header().Set("Idempotent-Replay", "true")
		status = http.StatusOK
	}
	w.Header().Set("Location", "/api/v1/runs/"+run.ID.String())
	writeJSON(w, status, newRunJSON(run, nonNilJobs(jobs)))
}

func nonNilJobs(jobs []*store.Job) []*store.Job {
	if jobs == nil {
		return []*store.Job{}
	}
	return jobs
}

// pathID parses the {id} path value.
func pathID(r *http.Request) (uuid.UUID, *requestError) {
	raw := r.PathValue("id")
	id, err := uuid.Parse(raw)
	if err != nil {
		return uuid.Nil, badRequest("malformed id %q: want a UUID", raw)
	}
	return id, nil
}

var runStatuses = map[store.RunStatus]bool{
	store.RunPending: true, store.RunRunning: true, store.RunSuccess: true,
	store.RunFailed: true, store.RunCancelled: true,
}

const (
	defaultPageSize = 50
	maxPageSize     = 500
)

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := store.ListRunsParams{
		Project: q.Get("project"),
		Status:  store.RunStatus(q.Get("status")),
		Ref:     q.Get("ref"),
		Branch:  q.Get("branch"),
		Event:   q.Get("event"),
		Actor:   q.Get("actor"),
		Limit:   defaultPageSize,
	}
	if msg := checkProjectName(p.Project); msg != "" {
		writeRequestError(w, badRequest("project filter: %s", msg))
		return
	}
	for _, f := range []struct{ name, v string }{{"ref", p.Ref}, {"branch", p.Branch}, {"event", p.Event}, {"actor", p.Actor}} {
		if msg := checkFilter(f.v); msg != "" {
			writeRequestError(w, badRequest("%s filter: %s", f.name, msg))
			return
		}
	}
	if p.Status != "" && !runStatuses[p.Status] {
		writeRequestError(w, badRequest("unknown status %q: want pending, running, success, failed or cancelled", p.Status))
		return
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageSize {
			writeRequestError(w, badRequest("bad limit %q: want an integer from 1 to %d", v, maxPageSize))
			return
		}
		p.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		id, err := uuid.Parse(v)
		if err != nil {
			writeRequestError(w, badRequest("malformed cursor %q: want the id of a run", v))
			return
		}
		p.Before = id
	}
	ids, all, err := s.visibleProjects(r.Context())
	if err != nil {
		s.storeError(w, r, "list runs", err)
		return
	}
	if !all {
		p.ProjectIDs = ids
	}
	runs, err := s.store.ListRuns(r.Context(), p)
	if err != nil {
		s.storeError(w, r, "list runs", err)
		return
	}
	// One more than is told, to know whether there are more.
	total, err := s.store.CountRuns(r.Context(), p, MaxRunsTotal+1)
	if err != nil {
		s.storeError(w, r, "count runs", err)
		return
	}
	listed := make([]uuid.UUID, len(runs))
	for i, run := range runs {
		listed[i] = run.ID
	}
	digests, err := s.store.DigestRuns(r.Context(), listed)
	if err != nil {
		s.storeError(w, r, "list runs", err)
		return
	}
	out := struct {
		Runs []runJSON `json:"runs"`
		// Total counts the runs the filters match, on every page, up to MaxRunsTotal;
		// TotalCapped says there are more.
		Total       int    `json:"total"`
		TotalCapped bool   `json:"total_capped,omitempty"`
		NextCursor  string `json:"next_cursor"`
	}{Runs: make([]runJSON, len(runs)), Total: min(total, MaxRunsTotal), TotalCapped: total > MaxRunsTotal}
	for i, run := range runs {
		out.Runs[i] = newRunJSON(run, nil)
		d := digests[run.ID]
		out.Runs[i].State = d.State(run.Status)
		if f := failure.Summarize(run, d); f != nil {
			out.Runs[i].Failure = f
		}
	}
	if len(runs) == p.Limit {
		out.NextCursor = runs[len(runs)-1].ID.String()
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	id, rerr := pathID(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	feed, rerr := parseRunFeed(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	s.writeRunFeed(w, r, id, feed)
}

// maxRunWait is the longest a read of a run's changes waits for one (?wait=).
const maxRunWait = time.Minute

// runFeed is what a read of a run asks of its change feed: the jobs changed after since
// (every job when since is negative), waiting up to wait for one to change.
type runFeed struct {
	since int64
	wait  time.Duration
}

// parseRunFeed reads ?since=SEQ and ?wait=DURATION; wait needs since.
func parseRunFeed(r *http.Request) (runFeed, *requestError) {
	q := r.URL.Query()
	feed := runFeed{since: -1}
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return feed, badRequest("since must be a whole number, a run's seq, not %q", v)
		}
		feed.since = n
	}
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > maxRunWait {
			return feed, badRequest("wait must be a duration from 0s to %s, not %q", maxRunWait, v)
		}
		if feed.since < 0 {
			return feed, badRequest("wait needs since: it waits for a change after a seq")
		}
		feed.wait = d
	}
	return feed, nil
}

// getRunByNumber answers as getRun does for the project's run of that number (#42).
func (s *Server) getRunByNumber(w http.ResponseWriter, r *http.Request) {
	name, rerr := pathProject(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	v := r.PathValue("number")
	number, err := strconv.Atoi(strings.TrimPrefix(v, "#"))
	if err != nil || number < 1 {
		writeRequestError(w, badRequest("a run number is a whole number from 1, as in #42, not %q", v))
		return
	}
	feed, rerr := parseRunFeed(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	run, err := s.store.GetRunByNumber(r.Context(), name, number)
	if err != nil {
		s.storeError(w, r, "get run", err)
		return
	}
	s.writeRunFeed(w, r, run.ID, feed)
}

// writeRun answers with the run and all its jobs.
func (s *Server) writeRun(w http.ResponseWriter, r *http.Request, id uuid.UUID, status int) {
	if out, ok := s.runView(w, r, id, runFeed{since: -1}); ok {
		writeJSON(w, status, out)
	}
}

// writeRunFeed answers with the run and its jobs that changed after its seq was
// feed.since; all of them when since is negative. The run is read first, so its seq,
// the cursor of the next call, is never past a change the answer lacks.
func (s *Server) writeRunFeed(w http.ResponseWriter, r *http.Request, id uuid.UUID, feed runFeed) {
	if out, ok := s.runView(w, r, id, feed); ok {
		writeJSON(w, http.StatusOK, out)
	}
}

// runView reads the run and its jobs for an answer (runChanges); on a store error it
// answers the request and reports false.
func (s *Server) runView(w http.ResponseWriter, r *http.Request, id uuid.UUID, feed runFeed) (runJSON, bool) {
	run, jobs, err := s.runChanges(r.Context(), id, feed)
	if err != nil {
		if r.Context().Err() == nil {
			s.storeError(w, r, "get run", err)
		}
		return runJSON{}, false
	}
	var runJobs []*store.Job
	if feed.since < 0 {
		// Why a pending job waits needs the whole run; waiting reads it only when this
		// is not it.
		runJobs = jobs
	}
	out := newRunJSON(run, nonNilJobs(jobs))
	for i, wt := range s.waiting(r.Context(), jobs, runJobs) {
		out.Jobs[i].Waiting = wt
	}
	if f := s.explainFailure(r.Context(), run, runJobs); f != nil {
		out.Failure = f
	}
	return out, true
}

// Reads of a run that wait for a change (?wait=).
const (
	// runWaitRecheck is how often such a read looks again with no wake-up: the writes
	// of another replica wake nobody here.
	runWaitRecheck = 250 * time.Millisecond
	// runWaitGap is the least time between two of its looks: a busy store's every
	// write is a wake-up, and a waiting reader looks at most this often.
	runWaitGap = 5 * time.Millisecond
)

// runChanges reads the run and its jobs changed after feed.since, every job when since
// is negative. With feed.wait it looks again whenever this replica commits a write, and
// every runWaitRecheck, until a job changed, the run ended, the wait is over or the
// server drains (Drain).
//
// A look that finds no job changed moves since up to the run's seq of that look, which
// was read before the jobs: no job changed in between, so the jobs changed after the
// later seq are those changed after the first, and the answer's seq, as ever, is never
// past a change it lacks.
func (s *Server) runChanges(ctx context.Context, id uuid.UUID, feed runFeed) (*store.Run, []*store.Job, error) {
	var wake <-chan struct{}
	if feed.wait > 0 {
		w, stop := s.store.WaitForWrites()
		defer stop()
		wake = w
	}
	deadline := time.Now().Add(feed.wait)
	since := feed.since
	for {
		looked := time.Now()
		run, err := s.store.GetRun(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		var jobs []*store.Job
		if since < 0 {
			jobs, err = s.store.ListJobs(ctx, id)
		} else {
			jobs, err = s.store.ListJobsChanged(ctx, id, since)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("list jobs: %w", err)
		}
		left := time.Until(deadline)
		if len(jobs) > 0 || since < 0 || run.Status.Terminal() || left <= 0 || s.drained.Err() != nil {
			return run, jobs, nil
		}
		since = max(since, run.JobSeq)
		if err := s.awaitWrite(ctx, wake, looked, min(left, runWaitRecheck)); err != nil {
			return nil, nil, err
		}
	}
}

// awaitWrite returns once wake receives (but not before runWaitGap after the last look)
// or d passed, whichever is first, or ctx's error when it ends first.
func (s *Server) awaitWrite(ctx context.Context, wake <-chan struct{}, looked time.Time, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	case <-s.drained.Done():
		return nil
	case <-wake:
	}
	if gap := runWaitGap - time.Since(looked); gap > 0 && gap < d {
		t.Reset(gap)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	id, rerr := pathID(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	if err := s.store.CancelRun(r.Context(), id); err != nil {
		s.storeError(w, r, "cancel run", err)
		return
	}
	s.auditCancel(r, id, uuid.Nil)
	s.writeRun(w, r, id, http.StatusAccepted)
}
