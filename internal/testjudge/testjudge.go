// Package testjudge judges a run's failing tests from their history in the store, with
// testreport.Judge's rules: the verdicts, and the headline they make ("1 new failure, 2
// known flaky"), that the API, the run page and the run's commit status show. It is the
// one place that reads the evidence for them, so all three say the same.
package testjudge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/testreport"
	"github.com/gantry-ci/gantry/internal/trigger"
	"github.com/google/uuid"
)

// Store is what judging needs of the store.
type Store interface {
	GetProjectByName(ctx context.Context, name string) (*store.Project, error)
	ListTestResults(ctx context.Context, p store.ListTestResultsParams) ([]*store.TestResult, error)
	TestEvidence(ctx context.Context, p store.TestEvidenceParams) (map[testreport.TestID]*store.TestEvidence, error)
	ListQuarantines(ctx context.Context, p store.ListQuarantinesParams) ([]*store.Quarantine, error)
	RunDefinition(ctx context.Context, id uuid.UUID) ([]byte, error)
}

// MaxJudged is how many of a run's failing tests its headline is decided from: the
// first in the order the store lists them (job plan order, then suite and name).
const MaxJudged = 200

// Bounds of the flip rule's reads of the repository, per judgement: the earlier commits
// whose change to the commit judged is listed, and the time all of that may take. Tests
// whose earlier commit is past them are judged without the rule.
const (
	maxFlipDiffs = 4
	flipTimeout  = 5 * time.Second
)

// Changes lists the paths that differ between two commits of a project's repository.
type Changes func(ctx context.Context, project *store.Project, before, after string) ([]string, error)

// Options are what judging may read besides the store.
type Options struct {
	// Changes reads the repository for the flip rule: a test that passed on the
	// branch's commit before and fails now, though nothing that matters changed between
	// the two, is flaky. Nil leaves the rule out.
	Changes Changes
	// Log takes what could not be read for the flip rule; nil discards it.
	Log *slog.Logger
}

// Verdicts decides the verdict of each failing test named in failing (each test once, at
// most store.MaxEvidenceTests; past the bound a test has no verdict) from its history in
// the run's project: on the run's commit, before the run on its branch and on the
// project's default branch, and, with o.Changes, what changed since the branch's commit
// before.
func Verdicts(ctx context.Context, st Store, run *store.Run, failing []*store.TestResult, o Options) (map[testreport.TestID]testreport.Verdict, error) {
	out := map[testreport.TestID]testreport.Verdict{}
	if len(failing) == 0 {
		return out, nil
	}
	var ids []testreport.TestID
	seen := map[testreport.TestID]bool{}
	for _, t := range failing {
		if !seen[t.ID()] && len(ids) < store.MaxEvidenceTests {
			seen[t.ID()] = true
			ids = append(ids, t.ID())
		}
	}
	defaultBranch := ""
	p, err := st.GetProjectByName(ctx, run.Project)
	switch {
	case err == nil:
		defaultBranch = p.DefaultBranch
	case !errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("read project %q: %w", run.Project, err)
	}
	sha := run.Trigger.StatusSHA()
	ev, err := st.TestEvidence(ctx, store.TestEvidenceParams{Project: run.Project, Tests: ids, SHA: sha,
		Branch: run.Trigger.Branch, DefaultBranch: defaultBranch, Before: run.CreatedAt})
	if err != nil {
		return nil, fmt.Errorf("read the failing tests' history: %w", err)
	}
	var unchanged map[string]string
	if o.Changes != nil && p != nil && p.RepoURL != "" && sha != "" {
		unchanged = unchangedSince(ctx, st, p, run, sha, ev, o)
	}
	for _, id := range ids {
		var judged testreport.Evidence
		if e := ev[id]; e != nil {
			judged = e.Judged()
			if b := e.LastOnBranch; b != nil {
				judged.Unchanged = unchanged[b.SHA]
			}
		}
		out[id] = testreport.Judge(judged)
	}
	return out, nil
}

