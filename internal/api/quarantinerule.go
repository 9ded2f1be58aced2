package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// A project's quarantine rule ("flaky on 3 commits within 7d: quarantined for 14d") is
// set by its maintainers and applied by the coordinator: when a job of the project that
// reported test results completes, the tests flaky on enough commits within the window
// that have no quarantine in force are quarantined, each with the evidence as its
// reason and an audit entry whose actor is the rule. Only what a test did after its
// last quarantine ended counts, so a release or an expiry is not undone at once by the
// flips that led to the quarantine.

func (s *Server) quarantineRuleRoutes() {
	s.handle("GET /api/v1/projects/{name}/tests/quarantine-rule", on(thingProject, store.RoleViewer), s.getQuarantineRule)
	s.handle("PUT /api/v1/projects/{name}/tests/quarantine-rule", on(thingProject, store.RoleMaintainer), s.putQuarantineRule)
	s.handle("DELETE /api/v1/projects/{name}/tests/quarantine-rule", on(thingProject, store.RoleMaintainer), s.deleteQuarantineRule)
}

// quarantineRuleJSON is a project's rule as the API shows it; Enabled is false, and
// nothing else set, for a project without one.
type quarantineRuleJSON struct {
	Enabled      bool   `json:"enabled"`
	FlakyCommits int    `json:"flaky_commits,omitempty"`
	Within       string `json:"within,omitempty"`
	For          string `json:"for,omitempty"`
	Owner        string `json:"owner,omitempty"`
	// Rule says it in words: "flaky on 3 commits within 7d: quarantined for 14d".
	Rule      string `json:"rule,omitempty"`
	UpdatedBy string `json:"updated_by,omitempty"`
	UpdatedAt string `json:"updated_at,omitempty"`
}

func toQuarantineRuleJSON(r *store.QuarantineRule) quarantineRuleJSON {
	if r == nil {
		return quarantineRuleJSON{}
	}
	return quarantineRuleJSON{Enabled: true, FlakyCommits: r.FlakyCommits, Within: store.FormatSpan(r.Within),
		For: store.FormatSpan(r.For), Owner: r.Owner, Rule: r.String(), UpdatedBy: r.UpdatedBy, UpdatedAt: formatTime(r.UpdatedAt)}
}

// getQuarantineRule shows the project's rule, or that it has none.
func (s *Server) getQuarantineRule(w http.ResponseWriter, r *http.Request) {
	rule, err := s.store.GetQuarantineRule(r.Context(), r.PathValue("name"))
	if err != nil {
		s.storeError(w, r, "get the quarantine rule", err)
		return
	}
	writeJSON(w, http.StatusOK, toQuarantineRuleJSON(rule))
}

type quarantineRuleRequest struct {
	// FlakyCommits is how many commits a test must have failed and passed on.
	FlakyCommits *int `json:"flaky_commits"`
	// Within is the window looked back over ("7d"); For how long a quarantine lasts
	// (default 14d).
	Within string `json:"within"`
	For    string `json:"for"`
	// Owner owns the quarantines the rule makes (default "rule").
	Owner string `json:"owner"`
}

