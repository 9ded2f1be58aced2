package pipeline

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gantry-ci/gantry/internal/ghaexpr"
)

// fakeWorkflows is a WorkflowLoader over files in memory: local ones by path, remote
// ones by owner/repo/path@ref, whose ref names the commit "c0ffee" + ref. A remote
// workflow it does not have is not read (ErrWorkflowNotRead) when notRead is set.
// It may serve parallel compiles.
type fakeWorkflows struct {
	local   map[string]string
	remote  map[string]string
	notRead bool

	mu    sync.Mutex
	reads []string
}

func (f *fakeWorkflows) read(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, name)
}

func (f *fakeWorkflows) LocalWorkflow(file string) ([]byte, error) {
	f.read(file)
	s, ok := f.local[file]
	if !ok {
		return nil, fmt.Errorf("no %s in the repository", file)
	}
	return []byte(s), nil
}

func (f *fakeWorkflows) RemoteWorkflow(owner, repo, file, ref string) ([]byte, string, error) {
	key := owner + "/" + repo + "/" + file + "@" + ref
	f.read(key)
	s, ok := f.remote[key]
	switch {
	case !ok && f.notRead:
		return nil, "", fmt.Errorf("%s: %w", key, ErrWorkflowNotRead)
	case !ok:
		return nil, "", fmt.Errorf("%s/%s has no %s at %s", owner, repo, file, ref)
	}
	return []byte(s), "c0ffee" + ref, nil
}

func compileCalls(t *testing.T, src string, wf *fakeWorkflows) *Plan {
	t.Helper()
	p, err := Compile([]byte(src), Options{Path: ".github/workflows/ci.yml", Workflows: wf})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return p
}

func callErrors(t *testing.T, src string, wf *fakeWorkflows) Errors {
	t.Helper()
	_, err := Compile([]byte(src), Options{Path: ".github/workflows/ci.yml", Workflows: wf})
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("Compile: %v, want Errors", err)
	}
	return es
}

const buildWorkflow = `name: build
on:
  workflow_call:
    inputs:
      version: {type: string, required: true}
      debug: {type: boolean, default: false}
      shards: {type: number, default: 2}
      label: {type: string}
    secrets:
      token: {required: true}
    outputs:
      artifact:
        description: where the build is
        value: ${{ jobs.compile.outputs.path }}
      both:
        value: ${{ jobs.compile.outputs.path }}-${{ jobs.test.outputs.verdict }}
env:
  MODE: called
defaults:
  run:
    shell: sh
jobs:
  compile:
    runs-on: ubuntu-latest
    outputs:
      path: ${{ steps.b.outputs.path }}
    steps:
      - id: b
        run: echo "path=out/${{ inputs.version }}" >> "$GITHUB_OUTPUT"
      - if: inputs.debug
        run: echo debug ${{ inputs.shards }} [${{ inputs.label }}]
      - run: echo "${{ secrets.token }}"
  test:
    name: Test ${{ inputs.version }}
    needs: compile
    runs-on: ubuntu-latest
    outputs:
      verdict: ${{ steps.t.outputs.verdict }}
    steps:
      - id: t
        run: echo ${{ needs.compile.outputs.path }} $MODE
`

// TestCallExpandsTheCalledJobs: the called workflow's jobs become jobs of the run named
// after the caller, read the caller's inputs and secrets, their own env and defaults,
// and a job that needs the caller waits for a job standing for the call, which has the
// called workflow's outputs.
func TestCallExpandsTheCalledJobs(t *testing.T) {
	t.Parallel()
	wf := &fakeWorkflows{local: map[string]string{".github/workflows/build.yml": buildWorkflow}}
	p := compileCalls(t, `name: ci
on: push
env: {TOP: x}
jobs:
  lint:
    runs-on: ubuntu-latest
    steps: [{run: make lint}]
  build:
    name: Build
    needs: lint
    uses: ./.github/workflows/build.yml
    permissions: {contents: read}
    concurrency: build
    with:
      version: "1.2"
      debug: true
    secrets:
      token: ${{ secrets.NPM_TOKEN }}
  deploy:
    needs: build
    runs-on: ubuntu-latest
    steps:
      - run: echo ${{ needs.build.outputs.artifact }} ${{ needs.build.outputs.both }}
`, wf)
	var keys []string
	for _, j := range p.Jobs {
		keys = append(keys, j.Key)
	}
	if want := []string{"lint", "build-compile", "build-test", "build", "deploy"}; !slices.Equal(keys, want) {
		t.Fatalf("jobs = %v, want %v", keys, want)
	}
	compile, test, result, deploy := p.Job("build-compile"), p.Job("build-test"), p.Job("build"), p.Job("deploy")
	if compile.DisplayName != "Build / compile" || test.DisplayName != "Build / Test 1.2" {
		t.Errorf("names = %q, %q", compile.DisplayName, test.DisplayName)
	}
	if !slices.Equal(compile.Needs, []string{"lint"}) || !slices.Equal(test.Needs, []string{"build-compile", "lint"}) {
		t.Errorf("needs: compile %v, test %v", compile.Needs, test.Needs)
	}
	if got := compile.Steps[0].Run; got != `echo "path=out/1.2" >> "$GITHUB_OUTPUT"` {
		t.Errorf("input put in: %q", got)
	}
	if st := compile.Steps[1]; st.If == nil || st.If.Text() != "true" || st.Run != "echo debug 2 []" {
		t.Errorf("boolean input, number default and unset string: if %v, run %q", st.If, st.Run)
	}
	if st := compile.Steps[2]; !strings.Contains(st.Run, "${NPM_TOKEN}") || st.Env["NPM_TOKEN"] == "" {
		t.Errorf("secrets.token reads the caller's NPM_TOKEN: run %q env %v", st.Run, st.Env)
	}
	if compile.Steps[0].Shell != "sh" || compile.Env["MODE"] != "called" || compile.Env["TOP"] != "x" {
		t.Errorf("the called workflow's defaults and env: shell %q env %v", compile.Steps[0].Shell, compile.Env)
	}
	if !strings.Contains(test.Steps[0].Run, "${{ needs.build-compile.outputs.path }}") {
		t.Errorf("needs.compile is renamed: %q", test.Steps[0].Run)
	}
	if !slices.Equal(result.Needs, []string{"build-compile", "build-test", "lint"}) || result.DisplayName != "Build" {
		t.Errorf("the job standing for the call: needs %v, name %q", result.Needs, result.DisplayName)
	}
	if result.Outputs["artifact"] != "${{ needs.build-compile.outputs.path }}" || !strings.Contains(result.Outputs["both"], "needs.build-test.outputs.verdict") {
		t.Errorf("its outputs = %v", result.Outputs)
	}
	if !slices.Equal(deploy.Needs, []string{"build"}) || !strings.Contains(deploy.Steps[0].Run, "${{ needs.build.outputs.artifact }}") {
		t.Errorf("deploy: needs %v, run %q", deploy.Needs, deploy.Steps[0].Run)
	}
}

