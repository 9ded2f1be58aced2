package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/testjudge"
	"github.com/gantry-ci/gantry/internal/testreport"
	"github.com/google/uuid"
)

// Test results are what the worker read from a job's test reports (pipeline.Reports):
// one result per test per attempt, sent in batches fenced by the job's lease like every
// report. Readers get a run's tests failing first, each failing one judged new, still
// failing, known broken or flaky from its history (testreport.Judge), a test's history
// in a project, and a project's flaky tests with their evidence.

func (s *Server) testRoutes() {
	s.handle("POST /api/v1/agent/jobs/{id}/tests", agentAccess, s.addTests)
	s.handle("GET /api/v1/runs/{id}/tests", on(thingRun, store.RoleViewer), s.runTests)
	s.handle("GET /api/v1/jobs/{id}/tests", on(thingJob, store.RoleViewer), s.jobTests)
	s.handle("GET /api/v1/projects/{name}/tests/history", on(thingProject, store.RoleViewer), s.testHistory)
	s.handle("GET /api/v1/projects/{name}/tests/flaky", on(thingProject, store.RoleViewer), s.flakyTests)
	s.handle("GET /api/v1/projects/{name}/tests/summary", on(thingProject, store.RoleViewer), s.testSummary)
}

// Bounds of the test result routes.
const (
	// maxTestBatch is the most results one report from a worker carries.
	maxTestBatch = testreport.BatchResults
	// maxTestBody bounds such a report: the worker cuts its batches at 4 MiB of text
	// (agent.maxTestBatchBytes), which JSON makes at most six times larger.
	maxTestBody = 32 << 20
	// defaultTestPage is a page of a run's tests when no limit is asked.
	defaultTestPage = 200
)

type testsRequest struct {
	Token   string            `json:"token"`
	First   *int              `json:"first"`
	Results []testreport.Wire `json:"results"`
}

// addTests keeps a batch of a job attempt's test results; a batch sent again adds
// nothing twice.
func (s *Server) addTests(w http.ResponseWriter, r *http.Request) {
	var req testsRequest
	if rerr := decodeJSONUpTo(w, r, &req, maxTestBody); rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	ref, ok := s.leaseRef(w, r, req.Token)
	if !ok {
		return
	}
	switch {
	case req.First == nil || *req.First < 0:
		writeError(w, http.StatusBadRequest, codeBadRequest, "first is required: the index of the batch's first result, from 0", nil)
		return
	case len(req.Results) > maxTestBatch:
		writeError(w, http.StatusBadRequest, codeBadRequest,
			"a batch holds at most "+strconv.Itoa(maxTestBatch)+" results, not "+strconv.Itoa(len(req.Results)), nil)
		return
	}
	attempt, err := s.store.LeaseAttempt(r.Context(), ref)
	if err != nil {
		s.agentError(w, r, "add test results", err)
		return
	}
	results := make([]testreport.Result, len(req.Results))
	for i, in := range req.Results {
		if in.DurationMS < 0 || in.DurationMS > float64(testreport.MaxDuration/time.Millisecond) {
			writeError(w, http.StatusBadRequest, codeBadRequest, "result "+strconv.Itoa(*req.First+i)+": duration_ms out of range", nil)
			return
		}
		res := in.Result()
		// Masked here too, as a log batch is: the worker masks what it sends, and the
		// coordinator does not count on it.
		for _, f := range []*string{&res.Message, &res.Output} {
			if *f == "" {
				continue
			}
			if *f, err = s.logs.MaskText(r.Context(), logs.Key{Job: ref.JobID, Attempt: attempt}, *f); err != nil {
				s.storeError(w, r, "mask test results", err)
				return
			}
		}
		results[i] = res
	}
	added, err := s.store.AddTestResults(r.Context(), store.AddTestResultsParams{LeaseRef: ref, First: *req.First, Results: results})
	if err != nil {
		s.agentError(w, r, "add test results", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"added": added})
}