// putQuarantineRule sets the project's rule, replacing the one it has.
func (s *Server) putQuarantineRule(w http.ResponseWriter, r *http.Request) {
	var req quarantineRuleRequest
	if rerr := s.decodeJSON(w, r, &req); rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	project := r.PathValue("name")
	rule := &store.QuarantineRule{Project: project, Owner: strings.TrimSpace(req.Owner), For: store.DefaultRuleQuarantine}
	if rule.Owner == "" {
		rule.Owner = store.ActorRule
	}
	if tk := tokenFrom(r.Context()); tk != nil {
		rule.UpdatedBy = tk.Name
	}
	switch {
	case req.FlakyCommits == nil:
		writeRequestError(w, badRequest("flaky_commits is required: on how many commits (1 to %d) a test must have failed and passed", store.MaxRuleCommits))
		return
	case req.Within == "":
		writeRequestError(w, badRequest("within is required: how far back the rule looks, a duration such as 7d"))
		return
	}
	rule.FlakyCommits = *req.FlakyCommits
	for _, f := range []struct {
		name, value string
		into        *time.Duration
	}{{"within", req.Within, &rule.Within}, {"for", req.For, &rule.For}} {
		if f.value == "" {
			continue
		}
		d, err := pipeline.ParseDuration(f.value)
		if err != nil {
			writeRequestError(w, badRequest("%s %q is not a duration such as 7d or 36h", f.name, f.value))
			return
		}
		*f.into = d
	}
	if msg := store.CheckQuarantineRule(rule); msg != "" {
		writeRequestError(w, badRequest("%s", msg))
		return
	}
	err := s.store.PutQuarantineRule(withAudit(r, auditEvent{Action: "test.quarantine_rule_set", Project: project, Target: project,
		Details: map[string]any{"rule": rule.String(), "owner": rule.Owner}}), rule)
	if err != nil {
		s.storeError(w, r, "set the quarantine rule", err)
		return
	}
	writeJSON(w, http.StatusOK, toQuarantineRuleJSON(rule))
}