// TestCallResult: the job that stands for a call is what needs.<caller>.result reads:
// skipped with the caller, failed when a job of the call failed or was cancelled, and a
// success when they succeeded or skipped themselves, as a called workflow is on GitHub.
func TestCallResult(t *testing.T) {
	t.Parallel()
	wf := &fakeWorkflows{local: map[string]string{".github/workflows/two.yml": `on: workflow_call
jobs:
  a: {runs-on: x, steps: [{run: a}]}
  b: {runs-on: x, if: github.event_name == 'push', steps: [{run: b}]}
`}}
	p := compileCalls(t, `on: push
jobs:
  pre: {runs-on: x, steps: [{run: pre}]}
  call:
    needs: pre
    uses: ./.github/workflows/two.yml
  after:
    needs: call
    if: always() && needs.call.result == 'failure'
    runs-on: x
    steps: [{run: after}]
`, wf)
	result := p.Job("call")
	ok := ConditionInput{Needs: map[string]string{"call-a": ResultSuccess, "call-b": ResultSuccess, "pre": ResultSuccess}}
	if d := result.Decide(ok); !d.Run {
		t.Errorf("all succeeded: the result job does not run: %s", d.Reason)
	}
	if d := result.Decide(ConditionInput{Needs: map[string]string{"call-a": ResultSkipped, "call-b": ResultSkipped, "pre": ResultFailed}}); d.Run {
		t.Errorf("caller skipped (pre failed): the result job runs")
	}
	// Its step shows each job's result and fails when one failed: the worker evaluates
	// what it reads of needs, as GitHub would.
	step := result.Steps[0]
	if step.If != nil || step.Shell != "sh" {
		t.Errorf("the step: if %v, shell %q; want it always run, by sh", step.If, step.Shell)
	}
	for _, c := range []struct {
		a, b string
		fail bool
	}{
		{"success", "success", false},
		{"success", "skipped", false},
		{"failure", "skipped", true},
		{"success", "cancelled", true},
	} {
		needs := map[string]any{"call-a": map[string]any{"result": c.a}, "call-b": map[string]any{"result": c.b}}
		script, err := ExpandWorkerExprs(step.Run, func(expr string) (string, error) {
			v, err := ghaexpr.EvalString(expr, &ghaexpr.Context{Values: map[string]any{"needs": needs}})
			return ghaexpr.ToString(v), err
		})
		if err != nil {
			t.Fatal(err)
		}
		want := "if [ 'false' = true ]"
		if c.fail {
			want = "if [ 'true' = true ]"
		}
		if !strings.Contains(script, want) || !strings.Contains(script, "echo 'call-a: "+c.a+"'") {
			t.Errorf("a %s, b %s: script\n%s\nwant %q", c.a, c.b, script, want)
		}
	}
	if !result.ReadsNeeds {
		t.Error("the result job does not read its needs, so the worker cannot decide its step")
	}
	if d := p.Job("after").Decide(ConditionInput{Needs: map[string]string{"call": ResultFailed}}); !d.Run {
		t.Errorf("needs.call.result == 'failure' after a failed call: %s", d.Reason)
	}
}