// testResultJSON is a test's result as the API shows it. Message and output are kept for
// tests that did not pass; run, branch and commit in a test's history.
type testResultJSON struct {
	JobID      uuid.UUID `json:"job_id"`
	Job        string    `json:"job"`
	Attempt    int       `json:"attempt"`
	Suite      string    `json:"suite"`
	Name       string    `json:"name"`
	File       string    `json:"file,omitempty"`
	Line       int       `json:"line,omitempty"`
	Status     string    `json:"status"`
	DurationMS float64   `json:"duration_ms"`
	// FailedAttempts are the reruns the test tool made within its report before a pass.
	FailedAttempts int    `json:"failed_attempts,omitempty"`
	Message        string `json:"message,omitempty"`
	Output         string `json:"output,omitempty"`
	// Quarantined marks a failing test its project has quarantined now: its failure
	// does not fail its job.
	Quarantined bool         `json:"quarantined,omitempty"`
	Run         int          `json:"run,omitempty"`
	RunID       *uuid.UUID   `json:"run_id,omitempty"`
	Branch      string       `json:"branch,omitempty"`
	SHA         string       `json:"sha,omitempty"`
	CreatedAt   string       `json:"created_at"`
	Verdict     *verdictJSON `json:"verdict,omitempty"`
}

type verdictJSON struct {
	Kind     string            `json:"kind"`
	Why      string            `json:"why"`
	Evidence []observationJSON `json:"evidence"`
}

type observationJSON struct {
	Status  string `json:"status"`
	Run     int    `json:"run"`
	Job     string `json:"job"`
	Attempt int    `json:"attempt"`
	Branch  string `json:"branch,omitempty"`
	SHA     string `json:"sha,omitempty"`
	At      string `json:"at"`
}

func toTestResultJSON(t *store.TestResult, where bool) testResultJSON {
	out := testResultJSON{JobID: t.JobID, Job: t.Job, Attempt: t.Attempt, Suite: t.Suite, Name: t.Name, File: t.File, Line: t.Line,
		Status: string(t.Status), DurationMS: float64(t.Duration.Microseconds()) / 1000, FailedAttempts: t.FailedAttempts,
		Message: t.Message, Output: t.Output, CreatedAt: formatTime(t.CreatedAt)}
	if where {
		id := t.RunID
		out.Run, out.RunID, out.Branch, out.SHA = t.RunNumber, &id, t.Branch, t.SHA
	}
	return out
}

func toVerdictJSON(v testreport.Verdict) *verdictJSON {
	out := &verdictJSON{Kind: string(v.Kind), Why: v.Why, Evidence: make([]observationJSON, len(v.Evidence))}
	for i, o := range v.Evidence {
		out.Evidence[i] = observationJSON{Status: string(o.Status), Run: o.Run, Job: o.Job, Attempt: o.Attempt, Branch: o.Branch,
			SHA: o.SHA, At: formatTime(o.At)}
	}
	return out
}

// runTestsJSON is a run's tests, or a job attempt's: counts by status, the verdicts of
// the failing tests with the headline they make, and a page of the tests.
type runTestsJSON struct {
	Counts   map[string]int `json:"counts"`
	Total    int            `json:"total"`
	Verdicts map[string]int `json:"verdicts"`
	// Headline says the verdicts as a person would: "1 new failure, 2 known flaky".
	Headline string `json:"headline"`
	// Judged is how many failing tests the verdicts are of: at most testjudge.MaxJudged.
	Judged int `json:"judged"`
	// Quarantined is how many of those the project has quarantined now.
	Quarantined int              `json:"quarantined"`
	Tests       []testResultJSON `json:"tests"`
	NextOffset  *int             `json:"next_offset,omitempty"`
}

// ChangedPaths lists the paths that differ between two commits of the project's
// repository, read through the coordinator's mirror of it (a commit it lacks is
// fetched): what the flip rule of the test verdicts reads (testjudge.Changes).
func (s *Server) ChangedPaths(ctx context.Context, proj *store.Project, before, after string) ([]string, error) {
	m, err := s.openMirror(ctx, proj)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	return m.ChangedPaths(ctx, before, after)
}

