package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/testreport"
)

// featureTests is the coordinator's feature of test results,
// POST /api/v1/agent/jobs/{id}/tests.
const featureTests = "tests"

// testAnnotations is how many failing tests are raised as error annotations, and how
// many report warnings as warning annotations.
const testAnnotations = 10

// testsTitle is the title of the annotations about a job's test reports.
const testsTitle = "Test reports"

// keepTestReports reads the test reports the job's reports: names after its steps,
// whatever their outcome (a failed job's reports are the ones that matter), and sends
// their results to the coordinator in batches. A report that cannot be read, or holds
// more than the bounds, is a warning on the job; the job's status never depends on its
// reports. The log says what was read; the first failing tests are raised as error
// annotations so that the job's page says what broke. It returns the failing tests.
func (a *Agent) keepTestReports(ctx context.Context, log *slog.Logger, j claimedJob, ws string, rec *logs.Recorder) ([]testreport.TestID, error) {
	formats := j.Spec.Reports.ByFormat()
	if len(formats) == 0 {
		return nil, nil
	}
	if !a.keepTests {
		rec.System("test reports: not read: the coordinator is of a version that does not keep test results")
		return nil, nil
	}
	var (
		results  []testreport.Result
		warnings []testreport.Warning
		files    int
	)
	for _, f := range formats {
		found, err := findFiles(ws, f.Paths, "test reports", rec)
		if err != nil {
			return nil, err
		}
		for _, file := range found {
			files++
			rs, ws := parseReport(f.Format, file, testreport.MaxTestsPerJob-len(results))
			warnings = append(warnings, ws...)
			results = append(results, rs...)
		}
	}
	for i, w := range warnings {
		if i == testAnnotations {
			rec.Annotate(-1, logs.LevelWarning, testsTitle, fmt.Sprintf("and %d more warnings about the test reports", len(warnings)-i))
			break
		}
		rec.Annotate(-1, logs.LevelWarning, testsTitle, w.String())
	}
	rec.System("test reports: " + describeResults(results, files))
	var failing []testreport.TestID
	for _, r := range results {
		if !r.Status.Failing() {
			continue
		}
		failing = append(failing, testreport.TestID{Suite: r.Suite, Name: r.Name})
		if len(failing) > testAnnotations {
			continue
		}
		if len(failing) == testAnnotations+1 {
			rec.Annotate(-1, logs.LevelError, testsTitle, "more tests failed: the run's tests list them all (gantry tests RUN)")
			continue
		}
		// The log shows an annotation's message alone: it names the test.
		msg, _, _ := strings.Cut(strings.TrimSpace(r.Message), "\n")
		id := testreport.TestID{Suite: r.Suite, Name: r.Name}.String()
		if msg == "" {
			msg = id + " " + string(r.Status)
		} else {
			msg = id + ": " + msg
		}
		rec.Annotate(-1, logs.LevelError, "Test "+string(r.Status), msg)
	}
	return failing, a.sendTestResults(ctx, log, j, results, rec)
}

// knownFailures decides what a job's test failures say about it, from what its project
// knows of its tests (the coordinator's answer): "success" when every failing test is
// quarantined, "flaky" when every one is flaky or quarantined and one at least flaky,
// "" otherwise (or when the coordinator cannot say). The log and a warning annotation say
// which and why.
func (a *Agent) knownFailures(ctx context.Context, log *slog.Logger, j claimedJob, failing []testreport.TestID, rec *logs.Recorder) string {
	if len(failing) == 0 {
		return ""
	}
	type testJSON struct {
		Suite string `json:"suite"`
		Name  string `json:"name"`
	}
	var ans struct {
		Quarantined []testJSON `json:"quarantined"`
		Flaky       []testJSON `json:"flaky"`
	}
	if err := a.retryPost(ctx, "/api/v1/agent/jobs/"+j.ID+"/known-tests", map[string]any{"token": j.Lease.Token}, &ans); err != nil {
		log.Warn("ask what the project knows of the failing tests", "err", err)
		return ""
	}
	set := func(ts []testJSON) map[testreport.TestID]bool {
		m := map[testreport.TestID]bool{}
		for _, t := range ts {
			m[testreport.TestID{Suite: t.Suite, Name: t.Name}] = true
		}
		return m
	}
	quarantined, flaky := set(ans.Quarantined), set(ans.Flaky)
	var q, f []string
	seen := map[testreport.TestID]bool{}
	for _, id := range failing {
		switch {
		case seen[id]:
		case quarantined[id]:
			q = append(q, id.String())
		case flaky[id]:
			f = append(f, id.String())
		default:
			return ""
		}
		seen[id] = true
	}
	var msg, outcome string
	if len(f) == 0 {
		outcome = "success"
		msg = fmt.Sprintf("the job's only failures are %s: the job succeeds; the failures are kept and shown", namedTests(q, "quarantined"))
	} else {
		outcome = string(pipeline.FailureFlaky)
		msg = fmt.Sprintf("the job's only failures are %s", namedTests(f, "flaky"))
		if len(q) > 0 {
			msg += " and " + namedTests(q, "quarantined")
		}
		msg += ": it failed as flaky (retry: {on: [flaky]} runs it again)"
	}
	rec.System(msg)
	rec.Annotate(-1, logs.LevelWarning, testsTitle, msg)
	return outcome
}

// namedTests says "3 quarantined tests (a, b, c)", naming the first few.
func namedTests(ids []string, what string) string {
	slices.Sort(ids)
	n := len(ids)
	if n > testAnnotations {
		ids = append(ids[:testAnnotations:testAnnotations], fmt.Sprintf("and %d more", n-testAnnotations))
	}
	return fmt.Sprintf("%d %s %s (%s)", n, what, plural(n, "test", "tests"), strings.Join(ids, ", "))
}

