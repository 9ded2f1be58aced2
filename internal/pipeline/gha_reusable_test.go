package pipeline

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// reusableWorkflow is a reusable workflow whose settings decided when the plan is made
// read its inputs, as a caller gives them: as on GitHub, it is good whatever they are.
const reusableWorkflow = `on:
  workflow_call:
    inputs:
      runson: {type: string, required: true}
      os: {type: string, default: linux}
      minutes: {type: number, default: 10}
      flaky: {type: boolean, default: false}
      env: {type: string, required: true}
      image: {type: string, required: true}
      matrix: {type: string, default: '{"go": ["1.25"]}'}
jobs:
  build:
    name: Build ${{ inputs.os }} ${{ matrix.go }}
    runs-on: [self-hosted, "${{ inputs.runson }}"]
    timeout-minutes: ${{ inputs.minutes }}
    continue-on-error: ${{ inputs.flaky }}
    environment: {name: "${{ inputs.env }}", url: "https://example.org/${{ inputs.env }}"}
    container:
      image: ${{ inputs.image }}
    services:
      db:
        image: postgres:${{ inputs.os }}
    strategy:
      matrix:
        go: ["1.25", "1.26"]
    if: inputs.flaky
    steps:
      - run: echo ${{ inputs.os }} ${{ matrix.go }}
        timeout-minutes: ${{ inputs.minutes }}
  computed:
    strategy:
      matrix: ${{ fromJSON(inputs.matrix) }}
    runs-on: ubuntu-latest
    steps:
      - run: echo ${{ matrix.go }}
  inner:
    uses: ./.github/workflows/inner.yml
    with:
      where: ${{ inputs.runson }}
`

const innerWorkflow = `on:
  workflow_call:
    inputs:
      where: {type: string, required: true}
jobs:
  run:
    runs-on: ${{ inputs.where }}
    steps: [{run: echo}]
`

// TestReusableCheckedAsCalled: with CheckReusable, a reusable workflow validated on its
// own is checked as called: each setting decided when the plan is made that reads its
// inputs is a warning naming it, at the line and column of its expression (in the file
// it is in), and the plan shows it as decided later. Without CheckReusable (a run), the
// same settings are refused, saying why.
func TestReusableCheckedAsCalled(t *testing.T) {
	t.Parallel()
	wf := &fakeWorkflows{local: map[string]string{".github/workflows/inner.yml": innerWorkflow}}
	p, err := Compile([]byte(reusableWorkflow), Options{Path: ".github/workflows/r.yml", Workflows: wf, CheckReusable: true})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	want := []string{
		"14:29: jobs.build.runs-on: runs-on reads inputs.runson, known only when a workflow calls this one; what it comes to is checked then",
		"15:22: jobs.build.timeout-minutes: timeout-minutes reads inputs.minutes,",
		"16:24: jobs.build.continue-on-error: continue-on-error reads inputs.flaky,",
		"17:26: jobs.build.environment: environment's name reads inputs.env,",
		"19:14: jobs.build.container: the container's image reads inputs.image,",
		"22:25: jobs.build.services: the image of service db reads inputs.os,",
		"29:26: jobs.build.steps[0].timeout-minutes: timeout-minutes reads inputs.minutes,",
		"32:15: jobs.computed.strategy.matrix: the matrix reads inputs.matrix, known only when a workflow calls this one; it is made and checked then",
		".github/workflows/inner.yml:7:14: jobs.run.runs-on: runs-on reads inputs.runson,",
	}
	if len(p.Warnings) != len(want) {
		t.Fatalf("%d warnings, want %d:\n%v", len(p.Warnings), len(want), Errors(p.Warnings))
	}
	for i, w := range want {
		if got := p.Warnings[i]; got.Kind != WarnDecidedWhenCalled || !strings.Contains(got.Error(), w) {
			t.Errorf("warning %d = %s %q\nwant it to hold %q", i, got.Kind, got.Error(), w)
		}
	}
	build := p.Job("build (go=1.26)")
	if build == nil {
		t.Fatalf("no job build (go=1.26): %v", p.Jobs)
	}
	if build.DisplayName != "Build inputs.os 1.26" || build.Timeout != Duration(6*time.Hour) || build.ContinueOnError ||
		build.Environment != nil || build.Image != "decided-when-called" || len(build.Services) != 1 || build.Services[0].Image != "decided-when-called" ||
		build.Steps[0].Timeout != 0 || fmt.Sprint(build.RunsOn) != "[docker]" {
		t.Errorf("build (go=1.26) is planned as %q, timeout %v, continue-on-error %v, environment %v, image %q, services %v, step timeout %v, runs on %v",
			build.DisplayName, build.Timeout, build.ContinueOnError, build.Environment, build.Image, build.Services, build.Steps[0].Timeout, build.RunsOn)
	}
	if c := p.Job("computed"); c == nil || c.DynamicMatrix == nil {
		t.Errorf("computed is not a job whose matrix is made later: %+v", c)
	}
	if r := p.Job("inner-run"); r == nil || len(r.RunsOn) != 0 {
		t.Errorf("inner-run asks for %v, want nothing until called", r)
	}
	if in, ok := p.On.Dispatch.Input("runson"); !ok || !in.Required {
		t.Errorf("the plan's inputs are %+v, want those workflow_call declares", p.On.Dispatch)
	}

	// Run on its own, the workflow has a dispatch's inputs, known only when a run is
	// created: the settings are refused, and the first error at each says why.
	_, err = Compile([]byte(reusableWorkflow), Options{Path: ".github/workflows/r.yml", Workflows: wf})
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("Compile without CheckReusable: %v, want Errors", err)
	}
	hinted := 0
	for _, e := range es {
		if strings.Contains(e.Message, "run on its own this reusable workflow (on: workflow_call) has a dispatch's inputs") {
			hinted++
		}
	}
	if hinted == 0 {
		t.Errorf("no error says why a reusable workflow run on its own is refused:\n%v", es)
	}
}