// TestCallConditions: the caller's if: holds for every job of the call, and status
// functions read the needs of the workflow they are written in.
func TestCallConditions(t *testing.T) {
	t.Parallel()
	called := `on: workflow_call
jobs:
  first: {runs-on: x, steps: [{run: a}]}
  cleanup:
    needs: first
    if: always()
    runs-on: x
    steps: [{run: b}]
  report:
    needs: first
    if: failure()
    runs-on: x
    steps: [{run: c}]
`
	wf := &fakeWorkflows{local: map[string]string{".github/workflows/c.yml": called}}
	cases := []struct {
		name, cond string
		needs      map[string]string // results, the caller's need "pre" among them
		run        map[string]bool   // job -> runs
	}{
		{"no if, pre failed", "", map[string]string{"pre": ResultFailed, "call-first": ResultSkipped},
			map[string]bool{"call-first": false, "call-cleanup": false, "call-report": false}},
		{"no if, first failed", "", map[string]string{"pre": ResultSuccess, "call-first": ResultFailed},
			map[string]bool{"call-first": true, "call-cleanup": true, "call-report": true}},
		{"no if, first succeeded", "", map[string]string{"pre": ResultSuccess, "call-first": ResultSuccess},
			map[string]bool{"call-first": true, "call-cleanup": true, "call-report": false}},
		{"if false", "github.ref == 'refs/heads/x'", map[string]string{"pre": ResultSuccess, "call-first": ResultSkipped},
			map[string]bool{"call-first": false, "call-cleanup": false, "call-report": false}},
		{"always, pre failed", "always()", map[string]string{"pre": ResultFailed, "call-first": ResultSuccess},
			map[string]bool{"call-first": true, "call-cleanup": true, "call-report": false}},
		{"failure, pre failed", "${{ failure() }}", map[string]string{"pre": ResultFailed, "call-first": ResultFailed},
			map[string]bool{"call-first": true, "call-cleanup": true, "call-report": true}},
		{"failure, pre succeeded", "failure()", map[string]string{"pre": ResultSuccess},
			map[string]bool{"call-first": false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			src := "on: push\njobs:\n  pre: {runs-on: x, steps: [{run: pre}]}\n  call:\n    needs: pre\n    uses: ./.github/workflows/c.yml\n"
			if c.cond != "" {
				src += "    if: " + c.cond + "\n"
			}
			p := compileCalls(t, src, wf)
			for job, want := range c.run {
				j := p.Job(job)
				if j == nil {
					t.Fatalf("no job %s", job)
				}
				in := ConditionInput{Ref: "refs/heads/main", Needs: map[string]string{}}
				for _, n := range j.NeedsNames {
					in.Needs[n] = c.needs[n]
				}
				if d := j.Decide(in); d.Run != want {
					cond := "<none>"
					if j.If != nil {
						cond = j.If.Text()
					}
					t.Errorf("%s (if: %s) runs = %v (%s), want %v", job, cond, d.Run, d.Reason, want)
				}
			}
		})
	}
}

// TestCallInputsFromTheCaller: inputs given as expressions of the caller's context are
// evaluated where the called workflow reads them; written out, they stand with their
// type, so a called workflow's matrix may come from one.
func TestCallInputsFromTheCaller(t *testing.T) {
	t.Parallel()
	wf := &fakeWorkflows{local: map[string]string{".github/workflows/m.yml": `on:
  workflow_call:
    inputs:
      versions: {type: string, required: true}
      tag: {type: string, required: true}
      strict: {type: boolean, required: true}
jobs:
  test:
    runs-on: ubuntu-latest
    continue-on-error: ${{ inputs.strict }}
    strategy:
      matrix:
        go: ${{ fromJSON(inputs.versions) }}
    steps:
      - run: echo ${{ matrix.go }} ${{ inputs.tag }}
      - if: ${{ inputs.tag != '' }}
        run: echo tagged
`}}
	p := compileCalls(t, `on: push
jobs:
  version:
    runs-on: x
    outputs: {tag: "${{ steps.v.outputs.tag }}"}
    steps: [{id: v, run: echo}]
  call:
    needs: version
    uses: ./.github/workflows/m.yml
    with:
      versions: '["1.25", "1.26"]'
      tag: v${{ needs.version.outputs.tag }}-${{ github.sha }}
      strict: false
`, wf)
	a, b := p.Job("call-test (go=1.25)"), p.Job("call-test (go=1.26)")
	if a == nil || b == nil {
		var keys []string
		for _, j := range p.Jobs {
			keys = append(keys, j.Key)
		}
		t.Fatalf("the matrix from fromJSON(inputs.versions): jobs %v", keys)
	}
	if a.ContinueOnError {
		t.Error("continue-on-error: ${{ inputs.strict }} with strict: false")
	}
	if got := a.Steps[0].Run; !strings.Contains(got, "1.25") || !strings.Contains(got, "needs.version.outputs.tag") {
		t.Errorf("run = %q", got)
	}
	if !slices.Contains(a.Needs, "version") || a.Steps[1].If == nil {
		t.Errorf("needs %v, step if %v", a.Needs, a.Steps[1].If)
	}
}

// TestCallSecretsInherit: with secrets: inherit, the called workflow reads the
// caller's secrets by their own names; a secret neither passed nor inherited is "".
func TestCallSecretsInherit(t *testing.T) {
	t.Parallel()
	wf := &fakeWorkflows{local: map[string]string{".github/workflows/s.yml": `on:
  workflow_call:
    secrets:
      deploy_key: {}
jobs:
  j:
    runs-on: x
    env:
      KEY: ${{ secrets.DEPLOY_KEY }}
      OTHER: ${{ secrets.OTHER }}
    steps: [{run: echo}]
`}}
	p := compileCalls(t, "on: push\njobs:\n  c:\n    uses: ./.github/workflows/s.yml\n    secrets: inherit\n", wf)
	env := p.Job("c-j").Env
	if !strings.Contains(env["KEY"], "gha:") || !strings.Contains(env["OTHER"], "gha:") {
		t.Errorf("inherit: env = %v, want both read by the worker", env)
	}
	p = compileCalls(t, "on: push\njobs:\n  c:\n    uses: ./.github/workflows/s.yml\n    secrets: {deploy_key: '${{ secrets.PROD_KEY }}'}\n", wf)
	env = p.Job("c-j").Env
	if env["OTHER"] != "" || env["KEY"] != WorkerExpr("secrets.PROD_KEY") {
		t.Errorf("mapping: env = %v, want KEY from PROD_KEY and OTHER empty", env)
	}
}

