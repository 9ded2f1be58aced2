package pipeline

import (
	"strings"

	"github.com/gantry-ci/gantry/internal/lazyre"
)

// TestReportAction is Gantry's own action for naming a job's test reports from a step,
// in a workflow or in Gantry's language: uses: gantry/test-report@v1 with the paths of
// each format as inputs (junit, go-test-json, tap: paths or globs in the workspace, one
// a line). They join the job's Reports, read after all its steps whatever their
// outcome, as those of its reports: key are: the job's reports are known when the plan
// is made, so the step takes no if:. The step itself runs whatever the outcome of the
// steps before it; it says in the log what it named and, with fail-on-failure or
// fail-on-empty, checks the reports as they are where it stands, as the reporter actions
// of GitHub workflows do (gha_reports.go).
const TestReportAction = "gantry/test-report"

// Inputs of gantry/test-report besides one for each format (ReportJUnit,
// ReportGoTestJSON, ReportTAP), both "true" or "false" (the default).
const (
	// TestReportFailOnFailure fails the step when, every step before it having
	// succeeded, its reports hold a failed or errored test.
	TestReportFailOnFailure = "fail-on-failure"
	// TestReportFailOnEmpty fails the step when, every step before it having
	// succeeded, its paths match no file.
	TestReportFailOnEmpty = "fail-on-empty"
)

// testReportInputs are the inputs gantry/test-report takes.
var testReportInputs = []string{ReportJUnit, ReportGoTestJSON, ReportTAP, TestReportFailOnFailure, TestReportFailOnEmpty}

// testReportRef matches the refs gantry/test-report is known by: its inputs are a
// contract of Gantry's, versioned v1 (v1.2 and v1.2.3 name the same), and a later
// version may change them, so no other ref is taken for this one.
var testReportRef = lazyre.New(`^v1(\.[0-9]+){0,2}$`)

// IsTestReport reports whether u names gantry/test-report, at any ref (the compiler
// refuses refs other than v1's). Names are case-insensitive, as GitHub's are.
func (u Uses) IsTestReport() bool {
	return u.Kind == UsesRepository && u.Dir == "" && isTestReportRepo(u)
}

func isTestReportRepo(u Uses) bool {
	return u.Kind == UsesRepository && strings.EqualFold(u.Owner, "gantry") && strings.EqualFold(u.Repo, "test-report")
}

// TestReportPaths reads a gantry/test-report step's inputs as the paths of each format
// they name, in the order of Reports.ByFormat; nil when they name none.
func TestReportPaths(with map[string]string) []ReportPaths {
	r := &Reports{JUnit: reportLines(with[ReportJUnit]), GoTestJSON: reportLines(with[ReportGoTestJSON]), TAP: reportLines(with[ReportTAP])}
	return r.ByFormat()
}

// reportLines reads an input of paths: one a line, blank lines and the spaces around
// each dropped, as actions read a multi-line input.
func reportLines(v string) []string {
	var out []string
	for _, line := range strings.Split(v, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// testReportStep checks a step that uses gantry/test-report, when the definition is
// read, and marks it; its paths are checked when the plan is made, after the matrix and
// env values are put in (buildJob).
func (d *decoder) testReportStep(st *stepSpec) {
	u, err := ParseUses(st.uses.v)
	if err != nil || !isTestReportRepo(u) {
		return
	}
	if u.Dir != "" {
		d.add(ErrInvalid, st.uses.node, st.uses.path, "uses %q: gantry/test-report has no directories; write gantry/test-report@v1", st.uses.v)
		return
	}
	st.testReport = true
	if !testReportRef.MatchString(u.Ref) {
		d.add(ErrInvalid, st.uses.node, st.uses.path, "uses %q: gantry/test-report is Gantry's own action, of version v1: write gantry/test-report@v1", st.uses.v)
	}
	if st.cond.node != nil {
		d.add(ErrInvalid, st.cond.node, st.cond.path, "if: does not apply to gantry/test-report: the job's reports are read after all its steps whatever their outcome, "+
			"and so this step runs whatever their outcome too; a report the job did not write is only a line in its log")
	}
	formats := 0
	for _, in := range st.with {
		switch in.name {
		case ReportJUnit, ReportGoTestJSON, ReportTAP:
			if len(reportLines(in.value.v)) > 0 {
				formats++
			}
		case TestReportFailOnFailure, TestReportFailOnEmpty:
			if v := in.value.v; !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
				d.add(ErrInvalid, in.value.node, in.value.path, "%s is %q: want true or false", in.name, v)
			}
		default:
			d.add(ErrInvalid, in.value.node, in.value.path, "gantry/test-report has no input %q: it takes %s%s",
				in.name, strings.Join(testReportInputs, ", "), suggest(in.name, testReportInputs))
		}
	}
	if formats == 0 {
		d.add(ErrRequired, st.uses.node, st.path+".with", "gantry/test-report needs the paths of at least one format: %s, one a line", strings.Join(reportFormats, ", "))
	}
}

// compileTestReportStep puts the matrix and env values into a gantry/test-report step's
// inputs (its paths must be known when the plan is made, as a reports: key's are) and
// adds its paths to the job's reports.
func (d *decoder) compileTestReportStep(job *Job, step *Step, st stepSpec, in []MatrixValue, env map[string]string) {
	step.With = make(map[string]string, len(st.with))
	for _, v := range st.with {
		s := d.substitute(v.value, in, env)
		step.With[v.name] = s
		if !contains(reportFormats, v.name) {
			continue
		}
		for _, p := range reportLines(s) {
			if msg := checkArtifactPath(p); msg != "" {
				d.add(ErrInvalid, v.value.node, v.value.path, "report path %q %s", p, msg)
				continue
			}
			if job.Reports == nil {
				job.Reports = &Reports{}
			}
			job.Reports.add(v.name, p)
		}
	}
}

// add adds path to the paths of format, unless it is there already.
func (r *Reports) add(format, path string) {
	list := map[string]*[]string{ReportJUnit: &r.JUnit, ReportGoTestJSON: &r.GoTestJSON, ReportTAP: &r.TAP}[format]
	if list != nil && !contains(*list, path) {
		*list = append(*list, path)
	}
}
