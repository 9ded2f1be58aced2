package pipeline

import (
	"reflect"
	"strings"
	"testing"
)

// TestWorkflowReporters: a reporter action's step is read as reports, a gantry/test-report
// step, exactly when its inputs say the format and the paths and nothing the worker would
// do otherwise than the action; any other is left to run the action.
func TestWorkflowReporters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, step string
		// with is the gantry/test-report step's inputs; nil when the action runs itself.
		with map[string]string
	}{
		{"mikepenz", "uses: mikepenz/action-junit-report@v5\nif: success() || failure()\nwith:\n  report_paths: |\n    build/TEST-*.xml\n    ./other/**/*.xml\n  check_name: JUnit\n  include_passed: true",
			map[string]string{"junit": "build/TEST-*.xml\nother/**/*.xml"}},
		{"mikepenz failing the job", "uses: mikepenz/action-junit-report@v4\nwith: {report_paths: '${{ github.workspace }}/x/*.xml', fail_on_failure: true}",
			map[string]string{"junit": "x/*.xml", "fail-on-failure": "true"}},
		{"mikepenz failing a job that failed already", "uses: mikepenz/action-junit-report@v4\nif: failure()\nwith: {report_paths: x.xml, fail_on_failure: true}",
			map[string]string{"junit": "x.xml"}},
		{"mikepenz at its default paths", "uses: mikepenz/action-junit-report@v5", nil},
		{"mikepenz requiring tests", "uses: mikepenz/action-junit-report@v5\nwith: {report_paths: x.xml, require_tests: true}", nil},
		{"mikepenz not requiring tests", "uses: mikepenz/action-junit-report@v5\nwith: {report_paths: x.xml, require_tests: false}", map[string]string{"junit": "x.xml"}},
		{"mikepenz forgiving retries", "uses: mikepenz/action-junit-report@v5\nwith: {report_paths: x.xml, check_retries: true, fail_on_failure: true}", nil},
		{"mikepenz with an input of a later version", "uses: mikepenz/action-junit-report@v9\nwith: {report_paths: x.xml, fail_on_flake: true}", nil},
		{"mikepenz with an id", "uses: mikepenz/action-junit-report@v5\nid: junit\nwith: {report_paths: x.xml}", nil},
		{"mikepenz under a condition on the event", "uses: mikepenz/action-junit-report@v5\nif: always() && github.event_name == 'push'\nwith: {report_paths: x.xml}", nil},
		{"mikepenz never run", "uses: mikepenz/action-junit-report@v5\nif: false\nwith: {report_paths: x.xml}", nil},
		{"mikepenz with braces", "uses: mikepenz/action-junit-report@v5\nwith: {report_paths: '**/{unit,it}/*.xml'}", nil},
		{"mikepenz outside the workspace", "uses: mikepenz/action-junit-report@v5\nwith: {report_paths: /tmp/x.xml}", nil},
		{"mikepenz with an expression in a flag", "uses: mikepenz/action-junit-report@v5\nwith: {report_paths: x.xml, fail_on_failure: '${{ matrix.strict }}'}", nil},
		{"dorny", "uses: dorny/test-reporter@v2\nif: ${{ !cancelled() }}\nwith: {name: JEST, path: 'reports/jest-*.xml, reports\\other.xml', reporter: jest-junit, working-directory: web/, path-replace-backslashes: 'true', list-tests: failed}",
			map[string]string{"junit": "web/reports/jest-*.xml\nweb/reports/other.xml", "fail-on-failure": "true", "fail-on-empty": "true"}},
		{"dorny go test", "uses: dorny/test-reporter@v1\nwith: {name: go, path: test.json, reporter: golang-json, fail-on-error: 'false', fail-on-empty: 'false'}",
			map[string]string{"go-test-json": "test.json"}},
		{"dorny with paths a line", "uses: dorny/test-reporter@v2\nwith: {name: x, path: \"a.xml\\nb.xml\", reporter: java-junit}", nil},
		{"dorny mocha", "uses: dorny/test-reporter@v2\nwith: {name: m, path: m.json, reporter: mocha-json}", nil},
		{"dorny without a name", "uses: dorny/test-reporter@v2\nwith: {path: x.xml, reporter: java-junit}", nil},
		{"dorny from an artifact", "uses: dorny/test-reporter@v2\nwith: {name: x, artifact: test-results, path: '*.xml', reporter: java-junit}", nil},
		{"dorny from a directory above", "uses: dorny/test-reporter@v2\nwith: {name: x, path: '*.xml', reporter: java-junit, working-directory: ../x}", nil},
		{"EnricoMi", "uses: EnricoMi/publish-unit-test-result-action@v2\nif: always()\nwith:\n  files: |\n    test-results/**/*.xml\n  junit_files: j.xml\n  action_fail: true\n  comment_mode: off",
			map[string]string{"junit": "j.xml\ntest-results/**/*.xml", "fail-on-failure": "true"}},
		{"EnricoMi on linux", "uses: enricomi/publish-unit-test-result-action/linux@v2\nwith: {files: x.xml, action_fail: 'True', fail_on: nothing}",
			map[string]string{"junit": "x.xml"}},
		{"EnricoMi composite", "uses: EnricoMi/publish-unit-test-result-action/composite@v2\nwith: {junit_files: x.xml}", map[string]string{"junit": "x.xml"}},
		{"EnricoMi failing on errors only", "uses: EnricoMi/publish-unit-test-result-action@v2\nwith: {files: x.xml, action_fail: true, fail_on: errors}", nil},
		{"EnricoMi TRX", "uses: EnricoMi/publish-unit-test-result-action@v2\nwith: {files: x.xml, trx_files: x.trx}", nil},
		{"EnricoMi JSON file", "uses: EnricoMi/publish-unit-test-result-action@v2\nwith: {files: x.xml, json_file: r.json}", nil},
		{"EnricoMi milliseconds", "uses: EnricoMi/publish-unit-test-result-action@v2\nwith: {files: x.xml, time_unit: milliseconds}", nil},
		{"EnricoMi excluding", "uses: EnricoMi/publish-unit-test-result-action@v2\nwith: {files: \"*.xml\\n!skip.xml\"}", nil},
		{"EnricoMi of another directory", "uses: EnricoMi/publish-unit-test-result-action/other@v2\nwith: {files: x.xml}", nil},
		{"upload-artifact of test results", "uses: actions/upload-artifact@v4\nwith: {name: test-results, path: junit.xml}", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			indented := "      - " + strings.ReplaceAll(tc.step, "\n", "\n        ") + "\n"
			p := compileWorkflow(t, "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: make test\n"+indented)
			j := p.Jobs[0]
			st := j.Steps[len(j.Steps)-1]
			if tc.with == nil {
				if st.Uses == TestReportAction+"@v1" || j.Reports != nil {
					t.Fatalf("read as reports: %+v, %+v", st, j.Reports)
				}
				return
			}
			if st.Uses != TestReportAction+"@v1" || st.If == nil || st.If.Source != "always()" {
				t.Fatalf("step %+v, want gantry/test-report under always()", st)
			}
			if !reflect.DeepEqual(st.With, tc.with) {
				t.Errorf("inputs %q, want %q", st.With, tc.with)
			}
			want := &Reports{}
			for _, f := range TestReportPaths(tc.with) {
				for _, p := range f.Paths {
					want.add(f.Format, p)
				}
			}
			if !reflect.DeepEqual(j.Reports, want) {
				t.Errorf("reports %+v, want %+v", j.Reports, want)
			}
			if name, _, _ := strings.Cut(strings.TrimPrefix(tc.step, "uses: "), "\n"); st.Name != "Run "+name {
				t.Errorf("name %q, want it named after the action as GitHub names it", st.Name)
			}
		})
	}
}