// TestCallNesting: a called workflow may call others, its own ./ calls read from its
// repository at the commit it was read at, and the ids and names say the whole chain.
func TestCallNesting(t *testing.T) {
	t.Parallel()
	wf := &fakeWorkflows{
		local: map[string]string{".github/workflows/outer.yml": `on: workflow_call
jobs:
  mid:
    name: Middle
    uses: acme/lib/.github/workflows/mid.yml@v1
    with: {who: outer}
  after:
    needs: mid
    runs-on: x
    steps: [{run: "echo ${{ needs.mid.outputs.got }}"}]
`},
		remote: map[string]string{
			"acme/lib/.github/workflows/mid.yml@v1": `on:
  workflow_call:
    inputs: {who: {type: string, required: true}}
    outputs: {got: {value: "${{ jobs.leaf.outputs.x }}"}}
jobs:
  leaf:
    uses: ./.github/workflows/leaf.yml
    with: {who: "${{ inputs.who }}"}
`,
			"acme/lib/.github/workflows/leaf.yml@c0ffeev1": `on:
  workflow_call:
    inputs: {who: {type: string, required: true}}
    outputs: {x: {value: "${{ jobs.say.outputs.x }}"}}
jobs:
  say:
    runs-on: x
    outputs: {x: "${{ steps.s.outputs.x }}"}
    steps: [{id: s, run: "echo hello ${{ inputs.who }}"}]
`,
		},
	}
	p := compileCalls(t, "on: push\njobs:\n  top:\n    name: Top\n    uses: ./.github/workflows/outer.yml\n", wf)
	say := p.Job("top-mid-leaf-say")
	if say == nil || say.DisplayName != "Top / Middle / leaf / say" || say.Steps[0].Run != "echo hello outer" {
		t.Fatalf("the innermost job: %+v", say)
	}
	mid := p.Job("top-mid")
	if mid == nil || mid.Outputs["got"] != "${{ needs.top-mid-leaf.outputs.x }}" || !slices.Contains(mid.Needs, "top-mid-leaf") {
		t.Fatalf("the job standing for the middle call: %+v", mid)
	}
	if leaf := p.Job("top-mid-leaf"); leaf == nil || leaf.Outputs["x"] != "${{ needs.top-mid-leaf-say.outputs.x }}" {
		t.Fatalf("the job standing for the innermost call: %+v", leaf)
	}
	if p.Job("top") != nil {
		t.Error("nothing needs top, yet a job stands for its call")
	}
	if !slices.Contains(wf.reads, "acme/lib/.github/workflows/leaf.yml@c0ffeev1") {
		t.Errorf("./ in acme/lib's workflow is not read from acme/lib at the commit: reads %v", wf.reads)
	}
}

