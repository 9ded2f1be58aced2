package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

type testView struct {
	Job        string  `json:"job"`
	Attempt    int     `json:"attempt"`
	Suite      string  `json:"suite"`
	Name       string  `json:"name"`
	Status     string  `json:"status"`
	DurationMS float64 `json:"duration_ms"`
	Message    string  `json:"message"`
	Output     string  `json:"output"`
	Run        int     `json:"run"`
	Branch     string  `json:"branch"`
	SHA        string  `json:"sha"`
	Verdict    *struct {
		Kind     string `json:"kind"`
		Why      string `json:"why"`
		Evidence []struct {
			Status string `json:"status"`
			Run    int    `json:"run"`
			SHA    string `json:"sha"`
		} `json:"evidence"`
	} `json:"verdict"`
}

type runTestsView struct {
	Counts     map[string]int `json:"counts"`
	Total      int            `json:"total"`
	Verdicts   map[string]int `json:"verdicts"`
	Headline   string         `json:"headline"`
	Judged     int            `json:"judged"`
	Tests      []testView     `json:"tests"`
	NextOffset *int           `json:"next_offset"`
}

// pushRun creates a run of project web on branch at sha as a webhook would, claims its
// one job through the worker API and returns the job's id and lease token.
func (b *bundle) pushRun(t *testing.T, branch, sha string) (run *store.Run, job, token string) {
	t.Helper()
	plan, err := pipeline.Compile([]byte("name: unit\njobs:\n  unit: {steps: [{run: go test}]}\n"), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run, _, _, err = b.store.CreateRun(context.Background(), store.CreateRunParams{Project: "web", Plan: plan,
		Trigger: store.Trigger{Ref: "refs/heads/" + branch, Branch: branch, SHA: sha, Event: "push", Verified: store.RefFromWebhook}})
	if err != nil {
		t.Fatal(err)
	}
	got := b.claim(t, `{"worker_id": "w", "wait": "0s"}`)
	if len(got.Jobs) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(got.Jobs))
	}
	return run, got.Jobs[0].ID, got.Jobs[0].Lease.Token
}

func testsBody(token string, first int, results ...map[string]any) string {
	b, _ := json.Marshal(map[string]any{"token": token, "first": first, "results": results})
	return string(b)
}

func result(name, status string) map[string]any {
	r := map[string]any{"suite": "example.com/web/pkg", "name": name, "status": status, "duration_ms": 12.5}
	if status != "passed" {
		r["message"], r["output"] = name+" failed: want 1, got 2", "=== RUN "+name+"\n    x_test.go:9: want 1, got 2\n"
	}
	return r
}

