package pipeline

import (
	"path"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gantry-ci/gantry/internal/ghaexpr"
	"github.com/gantry-ci/gantry/internal/lazyre"
)

// Test reports in workflows. A step of gantry/test-report names its job's reports
// (TestReportAction); a step of a reporter action whose inputs say the format and the
// paths of its reports, and nothing Gantry would have to guess or could not do as the
// action does, becomes such a step instead of fetching the action from GitHub. Any other
// use of a reporter (an input Gantry does not know, a format it does not read, reports
// taken from another run's artifact, outputs a later step may read) runs the action as
// any action runs: GitHub's check runs and comments are the action's to make.
// actions/upload-artifact is never read as reports, whatever its artifact is called.

// testReport translates a gantry/test-report step: its inputs are paths known when the
// plan is made, so expressions in them may read matrix and env values only.
func (t *ghaTranslator) testReport(j *ghaJob, st *ghaStep, r *yaml.Node, u field, v string, with, name, cond *field) *yaml.Node {
	return t.actionAs(j, st, r, u, v, with, name, cond, ghaPlanTime)
}

// reporterReports is what a reporter action's inputs say of its reports.
type reporterReports struct {
	// paths are the paths or globs of each format, as written, with the input each
	// came from.
	paths map[string][]reporterPath
	// failOnFailure and failOnEmpty are the action's inputs that fail its step when a
	// test failed or no report was found.
	failOnFailure, failOnEmpty bool
}

type reporterPath struct {
	v  string
	in field
}

// reporterInputs reads the inputs of one reporter action; false when the step must run
// the action itself.
type reporterInputs func(args map[string]field, d *decoder) (reporterReports, bool)

// reporters are the reporter actions read as reports, by actionName.
var reporters = map[string]reporterInputs{
	"mikepenz/action-junit-report":                          mikepenzReports,
	"dorny/test-reporter":                                   dornyReports,
	"enricomi/publish-unit-test-result-action":              enricoReports,
	"enricomi/publish-unit-test-result-action/composite":    enricoReports,
	"enricomi/publish-unit-test-result-action/docker":       enricoReports,
	"enricomi/publish-unit-test-result-action/linux":        enricoReports,
	"enricomi/publish-unit-test-result-action/macos":        enricoReports,
	"enricomi/publish-unit-test-result-action/windows":      enricoReports,
	"enricomi/publish-unit-test-result-action/windows/bash": enricoReports,
}

// reporter translates a step of a reporter action into a gantry/test-report step, or
// returns nil when that would not be faithful: the step has an id (a later step may read
// the outputs the action sets, which Gantry does not), an if: that reads more than the
// job's status, or inputs reporterInputs does not read as reports. Its if: is dropped:
// the job's reports are read whatever the outcome of its steps. The action's inputs
// that fail its step on a failed test or on no report become gantry/test-report's, for
// a step that runs when every step before it succeeded (on GitHub it fails a job that
// has failed already otherwise, which changes nothing).
func (t *ghaTranslator) reporter(j *ghaJob, st *ghaStep, r *yaml.Node, u field, v string, args map[string]field, name, cond *field) *yaml.Node {
	d := t.d
	read, ok := reporters[actionName(v)]
	if !ok || mappingValue(r, "id") != nil {
		return nil
	}
	onSuccess := true
	if cond != nil {
		c := d.resolve(cond.val)
		if c == nil || c.Kind != yaml.ScalarNode {
			return nil
		}
		if onSuccess, ok = statusCondition(c.Value); !ok {
			return nil
		}
	}
	rep, ok := read(args, d)
	if !ok {
		return nil
	}
	var out *yaml.Node
	var renames [][2]string
	if !t.tried(func() { out, renames = t.reporterStep(j, st, r, u, v, rep, name, onSuccess) }) || out == nil {
		return nil
	}
	t.pendingRenames = append(t.pendingRenames, renames...)
	return out
}

