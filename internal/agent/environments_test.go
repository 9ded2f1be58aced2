package agent

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// TestUndefinedEnvironmentIsSaidInTheJobLog: an environment can be defined before its
// project has any run, and a job naming an environment its project does not define runs
// (it has no rules to keep it) with its log saying so before anything else, while a job
// of a defined environment gets no such line.
func TestUndefinedEnvironmentIsSaidInTheJobLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, b.url+"/api/v1/projects/shop/environments/staging", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("PUT an environment of a project with no run yet: %d, want 200", res.StatusCode)
	}
	b.start(t, 2)
	p, err := pipeline.Compile([]byte(`jobs:
  stage: { environment: staging, steps: [ { run: "echo staged" } ] }
  ship: { environment: production, steps: [ { run: "echo shipped" } ] }
`), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run, _, _, err := b.st.CreateRun(t.Context(), store.CreateRunParams{Project: "shop", Plan: p, Trigger: store.Trigger{Branch: "main"}})
	if err != nil {
		t.Fatal(err)
	}
	b.wantSuccess(t, run.ID)
	const notice = "environment production is not defined in project shop: it has no rules"
	// The log's first line, before the first step's.
	if ship := b.jobLog(t, run.ID, "ship"); !strings.HasPrefix(ship, notice+"\n") {
		t.Errorf("the log of the job of an undefined environment does not start with %q:\n%s", notice, ship)
	}
	if stage := b.jobLog(t, run.ID, "stage"); strings.Contains(stage, "is not defined") {
		t.Errorf("the log of the job of a defined environment says it is not defined:\n%s", stage)
	}
}
