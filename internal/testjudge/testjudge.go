// Package testjudge judges a run's failing tests from their history in the store, with
// testreport.Judge's rules: the verdicts, and the headline they make ("1 new failure, 2
// known flaky"), that the API, the run page and the run's commit status show. It is the
// one place that reads the evidence for them, so all three say the same.
package testjudge

import (
	"context"
	"errors"
	"fmt"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/testreport"
)

// Store is what judging needs of the store.
type Store interface {
	GetProjectByName(ctx context.Context, name string) (*store.Project, error)
	ListTestResults(ctx context.Context, p store.ListTestResultsParams) ([]*store.TestResult, error)
	TestEvidence(ctx context.Context, p store.TestEvidenceParams) (map[testreport.TestID]*store.TestEvidence, error)
	ListQuarantines(ctx context.Context, p store.ListQuarantinesParams) ([]*store.Quarantine, error)
}

// MaxJudged is how many of a run's failing tests its headline is decided from: the
// first in the order the store lists them (job plan order, then suite and name).
const MaxJudged = 200

// Verdicts decides the verdict of each failing test named in failing (each test once, at
// most store.MaxEvidenceTests; past the bound a test has no verdict) from its history in
// the run's project: on the run's commit, and before the run on its branch and on the
// project's default branch.
func Verdicts(ctx context.Context, st Store, run *store.Run, failing []*store.TestResult) (map[testreport.TestID]testreport.Verdict, error) {
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
	ev, err := st.TestEvidence(ctx, store.TestEvidenceParams{Project: run.Project, Tests: ids, SHA: run.Trigger.StatusSHA(),
		Branch: run.Trigger.Branch, DefaultBranch: defaultBranch, Before: run.CreatedAt})
	if err != nil {
		return nil, fmt.Errorf("read the failing tests' history: %w", err)
	}
	for _, id := range ids {
		var judged testreport.Evidence
		if e := ev[id]; e != nil {
			judged = e.Judged()
		}
		out[id] = testreport.Judge(judged)
	}
	return out, nil
}

// Summary is a run's failing tests judged.
type Summary struct {
	// Failing are the run's first MaxJudged failing tests (failed or errored), of the
	// current attempt of each job.
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
func Summarize(ctx context.Context, st Store, run *store.Run, extra []*store.TestResult) (*Summary, error) {
	failing, err := st.ListTestResults(ctx, store.ListTestResultsParams{RunID: run.ID,
		Statuses: []testreport.Status{testreport.Failed, testreport.Errored}, Limit: MaxJudged})
	if err != nil {
		return nil, fmt.Errorf("list the failing tests of run %s: %w", run.ID, err)
	}
	judge := failing
	for _, t := range extra {
		if t.Status.Failing() && !contains(failing, t) {
			judge = append(judge, t)
		}
	}
	verdicts, err := Verdicts(ctx, st, run, judge)
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
