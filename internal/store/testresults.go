package store

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gantry-ci/gantry/internal/testreport"
	"github.com/google/uuid"
)

// TestResults keeps the per-test results of job attempts, read by the worker from the
// test reports the job's steps left (pipeline.Reports), with the run's project, branch
// and commit beside each: what a test's history and the flaky, new and known-broken
// verdicts are read from.
type TestResults interface {
	// AddTestResults records results of the attempt that holds the lease p.LeaseRef.
	// Each result has its index in the attempt (p.First, p.First+1, ...); a result whose
	// index is kept already is not added again, so a re-sent batch adds nothing twice.
	// ErrLeaseLost (ErrNotFound for a job that does not exist) when p.Token is not the
	// lease of an assigned or running job; ErrInvalid for an index below 0 or at or past
	// MaxTestResults, a status that is not one of testreport's, an empty name, or text
	// over testreport's bounds, not UTF-8 or holding NUL. It returns how many were added.
	AddTestResults(ctx context.Context, p AddTestResultsParams) (added int, err error)
	// ListTestResults lists results in the order a reader wants them: failing first
	// (errored and failed), then skipped, then passed; within a status in job plan order,
	// then suite and name. With p.BySlowest, the longest first, then by suite and name
	// (then job plan order). Those of p.JobID's attempt p.Attempt when JobID is set
	// (Attempt 0: the job's current one), or those of the current attempt of every job of
	// p.RunID. ErrNotFound for a job that does not exist; ErrInvalid when neither is set.
	ListTestResults(ctx context.Context, p ListTestResultsParams) ([]*TestResult, error)
	// CountTestResults counts by status what ListTestResults would list with p's run or
	// job (its status filter and paging ignored).
	CountTestResults(ctx context.Context, p ListTestResultsParams) (map[testreport.Status]int, error)
	// TestHistory lists one test's results in a project, newest first: on p.Branch when
	// it is set, before p.Before when it is set, at most p.Limit (MaxTestHistory when 0
	// or more).
	TestHistory(ctx context.Context, p TestHistoryParams) ([]*TestResult, error)
	// TestEvidence reads, for each test named (at most MaxEvidenceTests), what its verdict
	// is decided from: its results on p.SHA in any run of the project, and its latest
	// result before p.Before on p.Branch and on p.DefaultBranch (each "" to skip). Tests
	// with no result anywhere are left out.
	TestEvidence(ctx context.Context, p TestEvidenceParams) (map[testreport.TestID]*TestEvidence, error)
	// FlakyTests lists the tests of a project that failed and passed on one commit since
	// p.Since (a pass after failed reruns within one report is both), with those results: the evidence of each, newest first, at most p.Limit
	// tests.
	FlakyTests(ctx context.Context, p FlakyTestsParams) ([]*FlakyTest, error)
	// DeleteTestResultsBefore deletes the results added before t and returns how many
	// (retention, with the logs').
	DeleteTestResultsBefore(ctx context.Context, t time.Time) (int, error)
}

// Bounds of the test result queries.
const (
	// MaxTestResults is the most results one job attempt keeps.
	MaxTestResults = testreport.MaxTestsPerJob
	// MaxTestHistory is the most results one TestHistory call reads.
	MaxTestHistory = 1000
	// MaxEvidenceTests is the most tests one TestEvidence call reads.
	MaxEvidenceTests = 1000
)

// TestResult is one test's result in one job attempt.
type TestResult struct {
	JobID   uuid.UUID
	Attempt int
	// Index is the result's place in its attempt, from 0, as the worker numbered it.
	Index int
	testreport.Result
	// Filled in by the store from the job's run.
	RunID     uuid.UUID
	RunNumber int
	Project   string
	Branch    string
	SHA       string
	Job       string // the job's key
	CreatedAt time.Time
}

// ID is the test's identity: its suite and name.
func (r *TestResult) ID() testreport.TestID {
	return testreport.TestID{Suite: r.Suite, Name: r.Name}
}

// AddTestResultsParams are results from the worker holding the job's lease.
type AddTestResultsParams struct {
	LeaseRef
	// First is the index of Results[0] in the attempt.
	First   int
	Results []testreport.Result
}

// ListTestResultsParams select the results of one job (and attempt), or of a run.
type ListTestResultsParams struct {
	RunID   uuid.UUID
	JobID   uuid.UUID
	Attempt int
	// Statuses keeps only results of these statuses; all when empty.
	Statuses []testreport.Status
	// BySlowest lists the results longest first, whatever their status, rather than
	// failing first.
	BySlowest bool
	// Offset and Limit page the list; Limit 0 is no bound.
	Offset, Limit int
}

// TestHistoryParams select one test's results in a project.
type TestHistoryParams struct {
	Project string
	Test    testreport.TestID
	Branch  string
	Before  time.Time
	Limit   int
}

