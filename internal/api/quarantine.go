package api

import (
	"net/http"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/testreport"
)

// A quarantined test's failures are still kept, counted and shown, but do not fail its
// job while the quarantine lasts: the worker asks for the project's quarantines when a
// job's reports hold failures, and a job whose only failures are quarantined tests
// succeeds. Maintainers quarantine a test with an owner and an expiry; it ends by itself.

func (s *Server) quarantineRoutes() {
	s.handle("GET /api/v1/projects/{name}/tests/quarantine", on(thingProject, store.RoleViewer), s.listQuarantines)
	s.handle("PUT /api/v1/projects/{name}/tests/quarantine", on(thingProject, store.RoleMaintainer), s.putQuarantine)
	s.handle("DELETE /api/v1/projects/{name}/tests/quarantine", on(thingProject, store.RoleMaintainer), s.deleteQuarantine)
	s.handle("POST /api/v1/agent/jobs/{id}/known-tests", agentAccess, s.knownTests)
	s.quarantineRuleRoutes()
}

type quarantineJSON struct {
	Suite     string `json:"suite"`
	Name      string `json:"name"`
	Owner     string `json:"owner"`
	Reason    string `json:"reason,omitempty"`
	CreatedBy string `json:"created_by,omitempty"`
	CreatedAt string `json:"created_at"`
	ExpiresAt string `json:"expires_at"`
}

func toQuarantineJSON(q *store.Quarantine) quarantineJSON {
	return quarantineJSON{Suite: q.Test.Suite, Name: q.Test.Name, Owner: q.Owner, Reason: q.Reason, CreatedBy: q.CreatedBy,
		CreatedAt: formatTime(q.CreatedAt), ExpiresAt: formatTime(q.ExpiresAt)}
}

// listQuarantines lists the project's quarantines in force (?expired=true: and those
// that ended).
func (s *Server) listQuarantines(w http.ResponseWriter, r *http.Request) {
	qs, err := s.store.ListQuarantines(r.Context(), store.ListQuarantinesParams{Project: r.PathValue("name"),
		Expired: r.URL.Query().Get("expired") == "true"})
	if err != nil {
		s.storeError(w, r, "list quarantines", err)
		return
	}
	out := make([]quarantineJSON, len(qs))
	for i, q := range qs {
		out[i] = toQuarantineJSON(q)
	}
	writeJSON(w, http.StatusOK, out)
}

type quarantineRequest struct {
	Suite  string `json:"suite"`
	Name   string `json:"name"`
	Owner  string `json:"owner"`
	Reason string `json:"reason"`
	// For is how long it lasts, a duration ("14d", "36h"); ExpiresAt when it ends
	// (RFC 3339). One of the two.
	For       string `json:"for"`
	ExpiresAt string `json:"expires_at"`
}

// putQuarantine quarantines a test of the project, or replaces its quarantine.
func (s *Server) putQuarantine(w http.ResponseWriter, r *http.Request) {
	var req quarantineRequest
	if rerr := s.decodeJSON(w, r, &req); rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	var until time.Time
	switch {
	case (req.For == "") == (req.ExpiresAt == ""):
		writeRequestError(w, badRequest("say how long the quarantine lasts: for (a duration such as 14d) or expires_at (RFC 3339), one of them"))
		return
	case req.For != "":
		d, err := pipeline.ParseDuration(req.For)
		if err != nil || d <= 0 {
			writeRequestError(w, badRequest("for %q is not a duration such as 14d or 36h", req.For))
			return
		}
		until = s.clock.Now().Add(d)
	default:
		t, err := time.Parse(time.RFC3339Nano, req.ExpiresAt)
		if err != nil {
			writeRequestError(w, badRequest("expires_at %q is not a time in RFC 3339", req.ExpiresAt))
			return
		}
		until = t
	}
	project := r.PathValue("name")
	by := ""
	if tk := tokenFrom(r.Context()); tk != nil {
		by = tk.Name
	}
	test := testreport.TestID{Suite: req.Suite, Name: strings.TrimSpace(req.Name)}
	q, err := s.store.PutQuarantine(r.Context(), store.PutQuarantineParams{Project: project, Test: test,
		Owner: strings.TrimSpace(req.Owner), Reason: req.Reason, CreatedBy: by, ExpiresAt: until})
	if err != nil {
		s.storeError(w, r, "quarantine a test", err)
		return
	}
	_ = s.audit(r, auditEvent{Action: "test.quarantined", Project: project, Target: test.String(),
		Details: map[string]any{"owner": q.Owner, "expires_at": formatTime(q.ExpiresAt)}})
	writeJSON(w, http.StatusOK, toQuarantineJSON(q))
}

// deleteQuarantine ends a test's quarantine (?suite=&name=) before its expiry.
func (s *Server) deleteQuarantine(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	test := testreport.TestID{Suite: q.Get("suite"), Name: q.Get("name")}
	if test.Name == "" {
		writeRequestError(w, badRequest("name the test: ?name= and ?suite="))
		return
	}
	project := r.PathValue("name")
	if err := s.store.DeleteQuarantine(r.Context(), project, test); err != nil {
		s.storeError(w, r, "release a test from quarantine", err)
		return
	}
	_ = s.audit(r, auditEvent{Action: "test.released", Project: project, Target: test.String()})
	w.WriteHeader(http.StatusNoContent)
}

// knownTests answers the worker holding a job's lease with what its project knows of
// tests now: those quarantined, and those flaky (failed and passed on one commit) in
// the last flakyDays days. The worker decides from them whether a job whose tests
// failed succeeds (all quarantined) or failed as flaky (all flaky or quarantined).
func (s *Server) knownTests(w http.ResponseWriter, r *http.Request) {
	var req tokenRequest
	ref, ok := s.leaseRequest(w, r, &req)
	if !ok {
		return
	}
	job, err := s.store.GetJob(r.Context(), ref.JobID)
	if err != nil {
		s.agentError(w, r, "get job", err)
		return
	}
	run, err := s.store.GetRun(r.Context(), job.RunID)
	if err != nil {
		s.agentError(w, r, "get run", err)
		return
	}
	qs, err := s.store.ListQuarantines(r.Context(), store.ListQuarantinesParams{Project: run.Project})
	if err != nil {
		s.agentError(w, r, "list quarantines", err)
		return
	}
	fs, err := s.store.FlakyTests(r.Context(), store.FlakyTestsParams{Project: run.Project,
		Since: s.clock.Now().Add(-flakyDays * 24 * time.Hour), Limit: store.MaxTestHistory})
	if err != nil {
		s.agentError(w, r, "list flaky tests", err)
		return
	}
	type testJSON struct {
		Suite string `json:"suite"`
		Name  string `json:"name"`
	}
	out := struct {
		Quarantined []testJSON `json:"quarantined"`
		Flaky       []testJSON `json:"flaky"`
	}{Quarantined: make([]testJSON, len(qs)), Flaky: make([]testJSON, len(fs))}
	for i, q := range qs {
		out.Quarantined[i] = testJSON{Suite: q.Test.Suite, Name: q.Test.Name}
	}
	for i, f := range fs {
		out.Flaky[i] = testJSON{Suite: f.Test.Suite, Name: f.Test.Name}
	}
	writeJSON(w, http.StatusOK, out)
}

// flakyDays is how far back a test that failed and passed on one commit counts as
// flaky: for the project's list unless asked, and for a worker's retry on: [flaky].
const flakyDays = 14
