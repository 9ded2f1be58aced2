package notify_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/testreport"
)

// TestStatusSaysWhatFailed: a finished run's commit status says what its failing tests
// are, judged from the project's history when the status is sent: new, known broken on
// the default branch, flaky on its commit, and how many of them are quarantined. A run
// whose tests all passed says only that it passed.
func TestStatusSaysWhatFailed(t *testing.T) {
	t.Parallel()
	b := setup(t, 10)
	forgeRec, forgeSrv := serve(t, answer{status: 201})
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("ghp_secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.st.CreateProject(t.Context(), &store.Project{Name: "web", RepoURL: "https://github.com/acme/web.git", Provider: "github",
		DefaultBranch: "main", APIBaseURL: forgeSrv.URL, APITokenFile: tokenFile, CommitStatuses: store.CommitStatusesRun}); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	plan, err := pipeline.Compile([]byte(oneJob), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// run runs the pipeline's one job on branch at commit with these results.
	run := func(branch, commit string, status store.JobStatus, results ...testreport.Result) *store.Run {
		t.Helper()
		r, _, _, err := b.st.CreateRun(t.Context(), store.CreateRunParams{Project: "web", Plan: plan,
			Trigger: store.Trigger{Ref: "refs/heads/" + branch, Branch: branch, SHA: commit, Event: "push", Repository: "acme/web",
				Verified: store.RefFromWebhook}})
		if err != nil {
			t.Fatalf("CreateRun: %v", err)
		}
		cs, err := b.st.Claim(t.Context(), store.ClaimParams{WorkerID: "w", Max: 1, LeaseTTL: time.Minute, TimeoutGrace: time.Minute})
		if err != nil || len(cs) != 1 {
			t.Fatalf("Claim: %d jobs, %v", len(cs), err)
		}
		lease := store.LeaseRef{JobID: cs[0].Job.ID, Token: cs[0].Lease.Token}
		if _, err := b.st.AddTestResults(t.Context(), store.AddTestResultsParams{LeaseRef: lease, Results: results}); err != nil {
			t.Fatalf("AddTestResults: %v", err)
		}
		if _, err := b.st.CompleteJob(t.Context(), store.CompleteParams{LeaseRef: lease, Status: status}); err != nil {
			t.Fatalf("CompleteJob: %v", err)
		}
		b.clk.Advance(time.Minute)
		return r
	}
	test := func(name string, st testreport.Status) testreport.Result {
		r := testreport.Result{Suite: "web/pkg", Name: name, Status: st}
		if st.Failing() {
			r.Message = name + " failed"
		}
		return r
	}
	first := run("main", strings.Repeat("1", 40), store.JobFailed, test("TestBroken", testreport.Failed), test("TestFlaky", testreport.Passed))
	second := run("feature", strings.Repeat("2", 40), store.JobFailed, test("TestBroken", testreport.Failed),
		test("TestFlaky", testreport.Failed), test("TestNew", testreport.Errored), test("TestOK", testreport.Passed))
	third := run("feature", strings.Repeat("2", 40), store.JobSuccess, test("TestFlaky", testreport.Passed))
	if _, err := b.st.PutQuarantine(t.Context(), store.PutQuarantineParams{Project: "web", Test: testreport.TestID{Suite: "web/pkg", Name: "TestNew"},
		Owner: "ana", ExpiresAt: b.clk.Now().Add(24 * time.Hour)}); err != nil {
		t.Fatalf("PutQuarantine: %v", err)
	}
	for b.deliver() > 0 {
	}
	got := map[string]string{}
	for _, r := range forgeRec.requests() {
		var body map[string]string
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatalf("body %s: %v", r.body, err)
		}
		if body["state"] != "pending" {
			got[body["target_url"]] = body["description"]
		}
	}
	for _, want := range []struct {
		run  *store.Run
		desc string
	}{
		// On main nothing failed before: TestBroken is new there.
		{first, "Run #1: Failed — 1 new failure"},
		// Sent after the rerun passed TestFlaky on the same commit: the status says so.
		{second, "Run #2: Failed — 1 new failure, 1 known broken, 1 known flaky (1 quarantined)"},
		{third, "Run #3: Passed"},
	} {
		if d := got["https://ci.example.com/runs/"+want.run.ID.String()]; d != want.desc {
			t.Errorf("run #%d: description %q, want %q", want.run.Number, d, want.desc)
		}
	}
}
