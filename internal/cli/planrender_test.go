package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// releasePlan is built by hand so the renderers are tested without the compiler: a
// six-instance matrix fanned into one job, a conditional critical deploy, and keys that
// need escaping in DOT.
func releasePlan() *pipeline.Plan {
	job := func(key, name string, wave int, needs ...string) *pipeline.Job {
		return &pipeline.Job{
			Key: key, Name: name, Wave: wave, Needs: needs,
			Priority: pipeline.PriorityNormal,
			Timeout:  pipeline.Duration(30 * time.Minute),
			Steps:    []pipeline.Step{{Index: 0, Name: "run", Run: "make " + name, Shell: "bash"}},
		}
	}
	var tests []string
	p := &pipeline.Plan{Name: "release", Stages: []string{"build", "test", "deploy"}}
	lint := job("lint", "lint", 0)
	lint.Stage = "build"
	lint.RunsOn = []string{"linux", "amd64"}
	p.Jobs = append(p.Jobs, lint)
	for _, v := range []string{"1.25", "1.26"} {
		for shard := 1; shard <= 3; shard++ {
			key := fmt.Sprintf("test (go=%s, shard=%d)", v, shard)
			j := job(key, "test", 0)
			j.Stage = "test"
			j.Matrix = []pipeline.MatrixValue{{Name: "go", Value: v}, {Name: "shard", Value: fmt.Sprint(shard)}}
			j.RunsOn = []string{"linux", "amd64"}
			p.Jobs = append(p.Jobs, j)
			tests = append(tests, key)
		}
	}
	smoke := job(`smoke "quick" \ fast`, `smoke "quick" \ fast`, 0)
	p.Jobs = append(p.Jobs, smoke)

	build := job("build", "build", 1, append([]string{"lint"}, tests...)...)
	build.ContinueOnError = true
	p.Jobs = append(p.Jobs, build)

	// A job needing only four instances of a matrix lists them: not enough to collapse.
	few := job("report", "report", 1, tests[:4]...)
	few.Priority = pipeline.PriorityLow
	p.Jobs = append(p.Jobs, few)

	pkg := job("package", "package", 2, "build", `smoke "quick" \ fast`)
	p.Jobs = append(p.Jobs, pkg)

	deploy := job("deploy", "deploy", 3, "package")
	deploy.If = &pipeline.Condition{Source: `branch == "main" && success()`}
	deploy.Priority = pipeline.PriorityCritical
	deploy.Concurrency = &pipeline.Concurrency{Group: "production"}
	p.Jobs = append(p.Jobs, deploy)

	p.Waves = [][]string{
		append(append([]string{"lint"}, tests...), `smoke "quick" \ fast`),
		{"build", "report"},
		{"package"},
		{"deploy"},
	}
	return p
}