// TestEvidenceParams say which tests' evidence to read, and against what.
type TestEvidenceParams struct {
	Project       string
	Tests         []testreport.TestID
	SHA           string
	Branch        string
	DefaultBranch string
	// Before bounds the latest results read on the branches: those of runs created
	// before the run being judged.
	Before time.Time
}

// TestEvidence is what one test's verdict is decided from.
type TestEvidence struct {
	// OnCommit are its results on the commit judged, in any run and attempt.
	OnCommit []*TestResult
	// LastOnBranch and LastOnDefault are its latest results on the branch and on the
	// default branch before the run judged; nil when there is none.
	LastOnBranch, LastOnDefault *TestResult
}

// FlakyTestsParams select a project's flaky tests.
type FlakyTestsParams struct {
	Project string
	Since   time.Time
	Limit   int
	// Test, when its Name is set, lists that test alone.
	Test testreport.TestID
}

// FlakyTest is a test that failed and passed on one commit, with those results.
type FlakyTest struct {
	Test testreport.TestID
	// Evidence are its results on the commits where it both failed and passed, newest
	// first.
	Evidence []*TestResult
	// Commits is how many commits it flipped on.
	Commits int
	// LastSeen is when its latest such result was added.
	LastSeen time.Time
}

// Observation is the result as a point of a test's history.
func (r *TestResult) Observation() testreport.Observation {
	return testreport.Observation{Status: r.Status, FailedAttempts: r.FailedAttempts, Run: r.RunNumber, Job: r.Job,
		Attempt: r.Attempt, Branch: r.Branch, SHA: r.SHA, At: r.CreatedAt}
}

// Judged is the evidence as testreport.Judge reads it.
func (e *TestEvidence) Judged() testreport.Evidence {
	var out testreport.Evidence
	for _, r := range e.OnCommit {
		out.OnCommit = append(out.OnCommit, r.Observation())
	}
	for _, p := range []struct {
		from *TestResult
		to   **testreport.Observation
	}{{e.LastOnBranch, &out.LastOnBranch}, {e.LastOnDefault, &out.LastOnDefault}} {
		if p.from != nil {
			o := p.from.Observation()
			*p.to = &o
		}
	}
	return out
}

// Quarantines keeps the tests a project has quarantined: while a quarantine lasts, the
// test's failures are still kept, counted and shown, but do not fail its job. A
// quarantine ends by itself at its expiry.
type Quarantines interface {
	// PutQuarantine quarantines p.Test in p.Project until p.ExpiresAt, replacing the
	// quarantine it has. ErrNotFound for no such project; ErrInvalid for an empty test
	// name or owner, an expiry not after now or more than MaxQuarantine ahead, or text
	// over the bounds; ErrConflict when the project has MaxQuarantines others in force.
	PutQuarantine(ctx context.Context, p PutQuarantineParams) (*Quarantine, error)
	// AddQuarantine quarantines p.Test as PutQuarantine does, but only when it has no
	// quarantine in force: one in force, however long, is kept as it is and returned
	// with added false. The audit entry ctx carries (WithAudit) is recorded in the same
	// transaction, and only when the quarantine was added, so that two replicas adding
	// one test's quarantine at once add and audit it once. Its errors are PutQuarantine's.
	AddQuarantine(ctx context.Context, p PutQuarantineParams) (q *Quarantine, added bool, err error)
	// ListQuarantines lists the project's quarantines in force at p.At (now when zero),
	// by suite and name; p.Expired lists those that ended too.
	ListQuarantines(ctx context.Context, p ListQuarantinesParams) ([]*Quarantine, error)
	// DeleteQuarantine ends a test's quarantine now: it is kept as one that ended, so
	// that ListQuarantines with Expired lists it and a quarantine rule counts only what
	// the test did after it. ErrNotFound when it has none in force.
	DeleteQuarantine(ctx context.Context, project string, test testreport.TestID) error
}

// Bounds of quarantines.
const (
	// MaxQuarantine is the longest a quarantine may last: a test left quarantined for
	// good is a test deleted without saying so.
	MaxQuarantine = 90 * 24 * time.Hour
	// MaxQuarantines is the most quarantines in force in one project.
	MaxQuarantines = 1000
	// MaxQuarantineText bounds an owner and a reason.
	MaxQuarantineText = 1 << 10
)

// Quarantine is a test's quarantine in a project.
type Quarantine struct {
	Project   string
	Test      testreport.TestID
	Owner     string // who is to fix the test
	Reason    string
	CreatedBy string // who quarantined it ("" with authentication off)
	CreatedAt time.Time
	ExpiresAt time.Time
}

// PutQuarantineParams quarantine one test.
type PutQuarantineParams struct {
	Project   string
	Test      testreport.TestID
	Owner     string
	Reason    string
	CreatedBy string
	ExpiresAt time.Time
}