// unchangedSince reads, for the earlier commits of the run's branch the failing tests
// last passed on, whether anything that matters to the run's jobs changed from each to
// the commit judged, by the path filters of the run's pipeline. It maps each commit
// where nothing did to why; the others, and those it could not read, are left out.
func unchangedSince(ctx context.Context, st Store, p *store.Project, run *store.Run, sha string, ev map[testreport.TestID]*store.TestEvidence, o Options) map[string]string {
	var before []string
	seen := map[string]bool{}
	for _, e := range ev {
		b := e.LastOnBranch
		if b == nil || b.Status != testreport.Passed || b.SHA == "" || b.SHA == sha || seen[b.SHA] {
			continue
		}
		seen[b.SHA] = true
		if len(before) < maxFlipDiffs {
			before = append(before, b.SHA)
		}
	}
	if len(before) == 0 {
		return nil
	}
	var on *pipeline.Triggers
	// The run's own definition says which paths its jobs read; one that cannot be read or
	// no longer compiles (a newer Gantry's rules) has no path filter: any change then
	// matters.
	def, err := st.RunDefinition(ctx, run.ID)
	if err != nil && o.Log != nil {
		o.Log.Warn("tests judged with no path filter: read the run's definition", "run", run.ID, "err", err)
	}
	if plan, err := pipeline.Compile(def, pipeline.Options{Workflows: pipeline.SkipWorkflows}); err == nil {
		on = plan.On
	}
	kind := trigger.KindPush
	if run.Trigger.Event == string(trigger.KindPullRequest) {
		kind = trigger.KindPullRequest
	}
	ctx, cancel := context.WithTimeout(ctx, flipTimeout)
	defer cancel()
	out := map[string]string{}
	for _, b := range before {
		changed, err := o.Changes(ctx, p, b, sha)
		if err != nil {
			if o.Log != nil {
				o.Log.Warn("tests judged without the flip rule: list the paths changed", "project", p.Name, "before", b, "after", sha, "err", err)
			}
			continue
		}
		if matters, why := trigger.PathsMatter(on, kind, changed); !matters {
			out[b] = why
		}
	}
	return out
}

// Summary is a run's failing tests judged, or a job attempt's.
type Summary struct {
	// Failing are the first MaxJudged failing tests (failed or errored) of the run, of
	// the current attempt of each job; or of the job attempt summarized.
	Failing []*store.TestResult
	// Verdicts are those tests' verdicts, and those of the extra tests Summarize was given.
	Verdicts map[testreport.TestID]testreport.Verdict
	// Tally counts the verdicts of Failing by kind.
	Tally testreport.Tally
	// Quarantined holds the judged tests the project has quarantined now.
	Quarantined map[testreport.TestID]bool
	// QuarantinedFailing is how many of Failing are quarantined.
	QuarantinedFailing int
}

// Headline says the tally as a person would, with the quarantined among them: "1 new
// failure, 2 known flaky (1 quarantined)"; "" when no test failed.
func (s *Summary) Headline() string {
	h := s.Tally.String()
	if s.QuarantinedFailing > 0 {
		h += fmt.Sprintf(" (%d quarantined)", s.QuarantinedFailing)
	}
	return h
}

// Summarize judges the run's first MaxJudged failing tests, and the failing ones of
// extra (a page of the run's tests past them), and reads which are quarantined.
func Summarize(ctx context.Context, st Store, run *store.Run, extra []*store.TestResult, o Options) (*Summary, error) {
	return summarize(ctx, st, run, store.ListTestResultsParams{RunID: run.ID}, extra, o)
}

// SummarizeAttempt is Summarize for attempt of job, a job of run (its current attempt
// when attempt is 0): its failing tests judged in the run, as the job's page shows them.
func SummarizeAttempt(ctx context.Context, st Store, run *store.Run, job uuid.UUID, attempt int, extra []*store.TestResult, o Options) (*Summary, error) {
	return summarize(ctx, st, run, store.ListTestResultsParams{JobID: job, Attempt: attempt}, extra, o)
}

// summarize judges the failing tests of scope (a run's, or a job attempt's) and those of
// extra.
func summarize(ctx context.Context, st Store, run *store.Run, scope store.ListTestResultsParams, extra []*store.TestResult, o Options) (*Summary, error) {
	scope.Statuses, scope.Limit = []testreport.Status{testreport.Failed, testreport.Errored}, MaxJudged
	failing, err := st.ListTestResults(ctx, scope)
	if err != nil {
		return nil, fmt.Errorf("list the failing tests of run %s: %w", run.ID, err)
	}
	judge := failing
	for _, t := range extra {
		if t.Status.Failing() && !contains(failing, t) {
			judge = append(judge, t)
		}
	}
	verdicts, err := Verdicts(ctx, st, run, judge, o)
	if err != nil {
		return nil, err
	}
	s := &Summary{Failing: failing, Verdicts: verdicts, Tally: testreport.Tally{}, Quarantined: map[testreport.TestID]bool{}}
	if len(judge) > 0 {
		qs, err := st.ListQuarantines(ctx, store.ListQuarantinesParams{Project: run.Project})
		if err != nil {
			return nil, fmt.Errorf("list the quarantines of project %q: %w", run.Project, err)
		}
		for _, q := range qs {
			s.Quarantined[q.Test] = true
		}
	}
	for _, t := range failing {
		s.Tally[verdicts[t.ID()].Kind]++
		if s.Quarantined[t.ID()] {
			s.QuarantinedFailing++
		}
	}
	return s, nil
}

func contains(ts []*store.TestResult, t *store.TestResult) bool {
	for _, o := range ts {
		if o.JobID == t.JobID && o.Attempt == t.Attempt && o.Index == t.Index {
			return true
		}
	}
	return false
}