// TestCallErrors: each mistake is reported in the file it was made in, naming what it
// concerns in both.
func TestCallErrors(t *testing.T) {
	t.Parallel()
	wf := &fakeWorkflows{local: map[string]string{
		".github/workflows/a.yml": "on:\n  workflow_call:\n    inputs:\n      n: {type: number, required: true}\n" +
			"jobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ inputs.nope }}\n",
		".github/workflows/push.yml": "on: push\njobs:\n  x: {runs-on: x, steps: [{run: a}]}\n",
		".github/workflows/c.yml":    "on: workflow_call\njobs:\n  x:\n    uses: ./.github/workflows/d.yml\n",
		".github/workflows/d.yml":    "on: workflow_call\njobs:\n  y:\n    uses: ./.github/workflows/c.yml\n",
		".github/workflows/e.yml":    "on: workflow_call\njobs:\n  x:\n    runs-on: ubuntu-latest\n    needs: nothere\n    steps: [{run: a}]\n",
		".github/workflows/s.yml":    "on:\n  workflow_call:\n    secrets:\n      key: {required: true}\njobs:\n  x: {runs-on: x, steps: [{run: a}]}\n",
		".github/workflows/bad.yml":  "on: workflow_call\njobs:\n  x: [\n",
		".github/workflows/ok.yml":   "on: workflow_call\njobs:\n  x: {runs-on: x, steps: [{run: a}]}\n  y: {runs-on: x, steps: [{run: a}]}\n",
	}}
	cases := []struct {
		name, src string
		want      []string // file:line:col: path: message fragments, one per error
	}{
		{"wrong type and unknown input", "  a:\n    uses: ./.github/workflows/a.yml\n    with: {n: x, m: 1}\n",
			[]string{"5:15: jobs.a.with.n: input n of .github/workflows/a.yml is a number", "5:18: jobs.a.with.m: input m is not an input of .github/workflows/a.yml (on.workflow_call.inputs: it declares n)"}},
		{"missing required input", "  a:\n    uses: ./.github/workflows/a.yml\n",
			[]string{"4:11: jobs.a.uses: job a does not give input n, which .github/workflows/a.yml requires"}},
		{"undeclared input read", "  a:\n    uses: ./.github/workflows/a.yml\n    with: {n: 1}\n",
			[]string{".github/workflows/a.yml:9:23: jobs.x.steps[0].run: inputs.nope is not an input of .github/workflows/a.yml"}},
		{"not reusable", "  a:\n    uses: ./.github/workflows/push.yml\n",
			[]string{"4:11: jobs.a.uses: job a calls .github/workflows/push.yml, which is not a reusable workflow: its on: has no workflow_call"}},
		{"cycle", "  a:\n    uses: ./.github/workflows/c.yml\n",
			[]string{".github/workflows/d.yml:4:11: jobs.y.uses: reusable workflows call each other in a cycle: this workflow -> .github/workflows/c.yml -> .github/workflows/d.yml -> .github/workflows/c.yml"}},
		{"calls itself", "  a:\n    uses: ./.github/workflows/ci.yml\n",
			[]string{"4:11: jobs.a.uses: reusable workflows call each other in a cycle: this workflow -> .github/workflows/ci.yml"}},
		{"called job's mistake", "  a:\n    uses: ./.github/workflows/e.yml\n",
			[]string{`.github/workflows/e.yml:5:12: jobs.x.needs[0]: needs "nothere", but there is no such job in .github/workflows/e.yml`}},
		{"caller's needs", "  a:\n    needs: [zz]\n    uses: ./.github/workflows/ok.yml\n  b:\n    needs: a\n    runs-on: x\n    steps: [{run: b}]\n",
			[]string{`4:13: jobs.a.needs[0]: needs "zz", but there is no such job`}},
		{"unreadable", "  a:\n    uses: ./.github/workflows/missing.yml\n",
			[]string{"4:11: jobs.a.uses: job a calls the reusable workflow .github/workflows/missing.yml, which cannot be read: no .github/workflows/missing.yml in the repository"}},
		{"called file's syntax", "  a:\n    uses: ./.github/workflows/bad.yml\n",
			[]string{".github/workflows/bad.yml:"}},
		{"keys of the called jobs", "  a:\n    uses: ./.github/workflows/push.yml\n    runs-on: x\n",
			[]string{"4:11: jobs.a.uses: job a calls .github/workflows/push.yml", "5:5: jobs.a.runs-on: job a calls a reusable workflow, which has its own jobs: runs-on belongs to them"}},
		{"missing secret", "  a:\n    uses: ./.github/workflows/s.yml\n",
			[]string{"4:11: jobs.a.uses: job a does not pass secret key, which .github/workflows/s.yml requires"}},
		{"unknown secret", "  a:\n    uses: ./.github/workflows/s.yml\n    secrets: {key: x, kye: y}\n",
			[]string{`5:23: jobs.a.secrets.kye: secret kye is not a secret of .github/workflows/s.yml (on.workflow_call.secrets: it declares key)`}},
		{"no ref", "  a:\n    uses: acme/x/.github/workflows/a.yml\n",
			[]string{`4:11: jobs.a.uses: uses "acme/x/.github/workflows/a.yml" names no ref`}},
		{"not in .github/workflows", "  a:\n    uses: ./ci/a.yml\n",
			[]string{"reusable workflows are files of .github/workflows itself"}},
		{"a matrix of calls of a workflow that is not reusable", "  a:\n    strategy: {matrix: {v: [1, 2]}}\n    uses: ./.github/workflows/push.yml\n",
			[]string{"5:11: jobs.a.uses: job a-1 calls .github/workflows/push.yml, which is not a reusable workflow"}},
		{"a matrix of calls computed", "  a:\n    strategy: {matrix: '${{ fromJSON(needs.x.outputs.m) }}'}\n    uses: ./.github/workflows/ok.yml\n",
			[]string{"4:24: jobs.a.strategy.matrix: a matrix of calls of a reusable workflow computed by an expression is not supported"}},
		{"a matrix of calls with a mapping", "  a:\n    strategy: {matrix: {v: [{a: 1}]}}\n    uses: ./.github/workflows/ok.yml\n",
			[]string{"4:29: jobs.a.strategy.matrix.v[0]: a matrix of calls takes values that are strings, numbers or booleans"}},
		{"id taken", "  a-x: {runs-on: x, steps: [{run: a}]}\n  a:\n    uses: ./.github/workflows/e.yml\n",
			[]string{"5:11: jobs.a.uses: job a calls .github/workflows/e.yml, whose job x would be the job a-x of the run, which the workflow already has"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			es := callErrors(t, "on: push\njobs:\n"+c.src, wf)
			if len(es) != len(c.want) {
				t.Fatalf("%d errors, want %d:\n%v", len(es), len(c.want), es)
			}
			for i, w := range c.want {
				if !strings.Contains(es[i].Error(), w) {
					t.Errorf("error %d = %q\nwant it to hold %q", i, es[i].Error(), w)
				}
			}
		})
	}
}