// TestReusableStillRefused: a reusable workflow checked as called is refused for what is
// wrong whatever its inputs are, at the place it is wrong; and one with events of its
// own is checked for them, as any workflow is, each refusal saying why.
func TestReusableStillRefused(t *testing.T) {
	t.Parallel()
	const head = "on:\n  workflow_call:\n    inputs:\n      runson: {type: string, required: true}\njobs:\n  build:\n"
	cases := []struct {
		name, src string
		want      []string
	}{
		{"a step's output in runs-on", head + "    runs-on: ${{ inputs.runson }}-${{ steps.x.outputs.y }}\n    steps: [{id: x, run: echo}]\n",
			[]string{"7:39: jobs.build.runs-on: steps.x.outputs.y is known only when the step runs"}},
		{"a run value in a name", head + "    name: ${{ inputs.runson }} ${{ github.run_id }}\n    runs-on: x\n    steps: [{run: echo}]\n",
			[]string{"7:36: jobs.build.name: github.run_id is known only on the worker"}},
		{"an input it does not declare", head + "    runs-on: x\n    timeout-minutes: ${{ inputs.runsonn }}\n    steps: [{run: echo}]\n",
			[]string{`8:26: jobs.build.timeout-minutes: inputs.runsonn is not an input of this workflow (on.workflow_call.inputs: it declares runson); did you mean "runson"?`}},
		{"an expression that does not parse", head + "    runs-on: x\n    continue-on-error: ${{ inputs.runson == }}\n    steps: [{run: echo}]\n",
			[]string{"8:24: jobs.build.continue-on-error: Unexpected end of expression"}},
		{"an input it does not declare, read by a step and an if", head + "    if: inputs.typo == 'x'\n    runs-on: ${{ inputs.runson }}\n    steps:\n      - run: echo ${{ inputs.typo }}\n",
			[]string{`7:16: jobs.build.if: on.workflow_call.inputs declares no input "typo" (has: runson)`,
				`10:19: jobs.build.steps[0].run: on.workflow_call.inputs declares no input "typo" (has: runson)`}},
		{"a matrix of an input it does not declare", head + "    strategy: {matrix: '${{ fromJSON(inputs.m) }}'}\n    runs-on: x\n    steps: [{run: echo}]\n",
			[]string{"7:24: jobs.build.strategy.matrix: the matrix reads inputs.m, which is not an input of this workflow"}},
		{"an input without a type", "on:\n  workflow_call:\n    inputs:\n      runson: {required: true}\njobs:\n  build:\n    runs-on: ${{ inputs.runson }}\n    steps: [{run: echo}]\n",
			[]string{"4:7: on.workflow_call.inputs.runson.type: input runson needs a type: boolean, number or string"}},
		{"events of its own", "on:\n  workflow_dispatch:\n    inputs: {runson: {required: true}}\n  workflow_call:\n    inputs:\n      runson: {type: string, required: true}\njobs:\n  build:\n    runs-on: ${{ inputs.runson }}\n    steps: [{run: echo}]\n",
			[]string{"9:14: jobs.build.runs-on: ${{ inputs.runson }} is known only when a run is created and may stand only in a step's run and name and in env values; it reads inputs, and started by its own events (workflow_dispatch) this workflow has the inputs a dispatch gives",
				`9:14: jobs.build.runs-on: label "${{ inputs.runson }}"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := Compile([]byte(c.src), Options{Path: ".github/workflows/r.yml", CheckReusable: true})
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("Compile: %v, want Errors", err)
			}
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