// TestTestResults: a worker's test results are kept once however often sent; a run
// lists them failing first, each failure judged from the project's history (flaky on
// its commit, broken on the default branch already, new) with the headline they make;
// a test's history and the project's flaky tests read the same results.
func TestTestResults(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, b *bundle, _ *blob.DirStore) {
		if err := b.store.CreateProject(context.Background(), &store.Project{Name: "web", DefaultBranch: "main"}); err != nil {
			t.Fatal(err)
		}
		send := func(job, body string) {
			t.Helper()
			if r := b.post(t, "/api/v1/agent/jobs/"+job+"/tests", body); r.status != http.StatusOK {
				t.Fatalf("post tests: %d %s", r.status, r.body)
			}
		}
		complete := func(job, token, status string) {
			t.Helper()
			if r := b.post(t, "/api/v1/agent/jobs/"+job+"/complete", fmt.Sprintf(`{"token": %q, "status": %q, "exit_code": 1}`, token, status)); r.status != http.StatusOK {
				t.Fatalf("complete: %d %s", r.status, r.body)
			}
		}
		// later moves the store's clock on where it is a fake one: what the verdicts
		// read as "before the run" is by the store's time.
		later := func() {
			if b.clock != nil {
				b.clock.Advance(time.Minute)
			}
		}
		// On main at c1: TestFlaky passes, TestBroken fails.
		_, job, token := b.pushRun(t, "main", "c1")
		send(job, testsBody(token, 0, result("TestFlaky", "passed"), result("TestBroken", "failed")))
		complete(job, token, "failed")
		later()
		// On feature at c2: TestFlaky, TestBroken and TestNew fail; TestSkip is skipped.
		run2, job, token := b.pushRun(t, "feature", "c2")
		body := testsBody(token, 0, result("TestFlaky", "failed"), result("TestBroken", "failed"), result("TestNew", "errored"),
			result("TestSkip", "skipped"), result("TestOK", "passed"))
		send(job, body)
		var added struct {
			Added int `json:"added"`
		}
		b.post(t, "/api/v1/agent/jobs/"+job+"/tests", body).decode(t, &added)
		if added.Added != 0 {
			t.Errorf("a re-sent batch added %d", added.Added)
		}
		complete(job, token, "failed")
		later()
		// A rerun of c2 where TestFlaky passes.
		_, job3, token3 := b.pushRun(t, "feature", "c2")
		send(job3, testsBody(token3, 0, result("TestFlaky", "passed")))
		complete(job3, token3, "success")

		var v runTestsView
		b.get(t, "/api/v1/runs/"+run2.ID.String()+"/tests").decode(t, &v)
		if v.Total != 5 || v.Counts["failed"] != 2 || v.Counts["errored"] != 1 || v.Counts["skipped"] != 1 || v.Counts["passed"] != 1 {
			t.Errorf("counts %v, total %d", v.Counts, v.Total)
		}
		if v.Headline != "1 new failure, 1 known broken, 1 known flaky" || v.Judged != 3 {
			t.Errorf("headline %q of %d judged, want 1 new, 1 known broken, 1 known flaky of 3", v.Headline, v.Judged)
		}
		var order []string
		kinds := map[string]string{}
		for _, tv := range v.Tests {
			order = append(order, tv.Name+":"+tv.Status)
			if tv.Verdict != nil {
				kinds[tv.Name] = tv.Verdict.Kind
			}
		}
		if got := strings.Join(order, " "); got != "TestBroken:failed TestFlaky:failed TestNew:errored TestSkip:skipped TestOK:passed" {
			t.Errorf("order %q: want failing first, then skipped, then passed, each by name", got)
		}
		if kinds["TestFlaky"] != "flaky" || kinds["TestBroken"] != "known" || kinds["TestNew"] != "new" || len(kinds) != 3 {
			t.Errorf("verdicts %v", kinds)
		}
		flaky := v.Tests[1]
		if flaky.Verdict == nil || len(flaky.Verdict.Evidence) != 2 || flaky.Verdict.Evidence[1].Status != "passed" ||
			flaky.Verdict.Evidence[1].Run != run2.Number+1 || flaky.Message != "TestFlaky failed: want 1, got 2" ||
			!strings.Contains(flaky.Output, "x_test.go:9") || flaky.DurationMS != 12.5 || flaky.Job != "unit" {
			t.Errorf("the flaky test: %+v", flaky)
		}

		var page runTestsView
		b.get(t, "/api/v1/runs/"+run2.ID.String()+"/tests?status=skipped,passed&limit=1").decode(t, &page)
		if len(page.Tests) != 1 || page.Tests[0].Name != "TestSkip" || page.NextOffset == nil || *page.NextOffset != 1 {
			t.Errorf("a page of skipped and passed: %+v", page)
		}

		// The job's own tests read as the run's do, with counts and verdicts; an attempt
		// it never had has none.
		var jv runTestsView
		b.get(t, "/api/v1/jobs/"+job+"/tests?status=failed,errored&limit=2").decode(t, &jv)
		if jv.Total != 5 || jv.Counts["failed"] != 2 || jv.Counts["errored"] != 1 || jv.Headline != v.Headline || jv.Judged != 3 ||
			len(jv.Tests) != 2 || jv.Tests[0].Name != "TestBroken" || jv.Tests[0].Verdict == nil || jv.Tests[0].Verdict.Kind != "known" ||
			jv.Tests[1].Name != "TestFlaky" || jv.Tests[1].Message != "TestFlaky failed: want 1, got 2" ||
			jv.NextOffset == nil || *jv.NextOffset != 2 {
			t.Errorf("the job's failing tests: %+v", jv)
		}
		jv = runTestsView{}
		b.get(t, "/api/v1/jobs/"+job+"/tests?attempt=2").decode(t, &jv)
		if jv.Total != 0 || len(jv.Tests) != 0 || jv.Headline != "" || jv.NextOffset != nil {
			t.Errorf("attempt 2, which the job never had: %+v", jv)
		}
		if r := b.get(t, "/api/v1/jobs/"+job+"/tests?attempt=0"); r.status != http.StatusBadRequest {
			t.Errorf("attempt=0: %d %s, want 400", r.status, r.body)
		}

		var hist []testView
		b.get(t, "/api/v1/projects/web/tests/history?test=example.com/web/pkg.TestFlaky").decode(t, &hist)
		if len(hist) != 3 || hist[0].Status != "passed" || hist[1].Status != "failed" || hist[1].Branch != "feature" ||
			hist[1].SHA != "c2" || hist[2].Run != hist[1].Run-1 {
			t.Errorf("history of TestFlaky: %+v", hist)
		}
		hist = nil
		b.get(t, "/api/v1/projects/web/tests/history?name=TestFlaky&suite=example.com/web/pkg&branch=main").decode(t, &hist)
		if len(hist) != 1 || hist[0].SHA != "c1" {
			t.Errorf("history of TestFlaky on main: %+v", hist)
		}

		var flakyList []struct {
			Suite    string     `json:"suite"`
			Name     string     `json:"name"`
			Commits  int        `json:"commits"`
			Evidence []testView `json:"evidence"`
		}
		b.get(t, "/api/v1/projects/web/tests/flaky").decode(t, &flakyList)
		if len(flakyList) != 1 || flakyList[0].Name != "TestFlaky" || flakyList[0].Commits != 1 || len(flakyList[0].Evidence) != 2 {
			t.Errorf("flaky tests: %+v", flakyList)
		}
	})
}