// testPage reads ?status=, ?limit= and ?offset= of a list of tests.
func testPage(r *http.Request) (store.ListTestResultsParams, *requestError) {
	var p store.ListTestResultsParams
	q := r.URL.Query()
	if v := q.Get("status"); v != "" {
		for _, s := range strings.Split(v, ",") {
			st := testreport.Status(strings.TrimSpace(s))
			if !st.Valid() {
				return p, badRequest("status %q is not passed, failed, skipped or errored", s)
			}
			p.Statuses = append(p.Statuses, st)
		}
	}
	p.Limit = defaultTestPage
	for _, f := range []struct {
		name     string
		to       *int
		min, max int
	}{{"limit", &p.Limit, 1, store.MaxTestHistory}, {"offset", &p.Offset, 0, store.MaxTestResults * 10}} {
		if v := q.Get(f.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < f.min || n > f.max {
				return p, badRequest("%s must be a whole number from %d to %d, not %q", f.name, f.min, f.max, v)
			}
			*f.to = n
		}
	}
	return p, nil
}

// runTests lists a run's tests (the current attempt of each job), failing first, with
// the verdict of each failing one.
func (s *Server) runTests(w http.ResponseWriter, r *http.Request) {
	id, rerr := pathID(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	page, rerr := testPage(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	run, err := s.store.GetRun(r.Context(), id)
	if err != nil {
		s.storeError(w, r, "get run", err)
		return
	}
	page.RunID = id
	s.writeTests(w, r, run, page)
}

// writeTests answers the tests page selects (run's, or one job attempt's when it names
// a job) with their counts, and the failing ones judged in run.
func (s *Server) writeTests(w http.ResponseWriter, r *http.Request, run *store.Run, page store.ListTestResultsParams) {
	counts, err := s.store.CountTestResults(r.Context(), page)
	if err != nil {
		s.storeError(w, r, "count test results", err)
		return
	}
	out := runTestsJSON{Counts: map[string]int{}, Verdicts: map[string]int{}, Tests: []testResultJSON{}}
	for st, n := range counts {
		out.Counts[string(st)] = n
		out.Total += n
	}
	tests, err := s.store.ListTestResults(r.Context(), page)
	if err != nil {
		s.storeError(w, r, "list test results", err)
		return
	}
	// The failing tests of the page past the first testjudge.MaxJudged are judged too.
	o := testjudge.Options{Changes: s.ChangedPaths, Log: s.log}
	var sum *testjudge.Summary
	if page.JobID != uuid.Nil {
		sum, err = testjudge.SummarizeAttempt(r.Context(), s.store, run, page.JobID, page.Attempt, tests, o)
	} else {
		sum, err = testjudge.Summarize(r.Context(), s.store, run, tests, o)
	}
	if err != nil {
		s.storeError(w, r, "judge the failing tests", err)
		return
	}
	for k, n := range sum.Tally {
		out.Verdicts[string(k)] = n
	}
	out.Headline, out.Judged, out.Quarantined = sum.Headline(), len(sum.Failing), sum.QuarantinedFailing
	for _, t := range tests {
		j := toTestResultJSON(t, false)
		if v, ok := sum.Verdicts[t.ID()]; ok && t.Status.Failing() {
			j.Verdict = toVerdictJSON(v)
			j.Quarantined = sum.Quarantined[t.ID()]
		}
		out.Tests = append(out.Tests, j)
	}
	if len(tests) == page.Limit {
		next := page.Offset + len(tests)
		out.NextOffset = &next
	}
	writeJSON(w, http.StatusOK, out)
}

// jobTests lists a job attempt's tests (?attempt=N; its current one unless asked),
// failing first, as runTests lists a run's: with their counts, and each failing one
// judged in its run.
func (s *Server) jobTests(w http.ResponseWriter, r *http.Request) {
	id, rerr := pathID(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	page, rerr := testPage(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	page.JobID = id
	if v := r.URL.Query().Get("attempt"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeRequestError(w, badRequest("attempt must be a whole number from 1, not %q", v))
			return
		}
		page.Attempt = n
	}
	job, err := s.store.GetJob(r.Context(), id)
	if err != nil {
		s.storeError(w, r, "get job", err)
		return
	}
	run, err := s.store.GetRun(r.Context(), job.RunID)
	if err != nil {
		s.storeError(w, r, "get run", err)
		return
	}
	s.writeTests(w, r, run, page)
}

// testHistory answers one test's results in a project, newest first: the test is
// ?suite= and ?name=, or ?test=SUITE.NAME as the CLI shows it (split at the dot that
// names a test the project has; a name alone when it holds no such dot).
func (s *Server) testHistory(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := store.TestHistoryParams{Project: r.PathValue("name"), Branch: q.Get("branch")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxTestHistory {
			writeRequestError(w, badRequest("limit must be a whole number from 1 to %d, not %q", store.MaxTestHistory, v))
			return
		}
		p.Limit = n
	}
	if v := q.Get("before"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeRequestError(w, badRequest("before must be a time in RFC 3339, not %q", v))
			return
		}
		p.Before = t
	}
	var candidates []testreport.TestID
	switch test := q.Get("test"); {
	case q.Get("name") != "":
		candidates = []testreport.TestID{{Suite: q.Get("suite"), Name: q.Get("name")}}
	case test != "":
		candidates = testCandidates(test)
	default:
		writeRequestError(w, badRequest("name the test: ?test=SUITE.NAME, or ?name= with ?suite="))
		return
	}
	out := []testResultJSON{}
	for _, c := range candidates {
		p.Test = c
		rs, err := s.store.TestHistory(r.Context(), p)
		if err != nil {
			s.storeError(w, r, "test history", err)
			return
		}
		if len(rs) == 0 {
			continue
		}
		for _, t := range rs {
			out = append(out, toTestResultJSON(t, true))
		}
		break
	}
	writeJSON(w, http.StatusOK, out)
}

// testCandidates are the tests "SUITE.NAME" may name, the longest suite first: a suite
// may hold dots (a Go package's path, a Java class) and so may a name.
func testCandidates(test string) []testreport.TestID {
	var out []testreport.TestID
	for i := len(test) - 1; i > 0; i-- {
		if test[i] == '.' && i < len(test)-1 {
			out = append(out, testreport.TestID{Suite: test[:i], Name: test[i+1:]})
		}
	}
	return append(out, testreport.TestID{Name: test})
}

// flakyTestJSON is a flaky test with the results that show it.
type flakyTestJSON struct {
	Suite    string           `json:"suite"`
	Name     string           `json:"name"`
	Commits  int              `json:"commits"`
	LastSeen string           `json:"last_seen"`
	Evidence []testResultJSON `json:"evidence"`
}

// flakyTests lists a project's tests that failed and passed on one commit in the last
// ?days= (14 unless asked), most recently seen first.
func (s *Server) flakyTests(w http.ResponseWriter, r *http.Request) {
	days, limit := flakyDays, 100
	q := r.URL.Query()
	for _, f := range []struct {
		name string
		to   *int
		max  int
	}{{"days", &days, 365}, {"limit", &limit, store.MaxTestHistory}} {
		if v := q.Get(f.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > f.max {
				writeRequestError(w, badRequest("%s must be a whole number from 1 to %d, not %q", f.name, f.max, v))
				return
			}
			*f.to = n
		}
	}
	fs, err := s.store.FlakyTests(r.Context(), store.FlakyTestsParams{Project: r.PathValue("name"),
		Since: s.clock.Now().Add(-time.Duration(days) * 24 * time.Hour), Limit: limit})
	if err != nil {
		s.storeError(w, r, "flaky tests", err)
		return
	}
	out := make([]flakyTestJSON, len(fs))
	for i, f := range fs {
		out[i] = flakyTestJSON{Suite: f.Test.Suite, Name: f.Test.Name, Commits: f.Commits, LastSeen: formatTime(f.LastSeen),
			Evidence: make([]testResultJSON, len(f.Evidence))}
		for k, e := range f.Evidence {
			out[i].Evidence[k] = toTestResultJSON(e, true)
		}
	}
	writeJSON(w, http.StatusOK, out)
}
