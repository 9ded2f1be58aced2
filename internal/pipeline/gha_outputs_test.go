package pipeline

import (
	"strings"
	"testing"
)

// TestWorkflowOutputsAndStepConditions: job outputs, step ids and if:, the references
// that read them, a job's name template and fail-fast become Gantry's own.
func TestWorkflowOutputsAndStepConditions(t *testing.T) {
	t.Parallel()
	p := compileWorkflow(t, `
on: push
jobs:
  a:
    runs-on: x
    outputs:
      v: ${{ steps.s.outputs.version }}
    steps:
      - id: s
        run: echo "version=1" >> "$GITHUB_OUTPUT"
      - if: ${{ failure() && steps.s.outcome == 'failure' }}
        run: echo ${{ steps.s.outputs.version }}
  b:
    name: b ${{ matrix.x }}
    needs: a
    if: needs.a.outputs.v != ''
    runs-on: x
    strategy: {matrix: {x: [1, 2]}}
    env: {V: "${{ needs.a.outputs.v }}"}
    steps:
      - uses: actions/setup-go@v5
        if: always()
        with: {go-version: '1.26'}
      - run: echo $V
  c:
    needs: a
    runs-on: x
    strategy: {fail-fast: false, matrix: {x: [1]}}
    steps: [{run: x}]
`)
	a := p.Job("a")
	if a.Outputs["v"] != "${{ steps.s.outputs.version }}" {
		t.Errorf("a outputs = %v", a.Outputs)
	}
	if a.Steps[0].ID != "s" || a.Steps[1].If == nil || a.Steps[1].If.Source != `failure() && steps.s.outcome == "failed"` {
		t.Errorf("a steps = %+v", a.Steps)
	}
	if !strings.Contains(a.Steps[1].Run, "${{ steps.s.outputs.version }}") {
		t.Errorf("a step 1 run = %q", a.Steps[1].Run)
	}
	b := p.Job("b (x=1)")
	if b == nil || b.DisplayName != "b 1" || !b.FailFast || b.If.Source != `needs.a.outputs.v != ""` || b.Env["V"] != "${{ needs.a.outputs.v }}" {
		t.Fatalf("b = %+v", b)
	}
	if b.Steps[0].If == nil || b.Steps[0].If.Source != "always()" {
		t.Errorf("setup step if = %+v", b.Steps[0].If)
	}
	if c := p.Job("c (x=1)"); c.FailFast {
		t.Errorf("fail-fast: false is not fail_fast")
	}
}
