package agent

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/testreport"
	"github.com/google/uuid"
)

// junitStep is a step that writes a JUnit report of the given testcases (XML bodies)
// and exits with code.
func junitStep(code int, cases ...string) string {
	return fmt.Sprintf(`      - run: |
          cat > junit.xml <<'EOF'
          <testsuite name="pkg">%s</testsuite>
          EOF
          exit %d
`, strings.Join(cases, ""), code)
}

const (
	passes        = `<testcase classname="pkg" name="TestSteady"/>`
	flakyRerun    = `<testcase classname="pkg" name="TestFlaky"><flakyFailure message="timed out"/></testcase>`
	flakyFails    = `<testcase classname="pkg" name="TestFlaky"><failure message="timed out"/></testcase>`
	realFails     = `<testcase classname="pkg" name="TestReal"><failure message="want 1, got 2"/></testcase>`
	quarantinedOf = `<testcase classname="pkg" name="TestQuarantined"><failure message="races"/></testcase>`
)

// submitOn creates a run of yaml in project web on a verified commit of main.
func (b *bundle) submitOn(t *testing.T, sha, yaml string) uuid.UUID {
	t.Helper()
	p, err := pipeline.Compile([]byte(yaml), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run, _, _, err := b.st.CreateRun(t.Context(), store.CreateRunParams{Project: "web", Plan: p,
		Trigger: store.Trigger{Ref: "refs/heads/main", Branch: "main", SHA: sha, Event: "push", Verified: store.RefFromWebhook}})
	if err != nil {
		t.Fatal(err)
	}
	return run.ID
}

// TestKnownTestFailures: a real worker against a real coordinator decides what a job's
// test failures say from what the project knows of its tests. A failure of a test known
// flaky (it passed after a failed rerun on another commit) is failure kind flaky, which
// retry on: [flaky] retries; a real failure is not retried by it; a failure of
// quarantined tests alone succeeds, but not when another step failed too.
func TestKnownTestFailures(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 1)
	job := func(retry string, steps ...string) string {
		return "jobs:\n  unit:\n" + retry + "    reports: {junit: [junit.xml]}\n    steps:\n" + strings.Join(steps, "")
	}
	const onFlaky = "    retry: {max_attempts: 2, backoff: 0s, on: [flaky]}\n"

	// On c1 TestFlaky passes only after a rerun: the project knows it flaky from then on.
	b.wantSuccess(t, b.submitOn(t, "c1", job("", junitStep(0, passes, flakyRerun))))

	// only waits for the run's one job to end, promoting its retries as the
	// coordinator's scheduler would (this harness runs the API alone).
	only := func(run uuid.UUID) *store.Job {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			if _, err := b.st.PromoteRetries(t.Context()); err != nil {
				t.Fatal(err)
			}
			jobs, err := b.st.ListJobs(t.Context(), run)
			if err != nil || len(jobs) != 1 {
				t.Fatalf("jobs %v, %v", jobs, err)
			}
			if jobs[0].Status.Terminal() {
				return jobs[0]
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s still %s after a minute", jobs[0].Key, jobs[0].Status)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	flaky := only(b.submitOn(t, "c2", job(onFlaky, junitStep(1, passes, flakyFails))))
	if flaky.Status != store.JobFailed || flaky.FailureKind != store.FailureFlaky || flaky.Attempt != 2 {
		t.Errorf("a failure of a flaky test: %s (%s) after %d attempts, want failed as flaky after 2", flaky.Status, flaky.FailureKind, flaky.Attempt)
	}
	if log := b.jobLog(t, flaky.RunID, "unit"); !strings.Contains(log, "the job's only failures are 1 flaky test (pkg.TestFlaky): it failed as flaky") {
		t.Errorf("the flaky job's log does not say why:\n%s", log)
	}

	real := only(b.submitOn(t, "c3", job(onFlaky, junitStep(1, flakyFails, realFails))))
	if real.Status != store.JobFailed || real.FailureKind != store.FailureExit || real.Attempt != 1 {
		t.Errorf("a real failure beside a flaky one: %s (%s) after %d attempts, want failed once", real.Status, real.FailureKind, real.Attempt)
	}

	if _, err := b.st.PutQuarantine(t.Context(), store.PutQuarantineParams{Project: "web", Owner: "alice",
		Test: testreport.TestID{Suite: "pkg", Name: "TestQuarantined"}, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	forgiven := only(b.submitOn(t, "c4", job("", junitStep(1, passes, quarantinedOf))))
	if forgiven.Status != store.JobSuccess {
		t.Errorf("a failure of a quarantined test alone: %s (%s), want success", forgiven.Status, forgiven.FailureKind)
	}
	twoSteps := only(b.submitOn(t, "c5", job("", junitStep(1, quarantinedOf), "      - if: always()\n        run: exit 3\n")))
	if twoSteps.Status != store.JobFailed || twoSteps.FailureKind != store.FailureExit {
		t.Errorf("quarantined tests failed and another step too: %s (%s), want failed", twoSteps.Status, twoSteps.FailureKind)
	}
	rs, err := b.st.ListTestResults(t.Context(), store.ListTestResultsParams{JobID: forgiven.ID})
	if err != nil || len(rs) != 2 || rs[0].Name != "TestQuarantined" || rs[0].Status != testreport.Failed || rs[0].Message != "races" {
		t.Errorf("the forgiven job's results %+v, %v: want its failure kept", rs, err)
	}
}

// reportSteps is a workflow whose jobs name their reports with gantry/test-report and
// with reporter actions read as reports (none is fetched: the bundle has no actions
// source).
const reportSteps = `on: push
jobs:
  named:
    runs-on: ubuntu-latest
    steps:
      - run: |
          cat > junit.xml <<'EOF'
          <testsuite name="pkg"><testcase classname="pkg" name="TestA"/><testcase classname="pkg" name="TestB"><failure message="want 1"/></testcase></testsuite>
          EOF
          mkdir -p web/reports
          printf '%s\n' '{"Action":"run","Package":"example.com/x","Test":"TestGo"}' '{"Action":"pass","Package":"example.com/x","Test":"TestGo"}' > web/reports/go.json
          exit 1
      - uses: gantry/test-report@v1
        with:
          junit: junit.xml
          fail-on-failure: true
      - uses: dorny/test-reporter@v2
        if: ${{ !cancelled() }}
        with: {name: go, path: reports/go.json, reporter: golang-json, working-directory: web}
  gate:
    runs-on: ubuntu-latest
    steps:
      - run: |
          echo '<testsuite name="pkg"><testcase classname="pkg" name="TestC"><failure message="boom"/></testcase><testcase classname="pkg" name="TestD"/></testsuite>' > out.xml
          exit 1
        continue-on-error: true
      - uses: dorny/test-reporter@v2
        with: {name: unit, path: out.xml, reporter: java-junit}
      - run: echo after
  empty:
    runs-on: ubuntu-latest
    steps:
      - run: "true"
      - uses: dorny/test-reporter@v2
        with: {name: unit, path: missing.xml, reporter: java-junit, fail-on-error: false}
  fine:
    runs-on: ubuntu-latest
    steps:
      - run: echo '<testsuite name="ok"><testcase classname="ok" name="TestE"/></testsuite>' > TEST-ok.xml
      - uses: EnricoMi/publish-unit-test-result-action/linux@v2
        if: always()
        with: {files: "TEST-*.xml", action_fail: true, check_name: Unit}
      - uses: mikepenz/action-junit-report@v5
        if: success() || failure()
        with: {report_paths: "TEST-*.xml", fail_on_failure: true}
`

// TestTestReportSteps: a real worker runs gantry/test-report and the reporter actions it
// does itself. Their reports are kept whatever the outcome of the steps; each step says
// in the log what it named; their fail-on-failure and fail-on-empty fail the step where
// it stands while the job is doing well (the action's job failed by the reporter, its
// later steps skipped), and not a job that failed already.
func TestTestReportSteps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 2)
	run := b.submitOn(t, "c1", reportSteps)
	if r := b.waitRun(t, run); r.Status != store.RunFailed {
		t.Fatalf("run %s, want failed", r.Status)
	}
	type want struct {
		status  store.JobStatus
		steps   []store.StepStatus
		tests   []string // suite.name status, failing first
		logHas  []string
		logLack string
	}
	for key, w := range map[string]want{
		"named": {store.JobFailed, []store.StepStatus{store.StepFailed, store.StepSuccess, store.StepSuccess},
			[]string{"pkg.TestB failed", "example.com/x.TestGo passed", "pkg.TestA passed"},
			[]string{"test reports: junit junit.xml, read after the job's steps whatever their outcome",
				"test reports: not checked now: the job has failed already",
				"test reports: go-test-json web/reports/go.json, read after",
				"test reports: 3 tests from 2 files: 1 failed, 2 passed"}, "fail-on-failure"},
		"gate": {store.JobFailed, []store.StepStatus{store.StepFailed, store.StepFailed, store.StepSkipped},
			[]string{"pkg.TestC failed", "pkg.TestD passed"},
			[]string{"gantry/test-report: 1 of 2 tests failed (fail-on-failure)"}, ""},
		"empty": {store.JobFailed, []store.StepStatus{store.StepSuccess, store.StepFailed},
			nil, []string{`test reports: no file matches "missing.xml"`, "gantry/test-report: no file matches the report paths (fail-on-empty)"}, ""},
		"fine": {store.JobSuccess, []store.StepStatus{store.StepSuccess, store.StepSuccess, store.StepSuccess},
			[]string{"ok.TestE passed"}, []string{"test reports, checked: 1 test from 1 file: 1 passed"}, ""},
	} {
		job, steps := b.jobByKey(t, run, key)
		if job.Status != w.status {
			t.Errorf("%s: %s, want %s\n%s", key, job.Status, w.status, b.jobLog(t, run, key))
		}
		var got []store.StepStatus
		for _, s := range steps {
			got = append(got, s.Status)
		}
		if fmt.Sprint(got) != fmt.Sprint(w.steps) {
			t.Errorf("%s: steps %v, want %v", key, got, w.steps)
		}
		rs, err := b.st.ListTestResults(t.Context(), store.ListTestResultsParams{JobID: job.ID})
		if err != nil {
			t.Fatal(err)
		}
		var tests []string
		for _, r := range rs {
			tests = append(tests, r.Suite+"."+r.Name+" "+string(r.Status))
		}
		if fmt.Sprint(tests) != fmt.Sprint(w.tests) {
			t.Errorf("%s: results %v, want %v", key, tests, w.tests)
		}
		log := b.jobLog(t, run, key)
		wantLog(t, log, w.logHas...)
		if w.logLack != "" && strings.Contains(log, w.logLack) {
			t.Errorf("%s: the log says %q:\n%s", key, w.logLack, log)
		}
	}
}

// TestQuarantineRuleEndToEnd: a real worker runs jobs whose JUnit report has TestFlaky
// pass only after a rerun on three commits and TestTwice on two; with the project's
// rule of 3 commits in 7 days the coordinator quarantines TestFlaky after the third
// job completes, owned by the rule, and not TestTwice; then a job whose only failure is
// TestFlaky succeeds.
func TestQuarantineRuleEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 1)
	ctx := t.Context()
	if err := b.st.CreateProject(ctx, &store.Project{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	if err := b.st.PutQuarantineRule(ctx, &store.QuarantineRule{Project: "web", FlakyCommits: 3, Within: 7 * 24 * time.Hour,
		For: store.DefaultRuleQuarantine, Owner: store.ActorRule}); err != nil {
		t.Fatal(err)
	}
	job := func(steps ...string) string {
		return "jobs:\n  unit:\n    reports: {junit: [junit.xml]}\n    steps:\n" + strings.Join(steps, "")
	}
	const twiceRerun = `<testcase classname="pkg" name="TestTwice"><flakyFailure message="timed out"/></testcase>`
	const twicePasses = `<testcase classname="pkg" name="TestTwice"/>`
	quarantined := func() map[string]*store.Quarantine {
		t.Helper()
		qs, err := b.st.ListQuarantines(ctx, store.ListQuarantinesParams{Project: "web"})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*store.Quarantine{}
		for _, q := range qs {
			out[q.Test.Name] = q
		}
		return out
	}

	b.wantSuccess(t, b.submitOn(t, "c1", job(junitStep(0, passes, flakyRerun, twiceRerun))))
	b.wantSuccess(t, b.submitOn(t, "c2", job(junitStep(0, passes, flakyRerun, twiceRerun))))
	if qs := quarantined(); len(qs) != 0 {
		t.Errorf("quarantined after two commits: %v", qs)
	}
	b.wantSuccess(t, b.submitOn(t, "c3", job(junitStep(0, passes, flakyRerun, twicePasses))))
	deadline := time.Now().Add(30 * time.Second)
	qs := quarantined()
	for qs["TestFlaky"] == nil {
		if time.Now().After(deadline) {
			t.Fatalf("TestFlaky not quarantined by the rule 30s after its third flaky commit; quarantined: %v", qs)
		}
		time.Sleep(20 * time.Millisecond)
		qs = quarantined()
	}
	if q := qs["TestFlaky"]; q.Owner != store.ActorRule || q.CreatedBy != store.ActorRule ||
		!strings.HasPrefix(q.Reason, "flaky on 3 commits in 7d (quarantine rule: at least 3 in 7d): c3 (run #3), c2 (run #2), c1 (run #1)") {
		t.Errorf("the rule's quarantine: %+v", q)
	}
	if qs["TestTwice"] != nil || qs["TestSteady"] != nil {
		t.Errorf("a test flaky on two commits, or none, was quarantined: %v", qs)
	}

	b.wantSuccess(t, b.submitOn(t, "c4", job(junitStep(1, passes, flakyFails))))
}