// reporterStep writes the gantry/test-report step of a reporter's step, with the
// renames of its inputs (a path of the step to the workflow's path); nil when a path is
// not one Gantry reads as the action does.
func (t *ghaTranslator) reporterStep(j *ghaJob, st *ghaStep, r *yaml.Node, u field, v string, rep reporterReports, name *field, onSuccess bool) (*yaml.Node, [][2]string) {
	d := t.d
	out := gMap(r)
	if name != nil {
		if s, ok := d.str(name.val, name.path, "a step name"); ok {
			put(out, "name", name.keyNode, gStr(t.text(s, d.resolve(name.val), name.path, j, st, ghaStepName), d.resolve(name.val)))
		}
	} else {
		// Named as GitHub names it, not after the action that does its work here.
		put(out, "name", u.keyNode, gStr("Run "+v, d.resolve(u.val)))
	}
	put(out, "uses", u.keyNode, gStr(TestReportAction+"@v1", d.resolve(u.val)))
	w := gMap(r)
	var renames [][2]string
	for _, format := range reportFormats {
		ps := rep.paths[format]
		if len(ps) == 0 {
			continue
		}
		var lines []string
		for _, p := range ps {
			s, ok := reporterPathText(p.v)
			if !ok {
				return nil, nil
			}
			s = t.text(s, d.resolve(p.in.val), p.in.path, j, st, ghaPlanTime)
			if !strings.Contains(s, "${{") && checkArtifactPath(s) != "" {
				// Outside the workspace (an absolute path, ..): the action reads it, Gantry's
				// reports do not.
				return nil, nil
			}
			lines = append(lines, s)
		}
		first := ps[0].in
		put(w, format, first.keyNode, gStr(strings.Join(lines, "\n"), d.resolve(first.val)))
		renames = append(renames, [2]string{".with." + format, first.path})
	}
	if len(w.Content) == 0 {
		return nil, nil
	}
	if rep.failOnFailure && onSuccess {
		put(w, TestReportFailOnFailure, u.keyNode, gStr("true", d.resolve(u.val)))
	}
	if rep.failOnEmpty && onSuccess {
		put(w, TestReportFailOnEmpty, u.keyNode, gStr("true", d.resolve(u.val)))
	}
	put(out, "with", u.keyNode, w)
	return out, renames
}

// workspacePrefix is ${{ github.workspace }}/ at the start of a path: the workspace,
// which Gantry's report paths are relative to.
var workspacePrefix = lazyre.New(`^\$\{\{\s*github\.workspace\s*\}\}/+`)

// extglob matches the parts of a glob that the reporters' glob libraries read and
// Gantry's paths would take as plain text: braces, extended globs and negation.
var extglob = lazyre.New(`[{}]|[?*+@!]\(|^!`)

// exprText matches the ${{ }} in a text.
var exprText = lazyre.New(`\$\{\{.*?\}\}`)

// reporterPathText is a reporter's path as a report path of Gantry's, before its
// expressions are translated; false when Gantry would read it otherwise than the action.
func reporterPathText(p string) (string, bool) {
	p = workspacePrefix.ReplaceAllString(strings.TrimSpace(p), "")
	if p == "" || extglob.MatchString(exprText.ReplaceAllString(p, "")) {
		return "", false
	}
	return strings.TrimPrefix(p, "./"), true
}

// statusCondition reads an if: that tests nothing but the job's status (the status
// functions, literals and operators: always(), !cancelled(), success() || failure())
// and reports whether it holds when every step before it succeeded. ok is false for
// one that reads anything else, cannot be evaluated, or holds neither after success nor
// after a failure (the step never runs on GitHub).
func statusCondition(src string) (onSuccess, ok bool) {
	text := strings.TrimSpace(src)
	if strings.HasPrefix(text, "${{") && strings.HasSuffix(text, "}}") && strings.Count(text, "${{") == 1 {
		text = strings.TrimSpace(text[3 : len(text)-2])
	}
	if text == "" || strings.Contains(text, "${{") {
		return false, false
	}
	n, err := ghaexpr.Parse(text)
	if err != nil || len(ghaexpr.Refs(n)) > 0 {
		return false, false
	}
	holds := func(status string) (bool, error) {
		return ghaexpr.Condition(text, &ghaexpr.Context{Status: func(name string) bool { return name == "always" || name == status }})
	}
	onSuccess, err = holds("success")
	if err != nil {
		return false, false
	}
	onFailure, err := holds("failure")
	if err != nil || !onSuccess && !onFailure {
		return false, false
	}
	return onSuccess, true
}

// reporterArgs reads a reporter's inputs as written.
type reporterArgs struct {
	args map[string]field
	d    *decoder
}

// value is an input's text; ok is false for one that is not text.
func (a reporterArgs) value(key string) (v string, given, ok bool) {
	f, given := a.args[key]
	if !given {
		return "", false, true
	}
	n := a.d.resolve(f.val)
	if n == nil || n.Kind != yaml.ScalarNode {
		return "", true, false
	}
	if n.Tag == "!!null" {
		return "", false, true
	}
	return n.Value, true, true
}

// flag reads a boolean input as the action does: "true" is true, in any case when fold
// is set; def when not given. ok is false for an expression, decided when the step runs.
func (a reporterArgs) flag(key string, def, fold bool) (bool, bool) {
	v, given, ok := a.value(key)
	switch {
	case !ok || strings.Contains(v, "${{"):
		return false, false
	case !given:
		return def, true
	case fold:
		return strings.EqualFold(strings.TrimSpace(v), "true"), true
	}
	return v == "true", true
}