// deleteQuarantineRule removes the project's rule; its quarantines last until they end.
func (s *Server) deleteQuarantineRule(w http.ResponseWriter, r *http.Request) {
	project := r.PathValue("name")
	err := s.store.DeleteQuarantineRule(withAudit(r, auditEvent{Action: "test.quarantine_rule_deleted", Project: project, Target: project}), project)
	if err != nil {
		s.storeError(w, r, "delete the quarantine rule", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Bounds of the rule runner.
const (
	// ruleWorkers is how many projects' rules are evaluated at once.
	ruleWorkers = 2
	// maxRuleProjects is how many projects may wait for an evaluation; a completion in
	// another project past it is not evaluated (the next one of that project is).
	maxRuleProjects = 1000
	// maxRuleJobs is how many completed jobs a project's next evaluation remembers to
	// look at; past it the evaluation runs without looking whether they reported tests.
	maxRuleJobs = 32
	// ruleTimeout bounds one evaluation.
	ruleTimeout = time.Minute
)

// ruleRunner applies projects' quarantine rules after their jobs complete, off the
// completion's request so that a worker's completion waits for none of it: one
// evaluation at a time per project (completions while one runs make one more after it),
// ruleWorkers at once in all. Its state is only what waits to be evaluated; losing it
// in a restart loses no quarantine for long, as the next completion in the project
// reads the whole window again. Replicas may evaluate one project at once: the store
// adds each quarantine once.
type ruleRunner struct {
	s      *Server
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	waiting map[uuid.UUID]*ruleWait // by project id
	// names holds the names of the projects evaluated lately, by id: a project's name
	// never changes, and reading it through one of its runs was two thirds of an
	// evaluation's reads.
	names map[uuid.UUID]string
}

// ruleWait is what a project's next evaluation looks at: the attempts that completed
// since its last one, or, when more than maxRuleJobs did, all since then.
type ruleWait struct {
	jobs []completedAttempt
	many bool
}

type completedAttempt struct {
	job, run, project uuid.UUID
	attempt           int
}

func newRuleRunner(s *Server) *ruleRunner {
	ctx, cancel := context.WithCancel(context.Background())
	return &ruleRunner{s: s, ctx: ctx, cancel: cancel, slots: make(chan struct{}, ruleWorkers), waiting: map[uuid.UUID]*ruleWait{}}
}

// completed notes that an attempt of job ended, to evaluate its project's rule. It
// never waits for the store.
func (rr *ruleRunner) completed(job *store.Job) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.closed {
		return
	}
	w := rr.waiting[job.ProjectID]
	if w == nil {
		if len(rr.waiting) >= maxRuleProjects {
			rr.s.log.Warn("quarantine rules: too many projects waiting; this completion is not evaluated", "job", job.ID, "waiting", len(rr.waiting))
			return
		}
		w = &ruleWait{}
		rr.waiting[job.ProjectID] = w
		rr.wg.Add(1)
		go rr.run(job.ProjectID, w)
	}
	if len(w.jobs) < maxRuleJobs {
		w.jobs = append(w.jobs, completedAttempt{job: job.ID, run: job.RunID, project: job.ProjectID, attempt: job.Attempt})
	} else {
		w.many = true
	}
}

// run evaluates a project's rule until no completion waits for it.
func (rr *ruleRunner) run(project uuid.UUID, w *ruleWait) {
	defer rr.wg.Done()
	for {
		rr.mu.Lock()
		jobs, many := w.jobs, w.many
		w.jobs, w.many = nil, false
		if len(jobs) == 0 || rr.ctx.Err() != nil {
			delete(rr.waiting, project)
			rr.mu.Unlock()
			return
		}
		rr.mu.Unlock()
		select {
		case rr.slots <- struct{}{}:
		case <-rr.ctx.Done():
			continue
		}
		if err := rr.s.evaluateQuarantineRule(rr.ctx, rr.projectName, jobs, many); err != nil && rr.ctx.Err() == nil {
			rr.s.log.Error("quarantine rule: evaluation failed", "project_id", project, "err", err)
		}
		<-rr.slots
	}
}

// projectName returns the name of the project of the run of job, from the names seen
// before or else read with the run.
func (rr *ruleRunner) projectName(ctx context.Context, job completedAttempt) (string, error) {
	rr.mu.Lock()
	name, ok := rr.names[job.project]
	rr.mu.Unlock()
	if ok {
		return name, nil
	}
	run, err := rr.s.store.GetRun(ctx, job.run)
	if err != nil {
		return "", fmt.Errorf("get run %s: %w", job.run, err)
	}
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.names == nil || len(rr.names) >= maxRuleProjects {
		rr.names = map[uuid.UUID]string{}
	}
	rr.names[run.ProjectID] = run.Project
	return run.Project, nil
}

// close stops the evaluations and waits for them: none reads the store once it returns.
func (rr *ruleRunner) close() {
	rr.mu.Lock()
	rr.closed = true
	rr.mu.Unlock()
	rr.cancel()
	rr.wg.Wait()
}

// evaluateQuarantineRule applies the rule of the project of jobs, if it has one and one
// of jobs reported test results (any does when many).
// projectName names the project of a completed job's run.
func (s *Server) evaluateQuarantineRule(ctx context.Context, projectName func(context.Context, completedAttempt) (string, error),
	jobs []completedAttempt, many bool) error {
	ctx, cancel := context.WithTimeout(ctx, ruleTimeout)
	defer cancel()
	project, err := projectName(ctx, jobs[0])
	if err != nil {
		return err
	}
	rule, err := s.store.GetQuarantineRule(ctx, project)
	if err != nil || rule == nil {
		return err
	}
	reported := many
	for _, j := range jobs {
		if reported {
			break
		}
		rs, err := s.store.ListTestResults(ctx, store.ListTestResultsParams{JobID: j.job, Attempt: j.attempt, Limit: 1})
		if err != nil {
			return fmt.Errorf("test results of job %s: %w", j.job, err)
		}
		reported = len(rs) > 0
	}
	if !reported {
		return nil
	}
	_, err = s.applyQuarantineRule(ctx, rule)
	return err
}

// applyQuarantineRule quarantines the project's tests flaky on at least the rule's
// commits within its window, counting for each only what it did after its last
// quarantine ended, that have no quarantine in force. It returns how many it
// quarantined. A project at store.MaxQuarantines is logged and left as it is.
func (s *Server) applyQuarantineRule(ctx context.Context, rule *store.QuarantineRule) (int, error) {
	now := s.clock.Now()
	since := now.Add(-rule.Within)
	flaky, err := s.store.FlakyTests(ctx, store.FlakyTestsParams{Project: rule.Project, Since: since, Limit: store.MaxTestHistory})
	if err != nil {
		return 0, fmt.Errorf("flaky tests of project %s: %w", rule.Project, err)
	}
	flaky = slices.DeleteFunc(flaky, func(f *store.FlakyTest) bool { return f.Commits < rule.FlakyCommits })
	if len(flaky) == 0 {
		return 0, nil
	}
	qs, err := s.store.ListQuarantines(ctx, store.ListQuarantinesParams{Project: rule.Project, Expired: true})
	if err != nil {
		return 0, fmt.Errorf("quarantines of project %s: %w", rule.Project, err)
	}
	last := make(map[string]*store.Quarantine, len(qs))
	for _, q := range qs {
		last[q.Test.String()] = q
	}
	added := 0
	for _, f := range flaky {
		if q := last[f.Test.String()]; q != nil {
			if q.ExpiresAt.After(now) {
				continue // in force: the maintainer's or an earlier evaluation's stands
			}
			if q.ExpiresAt.After(since) {
				// It ended within the window: only the flips after that count.
				again, err := s.store.FlakyTests(ctx, store.FlakyTestsParams{Project: rule.Project, Since: q.ExpiresAt, Test: f.Test, Limit: 1})
				if err != nil {
					return added, fmt.Errorf("flaky results of %s: %w", f.Test, err)
				}
				if len(again) == 0 || again[0].Commits < rule.FlakyCommits {
					continue
				}
				f = again[0]
			}
		}
		until := now.Add(rule.For)
		audit := store.AuditEntry{Actor: store.ActorRule, Action: "test.quarantined", Project: rule.Project, Target: f.Test.String(),
			Details: store.AuditDetails(map[string]any{"owner": rule.Owner, "expires_at": formatTime(until), "rule": rule.String(), "commits": f.Commits})}
		q, ok, err := s.store.AddQuarantine(store.WithAudit(ctx, audit), store.PutQuarantineParams{Project: rule.Project, Test: f.Test,
			Owner: rule.Owner, Reason: ruleReason(rule, f), CreatedBy: store.ActorRule, ExpiresAt: until})
		switch {
		case errors.Is(err, store.ErrConflict):
			s.log.Warn("quarantine rule: the project has as many tests quarantined as it may; the rest stay as they are",
				"project", rule.Project, "max", store.MaxQuarantines, "test", f.Test.String())
			return added, nil
		case err != nil:
			return added, fmt.Errorf("quarantine %s: %w", f.Test, err)
		case ok:
			added++
			s.log.Info("quarantine rule: quarantined a flaky test", "project", rule.Project, "test", f.Test.String(),
				"commits", f.Commits, "until", formatTime(q.ExpiresAt))
		}
	}
	return added, nil
}

// ruleReason says why the rule quarantined f: the rule and the latest commits it
// flipped on, each with the run that showed it.
func ruleReason(rule *store.QuarantineRule, f *store.FlakyTest) string {
	var commits []string
	seen := map[string]bool{}
	for _, e := range f.Evidence {
		if seen[e.SHA] {
			continue
		}
		seen[e.SHA] = true
		commits = append(commits, fmt.Sprintf("%s (run #%d)", shortCommit(e.SHA), e.RunNumber))
	}
	reason := fmt.Sprintf("flaky on %d commits in %s (quarantine rule: at least %d in %s): %s", f.Commits, store.FormatSpan(rule.Within),
		rule.FlakyCommits, store.FormatSpan(rule.Within), strings.Join(commits, ", "))
	if more := f.Commits - len(commits); more > 0 {
		reason += fmt.Sprintf(" and %d more", more)
	}
	return reason
}

// shortCommit is a commit's first 12 characters, as people write them.
func shortCommit(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