// parseReport reads one report file of format, at most room results of it. What keeps
// the file from being read at all is one more warning, and no results.
func parseReport(format string, file keptFile, room int) ([]testreport.Result, []testreport.Warning) {
	notRead := func(line int, why string) []testreport.Warning {
		return []testreport.Warning{{File: file.Name, Line: line, Message: "not read as " + format + ": " + why}}
	}
	f, err := os.Open(file.path)
	if err != nil {
		return nil, notRead(0, err.Error())
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, notRead(0, err.Error())
	}
	if st.Size() > testreport.MaxReportBytes {
		return nil, notRead(0, fmt.Sprintf("%d bytes, more than the %d a report may have", st.Size(), testreport.MaxReportBytes))
	}
	rs, ws, err := testreport.Parse(format, file.Name, f, room)
	var fe *testreport.FormatError
	switch {
	case errors.As(err, &fe):
		return nil, append(ws, notRead(fe.Line, fe.Reason)...)
	case err != nil:
		return nil, append(ws, notRead(0, err.Error())...)
	}
	return rs, ws
}

// describeResults says what reports held: "1,204 tests from 2 files: 3 failed, 1
// skipped, 1,200 passed".
func describeResults(rs []testreport.Result, files int) string {
	counts := map[testreport.Status]int{}
	for _, r := range rs {
		counts[r.Status]++
	}
	out := fmt.Sprintf("%d %s from %d %s", len(rs), plural(len(rs), "test", "tests"), files, plural(files, "file", "files"))
	var parts []string
	for _, s := range []testreport.Status{testreport.Failed, testreport.Errored, testreport.Skipped, testreport.Passed} {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	if len(parts) > 0 {
		out += ": " + strings.Join(parts, ", ")
	}
	return out
}

// sendTestResults sends results in the worker's batches (testreport.Batches), each
// numbered from where the one before it ended so that a batch sent again is kept once.
// Texts are masked as the log is.
func (a *Agent) sendTestResults(ctx context.Context, log *slog.Logger, j claimedJob, results []testreport.Result, rec *logs.Recorder) error {
	first := 0
	for _, batch := range testreport.Batches(results, rec.MaskText) {
		body := map[string]any{"token": j.Lease.Token, "first": first, "results": batch}
		if err := a.retryPost(ctx, "/api/v1/agent/jobs/"+j.ID+"/tests", body, nil); err != nil {
			if errors.Is(err, errLeaseLost) {
				return err
			}
			log.Warn("the coordinator refused test results", "first", first, "err", err)
			rec.Annotate(-1, logs.LevelWarning, testsTitle, fmt.Sprintf("the coordinator did not keep test results %d to %d of %d: %v",
				first+1, first+len(batch), len(results), err))
			return nil
		}
		first += len(batch)
	}
	return nil
}

// testReportStep is a gantry/test-report step where it stands. The paths it names are
// the job's reports (the plan holds them in the job's Reports), read after all its steps
// by keepTestReports; here the step says so in the log and, with fail-on-failure or
// fail-on-empty, checks the reports as they are now, while the job has not failed
// (a step that failed with continue_on_error does not count): a job that failed
// already is not failed again by its reports, which would make two failed steps of one.
// depth is how deep in composite actions the step is: a composite action's step cannot
// name its job's reports, which the plan knows before any action is fetched.
func (r *actionRunner) testReportStep(ctx context.Context, with map[string]string, depth int, jobStatus func() string) stepRun {
	const what = pipeline.TestReportAction
	if depth > 0 {
		return r.nativeFailed(what, errors.New("a composite action's step cannot name the job's test reports: use gantry/test-report in the job's own steps"))
	}
	formats := pipeline.TestReportPaths(with)
	for _, f := range formats {
		r.rec.System(fmt.Sprintf("test reports: %s %s, read after the job's steps whatever their outcome", f.Format, strings.Join(f.Paths, ", ")))
	}
	failOnFailure, failOnEmpty := inputBool(with[pipeline.TestReportFailOnFailure]), inputBool(with[pipeline.TestReportFailOnEmpty])
	if !failOnFailure && !failOnEmpty {
		return stepRun{}
	}
	if jobStatus() != "success" {
		r.rec.System("test reports: not checked now: the job has failed already")
		return stepRun{}
	}
	if r.collector != nil {
		if err := r.collector.Collect(ctx); err != nil {
			return r.nativeFailed(what, fmt.Errorf("copy the workspace back from the job's environment: %w", err))
		}
	}
	var (
		results []testreport.Result
		files   int
	)
	for _, f := range formats {
		found, err := findFiles(r.ws, f.Paths, "test reports", r.rec)
		if err != nil {
			return r.nativeFailed(what, err)
		}
		files += len(found)
		if !failOnFailure {
			continue
		}
		for _, file := range found {
			// Warnings are the job's once its reports are read after the steps.
			rs, _ := parseReport(f.Format, file, testreport.MaxTestsPerJob-len(results))
			results = append(results, rs...)
		}
	}
	if failOnEmpty && files == 0 {
		return r.nativeFailed(what, errors.New("no file matches the report paths (fail-on-empty)"))
	}
	failing := 0
	for _, res := range results {
		if res.Status.Failing() {
			failing++
		}
	}
	if failing > 0 {
		return r.nativeFailed(what, fmt.Errorf("%d of %d %s failed (fail-on-failure)", failing, len(results), plural(len(results), "test", "tests")))
	}
	if failOnFailure {
		r.rec.System("test reports, checked: " + describeResults(results, files))
	}
	return stepRun{}
}
