package pipeline

import (
	"errors"
	"strings"
	"testing"
)

func TestRunValuesSubstitution(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, `
on:
  dispatch:
    inputs:
      target: {type: choice, options: [eu, us]}
      dry: {type: boolean}
env: {REF: "${{ ref }}", TOKEN: "${{ secrets.TOKEN }}"}
jobs:
  deploy:
    matrix: {n: ["1"]}
    steps:
      - name: deploy ${{ inputs.target }} at ${{ tag }}
        run: ./deploy --ref=${{ ref }} --sha ${{sha}} --pr=${{ pr.number }} --fork=${{ pr.fork }} --n=${{ matrix.n }} --dry=${{ inputs.dry }}
        env: {EVENT: "${{ event }} of ${{ repository }} on ${{ branch }}"}
      - run: echo plain
`)
	job := p.Job("deploy (n=1)")
	if got := job.Steps[0].Run; got != "./deploy --ref=${{ ref }} --sha ${{ sha }} --pr=${{ pr.number }} --fork=${{ pr.fork }} --n=1 --dry=${{ inputs.dry }}" {
		t.Errorf("plan's run = %q, want the run-time references kept canonically", got)
	}
	in := ConditionInput{Ref: "refs/tags/v2", Tag: "v2", SHA: "abc", Event: "tag", Repository: "acme/app",
		Inputs: map[string]string{"target": "eu"}, PRNumber: 0}
	got, err := job.WithRunValues(in)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"run":       "./deploy --ref=refs/tags/v2 --sha abc --pr= --fork=false --n=1 --dry=",
		"name":      "deploy eu at v2",
		"step env":  "tag of acme/app on ",
		"job env":   "refs/tags/v2",
		"secret":    "${{ secrets.TOKEN }}",
		"plain run": "echo plain",
	}
	have := map[string]string{
		"run": got.Steps[0].Run, "name": got.Steps[0].Name, "step env": got.Steps[0].Env["EVENT"],
		"job env": got.Env["REF"], "secret": got.Env["TOKEN"], "plain run": got.Steps[1].Run,
	}
	for k, w := range want {
		if have[k] != w {
			t.Errorf("%s = %q, want %q", k, have[k], w)
		}
	}
	if strings.Contains(job.Steps[0].Run, "refs/tags") || job.Env["REF"] != "${{ ref }}" {
		t.Errorf("WithRunValues changed the plan's job: %+v", job)
	}
	if secrets := got.Secrets(); len(secrets) != 1 || secrets[0] != "TOKEN" {
		t.Errorf("Secrets after WithRunValues = %v, want [TOKEN]", secrets)
	}
	pr, err := job.WithRunValues(ConditionInput{PRNumber: 12, Fork: true, Inputs: map[string]string{"dry": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := pr.Steps[0].Run; !strings.Contains(r, "--pr=12 --fork=true") || !strings.HasSuffix(r, "--dry=true") {
		t.Errorf("pull request run = %q", r)
	}
	// A value that would read as a reference, such as an input naming a secret, is refused.
	if _, err := job.WithRunValues(ConditionInput{Inputs: map[string]string{"target": "${{ secrets.TOKEN }}"}}); err == nil {
		t.Error("an input holding ${{ secrets.TOKEN }} was put in")
	}
	// A job without run-time references is the same job.
	if plain := mustCompile(t, "jobs: {a: {steps: [{run: x}]}}").Job("a"); mustRunValues(t, plain) != plain {
		t.Error("a job without run-time references was copied")
	}
}

// What a run of workflow_run knows of the run that started it is put in when it is
// created, as the run's own values are; a field workflow_run does not have is an error.
func TestWorkflowRunValuesSubstitution(t *testing.T) {
	t.Parallel()
	job := mustCompile(t, `
on:
  workflow_run: {workflows: [build]}
jobs:
  publish:
    timeout: 5m
    steps:
      - uses: actions/download-artifact@v4
        with: {name: report, run-id: "${{ workflow_run.id }}"}
      - run: echo ${{ workflow_run.name }} ${{ workflow_run.number }} ${{ workflow_run.conclusion }} ${{ workflow_run.branch }}@${{ workflow_run.sha }}
`).Job("publish")
	got, err := job.WithRunValues(ConditionInput{Event: "workflow_run", WorkflowRun: WorkflowRunValues{ID: "01a2-x", Name: "build", Number: 7,
		Action: "completed", Conclusion: "failure", Branch: "main", SHA: "abc"}})
	if err != nil {
		t.Fatal(err)
	}
	if w := got.Steps[0].With["run-id"]; w != "01a2-x" {
		t.Errorf("download's run-id = %q", w)
	}
	if r := got.Steps[1].Run; r != "echo build 7 failure main@abc" {
		t.Errorf("run = %q", r)
	}
	errs := compileErrs(t, "jobs:\n  a:\n    steps: [{run: 'echo ${{ workflow_run.head_sha }}'}]\n")
	if len(errs) != 1 || !strings.Contains(errs[0].Message, `workflow_run has no field "head_sha"`) {
		t.Errorf("an unknown field: %v", errs)
	}
}

// An environment's url may name the run's own values, put in when the run is created.
func TestEnvironmentURLRunValues(t *testing.T) {
	t.Parallel()
	job := mustCompile(t, "jobs:\n  deploy:\n    environment: {name: prod, url: 'https://example.com/app/${{ tag }}'}\n    steps: [{run: x}]\n").Job("deploy")
	got, err := job.WithRunValues(ConditionInput{Tag: "v2"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Environment.URL != "https://example.com/app/v2" || job.Environment.URL != "https://example.com/app/${{ tag }}" {
		t.Errorf("url %q (plan's %q), want the tag put in a copy", got.Environment.URL, job.Environment.URL)
	}
}

// A concurrency group may hold the run's own values and, in a workflow, GitHub
// expressions of what the trigger tells: both are decided when a run is created.
func TestConcurrencyGroupRunValues(t *testing.T) {
	t.Parallel()
	job := mustCompile(t, "env: {B: \"${{ branch }}\"}\njobs:\n  a:\n    concurrency: {group: \"deploy-${{ env.B }}-${{ sha }}\"}\n    steps: [{run: x}]\n").Job("a")
	got, err := job.WithRunValues(ConditionInput{Branch: "main", SHA: "abc"})
	if err != nil || got.Concurrency.Group != "deploy-main-abc" {
		t.Errorf("group %q, %v; want deploy-main-abc", got.Concurrency.Group, err)
	}
	p, err := Compile([]byte("on: push\njobs:\n  a:\n    runs-on: x\n    strategy: {matrix: {v: [1]}}\n"+
		"    concurrency: t-${{ matrix.v }}-${{ (github.event.pull_request && github.event.pull_request.number) || github.ref || github.run_id }}\n"+
		"    steps: [{run: x}]\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[*ConditionInput]string{
		{Ref: "refs/heads/main"}: "t-1-refs/heads/main",
		{Ref: "refs/pull/7/merge", Payload: []byte(`{"pull_request": {"number": 7}}`)}: "t-1-7",
		{RunID: "r1"}: "t-1-r1",
	} {
		got, err := p.Jobs[0].WithRunValues(*in)
		if err != nil || got.Concurrency.Group != want {
			t.Errorf("group %q, %v; want %q", got.Concurrency.Group, err, want)
		}
	}
	if p.Jobs[0].Concurrency.Group == "t-1-refs/heads/main" {
		t.Error("WithRunValues changed the plan's job")
	}
}

func mustRunValues(t *testing.T, j *Job) *Job {
	t.Helper()
	out, err := j.WithRunValues(ConditionInput{Ref: "r"})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRunValuesSubstitutionErrors(t *testing.T) {
	t.Parallel()
	const inputs = "on:\n  dispatch:\n    inputs:\n      target: {type: string}\n"
	tests := []struct {
		name, src, path string
		want            []string
	}{
		{"undeclared input", inputs + "jobs:\n  a:\n    steps: [{run: \"echo ${{ inputs.traget }}\"}]\n", "jobs.a.steps[0].run",
			[]string{`declares no input "traget"`, `did you mean "target"`}},
		{"pr field", "jobs:\n  a:\n    steps: [{run: \"echo ${{ pr.numbr }}\"}]\n", "jobs.a.steps[0].run",
			[]string{`pr has no field "numbr"`, `did you mean "number"`}},
		{"unknown name suggests", "jobs:\n  a:\n    steps: [{run: \"echo ${{ refs }}\"}]\n", "jobs.a.steps[0].run",
			[]string{"${{ refs }} is not a reference", `did you mean "ref"`}},
		{"not in a label", "jobs:\n  a:\n    runs_on: [\"${{ branch }}\"]\n    steps: [{run: x}]\n", "jobs.a.runs_on[0]",
			[]string{"known only when a run is created"}},
		{"no job's output in a concurrency group", "jobs:\n  a:\n    steps: [{run: x}]\n  b:\n    needs: [a]\n    concurrency: {group: \"deploy-${{ needs.a.outputs.x }}\"}\n    steps: [{run: x}]\n",
			"jobs.b.concurrency.group", []string{"not known when a run is created"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Compile([]byte(tt.src), Options{})
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Compile: %v, want errors", err)
			}
		next:
			for _, e := range errs {
				if e.Path != tt.path {
					continue
				}
				for _, w := range tt.want {
					if !strings.Contains(e.Message, w) {
						continue next
					}
				}
				return
			}
			t.Errorf("no error at %s saying %q; got %v", tt.path, tt.want, errs)
		})
	}
	// Without on: dispatch inputs, any inputs.NAME is allowed: it reads as "" when not given.
	j := mustCompile(t, "jobs:\n  a:\n    steps: [{run: \"echo ${{ inputs.anything }}.\"}]\n").Job("a")
	if got := mustRunValues(t, j).Steps[0].Run; got != "echo ." {
		t.Errorf("undeclared input read %q, want %q", got, "echo .")
	}
}

// TestInsertedValuesMakeNoReference: a need's output or a run's value put into a job's
// text is refused when it makes ${{ with the text around it ($ before {{, one value
// after another), which no check of the value alone sees: what reads the text next (the
// worker) would read it as a reference, to a secret at worst.
func TestInsertedValuesMakeNoReference(t *testing.T) {
	t.Parallel()
	p, err := Compile([]byte(`
jobs:
  a: { steps: [ { run: "true" } ] }
  b:
    needs: [a]
    steps:
      - run: echo $${{ needs.a.outputs.v }} ${{ needs.a.outputs.p }}${{ needs.a.outputs.q }} $${{ inputs.x }}
`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b *Job
	for _, j := range p.Jobs {
		if j.Key == "b" {
			b = j
		}
	}
	tail := strings.TrimPrefix(WorkerExpr("secrets.TOKEN"), "$")
	for _, tc := range []struct {
		name    string
		outputs map[string]string
		wantRun string
	}{
		{"plain", map[string]string{"v": "1.2", "p": "a", "q": "b"}, "echo $1.2 ab $${{ inputs.x }}"},
		{"after $", map[string]string{"v": tail}, ""},
		{"one after another", map[string]string{"p": "$", "q": tail}, ""},
		{"holds it", map[string]string{"v": WorkerExpr("secrets.TOKEN")}, ""},
	} {
		got, err := b.WithNeeds(map[string]map[string]string{"a": tc.outputs})
		switch {
		case tc.wantRun == "" && err == nil:
			t.Errorf("%s: WithNeeds put in %q", tc.name, got.Steps[0].Run)
		case tc.wantRun != "" && (err != nil || got.Steps[0].Run != tc.wantRun):
			t.Errorf("%s: WithNeeds: %v, %v; want run %q", tc.name, got, err, tc.wantRun)
		}
	}
	for x, ok := range map[string]bool{"7": true, tail: false, "{": true, "{{ x }}": false} {
		got, err := b.WithRunValues(ConditionInput{Inputs: map[string]string{"x": x}})
		if (err == nil) != ok {
			t.Errorf("inputs.x = %q: WithRunValues: %v, want ok %v", x, err, ok)
		} else if ok && !strings.HasSuffix(got.Steps[0].Run, " $"+x) {
			t.Errorf("inputs.x = %q: run %q", x, got.Steps[0].Run)
		}
	}
}
