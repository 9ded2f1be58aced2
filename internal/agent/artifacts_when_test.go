package agent

import (
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
)

// TestArtifactsWhen: artifacts: when: decides after which outcome the job's files are
// kept: on_failure keeps a failed job's reports and nothing of a job that succeeded,
// always keeps both, the default only a success's; a workflow's upload-artifact with
// if: failure() says the same.
func TestArtifactsWhen(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 4)
	run := b.submit(t, `
jobs:
  fails-on-failure:
    artifacts: {paths: [report.txt], when: on_failure}
    steps:
      - run: echo failed > report.txt; exit 1
  passes-on-failure:
    artifacts: {paths: [report.txt], when: on_failure}
    steps:
      - run: echo passed > report.txt
  fails-always:
    artifacts: {paths: [report.txt], when: always}
    steps:
      - run: echo failed > report.txt; exit 1
  fails-default:
    artifacts: {paths: [report.txt]}
    steps:
      - run: echo failed > report.txt; exit 1
`)
	if r := b.waitRun(t, run); r.Status != store.RunFailed {
		t.Fatalf("run %s, want failed", r.Status)
	}
	as := b.runArtifacts(t, run)
	for key, want := range map[string]bool{"fails-on-failure": true, "passes-on-failure": false, "fails-always": true, "fails-default": false} {
		if _, got := as[key+":report.txt"]; got != want {
			t.Errorf("%s kept report.txt: %v, want %v (artifacts %v)", key, got, want, as)
		}
	}

	wf := b.submit(t, `on: push
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - run: echo "FAIL x" > junit.xml; exit 1
      - uses: actions/upload-artifact@v4
        if: failure()
        with: {name: reports, path: junit.xml}
`)
	b.waitRun(t, wf)
	if _, ok := b.runArtifacts(t, wf)["test:junit.xml"]; !ok {
		t.Errorf("a failed job's upload-artifact with if: failure() kept nothing: %v", b.runArtifacts(t, wf))
	}
}
