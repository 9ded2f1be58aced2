package cli

import (
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/testreport"
)

// TestTestsSummary: gantry tests summary prints a branch's failing tests newest first,
// each with the run and commit its streak began in and the run it last passed in, and
// the run's slowest tests with their durations and jobs; --json prints the API's answer;
// a branch with no run says so, and --project is required.
func TestTestsSummary(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "gantry.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	srv := httptest.NewServer(api.New(api.Config{Store: st}).Handler())
	t.Cleanup(srv.Close)
	if err := st.CreateProject(ctx, &store.Project{Name: "web", DefaultBranch: "main"}); err != nil {
		t.Fatal(err)
	}
	plan, err := pipeline.Compile([]byte("jobs:\n  unit: {steps: [{run: go test}]}\n"), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	result := func(name string, s testreport.Status, d time.Duration) testreport.Result {
		return testreport.Result{Suite: "pkg", Name: name, Status: s, Duration: d, Message: name + " broke"}
	}
	// run pushes sha to main, and the worker reports rs and ends the job.
	run := func(sha string, rs ...testreport.Result) {
		t.Helper()
		if _, _, _, err := st.CreateRun(ctx, store.CreateRunParams{Project: "web", Plan: plan, Trigger: store.Trigger{Ref: "refs/heads/main",
			Branch: "main", SHA: sha, Event: "push", Verified: store.RefFromWebhook}}); err != nil {
			t.Fatal(err)
		}
		cs, err := st.Claim(ctx, store.ClaimParams{WorkerID: "w", Max: 1, LeaseTTL: time.Minute})
		if err != nil || len(cs) != 1 {
			t.Fatalf("claim: %d jobs, %v", len(cs), err)
		}
		ref := store.LeaseRef{JobID: cs[0].Job.ID, Token: cs[0].Lease.Token}
		if _, err := st.AddTestResults(ctx, store.AddTestResultsParams{LeaseRef: ref, Results: rs}); err != nil {
			t.Fatal(err)
		}
		exit := 1
		if _, err := st.CompleteJob(ctx, store.CompleteParams{LeaseRef: ref, Status: store.JobFailed, FailureKind: store.FailureExit, ExitCode: &exit}); err != nil {
			t.Fatal(err)
		}
	}
	const c1, c2, c3 = "c1c1c1c1c1c1c1c1c1c1", "c2c2c2c2c2c2c2c2c2c2", "c3c3c3c3c3c3c3c3c3c3"
	run(c1, result("TestLogin", testreport.Passed, time.Second), result("TestCart", testreport.Passed, time.Second))
	run(c2, result("TestLogin", testreport.Failed, time.Second), result("TestCart", testreport.Passed, time.Second))
	run(c3, result("TestLogin", testreport.Failed, 2500*time.Millisecond), result("TestCart", testreport.Failed, 40*time.Millisecond),
		result("TestSearch", testreport.Passed, 95*time.Second))

	server := []string{"--server", srv.URL}
	got := runCLI(t, invocation{args: append([]string{"tests", "summary", "--project", "web"}, server...)})
	if got.code != exitOK {
		t.Fatalf("gantry tests summary: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	for _, want := range []string{
		"main: run #3 at c3c3c3c3c3c3, ",
		", 3 tests, 2 failing\n\nFAILING, newest first\n" +
			"FAILED   pkg.TestCart  unit  new failure\n         since run #3 at c3c3c3c3c3c3, ",
		"\n         last passed in run #2 at c2c2c2c2c2c2, ",
		"\nFAILED   pkg.TestLogin  unit  known broken\n         since run #2 at c2c2c2c2c2c2, ",
		"\n         last passed in run #1 at c1c1c1c1c1c1, ",
		"\nSLOWEST\nDURATION  TEST            JOB   STATUS\n" +
			"1m35s     pkg.TestSearch  unit  passed\n" +
			"2.5s      pkg.TestLogin   unit  failed\n" +
			"40ms      pkg.TestCart    unit  failed\n",
	} {
		if !strings.Contains(got.stdout, want) {
			t.Errorf("gantry tests summary lacks %q:\n%s", want, got.stdout)
		}
	}

	got = runCLI(t, invocation{args: append([]string{"tests", "summary", "--project", "web", "--json"}, server...)})
	var v struct {
		Branch  string `json:"branch"`
		Failing []struct {
			Name  string `json:"name"`
			Since struct {
				Run int `json:"run"`
			} `json:"since"`
		} `json:"failing"`
	}
	if err := json.Unmarshal([]byte(got.stdout), &v); err != nil || v.Branch != "main" || len(v.Failing) != 2 ||
		v.Failing[1].Name != "TestLogin" || v.Failing[1].Since.Run != 2 {
		t.Errorf("gantry tests summary --json: %v: %s", err, got.stdout)
	}
	got = runCLI(t, invocation{args: append([]string{"tests", "summary", "--project", "web", "--branch", "dev"}, server...)})
	if got.code != exitOK || got.stdout != "no finished run of dev in project web kept test results (a job's reports: names the files its steps write)\n" {
		t.Errorf("a branch with no run: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	got = runCLI(t, invocation{args: append([]string{"tests", "summary"}, server...)})
	if got.code != exitUsage || !strings.Contains(got.stderr, "--project is required") {
		t.Errorf("without --project: exit %d, %s", got.code, got.stderr)
	}
}
