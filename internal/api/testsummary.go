package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/testjudge"
	"github.com/gantry-ci/gantry/internal/testreport"
	"github.com/google/uuid"
)

// A branch's test summary answers what a project's Tests page opens with: in the latest
// finished run of the branch that kept test results, the slowest tests, and the failing
// ones with since when each has been failing on the branch, newest streak first.

// Bounds of a branch's test summary.
const (
	// summaryRuns is how many of the branch's latest runs are looked at for one with
	// test results: a branch whose last 20 runs kept none has no summary.
	summaryRuns = 20
	// summarySlowest is how many of the run's slowest tests are listed.
	summarySlowest = 20
	// summaryFailing is how many of the run's failing tests are listed, each with its
	// streak: the first in the order the run's tests are listed (job plan order, then
	// suite and name).
	summaryFailing = 100
	// streakFirstRead and streakRead bound the reads of a failing test's history on the
	// branch: a first short one, which finds the pass before most failures, and one
	// longer read for a test failing for longer. A streak past streakRead results is cut.
	streakFirstRead = 10
	streakRead      = 100
)

// testSummaryJSON is a branch's test summary. Run is nil when none of the branch's
// latest runs finished with test results.
type testSummaryJSON struct {
	Branch string          `json:"branch"`
	Run    *summaryRunJSON `json:"run"`
	// Total counts the run's tests, FailingTotal its failing ones (failed and errored):
	// Failing lists at most summaryFailing of them.
	Total        int               `json:"total"`
	FailingTotal int               `json:"failing_total"`
	Slowest      []slowTestJSON    `json:"slowest"`
	Failing      []failingTestJSON `json:"failing"`
}

// summaryRunJSON is the run a branch's summary is of.
type summaryRunJSON struct {
	ID        uuid.UUID `json:"id"`
	Number    int       `json:"number"`
	SHA       string    `json:"sha"`
	Status    string    `json:"status"`
	CreatedAt string    `json:"created_at"`
}

// slowTestJSON is one of a run's slowest tests.
type slowTestJSON struct {
	Suite      string    `json:"suite"`
	Name       string    `json:"name"`
	Job        string    `json:"job"`
	JobID      uuid.UUID `json:"job_id"`
	Attempt    int       `json:"attempt"`
	Status     string    `json:"status"`
	DurationMS float64   `json:"duration_ms"`
}

// failingTestJSON is a failing test of a run with since when it has been failing on the
// run's branch: Since is the first failure of its streak, LastPass the pass before it
// (nil when the branch has none before it). StreakCut says the streak goes back further
// than the history read: Since is the earliest failure read.
type failingTestJSON struct {
	Suite       string           `json:"suite"`
	Name        string           `json:"name"`
	Job         string           `json:"job"`
	JobID       uuid.UUID        `json:"job_id"`
	Status      string           `json:"status"`
	Message     string           `json:"message,omitempty"`
	Since       streakPointJSON  `json:"since"`
	LastPass    *streakPointJSON `json:"last_pass"`
	StreakCut   bool             `json:"streak_cut,omitempty"`
	Verdict     *verdictJSON     `json:"verdict,omitempty"`
	Quarantined bool             `json:"quarantined,omitempty"`
}

// streakPointJSON is one result of a test's streak: its run, commit, job and time.
type streakPointJSON struct {
	Run   int       `json:"run"`
	RunID uuid.UUID `json:"run_id"`
	SHA   string    `json:"sha"`
	Job   string    `json:"job"`
	At    string    `json:"at"`
}

func toStreakPoint(r *store.TestResult) streakPointJSON {
	return streakPointJSON{Run: r.RunNumber, RunID: r.RunID, SHA: r.SHA, Job: r.Job, At: formatTime(r.CreatedAt)}
}