func TestWritePlanText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		plan *pipeline.Plan
		want string
	}{
		{
			name: "release",
			plan: releasePlan(),
			want: `release: 12 jobs in 4 waves
wave 1:
  lint  [runs_on: linux, amd64]
  test (go=1.25, shard=1)  [runs_on: linux, amd64]
  test (go=1.25, shard=2)  [runs_on: linux, amd64]
  test (go=1.25, shard=3)  [runs_on: linux, amd64]
  test (go=1.26, shard=1)  [runs_on: linux, amd64]
  test (go=1.26, shard=2)  [runs_on: linux, amd64]
  test (go=1.26, shard=3)  [runs_on: linux, amd64]
  smoke "quick" \ fast
wave 2:
  build  <- needs: lint, test ×6  [continue_on_error]
  report  <- needs: test (go=1.25, shard=1), test (go=1.25, shard=2), test (go=1.25, shard=3), test (go=1.26, shard=1)  [priority: low]
wave 3:
  package  <- needs: build, smoke "quick" \ fast
wave 4:
  deploy  <- needs: package  [if: branch == "main" && success()]  [priority: critical]  [concurrency: production]
`,
		},
		{
			name: "single job, no name",
			plan: &pipeline.Plan{
				Jobs:  []*pipeline.Job{{Key: "only", Name: "only"}},
				Waves: [][]string{{"only"}},
			},
			want: "pipeline: 1 job in 1 wave\nwave 1:\n  only\n",
		},
		{
			name: "empty",
			plan: &pipeline.Plan{Name: "nothing"},
			want: "nothing: 0 jobs in 0 waves\n",
		},
		{
			name: "triggers",
			plan: &pipeline.Plan{
				Name: "ci",
				On: &pipeline.Triggers{
					Push:        &pipeline.PushTrigger{BranchesIgnore: []string{"wip/**"}, Tags: []string{"v*"}, Paths: []string{"src/**", "go.mod"}},
					PullRequest: &pipeline.PullRequestTrigger{Types: []string{"opened"}, Branches: []string{"main"}, PathsIgnore: []string{"docs/**"}},
					Schedule: []pipeline.Schedule{
						{Cron: "@daily", Missed: pipeline.MissedSkip},
						{Cron: "0 3 * * 1-5", Timezone: "Europe/Berlin", Missed: pipeline.MissedRunOnce},
					},
					Dispatch: &pipeline.DispatchTrigger{Inputs: []pipeline.Input{{Name: "env", Type: pipeline.InputChoice, Required: true}, {Name: "n", Type: pipeline.InputNumber}}},
					WorkflowRun: &pipeline.WorkflowRunTrigger{Workflows: []string{"build", "Build Docs"}, Types: []string{"completed"},
						BranchesIgnore: []string{"wip/**"}},
				},
				Jobs:  []*pipeline.Job{{Key: "only", Name: "only"}},
				Waves: [][]string{{"only"}},
			},
			want: `ci: 1 job in 1 wave
on:
  push  [branches_ignore: wip/**]  [tags: v*]  [paths: src/**, go.mod]
  pull_request  [types: opened]  [branches: main]  [paths_ignore: docs/**]
  schedule  [cron: @daily]
  schedule  [cron: 0 3 * * 1-5]  [timezone: Europe/Berlin]  [missed: run_once]
  dispatch  [inputs: env (choice, required), n (number)]
  workflow_run  [workflows: build, Build Docs]  [types: completed]  [branches_ignore: wip/**]
wave 1:
  only
`,
		},
		{
			name: "dispatch without inputs",
			plan: &pipeline.Plan{Name: "manual", On: &pipeline.Triggers{Dispatch: &pipeline.DispatchTrigger{}}},
			want: "manual: 0 jobs in 0 waves\non:\n  dispatch\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b strings.Builder
			if err := writePlanText(&b, tt.plan); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}

func TestSummarizeNeeds(t *testing.T) {
	t.Parallel()
	jobs := map[string]*pipeline.Job{}
	for i := 1; i <= 6; i++ {
		k := fmt.Sprintf("t (n=%d)", i)
		jobs[k] = &pipeline.Job{Key: k, Name: "t"}
	}
	jobs["u (x=1)"] = &pipeline.Job{Key: "u (x=1)", Name: "u"}
	tests := []struct {
		needs []string
		want  string
	}{
		{nil, ""},
		{[]string{"a", "b"}, "a, b"},
		{[]string{"t (n=1)", "t (n=2)", "t (n=3)", "t (n=4)"}, "t (n=1), t (n=2), t (n=3), t (n=4)"},
		{[]string{"t (n=1)", "t (n=2)", "t (n=3)", "t (n=4)", "t (n=5)"}, "t ×5"},
		// The collapsed group stands where its first key stood.
		{[]string{"a", "t (n=1)", "u (x=1)", "t (n=2)", "t (n=3)", "t (n=4)", "t (n=5)", "t (n=6)"}, "a, t ×6, u (x=1)"},
		// Keys the plan does not know are their own base name.
		{[]string{"x", "x", "x", "x", "x"}, "x ×5"},
	}
	for _, tt := range tests {
		if got := summarizeNeeds(tt.needs, jobs); got != tt.want {
			t.Errorf("summarizeNeeds(%q) = %q, want %q", tt.needs, got, tt.want)
		}
	}
}

func TestWritePlanDot(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	if err := writePlanDot(&b, releasePlan()); err != nil {
		t.Fatal(err)
	}
	want := `digraph "release" {
  rankdir=LR;
  node [shape=box];
  // wave 1
  {rank=same; "lint"; "test (go=1.25, shard=1)"; "test (go=1.25, shard=2)"; "test (go=1.25, shard=3)"; "test (go=1.26, shard=1)"; "test (go=1.26, shard=2)"; "test (go=1.26, shard=3)"; "smoke \"quick\" \\ fast";}
  // wave 2
  {rank=same; "build"; "report";}
  // wave 3
  {rank=same; "package";}
  // wave 4
  {rank=same; "deploy";}
  "lint" -> "build";
  "test (go=1.25, shard=1)" -> "build";
  "test (go=1.25, shard=2)" -> "build";
  "test (go=1.25, shard=3)" -> "build";
  "test (go=1.26, shard=1)" -> "build";
  "test (go=1.26, shard=2)" -> "build";
  "test (go=1.26, shard=3)" -> "build";
  "test (go=1.25, shard=1)" -> "report";
  "test (go=1.25, shard=2)" -> "report";
  "test (go=1.25, shard=3)" -> "report";
  "test (go=1.26, shard=1)" -> "report";
  "build" -> "package";
  "smoke \"quick\" \\ fast" -> "package";
  "package" -> "deploy";
}
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestWritePlanDotDrawsJobsMissingFromWaves(t *testing.T) {
	t.Parallel()
	p := &pipeline.Plan{
		Name:  "odd\nname",
		Jobs:  []*pipeline.Job{{Key: "a"}, {Key: "b", Needs: []string{"a"}}},
		Waves: [][]string{{"a"}},
	}
	var b strings.Builder
	if err := writePlanDot(&b, p); err != nil {
		t.Fatal(err)
	}
	want := "digraph \"odd\\nname\" {\n  rankdir=LR;\n  node [shape=box];\n  // wave 1\n  {rank=same; \"a\";}\n  \"b\";\n  \"a\" -> \"b\";\n}\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
}

func TestDotQuote(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"plain":         `"plain"`,
		`say "hi"`:      `"say \"hi\""`,
		`back\slash`:    `"back\\slash"`,
		"two\nlines":    `"two\nlines"`,
		"test (go=1.2)": `"test (go=1.2)"`,
		"":              `""`,
	}
	for in, want := range tests {
		if got := dotQuote(in); got != want {
			t.Errorf("dotQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestPlanJSON checks the JSON output is the plan itself, indented.
func TestPlanJSON(t *testing.T) {
	t.Parallel()
	p := releasePlan()
	var b strings.Builder
	if err := writeJSON(&b, p); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.HasPrefix(out, "{\n  \"name\": \"release\",\n") || !strings.HasSuffix(out, "}\n") {
		t.Errorf("not indented JSON of the plan:\n%s", out)
	}
	want, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var gotV, wantV any
	if err := json.Unmarshal([]byte(out), &gotV); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &wantV); err != nil {
		t.Fatal(err)
	}
	gotS, _ := json.Marshal(gotV)
	wantS, _ := json.Marshal(wantV)
	if string(gotS) != string(wantS) {
		t.Errorf("JSON differs from json.Marshal of the plan:\n got %s\nwant %s", gotS, wantS)
	}
}

func TestPlanCommand(t *testing.T) {
	t.Parallel()
	paths := writeFiles(t, map[string]string{"good.yml": "name: demo\n", "bad.yml": badDoc})
	good, bad := paths["good.yml"], paths["bad.yml"]
	compile := fakeCompile(map[string]pipeline.Errors{badDoc: badErrs})

	var jsonWant strings.Builder
	if err := writeJSON(&jsonWant, demoPlan()); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
	}{
		{
			name:       "text is the default",
			args:       []string{"plan", good},
			wantCode:   exitOK,
			wantStdout: "demo: 2 jobs in 2 waves\nwave 1:\n  build\nwave 2:\n  test  <- needs: build\n",
		},
		{
			name:       "json",
			args:       []string{"plan", "--format=json", good},
			wantCode:   exitOK,
			wantStdout: jsonWant.String(),
		},
		{
			name:     "dot",
			args:     []string{"plan", good, "--format", "dot"},
			wantCode: exitOK,
			wantStdout: "digraph \"demo\" {\n  rankdir=LR;\n  node [shape=box];\n" +
				"  // wave 1\n  {rank=same; \"build\";}\n  // wave 2\n  {rank=same; \"test\";}\n" +
				"  \"build\" -> \"test\";\n}\n",
		},
		{
			name:     "invalid file is reported as by validate, whatever the format",
			args:     []string{"plan", "--format", "dot", bad},
			wantCode: exitFailure,
			wantStdout: bad + `:4:5: jobs.build.stepz: unknown key "stepz" in job; did you mean "steps"?` + "\n" +
				"    stepz: []\n" +
				"    ^\n" +
				bad + `:8:13: jobs.deploy.needs[0]: needs "nope", which is not a job` + "\n" +
				"    needs: [nope]\n" +
				"            ^\n" +
				"2 errors in 1 file\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := runCLI(t, invocation{args: tt.args, compile: compile})
			if got.code != tt.wantCode {
				t.Errorf("exit code = %d, want %d", got.code, tt.wantCode)
			}
			if got.stdout != tt.wantStdout {
				t.Errorf("stdout =\n%s\nwant\n%s", got.stdout, tt.wantStdout)
			}
			if got.stderr != "" {
				t.Errorf("stderr = %q, want nothing", got.stderr)
			}
		})
	}
}

// TestWriteJSONKeepsOperatorsReadable: expressions such as `a && b` appear in reports and
// must not come out as \u0026\u0026.
func TestWriteJSONKeepsOperatorsReadable(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	if err := writeJSON(&b, map[string]string{"if": `a && b < c`}); err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"if\": \"a && b < c\"\n}\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
