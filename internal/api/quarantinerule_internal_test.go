package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/executor/executortest"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
	"github.com/gantry-ci/gantry/internal/testreport"
)

// fullStore is a store whose projects have as many tests quarantined as they may while
// full is set: store.MaxQuarantines quarantines cost seconds to make with -race.
type fullStore struct {
	store.Store
	full *atomic.Bool
}

func (s fullStore) AddQuarantine(ctx context.Context, p store.PutQuarantineParams) (*store.Quarantine, bool, error) {
	if s.full.Load() {
		return nil, false, fmt.Errorf("quarantine %s: project %s has %d tests quarantined, the most it may: %w", p.Test, p.Project,
			store.MaxQuarantines, store.ErrConflict)
	}
	return s.Store.AddQuarantine(ctx, p)
}

// TestQuarantineRuleAtTheBound: a project with store.MaxQuarantines tests quarantined
// gets none more from its rule: the evaluation says so in the log and fails nothing.
// Once the server is closed, a completion starts no evaluation.
func TestQuarantineRuleAtTheBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(ctx, sqlitetest.Path(t), sqlite.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var (
		log  executortest.SyncBuffer
		full atomic.Bool
	)
	s := New(Config{Store: fullStore{Store: st, full: &full}, Clock: clk, Logger: slog.New(slog.NewTextHandler(&log, nil))})

	plan, err := pipeline.Compile([]byte("jobs:\n  unit: {steps: [{run: go test}]}\n"), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := st.CreateRun(ctx, store.CreateRunParams{Project: "web", Plan: plan,
		Trigger: store.Trigger{Ref: "refs/heads/main", Branch: "main", SHA: "c1", Event: "push", Verified: store.RefFromWebhook}}); err != nil {
		t.Fatal(err)
	}
	cs, err := st.Claim(ctx, store.ClaimParams{WorkerID: "w", LeaseTTL: time.Minute, TimeoutGrace: time.Minute})
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim: %v, %v", cs, err)
	}
	ref := store.LeaseRef{JobID: cs[0].Job.ID, Token: cs[0].Lease.Token}
	if _, err := st.AddTestResults(ctx, store.AddTestResultsParams{LeaseRef: ref, Results: []testreport.Result{
		{Suite: "p", Name: "TestFlaky", Status: testreport.Passed, FailedAttempts: 1, Message: "first try failed"}}}); err != nil {
		t.Fatal(err)
	}
	job, err := st.CompleteJob(ctx, store.CompleteParams{LeaseRef: ref, Status: store.JobSuccess})
	if err != nil {
		t.Fatal(err)
	}

	rule := &store.QuarantineRule{Project: "web", FlakyCommits: 1, Within: 7 * 24 * time.Hour, For: 14 * 24 * time.Hour, Owner: "rule"}
	full.Store(true)
	n, err := s.applyQuarantineRule(ctx, rule)
	if err != nil || n != 0 {
		t.Fatalf("applyQuarantineRule at the bound = %d, %v; want none quarantined and no error", n, err)
	}
	if !strings.Contains(log.String(), "the project has as many tests quarantined as it may") {
		t.Errorf("the log does not say the project is at the bound:\n%s", log.String())
	}
	if qs, err := st.ListQuarantines(ctx, store.ListQuarantinesParams{Project: "web"}); err != nil || len(qs) != 0 {
		t.Fatalf("quarantines at the bound: %+v, %v; want none added", qs, err)
	}

	// Below the bound, the rule quarantines TestFlaky.
	full.Store(false)
	if n, err := s.applyQuarantineRule(ctx, rule); err != nil || n != 1 {
		t.Errorf("applyQuarantineRule below the bound = %d, %v; want 1", n, err)
	}

	s.Close()
	s.rules.completed(job)
	s.rules.mu.Lock()
	waiting := len(s.rules.waiting)
	s.rules.mu.Unlock()
	if waiting != 0 {
		t.Errorf("a completion after Close left %d projects waiting", waiting)
	}
}

// seenStore records the jobs whose test results the quarantine rule looked at.
type seenStore struct {
	store.Store
	mu   sync.Mutex
	jobs []uuid.UUID
	// looked has a value each time the rule looks at a job's results.
	looked chan struct{}
}

func (s *seenStore) ListTestResults(ctx context.Context, p store.ListTestResultsParams) ([]*store.TestResult, error) {
	s.mu.Lock()
	s.jobs = append(s.jobs, p.JobID)
	s.mu.Unlock()
	select {
	case s.looked <- struct{}{}:
	default:
	}
	return s.Store.ListTestResults(ctx, p)
}

func (s *seenStore) seen() []uuid.UUID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.jobs)
}

// TestQuarantineRuleSkipsJobsWithoutTests: a completion whose worker says the job named no
// test reports (no_tests) is not counted by the project's quarantine rule; one that does
// not say so, an older worker's, is.
func TestQuarantineRuleSkipsJobsWithoutTests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlitetest.Path(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	seen := &seenStore{Store: st, looked: make(chan struct{}, 1)}
	s := New(Config{Store: seen})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { srv.Close(); s.Close() })
	if err := st.CreateProject(ctx, &store.Project{Name: "web", DefaultBranch: "main"}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutQuarantineRule(ctx, &store.QuarantineRule{Project: "web", FlakyCommits: 3, Within: 7 * 24 * time.Hour,
		For: 14 * 24 * time.Hour, Owner: "qa"}); err != nil {
		t.Fatal(err)
	}
	plan, err := pipeline.Compile([]byte("jobs:\n  a: {steps: [{run: 'true'}]}\n  b: {steps: [{run: 'true'}]}\n"), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := st.CreateRun(ctx, store.CreateRunParams{Project: "web", Plan: plan,
		Trigger: store.Trigger{Ref: "refs/heads/main", Branch: "main", SHA: "c1", Event: "push"}}); err != nil {
		t.Fatal(err)
	}
	cs, err := st.Claim(ctx, store.ClaimParams{WorkerID: "w", Max: 2, LeaseTTL: time.Minute, TimeoutGrace: time.Minute})
	if err != nil || len(cs) != 2 {
		t.Fatalf("claim: %v, %v", cs, err)
	}
	complete := func(c *store.Claim, extra string) {
		t.Helper()
		body := fmt.Sprintf(`{"token": %q, "status": "success", "exit_code": 0%s}`, c.Lease.Token, extra)
		res, err := http.Post(srv.URL+"/api/v1/agent/jobs/"+c.Job.ID.String()+"/complete", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("complete %s: %d", c.Job.Key, res.StatusCode)
		}
	}
	without, older := cs[0], cs[1]
	complete(without, `, "no_tests": true`)
	complete(older, "")
	// The rule looks at each waiting completion's results in the order they came: once
	// it has looked at the older worker's, it would have looked at the other before.
	deadline := time.After(30 * time.Second)
	for !slices.Contains(seen.seen(), older.Job.ID) {
		select {
		case <-seen.looked:
		case <-deadline:
			t.Fatalf("the rule did not look at the results of a completion without no_tests in 30s")
		}
	}
	if slices.Contains(seen.seen(), without.Job.ID) {
		t.Errorf("the rule looked at the results of a job whose worker said it had no tests")
	}
}
