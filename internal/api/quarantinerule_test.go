package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/testreport"
)

type quarantineRuleView struct {
	Enabled      bool   `json:"enabled"`
	FlakyCommits int    `json:"flaky_commits"`
	Within       string `json:"within"`
	For          string `json:"for"`
	Owner        string `json:"owner"`
	Rule         string `json:"rule"`
	UpdatedAt    string `json:"updated_at"`
}

// TestQuarantineRuleSettings: a project has no rule until a maintainer sets one; the
// rule reads back with its defaults filled in, is replaced by the next, and is removed;
// setting and removing it are audited; what is not a rule is refused with a reason.
func TestQuarantineRuleSettings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.store.CreateProject(context.Background(), &store.Project{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	path := "/api/v1/projects/web/tests/quarantine-rule"
	var v quarantineRuleView
	b.get(t, path).decode(t, &v)
	if v.Enabled || v.FlakyCommits != 0 {
		t.Errorf("a project without a rule shows %+v", v)
	}
	if r := b.get(t, "/api/v1/projects/nope/tests/quarantine-rule"); r.status != http.StatusNotFound {
		t.Errorf("the rule of an unknown project: %d %s, want 404", r.status, r.body)
	}

	r := b.do(t, http.MethodPut, path, "application/json", `{"flaky_commits": 3, "within": "7d"}`, nil)
	if r.status != http.StatusOK {
		t.Fatalf("set the rule: %d %s", r.status, r.body)
	}
	r.decode(t, &v)
	want := quarantineRuleView{Enabled: true, FlakyCommits: 3, Within: "7d", For: "14d", Owner: "rule",
		Rule: "flaky on 3 commits within 7d: quarantined for 14d", UpdatedAt: v.UpdatedAt}
	if v != want || v.UpdatedAt == "" {
		t.Errorf("set: %+v, want %+v", v, want)
	}
	var got quarantineRuleView
	b.get(t, path).decode(t, &got)
	if got != v {
		t.Errorf("read back: %+v, want %+v", got, v)
	}
	if r := b.do(t, http.MethodPut, path, "application/json", `{"flaky_commits": 1, "within": "36h", "for": "2d", "owner": " alice "}`, nil); r.status != http.StatusOK {
		t.Fatalf("set it again: %d %s", r.status, r.body)
	}
	b.get(t, path).decode(t, &got)
	if got.FlakyCommits != 1 || got.Within != "36h" || got.For != "2d" || got.Owner != "alice" {
		t.Errorf("after setting it again: %+v", got)
	}

	for _, tc := range []struct {
		name, body, says string
	}{
		{"no commits", `{"within": "7d"}`, "flaky_commits is required"},
		{"no window", `{"flaky_commits": 3}`, "within is required"},
		{"zero commits", `{"flaky_commits": 0, "within": "7d"}`, "flaky on 0 commits: want 1 to 100"},
		{"too many commits", `{"flaky_commits": 101, "within": "7d"}`, "want 1 to 100"},
		{"a window too short", `{"flaky_commits": 3, "within": "30m"}`, "a window of 30m: want 1h to 90d"},
		{"a window too long", `{"flaky_commits": 3, "within": "91d"}`, "a window of 91d: want 1h to 90d"},
		{"a quarantine too long", `{"flaky_commits": 3, "within": "7d", "for": "91d"}`, "a quarantine of 91d: want 1h to 90d"},
		{"a quarantine too short", `{"flaky_commits": 3, "within": "7d", "for": "59m"}`, "a quarantine of 59m: want 1h to 90d"},
		{"not a duration", `{"flaky_commits": 3, "within": "a week"}`, `within \"a week\" is not a duration`},
		{"a negative duration", `{"flaky_commits": 3, "within": "7d", "for": "-1d"}`, `for \"-1d\" is not a duration`},
		{"an owner of two lines", `{"flaky_commits": 3, "within": "7d", "owner": "a\nb"}`, "the owner is not text"},
		{"commits as text", `{"flaky_commits": "3", "within": "7d"}`, "flaky_commits"},
		{"an unknown field", `{"flaky_commits": 3, "within": "7d", "after": "1d"}`, "after"},
	} {
		r := b.do(t, http.MethodPut, path, "application/json", tc.body, nil)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), tc.says) {
			t.Errorf("%s: %d %s, want 400 saying %q", tc.name, r.status, r.body, tc.says)
		}
	}
	b.get(t, path).decode(t, &got)
	if got.FlakyCommits != 1 || got.Owner != "alice" {
		t.Errorf("a refused rule changed the one set: %+v", got)
	}

	if r := b.do(t, http.MethodDelete, path, "", "", nil); r.status != http.StatusNoContent {
		t.Fatalf("delete the rule: %d %s", r.status, r.body)
	}
	b.get(t, path).decode(t, &got)
	if got.Enabled {
		t.Errorf("after deleting it: %+v", got)
	}
	if r := b.do(t, http.MethodDelete, path, "", "", nil); r.status != http.StatusNotFound || !strings.Contains(string(r.body), "has no quarantine rule") {
		t.Errorf("delete again: %d %s, want 404", r.status, r.body)
	}
	entries, err := b.store.ListAudit(context.Background(), store.ListAuditParams{Action: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range entries {
		actions = append(actions, e.Action+" "+e.Project)
	}
	if fmt.Sprint(actions) != "[test.quarantine_rule_deleted web test.quarantine_rule_set web test.quarantine_rule_set web]" {
		t.Errorf("audit: %q", actions)
	}
}

// TestQuarantineRuleApplied: with a rule of 3 commits in 7 days, the completion of a job
// that reported results quarantines, after the fact, a test that flipped on 3 commits,
// owned by the rule, with the commits as its reason and an audit entry whose actor is
// the rule; a test that flipped on 2 is not quarantined, and a maintainer's longer
// quarantine of a test that flipped on 3 is left as it was. A test released from the
// rule's quarantine is quarantined again only on 3 flips after its release.
func TestQuarantineRuleApplied(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, b *bundle, _ *blob.DirStore) {
		ctx := context.Background()
		if err := b.store.CreateProject(ctx, &store.Project{Name: "web", DefaultBranch: "main"}); err != nil {
			t.Fatal(err)
		}
		if r := b.do(t, http.MethodPut, "/api/v1/projects/web/tests/quarantine-rule", "application/json",
			`{"flaky_commits": 3, "within": "7d", "owner": "qa-team"}`, nil); r.status != http.StatusOK {
			t.Fatalf("set the rule: %d %s", r.status, r.body)
		}
		suite := "example.com/web/pkg"
		id := func(name string) testreport.TestID { return testreport.TestID{Suite: suite, Name: name} }
		long := time.Now().Add(60 * 24 * time.Hour)
		if b.clock != nil {
			long = b.clock.Now().Add(60 * 24 * time.Hour)
		}
		if _, err := b.store.PutQuarantine(ctx, store.PutQuarantineParams{Project: "web", Test: id("TestLong"), Owner: "alice",
			Reason: "known race", CreatedBy: "alice", ExpiresAt: long}); err != nil {
			t.Fatal(err)
		}
		// flip is a result that passed after a failed rerun: flaky on its commit alone.
		flip := func(name string) map[string]any {
			r := result(name, "passed")
			r["failed_attempts"], r["message"] = 1, "first try: timeout"
			return r
		}
		job := func(sha string, results ...map[string]any) {
			t.Helper()
			if b.clock != nil {
				b.clock.Advance(time.Minute) // each commit's results after the last one's
			}
			_, job, token := b.pushRun(t, "main", sha)
			if r := b.post(t, "/api/v1/agent/jobs/"+job+"/tests", testsBody(token, 0, results...)); r.status != http.StatusOK {
				t.Fatalf("post tests: %d %s", r.status, r.body)
			}
			if r := b.post(t, "/api/v1/agent/jobs/"+job+"/complete", fmt.Sprintf(`{"token": %q, "status": "success", "exit_code": 0}`, token)); r.status != http.StatusOK {
				t.Fatalf("complete: %d %s", r.status, r.body)
			}
		}
		quarantines := func() map[string]*store.Quarantine {
			t.Helper()
			qs, err := b.store.ListQuarantines(ctx, store.ListQuarantinesParams{Project: "web"})
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]*store.Quarantine{}
			for _, q := range qs {
				out[q.Test.Name] = q
			}
			return out
		}
		// waitFor polls until name is quarantined: the rule runs after the completion.
		waitFor := func(name string) map[string]*store.Quarantine {
			t.Helper()
			deadline := time.Now().Add(30 * time.Second)
			for {
				qs := quarantines()
				if qs[name] != nil {
					return qs
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s not quarantined by the rule 30s after the job completed; quarantined: %v", name, qs)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}

		job("c1", flip("TestThree"), flip("TestTwo"), flip("TestLong"), result("TestSteady", "passed"))
		job("c2", flip("TestThree"), flip("TestTwo"), flip("TestLong"), result("TestSteady", "passed"))
		if qs := quarantines(); len(qs) != 1 {
			t.Errorf("after two commits: quarantined %v, want TestLong alone", qs)
		}
		job("c3", flip("TestThree"), result("TestTwo", "passed"), flip("TestLong"), result("TestSteady", "passed"))
		qs := waitFor("TestThree")
		q := qs["TestThree"]
		if q.Owner != "qa-team" || q.CreatedBy != store.ActorRule ||
			!strings.HasPrefix(q.Reason, "flaky on 3 commits in 7d (quarantine rule: at least 3 in 7d): c3 (run #3), c2 (run #2), c1 (run #1)") {
			t.Errorf("the rule's quarantine: %+v", q)
		}
		// The rule reads the time before the store does; a test's fake clock may have
		// moved on a minute between the two.
		if d := q.ExpiresAt.Sub(q.CreatedAt); d <= 14*24*time.Hour-2*time.Minute || d > 14*24*time.Hour {
			t.Errorf("the rule's quarantine lasts %s, want 14d", d)
		}
		if qs["TestTwo"] != nil || qs["TestSteady"] != nil {
			t.Errorf("a test flaky on 2 commits, or never, was quarantined: %v", qs)
		}
		if l := qs["TestLong"]; l == nil || l.Owner != "alice" || l.Reason != "known race" || !l.ExpiresAt.Equal(long.Truncate(time.Microsecond)) {
			t.Errorf("the maintainer's quarantine of TestLong became %+v", l)
		}
		entries, err := b.store.ListAudit(ctx, store.ListAuditParams{Action: "test.quarantined"})
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Actor != store.ActorRule || entries[0].Target != suite+".TestThree" ||
			!strings.Contains(string(entries[0].Details), `"rule":"flaky on 3 commits within 7d: quarantined for 14d"`) {
			t.Errorf("audit of the rule's quarantines: %+v", entries)
		}

		// Released, TestThree is not quarantined again by the flips that made the rule
		// quarantine it, nor by one more; TestTwo's third flip quarantines it meanwhile.
		if r := b.do(t, http.MethodDelete, "/api/v1/projects/web/tests/quarantine?suite="+suite+"&name=TestThree", "", "", nil); r.status != http.StatusNoContent {
			t.Fatalf("release TestThree: %d %s", r.status, r.body)
		}
		job("c4", flip("TestThree"), flip("TestTwo"))
		qs = waitFor("TestTwo")
		if qs["TestThree"] != nil {
			t.Errorf("TestThree was quarantined again on one flip after its release: %+v", qs["TestThree"])
		}
	})
}