// known reports whether every input given is one the action ignores (in Gantry's
// eyes) or one that reads: an input Gantry does not know (a later version's) may change
// what the action does.
func (a reporterArgs) known(ignored, read []string) bool {
	for k := range a.args {
		if !contains(ignored, k) && !contains(read, k) {
			return false
		}
	}
	return true
}

// paths splits an input into paths at sep, with the input they came from.
func (a reporterArgs) paths(key, sep string) ([]reporterPath, bool) {
	v, given, ok := a.value(key)
	if !ok || !given {
		return nil, ok
	}
	var out []reporterPath
	for _, p := range strings.Split(v, sep) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, reporterPath{v: p, in: a.args[key]})
		}
	}
	return out, true
}

// mikepenzInputs are mikepenz/action-junit-report's inputs that shape only what it
// publishes on GitHub (check runs, annotations, summaries, comments).
var mikepenzInputs = []string{"token", "github_token", "group_reports", "test_files_prefix", "exclude_sources", "annotate_only",
	"check_annotations", "update_check", "check_name", "commit", "include_passed", "include_skipped", "check_title_template",
	"bread_crumb_delimiter", "summary", "transformers", "job_summary", "job_summary_text", "detailed_summary", "flaky_summary",
	"verbose_summary", "skip_success_summary", "include_empty_in_summary", "include_time_in_summary", "simplified_summary",
	"group_suite", "comment", "updateComment", "annotate_notice", "follow_symlink", "job_name", "annotations_limit",
	"skip_annotations", "truncate_stack_traces", "resolve_ignore_classname", "skip_comment_without_tests", "pr_id", "suite_regex"}

// mikepenzReports: report_paths, a glob a line, of JUnit XML; fail_on_failure. Its
// other ways to fail (fail_on_parse_error, require_tests, require_passed_tests) and
// check_retries with fail_on_failure (a retried test's first failure forgiven) run
// the action.
func mikepenzReports(args map[string]field, d *decoder) (reporterReports, bool) {
	a := reporterArgs{args, d}
	if !a.known(mikepenzInputs, []string{"report_paths", "fail_on_failure", "fail_on_parse_error", "require_tests", "require_passed_tests", "check_retries"}) {
		return reporterReports{}, false
	}
	paths, ok := a.paths("report_paths", "\n")
	if !ok || len(paths) == 0 {
		// Its default, **/junit-reports/TEST-*.xml, is a guess of the action's.
		return reporterReports{}, false
	}
	fail, ok := a.flag("fail_on_failure", false, false)
	if !ok {
		return reporterReports{}, false
	}
	for _, k := range []string{"fail_on_parse_error", "require_tests", "require_passed_tests"} {
		if on, ok := a.flag(k, false, false); !ok || on {
			return reporterReports{}, false
		}
	}
	if retries, ok := a.flag("check_retries", false, false); !ok || retries && fail {
		return reporterReports{}, false
	}
	return reporterReports{paths: map[string][]reporterPath{ReportJUnit: paths}, failOnFailure: fail}, true
}

// dornyFormats are dorny/test-reporter's reporters whose files Gantry reads: its JUnit
// XML ones (each parsed by its java-junit parser or one alike) and go test -json.
var dornyFormats = map[string]string{
	"java-junit": ReportJUnit, "jest-junit": ReportJUnit, "phpunit-junit": ReportJUnit, "python-xunit": ReportJUnit,
	"swift-xunit": ReportJUnit, "tester-junit": ReportJUnit, "golang-json": ReportGoTestJSON,
}

// dornyInputs are dorny/test-reporter's inputs that shape only what it publishes.
var dornyInputs = []string{"name", "list-suites", "list-tests", "list-files", "max-annotations", "report-title", "only-summary",
	"use-actions-summary", "badge-title", "collapsed", "token"}

