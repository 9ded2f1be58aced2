package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// reportsPipeline has a job whose step writes a JUnit report (a failure with its
// message and output, a skip, a pass), a go test -json report (a pass and a failure in a
// subtest), and a file that claims to be JUnit and is not, then fails as a test runner
// with failures does.
const reportsPipeline = `name: reports
jobs:
  unit:
    steps:
      - run: |
          mkdir -p out
          cat > out/junit.xml <<'EOF'
          <?xml version="1.0" encoding="UTF-8"?>
          <testsuites>
            <testsuite name="tests.test_auth" tests="3" failures="1" skipped="1">
              <testcase classname="tests.test_auth" name="test_login" file="tests/test_auth.py" line="41" time="0.250">
                <failure message="AssertionError: want 200, got 500">Traceback: tests/test_auth.py:41: AssertionError</failure>
                <system-out>POST /login -> 500</system-out>
              </testcase>
              <testcase classname="tests.test_auth" name="test_logout" time="0.010"><skipped message="needs a browser"/></testcase>
              <testcase classname="tests.test_auth" name="test_signup" time="0.020"/>
            </testsuite>
          </testsuites>
          EOF
          printf '%s\n' \
            '{"Action":"run","Package":"example.com/web/api","Test":"TestRoutes"}' \
            '{"Action":"run","Package":"example.com/web/api","Test":"TestRoutes/health"}' \
            '{"Action":"output","Package":"example.com/web/api","Test":"TestRoutes/health","Output":"    routes_test.go:17: GET /healthz: 503\n"}' \
            '{"Action":"fail","Package":"example.com/web/api","Test":"TestRoutes/health","Elapsed":0.01}' \
            '{"Action":"fail","Package":"example.com/web/api","Test":"TestRoutes","Elapsed":0.02}' \
            '{"Action":"run","Package":"example.com/web/api","Test":"TestAuth"}' \
            '{"Action":"pass","Package":"example.com/web/api","Test":"TestAuth","Elapsed":0.03}' \
            '{"Action":"fail","Package":"example.com/web/api","Elapsed":0.05}' > test.json
          echo 'this is no XML' > out/broken.xml
          exit 1
    reports:
      junit: ["out/*.xml"]
      go-test-json: test.json
`