// TestWorkflowTestReports: in a workflow, gantry/test-report's inputs read the matrix
// and env as settings decided when the plan is made do; its own name is kept; a
// reporter's path made bad by a matrix value is reported at the workflow's input; and
// gantry/test-report's mistakes are reported at the workflow's lines.
func TestWorkflowTestReports(t *testing.T) {
	t.Parallel()
	p := compileWorkflow(t, `on: push
env: {OUT: out}
jobs:
  a:
    runs-on: ubuntu-latest
    strategy: {matrix: {go: ['1.25', '1.26']}}
    steps:
      - run: go test -json ./... > ${{ env.OUT }}/${{ matrix.go }}.json
      - name: keep ${{ matrix.go }}
        uses: gantry/test-report@v1
        with: {go-test-json: "${{ env.OUT }}/${{ matrix.go }}.json"}
      - name: Publish
        uses: mikepenz/action-junit-report@v5
        with: {report_paths: "junit-${{ matrix.go }}.xml"}
`)
	for _, j := range p.Jobs {
		goVersion := j.Matrix[0].Value
		want := &Reports{JUnit: []string{"junit-" + goVersion + ".xml"}, GoTestJSON: []string{"out/" + goVersion + ".json"}}
		if !reflect.DeepEqual(j.Reports, want) || j.Steps[1].Name != "keep "+goVersion || j.Steps[2].Name != "Publish" {
			t.Errorf("%s: reports %+v, steps %q and %q", j.Key, j.Reports, j.Steps[1].Name, j.Steps[2].Name)
		}
	}

	for _, tc := range []struct {
		name, steps, path, msg string
		line                   int
	}{
		{"a matrix value leaving the workspace", `
      - uses: mikepenz/action-junit-report@v5
        with: {report_paths: "${{ matrix.d }}/x.xml"}`, "jobs.a.steps[1].with.report_paths", `report path "../x.xml" must not leave the workspace`, 9},
		{"a step's output in gantry/test-report", `
      - id: d
        run: echo dir=x >> "$GITHUB_OUTPUT"
      - uses: gantry/test-report@v1
        with:
          junit: ${{ steps.d.outputs.dir }}/x.xml`, "jobs.a.steps[2].with.junit", "steps.d.outputs.dir is known only when the step runs", 12},
		{"an unknown input after a checkout Gantry does itself", `
      - uses: actions/checkout@v4
      - uses: gantry/test-report@v1
        with: {junit: x.xml, reporter: java-junit}`, "jobs.a.steps[2].with.reporter", `gantry/test-report has no input "reporter"`, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := compileErrs(t, "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    strategy: {matrix: {d: [a, ..]}}\n    steps:\n      - run: make"+tc.steps+"\n")
			for _, e := range errs {
				if e.Path == tc.path && strings.Contains(e.Message, tc.msg) && e.Line == tc.line {
					return
				}
			}
			t.Errorf("errors %v, want one at %s, line %d, saying %q", errs, tc.path, tc.line, tc.msg)
		})
	}
}

func TestStatusCondition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src           string
		onSuccess, ok bool
	}{
		{"always()", true, true},
		{"${{ !cancelled() }}", true, true},
		{"success() || failure()", true, true},
		{"${{ failure() }}", false, true},
		{"true", true, true},
		{"cancelled()", false, false},
		{"false", false, false},
		{"always() && github.ref == 'refs/heads/main'", false, false},
		{"matrix.os == 'linux'", false, false},
		{"hashFiles('x') != ''", false, false},
		{"${{ always() }} && x", false, false},
		{"always(", false, false},
	} {
		onSuccess, ok := statusCondition(tc.src)
		if onSuccess != tc.onSuccess || ok != tc.ok {
			t.Errorf("statusCondition(%q) = %v, %v; want %v, %v", tc.src, onSuccess, ok, tc.onSuccess, tc.ok)
		}
	}
}