// testSummary answers a branch's test summary (?branch=, the project's default branch
// unless asked): the latest finished run of it with test results, its slowest tests and
// its failing ones with their streaks and verdicts.
func (s *Server) testSummary(w http.ResponseWriter, r *http.Request) {
	p, ok := s.projectInPath(w, r)
	if !ok {
		return
	}
	branch := r.URL.Query().Get("branch")
	if msg := checkFilter(branch); msg != "" {
		writeRequestError(w, badRequest("branch: %s", msg))
		return
	}
	if branch == "" {
		branch = p.DefaultBranch
	}
	out := testSummaryJSON{Branch: branch, Slowest: []slowTestJSON{}, Failing: []failingTestJSON{}}
	if branch == "" {
		// A project with no default branch names one: results of every branch mixed
		// would make no streak.
		writeJSON(w, http.StatusOK, out)
		return
	}
	run, counts, err := s.summaryRun(r.Context(), p.Name, branch)
	if err != nil {
		s.storeError(w, r, "find the branch's latest run with test results", err)
		return
	}
	if run == nil {
		writeJSON(w, http.StatusOK, out)
		return
	}
	out.Run = &summaryRunJSON{ID: run.ID, Number: run.Number, SHA: run.Trigger.StatusSHA(), Status: string(run.Status),
		CreatedAt: formatTime(run.CreatedAt)}
	for st, n := range counts {
		out.Total += n
		if st.Failing() {
			out.FailingTotal += n
		}
	}
	slowest, err := s.store.ListTestResults(r.Context(), store.ListTestResultsParams{RunID: run.ID, BySlowest: true, Limit: summarySlowest})
	if err != nil {
		s.storeError(w, r, "list the slowest tests", err)
		return
	}
	for _, t := range slowest {
		out.Slowest = append(out.Slowest, slowTestJSON{Suite: t.Suite, Name: t.Name, Job: t.Job, JobID: t.JobID, Attempt: t.Attempt,
			Status: string(t.Status), DurationMS: float64(t.Duration.Microseconds()) / 1000})
	}
	if out.FailingTotal > 0 {
		if out.Failing, err = s.failingSince(r.Context(), run); err != nil {
			s.storeError(w, r, "judge the failing tests", err)
			return
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// summaryRun finds the latest of the branch's last summaryRuns runs that finished
// (succeeded or failed) with test results, and counts them by status; nil when none
// did. A run under way is passed over, as is a cancelled one: their results are of some
// jobs only, and would make the lists change under the reader or hide a failure.
func (s *Server) summaryRun(ctx context.Context, project, branch string) (*store.Run, map[testreport.Status]int, error) {
	runs, err := s.store.ListRuns(ctx, store.ListRunsParams{Project: project, Branch: branch, Limit: summaryRuns})
	if err != nil {
		return nil, nil, err
	}
	for _, run := range runs {
		if run.Status != store.RunSuccess && run.Status != store.RunFailed {
			continue
		}
		counts, err := s.store.CountTestResults(ctx, store.ListTestResultsParams{RunID: run.ID})
		if err != nil {
			return nil, nil, fmt.Errorf("count the tests of run %s: %w", run.ID, err)
		}
		for _, n := range counts {
			if n > 0 {
				return run, counts, nil
			}
		}
	}
	return nil, nil, nil
}

// failingSince lists the run's first summaryFailing failing tests with their verdicts
// and since when each has been failing on the run's branch, newest streak first.
func (s *Server) failingSince(ctx context.Context, run *store.Run) ([]failingTestJSON, error) {
	failing, err := s.store.ListTestResults(ctx, store.ListTestResultsParams{RunID: run.ID,
		Statuses: []testreport.Status{testreport.Failed, testreport.Errored}, Limit: summaryFailing})
	if err != nil {
		return nil, fmt.Errorf("list the failing tests of run %s: %w", run.ID, err)
	}
	// Judged as the run's Tests tab judges them, these only: the run's headline is not
	// asked for here.
	verdicts, err := testjudge.Verdicts(ctx, s.store, run, failing, testjudge.Options{Changes: s.ChangedPaths, Log: s.log})
	if err != nil {
		return nil, err
	}
	qs, err := s.store.ListQuarantines(ctx, store.ListQuarantinesParams{Project: run.Project})
	if err != nil {
		return nil, fmt.Errorf("list the quarantines of project %q: %w", run.Project, err)
	}
	quarantined := map[testreport.TestID]bool{}
	for _, q := range qs {
		quarantined[q.Test] = true
	}
	type streak struct {
		since, lastPass *store.TestResult
		cut             bool
	}
	// A test failing in two jobs (a matrix) has one history on the branch.
	streaks := map[testreport.TestID]streak{}
	type item struct {
		json  failingTestJSON
		since *store.TestResult
	}
	items := make([]item, 0, len(failing))
	for _, t := range failing {
		st, ok := streaks[t.ID()]
		if !ok {
			for _, limit := range []int{streakFirstRead, streakRead} {
				hist, err := s.store.TestHistory(ctx, store.TestHistoryParams{Project: run.Project, Test: t.ID(),
					Branch: run.Trigger.Branch, Limit: limit})
				if err != nil {
					return nil, fmt.Errorf("read the history of %s: %w", t.ID(), err)
				}
				st.since, st.lastPass, st.cut = failingStreak(hist, run.Number, limit)
				if !st.cut {
					break
				}
			}
			streaks[t.ID()] = st
		}
		first := st.since
		if first == nil {
			// Every result read is of a later run: the streak is cut before this one's.
			first = t
		}
		f := failingTestJSON{Suite: t.Suite, Name: t.Name, Job: t.Job, JobID: t.JobID, Status: string(t.Status), Message: t.Message,
			Since: toStreakPoint(first), StreakCut: st.cut, Quarantined: quarantined[t.ID()]}
		if st.lastPass != nil {
			p := toStreakPoint(st.lastPass)
			f.LastPass = &p
		}
		if v, ok := verdicts[t.ID()]; ok {
			f.Verdict = toVerdictJSON(v)
		}
		items = append(items, item{f, first})
	}
	// Newest streak first; ties in the run's order.
	slices.SortStableFunc(items, func(a, b item) int {
		if a.since.RunNumber != b.since.RunNumber {
			return b.since.RunNumber - a.since.RunNumber
		}
		return b.since.CreatedAt.Compare(a.since.CreatedAt)
	})
	out := make([]failingTestJSON, len(items))
	for i, it := range items {
		out[i] = it.json
	}
	return out, nil
}

// failingStreak reads a test's history on a branch (newest first, as TestHistory lists
// it, read with limit) for the streak of failures that run number runNumber ends: the
// earliest failure of it, and the pass before it. Results of later runs are passed over,
// and so are skipped ones, which neither break a streak nor make one. cut says the
// history read ended within the streak, limit results long: it may go back further.
func failingStreak(hist []*store.TestResult, runNumber, limit int) (since, lastPass *store.TestResult, cut bool) {
	for _, r := range hist {
		switch {
		case r.RunNumber > runNumber:
			continue
		case r.Status.Failing():
			since = r
		case r.Status == testreport.Passed:
			return since, r, false
		}
	}
	return since, nil, len(hist) >= limit
}