// ListQuarantinesParams select a project's quarantines.
type ListQuarantinesParams struct {
	Project string
	At      time.Time
	Expired bool
}

// QuarantineRules keeps each project's quarantine rule: a test flaky on at least
// FlakyCommits commits within Within is quarantined For, by the coordinator, when a job
// of the project that reported test results completes. A project has at most one rule,
// and none until one is set.
type QuarantineRules interface {
	// PutQuarantineRule sets r.Project's rule, replacing the one it has, and fills in
	// r.UpdatedAt. The audit entry ctx carries (WithAudit) is recorded in the same
	// transaction. ErrNotFound for no such project; ErrInvalid for a rule out of the
	// bounds (CheckQuarantineRule).
	PutQuarantineRule(ctx context.Context, r *QuarantineRule) error
	// GetQuarantineRule returns the project's rule, or nil and no error when it has
	// none; ErrNotFound for no such project.
	GetQuarantineRule(ctx context.Context, project string) (*QuarantineRule, error)
	// DeleteQuarantineRule removes the project's rule; the quarantines it made last
	// until their expiry. The audit entry ctx carries is recorded in the same
	// transaction. ErrNotFound when the project has no rule, or there is no such project.
	DeleteQuarantineRule(ctx context.Context, project string) error
}

// Bounds of a quarantine rule.
const (
	// MaxRuleCommits is the most commits a rule may ask a test to be flaky on.
	MaxRuleCommits = 100
	// MinRuleSpan is the shortest window and quarantine a rule may have: a rule is about
	// a test's habit, not one bad minute.
	MinRuleSpan = time.Hour
	// MaxRuleWindow is the longest window a rule may look back over.
	MaxRuleWindow = 90 * 24 * time.Hour
	// DefaultRuleQuarantine is how long a rule quarantines a test unless it says.
	DefaultRuleQuarantine = 14 * 24 * time.Hour
	// ActorRule is the actor of what a project's quarantine rule does, the creator of
	// the quarantines it makes, and their owner unless the rule names one.
	ActorRule = "rule"
)

// QuarantineRule is a project's rule for quarantining flaky tests.
type QuarantineRule struct {
	Project string
	// FlakyCommits is how many commits (FlakyTest.Commits) a test must have failed and
	// passed on, within Within, to be quarantined: 1 to MaxRuleCommits.
	FlakyCommits int
	// Within is how far back the rule looks: MinRuleSpan to MaxRuleWindow.
	Within time.Duration
	// For is how long the rule quarantines a test: MinRuleSpan to MaxQuarantine.
	For time.Duration
	// Owner is the owner of the quarantines the rule makes: who is to fix the tests.
	Owner string
	// UpdatedBy is who set the rule ("" with authentication off); UpdatedAt when.
	UpdatedBy string
	UpdatedAt time.Time
}

// CheckQuarantineRule says what is wrong with r, or "" when nothing is.
func CheckQuarantineRule(r *QuarantineRule) string {
	switch {
	case r.FlakyCommits < 1 || r.FlakyCommits > MaxRuleCommits:
		return fmt.Sprintf("flaky on %d commits: want 1 to %d", r.FlakyCommits, MaxRuleCommits)
	case r.Within < MinRuleSpan || r.Within > MaxRuleWindow:
		return fmt.Sprintf("a window of %s: want %s to %s", FormatSpan(r.Within), FormatSpan(MinRuleSpan), FormatSpan(MaxRuleWindow))
	case r.For < MinRuleSpan || r.For > MaxQuarantine:
		return fmt.Sprintf("a quarantine of %s: want %s to %s", FormatSpan(r.For), FormatSpan(MinRuleSpan), FormatSpan(MaxQuarantine))
	case strings.TrimSpace(r.Owner) == "":
		return "an owner is required: who is to fix the tests the rule quarantines"
	case len(r.Owner) > MaxQuarantineText || !utf8.ValidString(r.Owner) || strings.ContainsFunc(r.Owner, unicode.IsControl):
		return fmt.Sprintf("the owner is not text of at most %d bytes on one line", MaxQuarantineText)
	}
	return ""
}

// String says what the rule does: "flaky on 3 commits within 7d: quarantined for 14d".
func (r *QuarantineRule) String() string {
	return fmt.Sprintf("flaky on %d %s within %s: quarantined for %s", r.FlakyCommits, plural(r.FlakyCommits, "commit", "commits"),
		FormatSpan(r.Within), FormatSpan(r.For))
}

// FormatSpan writes d as the durations of a rule are written: whole days as "7d", whole
// hours as "36h", else as time.Duration does without its trailing zeros ("1h30m").
func FormatSpan(d time.Duration) string {
	switch {
	case d != 0 && d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d != 0 && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d > 0 && d%time.Minute == 0:
		return strings.TrimSuffix(d.String(), "0s")
	}
	return d.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