// dornyReports: path, comma-separated globs (path-replace-backslashes and
// working-directory as the action reads them), of a reporter in dornyFormats;
// fail-on-error and fail-on-empty, both on unless turned off. Reports read from an
// artifact (artifact:) run the action.
func dornyReports(args map[string]field, d *decoder) (reporterReports, bool) {
	a := reporterArgs{args, d}
	if !a.known(dornyInputs, []string{"path", "reporter", "path-replace-backslashes", "working-directory", "fail-on-error", "fail-on-empty", "artifact"}) {
		return reporterReports{}, false
	}
	if v, given, ok := a.value("artifact"); !ok || given && v != "" {
		return reporterReports{}, false
	}
	reporter, _, ok := a.value("reporter")
	format := dornyFormats[strings.TrimSpace(reporter)]
	if _, named, _ := a.value("name"); !ok || format == "" || !named {
		// name and reporter are required: without them the action fails.
		return reporterReports{}, false
	}
	paths, ok := a.paths("path", ",")
	if !ok || len(paths) == 0 {
		return reporterReports{}, false
	}
	for _, p := range paths {
		if strings.Contains(p.v, "\n") {
			// The action splits at commas only: a line break is part of a glob.
			return reporterReports{}, false
		}
	}
	backslashes, ok := a.flag("path-replace-backslashes", false, false)
	if !ok {
		return reporterReports{}, false
	}
	dir, _, ok := a.value("working-directory")
	dir = strings.TrimSpace(dir)
	if !ok || strings.Contains(dir, "${{") || dir != "" && (checkArtifactPath(dir) != "" || extglob.MatchString(dir)) {
		return reporterReports{}, false
	}
	for i := range paths {
		if backslashes {
			paths[i].v = strings.ReplaceAll(paths[i].v, `\`, "/")
		}
		if dir != "" && dir != "." {
			paths[i].v = path.Clean(dir) + "/" + strings.TrimPrefix(paths[i].v, "./")
		}
	}
	failOnError, ok1 := a.flag("fail-on-error", true, false)
	failOnEmpty, ok2 := a.flag("fail-on-empty", true, false)
	if !ok1 || !ok2 {
		return reporterReports{}, false
	}
	return reporterReports{paths: map[string][]reporterPath{format: paths}, failOnFailure: failOnError, failOnEmpty: failOnEmpty}, true
}

// enricoInputs are EnricoMi/publish-unit-test-result-action's inputs that shape only
// what it publishes.
var enricoInputs = []string{"github_token", "github_token_actor", "github_retries", "ssl_verify", "commit", "check_name",
	"comment_title", "comment_mode", "test_file_prefix", "report_individual_runs", "report_suite_logs",
	"deduplicate_classes_by_file_name", "large_files", "ignore_runs", "check_run", "job_summary", "compare_to_earlier_commit",
	"pull_request_build", "event_file", "event_name", "test_changes_limit", "check_run_annotations",
	"check_run_annotations_branch", "seconds_between_github_reads", "seconds_between_github_writes",
	"secondary_rate_limit_wait_seconds", "json_thousands_separator", "json_suite_details", "json_test_case_results",
	"search_pull_requests"}

// enricoReports: junit_files and files, a glob a line, read as JUnit XML (files may
// also hold NUnit, xUnit, TRX or JSON results, which the action tells apart and Gantry
// does not read: the job warns of each such file); action_fail with fail_on "test
// failures" (its default). nunit_files, xunit_files and trx_files, which name formats
// Gantry does not read, json_file (a file a later step may read), time_unit other than
// seconds, action_fail_on_inconclusive and fail_on "errors" with action_fail run the
// action.
func enricoReports(args map[string]field, d *decoder) (reporterReports, bool) {
	a := reporterArgs{args, d}
	if !a.known(enricoInputs, []string{"files", "junit_files", "fail_on", "action_fail", "action_fail_on_inconclusive", "time_unit",
		"nunit_files", "xunit_files", "trx_files", "json_file"}) {
		return reporterReports{}, false
	}
	for _, k := range []string{"nunit_files", "xunit_files", "trx_files", "json_file"} {
		if v, given, ok := a.value(k); !ok || given && strings.TrimSpace(v) != "" {
			return reporterReports{}, false
		}
	}
	if v, given, ok := a.value("time_unit"); !ok || given && !strings.EqualFold(strings.TrimSpace(v), "seconds") {
		return reporterReports{}, false
	}
	var paths []reporterPath
	for _, k := range []string{"junit_files", "files"} {
		ps, ok := a.paths(k, "\n")
		if !ok {
			return reporterReports{}, false
		}
		paths = append(paths, ps...)
	}
	if len(paths) == 0 {
		return reporterReports{}, false
	}
	fail, ok := a.flag("action_fail", false, true)
	if !ok {
		return reporterReports{}, false
	}
	if inconclusive, ok := a.flag("action_fail_on_inconclusive", false, true); !ok || inconclusive {
		return reporterReports{}, false
	}
	if fail {
		on, _, ok := a.value("fail_on")
		switch on = strings.ToLower(strings.TrimSpace(on)); {
		case !ok:
			return reporterReports{}, false
		case on == "nothing":
			fail = false
		case on != "" && on != "test failures":
			return reporterReports{}, false
		}
	}
	return reporterReports{paths: map[string][]reporterPath{ReportJUnit: paths}, failOnFailure: fail}, true
}
