package pipeline

import (
	"testing"
	"time"
)

// timeout-minutes and continue-on-error from expressions are decided for each instance
// of the matrix, a job's and a step's alike.
func TestWorkflowSettingExpressions(t *testing.T) {
	wf := `on: push
jobs:
  test:
    runs-on: ubuntu-latest
    timeout-minutes: ${{ matrix.slow == 'yes' && 60 || 15 }}
    continue-on-error: ${{ matrix.slow == 'yes' }}
    strategy:
      matrix:
        slow: ['yes', 'no']
        t: [3]
    steps:
      - uses: actions/checkout@v4
      - run: make
        timeout-minutes: ${{ matrix.t }}
        continue-on-error: ${{ matrix.slow != 'yes' }}
`
	p, err := Compile([]byte(wf), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Jobs) != 2 {
		t.Fatalf("%d jobs", len(p.Jobs))
	}
	for _, j := range p.Jobs {
		slow := j.Matrix[0].Value == "yes"
		wantJob := 15 * time.Minute
		if slow {
			wantJob = time.Hour
		}
		st := j.Steps[0]
		if time.Duration(j.Timeout) != wantJob || j.ContinueOnError != slow || time.Duration(st.Timeout) != 3*time.Minute || st.ContinueOnError == slow {
			t.Errorf("%s: job timeout %s, continue %v; step timeout %s, continue %v", j.Key, time.Duration(j.Timeout), j.ContinueOnError, time.Duration(st.Timeout), st.ContinueOnError)
		}
	}
}
