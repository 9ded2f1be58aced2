package api

import (
	"strconv"
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/testreport"
)

// TestFailingStreak: a streak is the failures from the run judged back to the pass
// before them, skipping later runs' results and skipped ones; a history that ends
// within it, as long as the read's limit, is cut.
func TestFailingStreak(t *testing.T) {
	t.Parallel()
	// h is a history, newest first: "5F" is a failure in run 5, "4P" a pass, "3S" a skip,
	// "2E" an error.
	h := func(rs ...string) []*store.TestResult {
		out := make([]*store.TestResult, len(rs))
		status := map[byte]testreport.Status{'F': testreport.Failed, 'P': testreport.Passed, 'S': testreport.Skipped, 'E': testreport.Errored}
		for i, r := range rs {
			n, err := strconv.Atoi(r[:len(r)-1])
			if err != nil {
				t.Fatalf("history %q: %v", r, err)
			}
			out[i] = &store.TestResult{RunNumber: n, Result: testreport.Result{Status: status[r[len(r)-1]]}}
		}
		return out
	}
	run := func(r *store.TestResult) int {
		if r == nil {
			return 0
		}
		return r.RunNumber
	}
	for _, tc := range []struct {
		name     string
		hist     []*store.TestResult
		limit    int
		since    int
		lastPass int
		cut      bool
	}{
		{"failing since the run", h("5F", "4P", "3F"), 10, 5, 4, false},
		{"failing for three runs", h("5F", "4E", "3F", "2P", "1P"), 10, 3, 2, false},
		{"skips neither break nor make it", h("5F", "4S", "3F", "2S", "1P"), 10, 3, 1, false},
		{"later runs passed over", h("7P", "6F", "5F", "4P"), 10, 5, 4, false},
		{"a pass in an earlier attempt of the run", h("5F", "5P", "4F"), 10, 5, 5, false},
		{"never passed on the branch", h("5F", "4F"), 10, 4, 0, false},
		{"the read ends within it", h("5F", "4F", "3F"), 3, 3, 0, true},
		{"a read as long as the limit that ends at a pass", h("5F", "4F", "3P"), 3, 4, 3, false},
		{"only later runs read", h("7F", "6P"), 2, 0, 0, true},
	} {
		since, lastPass, cut := failingStreak(tc.hist, 5, tc.limit)
		if run(since) != tc.since || run(lastPass) != tc.lastPass || cut != tc.cut {
			t.Errorf("%s: since run %d, last pass run %d, cut %v; want %d, %d, %v", tc.name, run(since), run(lastPass), cut,
				tc.since, tc.lastPass, tc.cut)
		}
	}
}