// TestCallLimits: GitHub's limits on levels of workflows and on unique workflows called.
func TestCallLimits(t *testing.T) {
	t.Parallel()
	wf := &fakeWorkflows{local: map[string]string{}}
	for i := 1; i <= MaxWorkflowLevels; i++ {
		wf.local[fmt.Sprintf(".github/workflows/l%d.yml", i)] = fmt.Sprintf("on: workflow_call\njobs:\n  n:\n    uses: ./.github/workflows/l%d.yml\n", i+1)
	}
	wf.local[fmt.Sprintf(".github/workflows/l%d.yml", MaxWorkflowLevels)] = "on: workflow_call\njobs:\n  leaf: {runs-on: x, steps: [{run: a}]}\n"
	p := compileCalls(t, "on: push\njobs:\n  c:\n    uses: ./.github/workflows/l2.yml\n", wf)
	if len(p.Jobs) != 1 || !strings.HasPrefix(p.Jobs[0].Key, "c-n-n-n") {
		t.Fatalf("nine levels of calls: jobs %v", p.Jobs[0].Key)
	}
	es := callErrors(t, "on: push\njobs:\n  c:\n    uses: ./.github/workflows/l1.yml\n", wf)
	if len(es) != 1 || es[0].File != ".github/workflows/l9.yml" || !strings.Contains(es[0].Message, "past GitHub's limit of 10 levels of workflows") {
		t.Errorf("ten levels of calls: %v", es)
	}

	many := &fakeWorkflows{local: map[string]string{}}
	var src strings.Builder
	src.WriteString("on: push\njobs:\n")
	for i := 0; i <= MaxCalledWorkflows; i++ {
		many.local[fmt.Sprintf(".github/workflows/w%d.yml", i)] = "on: workflow_call\njobs:\n  j: {runs-on: x, steps: [{run: a}]}\n"
		fmt.Fprintf(&src, "  c%d:\n    uses: ./.github/workflows/w%d.yml\n  again%d:\n    uses: ./.github/workflows/w%d.yml\n", i, i, i, i)
	}
	es = callErrors(t, src.String(), many)
	if len(es) != 2 || !strings.Contains(es[0].Message, "past GitHub's limit of 50 unique reusable workflows") || es[0].Path != "jobs.c50.uses" || es[1].Path != "jobs.again50.uses" {
		t.Errorf("51 workflows, each called twice: %v", es)
	}
}

// TestCallWithoutReading: a loader that does not read a workflow (gantry validate
// offline) leaves the caller's side checked and a job in its place; with no loader at
// all, a call says there is nothing to read it from.
func TestCallWithoutReading(t *testing.T) {
	t.Parallel()
	src := "on: push\njobs:\n  fuzz:\n    uses: acme/fuzz/.github/workflows/ci.yml@main\n    with: {x: '${{ github.sha }}'}\n  after:\n    needs: fuzz\n    runs-on: x\n    steps: [{run: 'echo ${{ needs.fuzz.outputs.y }}'}]\n"
	p := compileCalls(t, src, &fakeWorkflows{notRead: true})
	if j := p.Job("fuzz"); j == nil || !strings.Contains(j.Steps[0].Run, "was not read") {
		t.Fatalf("the job in place of the call: %+v", j)
	}
	es := callErrors(t, strings.Replace(src, "github.sha", "github.nothing", 1), &fakeWorkflows{notRead: true})
	if len(es) != 1 || !strings.Contains(es[0].Message, "github.nothing") {
		t.Errorf("the caller's with: is still checked: %v", es)
	}
	_, err := Compile([]byte(src), Options{Path: ".github/workflows/ci.yml"})
	if err == nil || !strings.Contains(err.Error(), "there is no repository to read it from") {
		t.Errorf("no loader: %v", err)
	}
}

