package cli

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/logs/logchunks"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/testreport"
)

// TestPurgeSummaries: the log retention deletes the step summaries and test results kept
// before its cut with the logs, and keeps the later ones.
func TestPurgeSummaries(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "gantry.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	plan, err := pipeline.Compile([]byte("jobs: {a: {steps: [{run: 'true'}, {run: 'true'}]}}"), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := st.CreateRun(t.Context(), store.CreateRunParams{Plan: plan}); err != nil {
		t.Fatal(err)
	}
	cs, err := st.Claim(t.Context(), store.ClaimParams{WorkerID: "w", Max: 1, LeaseTTL: time.Minute})
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim: %v, %d jobs", err, len(cs))
	}
	ref := store.LeaseRef{JobID: cs[0].Job.ID, Token: cs[0].Lease.Token}
	if err := st.PutSummary(t.Context(), store.PutSummaryParams{LeaseRef: ref, Step: 0, Markdown: "old"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddTestResults(t.Context(), store.AddTestResultsParams{LeaseRef: ref,
		Results: []testreport.Result{{Name: "TestOld", Status: testreport.Passed}}}); err != nil {
		t.Fatal(err)
	}
	tests := func() int {
		rs, err := st.ListTestResults(t.Context(), store.ListTestResultsParams{JobID: ref.JobID})
		if err != nil {
			t.Fatal(err)
		}
		return len(rs)
	}
	svc := logs.NewService(logs.Config{Storage: logchunks.New(st)})
	t.Cleanup(svc.Close)
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	purgeBefore(t.Context(), svc, st, time.Now().Add(-time.Hour), log)
	if ps, _ := st.ListSummaries(t.Context(), store.ListSummariesParams{JobID: ref.JobID}); len(ps) != 1 {
		t.Fatalf("a summary newer than the cut: %d parts left, want 1", len(ps))
	}
	if n := tests(); n != 1 {
		t.Fatalf("a test result newer than the cut: %d left, want 1", n)
	}
	purgeBefore(t.Context(), svc, st, time.Now().Add(time.Second), log)
	if ps, _ := st.ListSummaries(t.Context(), store.ListSummariesParams{JobID: ref.JobID}); len(ps) != 0 {
		t.Errorf("a summary older than the cut: %d parts left, want none", len(ps))
	}
	if n := tests(); n != 0 {
		t.Errorf("a test result older than the cut: %d left, want none", n)
	}
}
