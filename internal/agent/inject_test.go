package agent

import (
	"maps"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// shellMarker writes an expression as the plan keeps it for the worker
// (pipeline.WorkerExpr), quoted for a shell in two parts ($ and the rest), so that the
// workflow's own text holds no ${{ and the marker exists only as what a step makes.
func shellMarker(expr string) string {
	return "'$''" + strings.TrimPrefix(pipeline.WorkerExpr(expr), "$") + "'"
}

// TestStepValuesAreNeverEvaluated: a step's output, and what a step writes to
// $GITHUB_ENV, are put into a later step's run, name, env and with: and into the job's
// outputs as text, as GitHub does: one that reads as the expression Gantry keeps for the
// worker is not evaluated, so it cannot read the job's secrets. An output read inside a
// larger expression still is a value. An output that makes the marker only with the
// text before it ($ then {{ gha:... }}, which no check of the output alone sees) is text
// too.
func TestStepValuesAreNeverEvaluated(t *testing.T) {
	t.Parallel()
	b := setupSecrets(t)
	const token = "inject-token-5521"
	b.setSecret(t, "web", "TOKEN", token)
	// What an attacker's text (a pull request's title, a file in the change) would say.
	marker := shellMarker("format('leak:{0}:{1}', secrets.TOKEN, github.repository)")
	run := b.submitIn(t, "web", store.Trigger{Branch: "main", Repository: "acme/app", Event: "push"}, nil, `on: push
jobs:
  a:
    runs-on: ubuntu-latest
    env: { TOKEN: "${{ secrets.TOKEN }}" }
    outputs:
      plain: ${{ steps.one.outputs.plain }}
      cond: ${{ steps.one.outputs.v == 'a' && 'same' || 'differs' }}
    steps:
      - id: one
        run: |
          m=`+marker+`
          printf '%s' "$m" > marker.txt
          echo "v=$m" >> "$GITHUB_OUTPUT"
          echo "plain=a" >> "$GITHUB_OUTPUT"
          echo "tail=${m#?}" >> "$GITHUB_OUTPUT"
          echo "W=$m" >> "$GITHUB_ENV"
          mkdir -p .github/actions/keep
          D='$'
          cat > .github/actions/keep/action.yml <<EOF
          inputs:
            v: { required: true }
          runs:
            using: composite
            steps:
              - shell: sh
                env: { V: "${D}{{ inputs.v }}" }
                run: printf '%s' "\$V" > with.txt
          EOF
      - name: shows ${{ steps.one.outputs.v }}
        env: { V: "${{ steps.one.outputs.v }}", X: "x${{ steps.one.outputs.v }}" }
        run: |
          printf '%s' '${{ steps.one.outputs.v }}' > run.txt
          test "$(cat run.txt)" = "$(cat marker.txt)" || { echo "run got: $(cat run.txt)"; exit 3; }
          test "$V" = "$(cat marker.txt)" || { echo "env got: $V"; exit 4; }
          test "$X" = "x$(cat marker.txt)" || { echo "env got: $X"; exit 4; }
          test "$W" = "$(cat marker.txt)" || { echo "GITHUB_ENV got: $W"; exit 5; }
          printf '%s' '$${{ steps.one.outputs.tail }}' > tail.txt
          test "$(cat tail.txt)" = "$(cat marker.txt)" || { echo "run got: $(cat tail.txt)"; exit 9; }
          test "${{ steps.one.outputs.plain == 'a' && 'yes' || 'no' }}" = yes || exit 6
          test "${{ steps.one.outputs.v == 'a' && 'yes' || 'no' }}" = no || exit 7
      - uses: $/.github/actions/keep
        with: { v: "${{ steps.one.outputs.v }}" }
      - run: test "$(cat with.txt)" = "$(cat marker.txt)" || { echo "with got=$(cat with.txt)"; exit 8; }
  b:
    runs-on: ubuntu-latest
    env: { TOKEN: "${{ secrets.TOKEN }}" }
    outputs:
      v: ${{ steps.one.outputs.v }}
    steps:
      - id: one
        run: echo "v=$(printf %s `+marker+`)" >> "$GITHUB_OUTPUT"
  d:
    runs-on: ubuntu-latest
    env: { TOKEN: "${{ secrets.TOKEN }}" }
    outputs:
      t: x$${{ steps.one.outputs.tail }}
    steps:
      - id: one
        run: |
          m=`+marker+`
          printf '%s' "$m" > marker.txt
          echo "tail=${m#?}" >> "$GITHUB_OUTPUT"
          echo "W=$m" >> "$GITHUB_ENV"
      - name: tail $${{ steps.one.outputs.tail }}
        env: { T: "$${{ steps.one.outputs.tail }}" }
        run: |
          test "$W" = "$(cat marker.txt)" || { echo "GITHUB_ENV got: $W"; exit 5; }
          test "$T" = "$(cat marker.txt)" || { echo "env got: $T"; exit 4; }
  c:
    runs-on: ubuntu-latest
    env: { TOKEN: "${{ secrets.TOKEN }}" }
    steps:
      - run: echo "u=$(printf %s `+marker+`)" >> "$GITHUB_OUTPUT"
`)
	b.waitRun(t, run)
	literal := pipeline.WorkerExpr("format('leak:{0}:{1}', secrets.TOKEN, github.repository)")

	a, _ := b.jobByKey(t, run, "a")
	aLog := b.jobLog(t, run, "a")
	if a.Status != store.JobSuccess {
		t.Errorf("a: %s, want success (each step saw the output as text)\n%s", a.Status, aLog)
	}
	wantLog(t, aLog, "step shows "+literal)
	if want := map[string]string{"plain": "a", "cond": "differs"}; !maps.Equal(a.Outputs, want) {
		t.Errorf("a: outputs %q, want %q", a.Outputs, want)
	}
	// d's outputs holds ${{ once its step's output is put in, and is refused; its steps
	// saw text.
	if d, _ := b.jobByKey(t, run, "d"); d.Status != store.JobFailed {
		t.Errorf("d: %s, want failed (its output holds ${{)", d.Status)
	}
	dLog := b.jobLog(t, run, "d")
	wantLog(t, dLog, "step tail "+literal, "output t holds ${{")
	if strings.Contains(dLog, "exit code") {
		t.Errorf("d: a step failed:\n%s", dLog)
	}
	for _, key := range []string{"a", "b", "c", "d"} {
		j, _ := b.jobByKey(t, run, key)
		log := b.jobLog(t, run, key)
		if strings.Contains(log, "leak:") {
			t.Errorf("%s: a step's value was evaluated as an expression:\n%s", key, log)
		}
		for name, v := range j.Outputs {
			if strings.Contains(v, "leak:") || strings.Contains(v, token) {
				t.Errorf("%s: output %s = %q: a step's value was evaluated as an expression", key, name, v)
			}
		}
	}
	// A job's output that holds ${{ is refused, as ever: the job says so and leaves none.
	bj, _ := b.jobByKey(t, run, "b")
	if bj.Status != store.JobFailed || len(bj.Outputs) != 0 {
		t.Errorf("b: %s with outputs %q, want failed with none (its output holds ${{)", bj.Status, bj.Outputs)
	}
	wantLog(t, b.jobLog(t, run, "b"), "output v holds ${{")
	cj, _ := b.jobByKey(t, run, "c")
	if cj.Status != store.JobFailed || len(cj.Outputs) != 0 {
		t.Errorf("c: %s with outputs %q, want failed with none (its output holds ${{)", cj.Status, cj.Outputs)
	}
}

// TestNeedsOutputsMakeNoReference: a need's output that makes the kept-expression form
// with the text it is put after ($${{ needs.a.outputs.v }} with v = {{ gha:... }}, which
// the check of the output alone lets through) fails the job before its first step,
// saying why, rather than being evaluated by the worker.
func TestNeedsOutputsMakeNoReference(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 1)
	tail := strings.TrimPrefix(pipeline.WorkerExpr("format('leak:{0}', 'x')"), "$")
	run := b.submit(t, `
jobs:
  a:
    outputs: { v: "${{ steps.one.outputs.v }}" }
    steps:
      - id: one
        run: echo 'v=`+tail+`' >> "$GANTRY_OUTPUT"
  b:
    needs: [a]
    steps:
      - run: echo "got $${{ needs.a.outputs.v }}"
`)
	b.waitRun(t, run)
	if a, _ := b.jobByKey(t, run, "a"); a.Status != store.JobSuccess || a.Outputs["v"] != tail {
		t.Fatalf("a: %s, outputs %q", a.Status, a.Outputs)
	}
	j, steps := b.jobByKey(t, run, "b")
	log := b.jobLog(t, run, "b")
	if j.Status != store.JobFailed || strings.Contains(log, "leak:") {
		t.Errorf("b: %s, want failed before its step; log:\n%s", j.Status, log)
	}
	wantLog(t, log, "makes ${{ with the text around it")
	for _, st := range steps {
		if st.Status == store.StepSuccess {
			t.Errorf("b: step %d ran", st.Index)
		}
	}
}
