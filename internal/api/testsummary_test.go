package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/store"
)

// testSummaryView is a branch's test summary as the API answers it.
type testSummaryView struct {
	Branch string `json:"branch"`
	Run    *struct {
		ID     string `json:"id"`
		Number int    `json:"number"`
		SHA    string `json:"sha"`
		Status string `json:"status"`
	} `json:"run"`
	Total        int `json:"total"`
	FailingTotal int `json:"failing_total"`
	Slowest      []struct {
		Suite      string  `json:"suite"`
		Name       string  `json:"name"`
		Job        string  `json:"job"`
		Status     string  `json:"status"`
		DurationMS float64 `json:"duration_ms"`
	} `json:"slowest"`
	Failing []struct {
		Name     string                 `json:"name"`
		Job      string                 `json:"job"`
		Status   string                 `json:"status"`
		Message  string                 `json:"message"`
		Since    streakPoint            `json:"since"`
		LastPass *streakPoint           `json:"last_pass"`
		Verdict  *struct{ Kind string } `json:"verdict"`
	} `json:"failing"`
}

type streakPoint struct {
	Run   int    `json:"run"`
	RunID string `json:"run_id"`
	SHA   string `json:"sha"`
	At    string `json:"at"`
}

// took is a result of suite example.com/web/pkg that took ms milliseconds.
func took(name, status string, ms float64) map[string]any {
	r := result(name, status)
	r["duration_ms"] = ms
	return r
}

