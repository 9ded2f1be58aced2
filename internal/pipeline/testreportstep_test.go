package pipeline

import (
	"reflect"
	"strings"
	"testing"
)

// TestTestReportStep: a gantry/test-report step's paths join the job's reports: key's,
// once each, with the matrix put in; the step stays, to run whatever happened before it
// (if: always()), with its inputs; any v1 ref and any case of the name are taken.
func TestTestReportStep(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, `
jobs:
  unit:
    matrix: {pkg: [api, web]}
    reports: {junit: [junit.xml]}
    steps:
      - run: make test
      - uses: gantry/test-report@v1
        with:
          junit: |
            junit.xml

            out/${{ matrix.pkg }}/*.xml
          tap: t.tap
          fail-on-failure: true
      - uses: Gantry/Test-Report@v1.2.3
        with: {go-test-json: "  test.json  ", fail-on-empty: "FALSE"}
`)
	if len(p.Jobs) != 2 {
		t.Fatalf("jobs %v", keys(p.Jobs))
	}
	for _, j := range p.Jobs {
		pkg := j.Matrix[0].Value
		want := &Reports{JUnit: []string{"junit.xml", "out/" + pkg + "/*.xml"}, GoTestJSON: []string{"test.json"}, TAP: []string{"t.tap"}}
		if !reflect.DeepEqual(j.Reports, want) {
			t.Errorf("%s: reports %+v, want %+v", j.Key, j.Reports, want)
		}
		st := j.Steps[1]
		if st.Uses != "gantry/test-report@v1" || st.If == nil || st.If.Source != "always()" || st.Name != "Run gantry/test-report@v1" {
			t.Errorf("%s: step %+v, want gantry/test-report under always()", j.Key, st)
		}
		if got := TestReportPaths(st.With); len(got) != 2 || got[0].Paths[1] != "out/"+pkg+"/*.xml" || got[1].Format != ReportTAP ||
			st.With[TestReportFailOnFailure] != "true" {
			t.Errorf("%s: inputs %q read as %+v", j.Key, st.With, got)
		}
		if u, err := ParseUses(j.Steps[2].Uses); err != nil || u.NativeAction() != NativeTestReport {
			t.Errorf("%s: %s is not done by the worker itself: %v", j.Key, j.Steps[2].Uses, err)
		}
	}
	for _, s := range []string{"actions/test-report@v1", "gantry/test-reports@v1", "gantry/test-report/x@v1", "./gantry/test-report"} {
		if u, _ := ParseUses(s); u.IsTestReport() {
			t.Errorf("%s is taken for gantry/test-report", s)
		}
	}
}

func TestTestReportStepErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, step, path, msg string
	}{
		{"another version", `{uses: gantry/test-report@v2, with: {junit: a.xml}}`, "jobs.a.steps[1].uses",
			`uses "gantry/test-report@v2": gantry/test-report is Gantry's own action, of version v1: write gantry/test-report@v1`},
		{"a branch", `{uses: gantry/test-report@main, with: {junit: a.xml}}`, "jobs.a.steps[1].uses", "of version v1"},
		{"a directory", `{uses: gantry/test-report/junit@v1, with: {junit: a.xml}}`, "jobs.a.steps[1].uses", "gantry/test-report has no directories"},
		{"if", `{uses: gantry/test-report@v1, if: failure(), with: {junit: a.xml}}`, "jobs.a.steps[1].if",
			"if: does not apply to gantry/test-report: the job's reports are read after all its steps whatever their outcome"},
		{"unknown input", `{uses: gantry/test-report@v1, with: {junit: a.xml, go_test_json: t.json}}`, "jobs.a.steps[1].with.go_test_json",
			`gantry/test-report has no input "go_test_json": it takes junit, go-test-json, tap, fail-on-failure, fail-on-empty; did you mean "go-test-json"?`},
		{"no format", `{uses: gantry/test-report@v1, with: {fail-on-failure: true}}`, "jobs.a.steps[1].with",
			"gantry/test-report needs the paths of at least one format: junit, go-test-json, tap"},
		{"blank paths", `{uses: gantry/test-report@v1, with: {tap: "\n  \n"}}`, "jobs.a.steps[1].with", "needs the paths of at least one format"},
		{"no with", `{uses: gantry/test-report@v1}`, "jobs.a.steps[1].with", "needs the paths of at least one format"},
		{"not a boolean", `{uses: gantry/test-report@v1, with: {tap: t.tap, fail-on-empty: yes}}`, "jobs.a.steps[1].with.fail-on-empty",
			`fail-on-empty is "yes": want true or false`},
		{"outside the workspace", `{uses: gantry/test-report@v1, with: {tap: "a.tap\n../b.tap"}}`, "jobs.a.steps[1].with.tap",
			`report path "../b.tap" must not leave the workspace`},
		{"absolute", `{uses: gantry/test-report@v1, with: {junit: /tmp/a.xml}}`, "jobs.a.steps[1].with.junit", "must be relative to the workspace"},
		{"a secret", `{uses: gantry/test-report@v1, with: {junit: "${{ secrets.DIR }}/a.xml"}}`, "jobs.a.steps[1].with.junit", "secrets.DIR"},
		{"a step's output", `{uses: gantry/test-report@v1, with: {junit: "${{ steps.x.outputs.dir }}/a.xml"}}`, "jobs.a.steps[1].with.junit", "steps.x.outputs.dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := compileErrs(t, "jobs:\n  a:\n    reports: {tap: [x.tap]}\n    steps:\n      - run: x\n      - "+tc.step+"\n")
			for _, e := range errs {
				if e.Path == tc.path && strings.Contains(e.Message, tc.msg) {
					return
				}
			}
			t.Errorf("errors %v, want one at %s saying %q", errs, tc.path, tc.msg)
		})
	}
}
