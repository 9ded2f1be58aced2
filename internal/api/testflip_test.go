package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/source/sourcetest"
	"github.com/gantry-ci/gantry/internal/store"
)

// TestFlakyWithoutChange: a test that passed on the branch's commit before and fails now
// is flaky when nothing that matters changed between the two commits, read from the
// project's repository: no file at all (an empty commit pushed to build again), or only
// files the pipeline's paths_ignore leaves out. A change to a file the jobs read makes
// the failure new.
func TestFlakyWithoutChange(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) { c.MirrorsDir = t.TempDir() })
	repo := sourcetest.NewRepo(t)
	const def = "name: unit\non:\n  push:\n    paths_ignore: ['docs/**']\njobs:\n  unit: {steps: [{run: go test}]}\n"
	c1 := repo.Commit("refs/heads/main", map[string]string{".gantry.yml": def, "a.go": "package a\n", "docs/x.md": "one\n"})
	c2 := repo.Commit("refs/heads/main", nil) // nothing changed
	c3 := repo.Commit("refs/heads/main", map[string]string{"docs/x.md": "two\n"})
	c4 := repo.Commit("refs/heads/main", map[string]string{"a.go": "package a // changed\n"})
	if err := b.store.CreateProject(context.Background(), &store.Project{Name: "web", RepoURL: repo.URL(), DefaultBranch: "main"}); err != nil {
		t.Fatal(err)
	}
	plan, err := pipeline.Compile([]byte(def), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// run runs the job at sha with these results and returns the run.
	run := func(sha string, results ...map[string]any) *store.Run {
		t.Helper()
		r, _, _, err := b.store.CreateRun(context.Background(), store.CreateRunParams{Project: "web", Plan: plan, Definition: []byte(def),
			Trigger: store.Trigger{Ref: "refs/heads/main", Branch: "main", SHA: sha, Event: "push", Verified: store.RefFromWebhook}})
		if err != nil {
			t.Fatal(err)
		}
		got := b.claim(t, `{"worker_id": "w", "wait": "0s"}`)
		if len(got.Jobs) != 1 {
			t.Fatalf("claimed %d jobs, want 1", len(got.Jobs))
		}
		job, token := got.Jobs[0].ID, got.Jobs[0].Lease.Token
		if r := b.post(t, "/api/v1/agent/jobs/"+job+"/tests", testsBody(token, 0, results...)); r.status != http.StatusOK {
			t.Fatalf("post tests: %d %s", r.status, r.body)
		}
		if r := b.post(t, "/api/v1/agent/jobs/"+job+"/complete", fmt.Sprintf(`{"token": %q, "status": "failed", "exit_code": 1}`, token)); r.status != http.StatusOK {
			t.Fatalf("complete: %d %s", r.status, r.body)
		}
		b.clock.Advance(time.Minute)
		return r
	}
	run(c1, result("TestEmpty", "passed"))
	second := run(c2, result("TestEmpty", "failed"), result("TestDocs", "passed"))
	third := run(c3, result("TestDocs", "failed"), result("TestCode", "passed"))
	fourth := run(c4, result("TestCode", "failed"))

	for _, c := range []struct {
		run        *store.Run
		test, kind string
		why        string
		headline   string
	}{
		{second, "TestEmpty", "flaky", "though no file changed between them", "1 known flaky"},
		{third, "TestDocs", "flaky", "though 1 file changed between them: every changed path is ignored (docs/**)", "1 known flaky"},
		{fourth, "TestCode", "new", "first seen failing on this commit", "1 new failure"},
	} {
		var v runTestsView
		b.get(t, "/api/v1/runs/"+c.run.ID.String()+"/tests").decode(t, &v)
		if v.Headline != c.headline {
			t.Errorf("run #%d: headline %q, want %q", c.run.Number, v.Headline, c.headline)
		}
		var found bool
		for _, tv := range v.Tests {
			if tv.Name != c.test {
				continue
			}
			found = true
			if tv.Verdict == nil || tv.Verdict.Kind != c.kind || !strings.Contains(tv.Verdict.Why, c.why) {
				t.Errorf("run #%d: %s's verdict %+v, want %s saying %q", c.run.Number, c.test, tv.Verdict, c.kind, c.why)
				continue
			}
			if c.kind == "flaky" {
				// The evidence is the pass on the commit before and the failure now.
				ev := tv.Verdict.Evidence
				if len(ev) != 2 || ev[0].Status != "passed" || ev[0].Run != c.run.Number-1 || ev[1].Status != "failed" || ev[1].Run != c.run.Number {
					t.Errorf("run #%d: %s's evidence %+v, want the pass in run %d and the failure in run %d", c.run.Number, c.test, ev, c.run.Number-1, c.run.Number)
				}
			}
		}
		if !found {
			t.Errorf("run #%d: %s not listed: %+v", c.run.Number, c.test, v.Tests)
		}
	}
}