// TestTestResultRefusals: reports that are not the lease holder's or not well formed
// change nothing and say why.
func TestTestResultRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, token := b.leasedJob(t)
	many := make([]map[string]any, 1001)
	for i := range many {
		many[i] = result(fmt.Sprintf("T%d", i), "passed")
	}
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"wrong token", testsBody("not-the-token", 0, result("T", "passed")), http.StatusConflict},
		{"no first", `{"token": "` + token + `", "results": []}`, http.StatusBadRequest},
		{"unknown status", testsBody(token, 0, result("T", "broken")), http.StatusBadRequest},
		{"no name", testsBody(token, 0, map[string]any{"suite": "s", "status": "passed"}), http.StatusBadRequest},
		{"too many", testsBody(token, 0, many...), http.StatusBadRequest},
		{"negative duration", testsBody(token, 0, map[string]any{"name": "T", "status": "passed", "duration_ms": -1}), http.StatusBadRequest},
		{"unknown field", `{"token": "` + token + `", "first": 0, "results": [{"name": "T", "status": "passed", "colour": "red"}]}`, http.StatusBadRequest},
	} {
		if r := b.post(t, "/api/v1/agent/jobs/"+id+"/tests", tc.body); r.status != tc.status || !strings.Contains(string(r.body), `"message"`) {
			t.Errorf("%s: %d %s, want %d with a message", tc.name, r.status, r.body, tc.status)
		}
	}
	var v runTestsView
	var job jobView
	b.get(t, "/api/v1/jobs/"+id).decode(t, &job)
	b.get(t, "/api/v1/runs/"+job.RunID+"/tests").decode(t, &v)
	if v.Total != 0 || len(v.Tests) != 0 || v.Headline != "" {
		t.Errorf("after refused reports: %+v", v)
	}
	for _, q := range []string{"status=green", "limit=0", "offset=-1"} {
		if r := b.get(t, "/api/v1/runs/"+job.RunID+"/tests?"+q); r.status != http.StatusBadRequest {
			t.Errorf("?%s: %d, want 400", q, r.status)
		}
	}
	if r := b.get(t, "/api/v1/projects/default/tests/history"); r.status != http.StatusBadRequest {
		t.Errorf("history without a test: %d, want 400", r.status)
	}
}

// TestQuarantineRefusals: a quarantine without an owner, a length, or within the
// bounds is refused with a reason, and a release of a test not quarantined is 404.
func TestQuarantineRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.leasedJob(t)
	path := "/api/v1/projects/default/tests/quarantine"
	for _, tc := range []struct {
		name, body string
		status     int
		says       string
	}{
		{"no owner", `{"suite": "s", "name": "T", "for": "7d"}`, http.StatusBadRequest, "an owner is required"},
		{"no length", `{"suite": "s", "name": "T", "owner": "a"}`, http.StatusBadRequest, "say how long the quarantine lasts"},
		{"both lengths", `{"suite": "s", "name": "T", "owner": "a", "for": "7d", "expires_at": "2099-01-01T00:00:00Z"}`, http.StatusBadRequest, "one of them"},
		{"not a duration", `{"suite": "s", "name": "T", "owner": "a", "for": "a week"}`, http.StatusBadRequest, "is not a duration"},
		{"too long", `{"suite": "s", "name": "T", "owner": "a", "for": "91d"}`, http.StatusBadRequest, "within 90 days"},
		{"no name", `{"suite": "s", "owner": "a", "for": "7d"}`, http.StatusBadRequest, "the test has no name"},
	} {
		if r := b.do(t, http.MethodPut, path, "application/json", tc.body, nil); r.status != tc.status || !strings.Contains(string(r.body), tc.says) {
			t.Errorf("%s: %d %s, want %d with a message", tc.name, r.status, r.body, tc.status)
		}
	}
	if r := b.do(t, http.MethodPut, path, "application/json", `{"suite": "s", "name": "T", "owner": "a", "for": "7d"}`, nil); r.status != http.StatusOK {
		t.Fatalf("a quarantine: %d %s", r.status, r.body)
	}
	var qs []struct {
		Name, Owner string
	}
	b.get(t, path).decode(t, &qs)
	if len(qs) != 1 || qs[0].Name != "T" || qs[0].Owner != "a" {
		t.Errorf("quarantines %+v", qs)
	}
	if r := b.do(t, http.MethodDelete, path+"?suite=s&name=Other", "", "", nil); r.status != http.StatusNotFound {
		t.Errorf("release of a test not quarantined: %d, want 404", r.status)
	}
	if r := b.do(t, http.MethodDelete, path+"?suite=s&name=T", "", "", nil); r.status != http.StatusNoContent {
		t.Errorf("release: %d, want 204", r.status)
	}
}
