package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/actions"
	"github.com/gantry-ci/gantry/internal/actions/actionstest"
	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/source/sourcetest"
)

// TestReusableWorkflowRuns: a project's workflow that calls reusable workflows makes runs
// with their jobs, reading a workflow of its repository at the pushed (or dispatched)
// commit and another repository's from the actions source; a mistake in a called file
// fails the push's run with an error naming that file. A definition sent on its own has
// no repository to read a workflow of from.
func TestReusableWorkflowRuns(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	actionstest.Repo(t, src, "acme", "flows", map[string]string{
		".github/workflows/lint.yml": "on: workflow_call\njobs:\n  lint:\n    runs-on: ubuntu-latest\n    steps: [{run: lint}]\n",
	}, "v1")
	actionsSrc, err := actions.ParseSource(src)
	if err != nil {
		t.Fatal(err)
	}
	mirrors := t.TempDir()
	b := setupWith(t, func(c *api.Config) {
		c.MirrorsDir = mirrors
		c.Actions = &actions.Resolver{Source: actionsSrc, MirrorsDir: t.TempDir()}
	})
	repo := sourcetest.NewRepo(t)
	ci := "on: [push, workflow_dispatch]\njobs:\n  build:\n    uses: ./.github/workflows/build.yml\n    with: {target: app}\n" +
		"  lint:\n    uses: acme/flows/.github/workflows/lint.yml@v1\n"
	first := repo.Commit("refs/heads/main", map[string]string{
		".github/workflows/ci.yml":    ci,
		".github/workflows/build.yml": "on:\n  workflow_call:\n    inputs: {target: {type: string, required: true}}\njobs:\n  make:\n    runs-on: ubuntu-latest\n    steps: [{run: 'make ${{ inputs.target }}'}]\n",
	})
	b.createProject(t, map[string]any{"name": "calls", "repo_url": repo.URL(), "provider": "github", "webhook_secret": "s3cret-s3cret",
		"pipeline_path": ".github/workflows/ci.yml"})
	h := wantHook(t, b.sendGitHub(t, "calls", "push", "d-1", "s3cret-s3cret", githubPush("refs/heads/main", zeroSHA, first)), http.StatusAccepted, true)
	var run runView
	b.get(t, "/api/v1/runs/"+h.Runs[0]).decode(t, &run)
	var keys []string
	for _, j := range run.Jobs {
		keys = append(keys, j.Key)
	}
	if strings.Join(keys, " ") != "build-make lint-lint" {
		t.Fatalf("jobs of the push's run = %v, want build-make lint-lint", keys)
	}

	// The called file changes at the next commit: that commit's is read.
	bad := repo.Commit("refs/heads/main", map[string]string{
		".github/workflows/build.yml": "on:\n  workflow_call:\n    inputs: {target: {type: string, required: true}}\njobs:\n  make:\n    runs-on: ubuntu-latest\n    stepz: []\n",
	})
	h = wantHook(t, b.sendGitHub(t, "calls", "push", "d-2", "s3cret-s3cret", githubPush("refs/heads/main", first, bad)), http.StatusAccepted, true)
	var failed failedRunView
	b.get(t, "/api/v1/runs/"+h.Runs[0]).decode(t, &failed)
	if failed.Status != "failed" || len(failed.Errors) == 0 {
		t.Fatalf("run of a broken called workflow = %+v", failed)
	}
	found := false
	for _, e := range failed.Errors {
		found = found || e.File == ".github/workflows/build.yml" && e.Line == 7 && e.Path == "jobs.make.stepz"
	}
	if !found {
		t.Errorf("errors = %+v, want one in .github/workflows/build.yml at line 7, jobs.make.stepz", failed.Errors)
	}

	// A dispatch reads the called workflow at the commit it runs.
	r := b.post(t, "/api/v1/projects/calls/dispatches", `{"ref": "`+first+`"}`)
	if r.status != http.StatusAccepted {
		t.Fatalf("dispatch at %s: %d %s", first, r.status, r.body)
	}
	r.decode(t, &run)
	if len(run.Jobs) != 2 || run.Jobs[0].Key != "build-make" {
		t.Errorf("dispatched run's jobs = %+v", run.Jobs)
	}

	// A definition posted on its own reads other repositories' workflows only.
	r = b.do(t, http.MethodPost, "/api/v1/runs", "application/yaml", "on: push\njobs:\n  lint:\n    uses: acme/flows/.github/workflows/lint.yml@v1\n", nil)
	if r.status != http.StatusAccepted {
		t.Errorf("posted run of a remote call: %d %s", r.status, r.body)
	}
	r = b.do(t, http.MethodPost, "/api/v1/runs", "application/yaml", ci, nil)
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "was not read from a repository") {
		t.Errorf("posted run of a local call: %d %s", r.status, r.body)
	}
}
