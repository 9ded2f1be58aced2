package pipeline

import (
	"reflect"
	"strings"
	"testing"
)

func TestReports(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, `
name: reports
jobs:
  unit:
    matrix: {pkg: [api, web]}
    steps: [{run: make test}]
    reports:
      junit: ["out/${{ matrix.pkg }}/junit*.xml", "**/TEST-*.xml"]
      go-test-json: test.json
  none: {steps: [{run: make}]}
`)
	want := map[string]*Reports{
		"unit (pkg=api)": {JUnit: []string{"out/api/junit*.xml", "**/TEST-*.xml"}, GoTestJSON: []string{"test.json"}},
		"unit (pkg=web)": {JUnit: []string{"out/web/junit*.xml", "**/TEST-*.xml"}, GoTestJSON: []string{"test.json"}},
		"none":           nil,
	}
	for _, j := range p.Jobs {
		if !reflect.DeepEqual(j.Reports, want[j.Key]) {
			t.Errorf("%s: reports %+v, want %+v", j.Key, j.Reports, want[j.Key])
		}
	}
	got := p.Jobs[0].Reports.ByFormat()
	if len(got) != 2 || got[0].Format != ReportJUnit || got[1].Format != ReportGoTestJSON || got[1].Paths[0] != "test.json" {
		t.Errorf("ByFormat = %+v, want junit then go-test-json", got)
	}
}

func TestReportsErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, reports, path, msg string
	}{
		{"unknown format", `{junit_xml: [a.xml]}`, "jobs.a.reports.junit_xml", `unknown key "junit_xml" in reports`},
		{"separator slip", `{go_test_json: [a.json]}`, "jobs.a.reports.go_test_json", `did you mean "go-test-json"`},
		{"outside the workspace", `{tap: [../x.tap]}`, "jobs.a.reports.tap[0]", `report path "../x.tap" must not leave the workspace`},
		{"absolute", `{junit: /tmp/x.xml}`, "jobs.a.reports.junit[0]", "must be relative to the workspace"},
		{"empty", `{}`, "jobs.a.reports", "reports need at least one path of a format: junit, go-test-json, tap"},
		{"not a mapping", `[a.xml]`, "jobs.a.reports", "reports"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := compileErrs(t, "jobs:\n  a:\n    steps: [{run: x}]\n    reports: "+tc.reports+"\n")
			for _, e := range errs {
				if e.Path == tc.path && strings.Contains(e.Message, tc.msg) {
					return
				}
			}
			t.Errorf("errors %v, want one at %s saying %q", errs, tc.path, tc.msg)
		})
	}
}

// TestReportsMakeGantrysLanguage: a job with reports: is read in Gantry's language, not as
// a workflow, even in a document with on:.
func TestReportsMakeGantrysLanguage(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, "on: push\njobs:\n  a:\n    steps: [{run: x}]\n    reports: {tap: [t.tap]}\n")
	if p.Jobs[0].Reports == nil || p.Jobs[0].Reports.TAP[0] != "t.tap" {
		t.Fatalf("reports %+v, want the tap path", p.Jobs[0].Reports)
	}
}

// TestRetriesFlaky: on: [flaky] retries a flaky failure and no other; on: [failure]
// retries a flaky failure too, which is a failure.
func TestRetriesFlaky(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, "jobs:\n  a: {steps: [{run: x}], retry: {max_attempts: 2, on: [flaky]}}\n  b: {steps: [{run: x}], retry: {max_attempts: 2, on: [failure]}}\n")
	a, b := p.Jobs[0].Retry, p.Jobs[1].Retry
	for _, tc := range []struct {
		r    RetryPolicy
		kind FailureKind
		want bool
	}{
		{a, FailureFlaky, true}, {a, FailureExit, false}, {a, FailureTimeout, false},
		{b, FailureFlaky, true}, {b, FailureExit, true}, {b, FailureLost, false},
	} {
		if got := tc.r.Retries(tc.kind); got != tc.want {
			t.Errorf("on %v retries %s: %v, want %v", tc.r.On, tc.kind, got, tc.want)
		}
	}
}
