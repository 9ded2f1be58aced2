package testreport

import (
	"strings"
	"testing"
	"time"
)

func TestJudge(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	obs := func(s Status, run, attempt int, branch, sha string, min int) Observation {
		return Observation{Status: s, Run: run, Job: "unit", Attempt: attempt, Branch: branch, SHA: sha, At: t0.Add(time.Duration(min) * time.Minute)}
	}
	this := obs(Failed, 9, 1, "feature", "c9", 10)
	for _, tc := range []struct {
		name     string
		ev       Evidence
		kind     Kind
		evidence int
		why      string
	}{
		{"failed then passed on a retry", Evidence{OnCommit: []Observation{this, obs(Passed, 9, 2, "feature", "c9", 12)},
			LastOnDefault: &Observation{Status: Failed}}, KindFlaky, 2, "failed and passed on the same commit: failed in run 9 (unit attempt 1)"},
		{"passed in an earlier run of the commit", Evidence{OnCommit: []Observation{obs(Passed, 8, 1, "feature", "c9", 5), this}},
			KindFlaky, 2, "passed in run 8 (unit attempt 1) on feature at c9; failed in run 9"},
		{"errored then passed", Evidence{OnCommit: []Observation{obs(Errored, 9, 1, "feature", "c9", 10), obs(Passed, 9, 2, "feature", "c9", 12)}},
			KindFlaky, 2, "errored in run 9"},
		{"passed after reruns in one report", Evidence{OnCommit: []Observation{this, {Status: Passed, FailedAttempts: 2, Run: 9, Job: "unit", Attempt: 2}}},
			KindFlaky, 1, "failed and passed on the same commit: passed after 2 failed reruns in run 9 (unit attempt 2)"},
		{"skipped is no pass", Evidence{OnCommit: []Observation{this, obs(Skipped, 9, 2, "feature", "c9", 12)}}, KindNew, 0, "no earlier failure"},
		{"broken on the default branch", Evidence{OnCommit: []Observation{this}, LastOnDefault: ptr(obs(Failed, 7, 1, "main", "c7", 1)),
			LastOnBranch: ptr(obs(Failed, 8, 1, "feature", "c8", 5))}, KindKnown, 1, "already failing on the default branch: failed in run 7"},
		{"broken earlier on the branch", Evidence{OnCommit: []Observation{this}, LastOnDefault: ptr(obs(Passed, 7, 1, "main", "c7", 1)),
			LastOnBranch: ptr(obs(Errored, 8, 1, "feature", "c8", 5))}, KindStill, 1, "failing on this branch since an earlier commit: errored in run 8"},
		{"new after passes", Evidence{OnCommit: []Observation{this}, LastOnBranch: ptr(obs(Passed, 8, 1, "feature", "c8", 5)),
			LastOnDefault: ptr(obs(Passed, 7, 1, "main", "c7", 1))}, KindNew, 2, "first seen failing on this commit; before it: passed in run 8"},
		{"flipped with nothing changed", Evidence{OnCommit: []Observation{this}, LastOnBranch: ptr(obs(Passed, 8, 1, "feature", "c8", 5)),
			LastOnDefault: ptr(obs(Failed, 7, 1, "main", "c7", 1)), Unchanged: "no file changed between them"}, KindFlaky, 2,
			"passed on the commit before and fails now, though no file changed between them: passed in run 8 (unit attempt 1) on feature at c8"},
		{"unchanged but failing before", Evidence{OnCommit: []Observation{this}, LastOnBranch: ptr(obs(Failed, 8, 1, "feature", "c8", 5)),
			Unchanged: "no file changed between them"}, KindStill, 1, "failing on this branch since an earlier commit"},
		{"never seen before", Evidence{OnCommit: []Observation{this}}, KindNew, 0, "no earlier failure: first seen failing on this commit"},
		{"no commit at all", Evidence{}, KindNew, 0, "no earlier failure"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(tc.ev)
			if v.Kind != tc.kind || len(v.Evidence) != tc.evidence || !strings.Contains(v.Why, tc.why) {
				t.Errorf("Judge = %s with %d observations, %q; want %s with %d, saying %q", v.Kind, len(v.Evidence), v.Why, tc.kind, tc.evidence, tc.why)
			}
			if v.Kind == KindFlaky && len(v.Evidence) == 2 && !v.Evidence[0].At.Before(v.Evidence[1].At) {
				t.Errorf("flaky evidence out of order: %v", v.Evidence)
			}
		})
	}
}

func ptr(o Observation) *Observation { return &o }

func TestTally(t *testing.T) {
	for _, tc := range []struct {
		t    Tally
		want string
	}{
		{Tally{}, ""},
		{Tally{KindNew: 1, KindFlaky: 2}, "1 new failure, 2 known flaky"},
		{Tally{KindFlaky: 1, KindKnown: 3, KindStill: 1, KindNew: 2}, "2 new failures, 1 still failing, 3 known broken, 1 known flaky"},
	} {
		if got := tc.t.String(); got != tc.want {
			t.Errorf("%v = %q, want %q", tc.t, got, tc.want)
		}
	}
}