// TestTestsEndToEnd: a coordinator and a worker, each a process of its own, run a job
// whose step writes test reports and fails; the worker reads them whatever the step's
// outcome, the job's log says what they held, its annotations name the failing tests
// and the report that could not be read, and gantry tests prints the failures first,
// each a new failure, with where and why it failed; gantry tests history reads one
// test's result back.
func TestTestsEndToEnd(t *testing.T) {
	t.Parallel()
	srv := startServerProcess(t, "sqlite://"+filepath.Join(t.TempDir(), "gantry.db"))
	startChild(t, []string{"worker", "--server", srv.base, "--work-dir", t.TempDir()})
	run := submitRun(t, srv.base, reportsPipeline)
	run = waitRun(t, srv.base, run.ID, func(r runDetails) bool { return runTerminal(r.Status) })
	if run.Status != "failed" {
		t.Fatalf("run %s, want failed (its step exits 1): %+v", run.Status, run.Jobs)
	}
	job := run.Jobs[0]
	server := []string{"--server", srv.base}

	logs := runCLI(t, invocation{args: append([]string{"logs", job.ID}, server...)})
	if !strings.Contains(logs.stdout, "test reports: 6 tests from 3 files: 3 failed, 1 skipped, 2 passed") {
		t.Errorf("the job's log does not say what the reports held:\n%s", logs.stdout)
	}
	ans := call(t, http.MethodGet, srv.base+"/api/v1/jobs/"+job.ID+"/annotations", "")
	var anns []annotationView
	if err := json.Unmarshal([]byte(ans.body), &anns); err != nil {
		t.Fatalf("annotations: %v: %s", err, ans.body)
	}
	var titles []string
	for _, a := range anns {
		titles = append(titles, a.Level+" "+a.Title+": "+a.Message)
	}
	all := strings.Join(titles, "\n")
	for _, want := range []string{
		"error Test failed: tests.test_auth.test_login: AssertionError: want 200, got 500",
		"error Test failed: example.com/web/api.TestRoutes/health: ",
		"error Test failed: example.com/web/api.TestRoutes failed",
		"warning Test reports: out/broken.xml: not read as junit: no XML element in it",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("annotations lack %q:\n%s", want, all)
		}
	}

	got := runCLI(t, invocation{args: append([]string{"tests", run.ID}, server...)})
	if got.code != exitOK {
		t.Fatalf("gantry tests: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	out := got.stdout
	for _, want := range []string{
		"6 tests: 3 failed, 1 skipped, 2 passed\n3 new failures\n",
		"FAILED   example.com/web/api.TestRoutes  unit",
		"FAILED   tests.test_auth.test_login  unit  (250ms)  new failure\n         at tests/test_auth.py:41\n         AssertionError: want 200, got 500\n",
		"FAILED   example.com/web/api.TestRoutes/health  unit",
		"routes_test.go:17: GET /healthz: 503",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("gantry tests lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "test_signup") || strings.Contains(out, "SKIPPED") {
		t.Errorf("gantry tests without --all lists passed or skipped tests:\n%s", out)
	}
	got = runCLI(t, invocation{args: append([]string{"tests", "--json", run.ID}, server...)})
	var asJSON struct {
		Headline string `json:"headline"`
		Total    int    `json:"total"`
	}
	if err := json.Unmarshal([]byte(got.stdout), &asJSON); err != nil || asJSON.Headline != "3 new failures" || asJSON.Total != 6 {
		t.Errorf("gantry tests --json: %v: %s", err, got.stdout)
	}
	got = runCLI(t, invocation{args: append([]string{"tests", "--all", run.ID}, server...)})
	if i, j := strings.Index(got.stdout, "SKIPPED  tests.test_auth.test_logout"), strings.Index(got.stdout, "PASSED   "); got.code != exitOK ||
		i < 0 || j < i || !strings.Contains(got.stdout, "needs a browser") {
		t.Errorf("gantry tests --all: exit %d; want the skipped test, then the passed ones\n%s", got.code, got.stdout)
	}

	got = runCLI(t, invocation{args: append([]string{"tests", "history", "tests.test_auth.test_login", "--project", "default"}, server...)})
	if got.code != exitOK || !strings.Contains(got.stdout, "tests.test_auth.test_login in project default\n") ||
		!strings.Contains(got.stdout, "failed") || !strings.Contains(got.stdout, "1 result, 1 failing\n") {
		t.Errorf("gantry tests history: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	got = runCLI(t, invocation{args: append([]string{"tests", "flaky", "--project", "default"}, server...)})
	if got.code != exitOK || got.stdout != "project default has no flaky tests in the last 14 days\n" {
		t.Errorf("gantry tests flaky: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	got = runCLI(t, invocation{args: append([]string{"tests", "history", "x"}, server...)})
	if got.code != exitUsage || !strings.Contains(got.stderr, "--project is required") {
		t.Errorf("gantry tests history without --project: exit %d, %s", got.code, got.stderr)
	}

	// Quarantined, two of the three failing tests leave the job failed; all three let
	// it succeed, with the failures still kept and shown.
	quarantine := func(test string) {
		t.Helper()
		got := runCLI(t, invocation{args: append([]string{"tests", "quarantine", test, "--project", "default", "--owner", "alice",
			"--for", "7d", "--reason", "flaky on CI"}, server...)})
		if got.code != exitOK || !strings.Contains(got.stdout, test+" quarantined in project default until ") {
			t.Fatalf("gantry tests quarantine %s: exit %d\n%s%s", test, got.code, got.stdout, got.stderr)
		}
	}
	quarantine("tests.test_auth.test_login")
	quarantine("example.com/web/api.TestRoutes/health")
	again := waitRun(t, srv.base, submitRun(t, srv.base, reportsPipeline).ID, func(r runDetails) bool { return runTerminal(r.Status) })
	if again.Status != "failed" {
		t.Errorf("with one failing test not quarantined: run %s, want failed", again.Status)
	}
	quarantine("example.com/web/api.TestRoutes")
	list := runCLI(t, invocation{args: append([]string{"tests", "quarantine", "--project", "default"}, server...)})
	if list.code != exitOK || strings.Count(list.stdout, "alice") != 3 || !strings.Contains(list.stdout, "tests.test_auth.test_login") {
		t.Errorf("gantry tests quarantine --project: exit %d\n%s%s", list.code, list.stdout, list.stderr)
	}
	forgiven := waitRun(t, srv.base, submitRun(t, srv.base, reportsPipeline).ID, func(r runDetails) bool { return runTerminal(r.Status) })
	if forgiven.Status != "success" {
		t.Fatalf("with every failing test quarantined: run %s, want success", forgiven.Status)
	}
	logs = runCLI(t, invocation{args: append([]string{"logs", forgiven.Jobs[0].ID}, server...)})
	if !strings.Contains(logs.stdout, "the job's only failures are 3 quarantined tests (example.com/web/api.TestRoutes, ") {
		t.Errorf("the forgiven job's log does not say why:\n%s", logs.stdout)
	}
	got = runCLI(t, invocation{args: append([]string{"tests", forgiven.ID}, server...)})
	if got.code != exitOK || !strings.Contains(got.stdout, "3 failed, 1 skipped, 2 passed\n") || !strings.Contains(got.stdout, "(3 quarantined)") {
		t.Errorf("gantry tests of the forgiven run: exit %d\n%s", got.code, got.stdout)
	}
	got = runCLI(t, invocation{args: append([]string{"tests", "release", "example.com/web/api.TestRoutes", "--project", "default"}, server...)})
	if got.code != exitOK || got.stdout != "example.com/web/api.TestRoutes released from quarantine in project default\n" {
		t.Errorf("gantry tests release: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	list = runCLI(t, invocation{args: append([]string{"tests", "quarantine", "--project", "default"}, server...)})
	if strings.Count(list.stdout, "alice") != 2 {
		t.Errorf("after a release: %s", list.stdout)
	}
	got = runCLI(t, invocation{args: append([]string{"tests", "quarantine", "nosuch.Test", "--project", "default", "--owner", "a", "--for", "1d"}, server...)})
	if got.code != exitFailure || !strings.Contains(got.stderr, "has no results of nosuch.Test: give its suite with --suite") {
		t.Errorf("quarantine of an unknown test: exit %d, %s", got.code, got.stderr)
	}
	got = runCLI(t, invocation{args: append([]string{"tests", "quarantine", "x", "--project", "default", "--owner", "a"}, server...)})
	if got.code != exitUsage {
		t.Errorf("quarantine without --for: exit %d, want %d", got.code, exitUsage)
	}
}

// reportsWorkflow is a GitHub workflow whose test step writes a JUnit report and a go
// test -json one and fails; gantry/test-report names the first, dorny/test-reporter (done
// by Gantry itself) the second.
const reportsWorkflow = `name: reports
on: push
jobs:
  unit:
    runs-on: ubuntu-latest
    steps:
      - run: |
          mkdir -p out
          cat > out/junit.xml <<'EOF'
          <testsuite name="tests.test_auth">
            <testcase classname="tests.test_auth" name="test_login"><failure message="want 200, got 500"/></testcase>
            <testcase classname="tests.test_auth" name="test_signup"/>
          </testsuite>
          EOF
          printf '%s\n' \
            '{"Action":"run","Package":"example.com/web/api","Test":"TestRoutes"}' \
            '{"Action":"pass","Package":"example.com/web/api","Test":"TestRoutes","Elapsed":0.02}' > test.json
          exit 1
      - uses: gantry/test-report@v1
        with:
          junit: out/*.xml
      - name: Publish Go results
        uses: dorny/test-reporter@v2
        if: success() || failure()
        with: {name: Go, path: test.json, reporter: golang-json}
`

// TestWorkflowTestReportsEndToEnd: a workflow posted to a coordinator, run by a worker,
// each a process of its own, keeps the reports its gantry/test-report and reporter steps
// name, readable through the API. The server's actions source is an empty directory: an
// action it had to fetch would refuse the run.
func TestWorkflowTestReportsEndToEnd(t *testing.T) {
	t.Parallel()
	srv := startServerProcess(t, "sqlite://"+filepath.Join(t.TempDir(), "gantry.db"), "--actions-source", t.TempDir())
	startChild(t, []string{"worker", "--server", srv.base, "--work-dir", t.TempDir()})
	run := submitRun(t, srv.base, reportsWorkflow)
	run = waitRun(t, srv.base, run.ID, func(r runDetails) bool { return runTerminal(r.Status) })
	if run.Status != "failed" || len(run.Jobs) != 1 {
		t.Fatalf("run %s, want failed (its test step exits 1): %+v", run.Status, run.Jobs)
	}
	job := run.Jobs[0]

	var tests struct {
		Total int `json:"total"`
		Tests []struct {
			Suite  string `json:"suite"`
			Name   string `json:"name"`
			Status string `json:"status"`
		} `json:"tests"`
	}
	ans := call(t, http.MethodGet, srv.base+"/api/v1/runs/"+run.ID+"/tests", "")
	if err := json.Unmarshal([]byte(ans.body), &tests); err != nil {
		t.Fatalf("tests: %v: %s", err, ans.body)
	}
	var got []string
	for _, r := range tests.Tests {
		got = append(got, r.Suite+"."+r.Name+" "+r.Status)
	}
	want := "[tests.test_auth.test_login failed example.com/web/api.TestRoutes passed tests.test_auth.test_signup passed]"
	if tests.Total != 3 || fmt.Sprint(got) != want {
		t.Errorf("the run's tests: %d %v, want 3 %s", tests.Total, got, want)
	}

	logs := runCLI(t, invocation{args: []string{"logs", job.ID, "--server", srv.base}})
	for _, want := range []string{
		"step Run gantry/test-report@v1\n",
		"test reports: junit out/*.xml, read after the job's steps whatever their outcome",
		"step Publish Go results\n",
		"test reports: go-test-json test.json, read after the job's steps whatever their outcome",
		"test reports: not checked now: the job has failed already",
		"test reports: 3 tests from 2 files: 1 failed, 2 passed",
	} {
		if !strings.Contains(logs.stdout, want) {
			t.Errorf("the job's log lacks %q:\n%s", want, logs.stdout)
		}
	}
}