// TestTestSummary: a branch's summary is of its latest finished run with test results
// (run 5, under way on main, is passed over): its tests slowest first, ties by name, and
// its failing ones newest streak first, each with the run, commit and time of the first
// failure of its streak on the branch and the pass before it (TestBroken has failed on
// main since run 2 of 4, after passing in run 1; TestFlaky's skip in run 3 and its pass
// in the later run 5 are passed over), and its verdict (TestFlaky passed on its commit in
// run 5: flaky). Another branch has its own; a branch with no run has
// none; a bad branch is refused.
func TestTestSummary(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, b *bundle, _ *blob.DirStore) {
		ctx := context.Background()
		if err := b.store.CreateProject(ctx, &store.Project{Name: "web", DefaultBranch: "main"}); err != nil {
			t.Fatal(err)
		}
		var summary testSummaryView
		b.get(t, "/api/v1/projects/web/tests/summary").decode(t, &summary)
		if summary.Branch != "main" || summary.Run != nil || len(summary.Slowest) != 0 || len(summary.Failing) != 0 {
			t.Errorf("a project with no run: %+v", summary)
		}
		push := func(branch, sha, status string, results ...map[string]any) *store.Run {
			t.Helper()
			run, job, token := b.pushRun(t, branch, sha)
			if r := b.post(t, "/api/v1/agent/jobs/"+job+"/tests", testsBody(token, 0, results...)); r.status != http.StatusOK {
				t.Fatalf("post tests: %d %s", r.status, r.body)
			}
			if status != "" {
				if r := b.post(t, "/api/v1/agent/jobs/"+job+"/complete", fmt.Sprintf(`{"token": %q, "status": %q, "exit_code": 1}`, token, status)); r.status != http.StatusOK {
					t.Fatalf("complete: %d %s", r.status, r.body)
				}
			}
			if b.clock != nil {
				b.clock.Advance(time.Minute)
			}
			return run
		}
		push("main", "c1", "success", took("TestBroken", "passed", 10), took("TestNew", "passed", 10), took("TestFlaky", "passed", 10))
		run2 := push("main", "c2", "failed", took("TestBroken", "failed", 10), took("TestNew", "passed", 10), took("TestFlaky", "passed", 10))
		push("main", "c3", "failed", took("TestBroken", "failed", 10), took("TestNew", "passed", 10), took("TestFlaky", "skipped", 0))
		run4 := push("main", "c4", "failed", took("TestBroken", "failed", 3000), took("TestNew", "failed", 12.5), took("TestFlaky", "failed", 250),
			took("TestFresh", "errored", 12.5), took("TestSlow", "passed", 9000), took("TestSkip", "skipped", 0))
		// Run 5, of c4 again, is under way: it is not the summary's, but its pass of
		// TestFlaky on c4 makes run 4's failure flaky.
		push("main", "c4", "", took("TestFlaky", "passed", 10))
		feature := push("feature", "f1", "success", took("TestFeature", "passed", 40))

		summary = testSummaryView{}
		b.get(t, "/api/v1/projects/web/tests/summary").decode(t, &summary)
		if summary.Branch != "main" || summary.Run == nil || summary.Run.ID != run4.ID.String() || summary.Run.Number != 4 ||
			summary.Run.SHA != "c4" || summary.Run.Status != "failed" || summary.Total != 6 || summary.FailingTotal != 4 {
			t.Fatalf("the summary of main: branch %q, run %+v, %d tests, %d failing; want run 4 of c4, failed, 6 tests, 4 failing",
				summary.Branch, summary.Run, summary.Total, summary.FailingTotal)
		}
		var slowest []string
		for _, s := range summary.Slowest {
			slowest = append(slowest, fmt.Sprintf("%s:%s:%s:%g", s.Name, s.Job, s.Status, s.DurationMS))
		}
		if got, want := strings.Join(slowest, " "),
			"TestSlow:unit:passed:9000 TestBroken:unit:failed:3000 TestFlaky:unit:failed:250 TestFresh:unit:errored:12.5 TestNew:unit:failed:12.5 TestSkip:unit:skipped:0"; got != want {
			t.Errorf("slowest:\n got %s\nwant %s", got, want)
		}
		point := func(p *streakPoint) string {
			if p == nil {
				return "none"
			}
			if _, err := time.Parse(time.RFC3339Nano, p.At); err != nil || p.RunID == "" {
				return fmt.Sprintf("#%d with run id %q at %q", p.Run, p.RunID, p.At)
			}
			return fmt.Sprintf("#%d@%s", p.Run, p.SHA)
		}
		var failing []string
		for _, f := range summary.Failing {
			kind := "none"
			if f.Verdict != nil {
				kind = f.Verdict.Kind
			}
			failing = append(failing, fmt.Sprintf("%s:%s since %s after %s (%s)", f.Name, f.Status, point(&f.Since), point(f.LastPass), kind))
		}
		if got, want := strings.Join(failing, "\n"), strings.Join([]string{
			"TestFlaky:failed since #4@c4 after #2@c2 (flaky)",
			"TestFresh:errored since #4@c4 after none (new)",
			"TestNew:failed since #4@c4 after #3@c3 (new)",
			"TestBroken:failed since #2@c2 after #1@c1 (known)",
		}, "\n"); got != want {
			t.Errorf("failing, newest streak first:\n got %s\nwant %s", got, want)
		}
		if f := summary.Failing[3]; f.Since.RunID != run2.ID.String() || f.Job != "unit" || f.Message != "TestBroken failed: want 1, got 2" {
			t.Errorf("TestBroken's streak starts in run %s with job %q and message %q; want run 2 (%s), unit, its message", f.Since.RunID, f.Job, f.Message, run2.ID)
		}

		summary = testSummaryView{}
		b.get(t, "/api/v1/projects/web/tests/summary?branch=feature").decode(t, &summary)
		if summary.Branch != "feature" || summary.Run == nil || summary.Run.ID != feature.ID.String() || len(summary.Slowest) != 1 ||
			summary.Slowest[0].Name != "TestFeature" || len(summary.Failing) != 0 {
			t.Errorf("the summary of feature: %+v", summary)
		}
		summary = testSummaryView{}
		b.get(t, "/api/v1/projects/web/tests/summary?branch=nowhere").decode(t, &summary)
		if summary.Branch != "nowhere" || summary.Run != nil || summary.Slowest == nil || summary.Failing == nil {
			t.Errorf("the summary of a branch with no run: %+v", summary)
		}
		for _, q := range []string{"branch=" + url.QueryEscape("main\x01"), "branch=" + strings.Repeat("b", 501)} {
			if r := b.get(t, "/api/v1/projects/web/tests/summary?"+q); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "branch") {
				t.Errorf("?%.20s: %d %s, want 400 naming the branch", q, r.status, r.body)
			}
		}
		if r := b.get(t, "/api/v1/projects/nope/tests/summary"); r.status != http.StatusNotFound {
			t.Errorf("an unknown project: %d, want 404", r.status)
		}
	})
}