// TestCallConvert: gantry convert writes out the expanded jobs, which plan as the
// workflow does.
func TestCallConvert(t *testing.T) {
	t.Parallel()
	wf := &fakeWorkflows{local: map[string]string{".github/workflows/build.yml": buildWorkflow}}
	src := "on: push\njobs:\n  b:\n    uses: ./.github/workflows/build.yml\n    with: {version: '2'}\n    secrets: inherit\n  d:\n    needs: b\n    runs-on: x\n    steps: [{run: 'echo ${{ needs.b.outputs.artifact }}'}]\n"
	opts := Options{Path: ".github/workflows/ci.yml", Workflows: wf}
	want := compileCalls(t, src, wf)
	out, err := ConvertWorkflow([]byte(src), opts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Compile(out, Options{Path: "pipeline.yml"})
	if err != nil {
		t.Fatalf("Compile(convert): %v\n%s", err, out)
	}
	if a, b := planJSON(t, want), planJSON(t, got); a != b {
		t.Fatalf("plans differ\nworkflow:\n%s\nconverted:\n%s", a, b)
	}
}

// TestCallMatrix: a calling job with a matrix calls the workflow once for each
// combination (include and exclude as on GitHub), each reading its own values; a value
// that is an expression is read when the called jobs run. The job standing for them all
// has the output of the last combination that sets it.
func TestCallMatrix(t *testing.T) {
	t.Parallel()
	wf := &fakeWorkflows{local: map[string]string{".github/workflows/t.yml": `on:
  workflow_call:
    inputs:
      version: {type: string, required: true}
      race: {type: boolean, default: false}
    outputs:
      report: {value: "${{ jobs.test.outputs.r }}"}
jobs:
  test:
    runs-on: ubuntu-latest
    outputs: {r: "${{ steps.t.outputs.r }}"}
    steps:
      - id: t
        run: go${{ inputs.version }} test ${{ inputs.race && '-race' || '' }}
`}}
	p := compileCalls(t, `on: push
jobs:
  latest:
    runs-on: x
    outputs: {v: "${{ steps.v.outputs.v }}"}
    steps: [{id: v, run: echo}]
  test:
    needs: latest
    strategy:
      fail-fast: false
      matrix:
        go: ['1.25', '1.26', '${{ needs.latest.outputs.v }}']
        os: [linux]
        exclude: [{go: '1.25'}]
        include: [{go: '1.26', race: true}]
    uses: ./.github/workflows/t.yml
    with:
      version: ${{ matrix.go }}
      race: ${{ matrix.race == true }}
  report:
    needs: test
    runs-on: x
    steps: [{run: "echo ${{ needs.test.outputs.report }}"}]
`, wf)
	one, two := p.Job("test-1-test"), p.Job("test-2-test")
	if one == nil || two == nil || p.Job("test-3-test") != nil {
		var keys []string
		for _, j := range p.Jobs {
			keys = append(keys, j.Key)
		}
		t.Fatalf("two combinations left (1.25 excluded): jobs %v", keys)
	}
	if one.DisplayName != "test (1.26, linux, true) / test" || one.Steps[0].Run != "go1.26 test -race" {
		t.Errorf("the first combination: name %q, run %q", one.DisplayName, one.Steps[0].Run)
	}
	if two.DisplayName != "test (needs.latest.outputs.v, linux) / test" || !strings.Contains(two.Steps[0].Run, "needs.latest.outputs.v") || !slices.Contains(two.Needs, "latest") {
		t.Errorf("the combination whose value is an expression: name %q, run %q, needs %v", two.DisplayName, two.Steps[0].Run, two.Needs)
	}
	all := p.Job("test")
	if all == nil || !slices.Equal(all.Needs, []string{"test-1-test", "test-2-test", "latest"}) {
		t.Fatalf("the job standing for the calls: %+v", all)
	}
	if got := all.Outputs["report"]; !strings.Contains(got, "gha:") {
		t.Errorf("its output = %q, want the worker to pick the last combination's that is set", got)
	}
	if !slices.Equal(p.Job("report").Needs, []string{"test"}) {
		t.Errorf("report needs %v", p.Job("report").Needs)
	}
}

// TestCallNameReadsInputs: a called job's name reads the caller's inputs. One the caller
// fills from what a job it needs left is evaluated when the called job is claimed, as a
// job's own name reading needs is (GitHub evaluates a job's name when it starts); one
// known only when the jobs run that a claim cannot read (github.run_id) shows as the
// caller's expression.
func TestCallNameReadsInputs(t *testing.T) {
	t.Parallel()
	wf := &fakeWorkflows{local: map[string]string{".github/workflows/n.yml": `on:
  workflow_call:
    inputs:
      os: {type: string, required: true}
      version: {type: string, required: true}
      tag: {type: string, default: ""}
jobs:
  build:
    name: Build ${{ inputs.os }} v${{ inputs.version }}${{ inputs.tag }}
    runs-on: x
    steps: [{run: echo}]
`}}
	p := compileCalls(t, `on: push
jobs:
  v:
    runs-on: x
    outputs: {v: "${{ steps.v.outputs.v }}"}
    steps: [{id: v, run: echo}]
  b:
    needs: v
    uses: ./.github/workflows/n.yml
    with: {os: linux, version: "${{ needs.v.outputs.v }}"}
  c:
    needs: v
    uses: ./.github/workflows/n.yml
    with: {os: linux, version: "${{ needs.v.outputs.v || 'dev' }}", tag: "${{ github.run_id }}"}
`, wf)
	b := p.Job("b-build")
	if b.DisplayName != "b / Build linux v${{ needs.v.outputs.v }}" || b.NameTemplate == "" {
		t.Fatalf("b-build: name %q, template %q; want the need's output kept for the claim", b.DisplayName, b.NameTemplate)
	}
	got, err := b.ClaimedName(map[string]string{"v": "success"}, map[string]map[string]string{"v": {"v": "1.2.3"}})
	if err != nil || got != "b / Build linux v1.2.3" {
		t.Errorf("b-build's claimed name = %q, %v; want b / Build linux v1.2.3", got, err)
	}
	c := p.Job("c-build")
	got, err = c.ClaimedName(map[string]string{"v": "success"}, map[string]map[string]string{"v": {}})
	if err != nil || got != "c / Build linux vdevgithub.run_id" {
		t.Errorf("c-build's claimed name = %q, %v; want the need's output evaluated and github.run_id as written", got, err)
	}
}

// TestCallPlanTimeNeeds: a setting of a called job that Gantry decides before the job is
// claimed and that reads an input the caller fills from a need is refused at the input,
// naming what the caller gave and when Gantry decides the setting; its if: and its
// environment's url, decided later, may read it.
func TestCallPlanTimeNeeds(t *testing.T) {
	t.Parallel()
	wf := &fakeWorkflows{local: map[string]string{".github/workflows/n.yml": `on:
  workflow_call:
    inputs:
      who: {type: string, required: true}
      n: {type: number, default: 5}
jobs:
  ro:
    runs-on: [self-hosted, "${{ inputs.who }}"]
    steps: [{run: echo}]
  tm:
    timeout-minutes: ${{ inputs.n }}
    continue-on-error: ${{ inputs.who == 'x' }}
    runs-on: x
    steps:
      - run: echo
        timeout-minutes: ${{ inputs.n }}
  env:
    environment: {name: "${{ inputs.who }}", url: "https://example.org/${{ inputs.who }}"}
    concurrency: {group: "g-${{ inputs.who }}"}
    container: {image: "alpine:${{ inputs.who }}"}
    if: inputs.who == 'x'
    runs-on: x
    steps: [{run: echo}]
  fine:
    if: inputs.who == 'x'
    environment: {name: prod, url: "https://example.org/${{ inputs.who }}"}
    runs-on: x
    steps: [{run: echo}]
`}}
	es := callErrors(t, `on: push
jobs:
  v:
    runs-on: x
    outputs: {v: "${{ steps.v.outputs.v }}"}
    steps: [{id: v, run: echo}]
  b:
    needs: v
    uses: ./.github/workflows/n.yml
    with: {who: "${{ needs.v.outputs.v }}", n: "${{ fromJSON(needs.v.outputs.v) }}"}
`, wf)
	want := []string{
		".github/workflows/n.yml:8:33: jobs.ro.runs-on[1]: runs-on reads inputs.who, which job b gives as ${{ needs.v.outputs.v }}: what a job it needs left is known only when the job is claimed, but Gantry decides runs-on when it plans the run",
		".github/workflows/n.yml:11:26: jobs.tm.timeout-minutes: timeout-minutes reads inputs.n, which job b gives as ${{ fromJSON(needs.v.outputs.v) }}",
		".github/workflows/n.yml:12:28: jobs.tm.continue-on-error: continue-on-error reads inputs.who",
		".github/workflows/n.yml:16:30: jobs.tm.steps[0].timeout-minutes: timeout-minutes reads inputs.n",
		".github/workflows/n.yml:18:30: jobs.env.environment.name: environment's name reads inputs.who",
		".github/workflows/n.yml:19:33: jobs.env.concurrency.group: concurrency's group reads inputs.who, which job b gives as ${{ needs.v.outputs.v }}: what a job it needs left is known only when the job is claimed, but Gantry decides concurrency's group when it creates the run",
		".github/workflows/n.yml:20:36: jobs.env.container.image: the container's image reads inputs.who",
	}
	if len(es) != len(want) {
		t.Fatalf("%d errors, want %d:\n%v", len(es), len(want), es)
	}
	for i, w := range want {
		if !strings.Contains(es[i].Error(), w) {
			t.Errorf("error %d = %q\nwant it to hold %q", i, es[i].Error(), w)
		}
	}
}

// TestCallExpansionBounded: calls that multiply (each workflow calling the next five
// times, nine levels deep) stop at the limit of jobs rather than expand first.
func TestCallExpansionBounded(t *testing.T) {
	t.Parallel()
	wf := &fakeWorkflows{local: map[string]string{}}
	for i := 1; i < MaxWorkflowLevels; i++ {
		var b strings.Builder
		b.WriteString("on: workflow_call\njobs:\n")
		for k := 0; k < 5; k++ {
			if i == MaxWorkflowLevels-1 {
				fmt.Fprintf(&b, "  j%d: {runs-on: x, steps: [{run: a}]}\n", k)
			} else {
				fmt.Fprintf(&b, "  c%d: {uses: ./.github/workflows/w%d.yml}\n", k, i+1)
			}
		}
		wf.local[fmt.Sprintf(".github/workflows/w%d.yml", i)] = b.String()
	}
	es := callErrors(t, "on: push\njobs:\n  top:\n    uses: ./.github/workflows/w1.yml\n", wf)
	if len(es) != 1 || es[0].Kind != ErrLimit || !strings.Contains(es[0].Message, "past the limit of 10000 jobs") {
		t.Errorf("errors = %v", es)
	}
}

// TestCallAndComputedMatrix: a workflow that calls a reusable workflow may have a job whose
// matrix is computed from its needs' outputs, which is made when they are done without
// reading the called workflow again; a called workflow's job may not (yet).
func TestCallAndComputedMatrix(t *testing.T) {
	t.Parallel()
	wf := &fakeWorkflows{local: map[string]string{
		".github/workflows/ok.yml": "on: workflow_call\njobs:\n  x: {runs-on: x, steps: [{run: a}]}\n",
		".github/workflows/dyn.yml": "on: workflow_call\njobs:\n  s: {runs-on: x, outputs: {m: a}, steps: [{run: a}]}\n" +
			"  t:\n    needs: s\n    runs-on: x\n    strategy: {matrix: {v: '${{ fromJSON(needs.s.outputs.m) }}'}}\n    steps: [{run: a}]\n",
	}}
	src := "on: push\njobs:\n  setup: {runs-on: x, outputs: {m: '${{ steps.m.outputs.m }}'}, steps: [{id: m, run: a}]}\n" +
		"  call: {needs: setup, uses: ./.github/workflows/ok.yml}\n" +
		"  test:\n    needs: [setup, call]\n    runs-on: x\n    strategy: {matrix: {v: '${{ fromJSON(needs.setup.outputs.m) }}'}}\n    steps: [{run: 'echo ${{ matrix.v }}'}]\n"
	p := compileCalls(t, src, wf)
	test := p.Job("test")
	if test == nil || test.DynamicMatrix == nil {
		t.Fatalf("test is not a placeholder: %s", planJSON(t, p))
	}
	got, err := test.ExpandMatrix([]byte(src), ConditionInput{Needs: map[string]string{"setup": ResultSuccess, "call": ResultSuccess},
		NeedOutputs: map[string]map[string]string{"setup": {"m": `["a","b"]`}}})
	if err != nil || len(got) != 2 || !slices.Equal(got[0].Needs, []string{"setup", "call"}) {
		t.Fatalf("ExpandMatrix = %d instances, %v", len(got), err)
	}
	es := callErrors(t, "on: push\njobs:\n  c:\n    uses: ./.github/workflows/dyn.yml\n", wf)
	if len(es) != 1 || es[0].File != ".github/workflows/dyn.yml" || es[0].Line != 7 || !strings.Contains(es[0].Message, "is not supported yet") {
		t.Errorf("a called job's computed matrix: %v", es)
	}
}
