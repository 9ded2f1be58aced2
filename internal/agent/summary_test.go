package agent

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// summaryParts is each kept part of the job's current attempt, "step:text".
func (b *bundle) summaryParts(t *testing.T, job uuid.UUID) []string {
	t.Helper()
	ps, err := b.st.ListSummaries(t.Context(), store.ListSummariesParams{JobID: job, Markdown: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%d:%s", p.Step, p.Markdown))
	}
	return out
}

// summaryWarnings are the job's warnings about step summaries, "step:message".
func (b *bundle) summaryWarnings(t *testing.T, job uuid.UUID) []string {
	t.Helper()
	as, err := b.st.ListAnnotations(t.Context(), store.ListAnnotationsParams{JobID: job})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range as {
		if a.Title == summaryTitle && a.Level == store.AnnotationWarning {
			out = append(out, fmt.Sprintf("%d:%s", a.Step, a.Message))
		}
	}
	return out
}

func wantParts(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("%s: summary parts\n%q\nwant\n%q", what, got, want)
	}
}

// TestStepSummaries: every step has a summary file of its own, empty when it starts, by
// Gantry's name and GitHub's; what it wrote is kept after it, as its part of the job's
// summary, whether it failed or not; masked like the log; one over 1 MiB, or a file a
// step replaced with a symlink, is not kept, and a warning of that step says why.
func TestStepSummaries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 2)
	run := b.submit(t, `
jobs:
  ok:
    steps:
      - run: |
          test "$GANTRY_STEP_SUMMARY" = "$GITHUB_STEP_SUMMARY" && test -f "$GANTRY_STEP_SUMMARY" && test ! -s "$GANTRY_STEP_SUMMARY"
          echo "# Title" >> "$GANTRY_STEP_SUMMARY"
          printf '| a | b |\n|---|---|\n| 1 | 2 |\n' >> "$GITHUB_STEP_SUMMARY"
      - run: echo "nothing to say"
      - run: |
          echo "::add-mask::hunter2hunter2"
          echo "token hunter2hunter2" >> "$GITHUB_STEP_SUMMARY"
      - run: echo "failed, but said so" >> "$GITHUB_STEP_SUMMARY"; exit 3
        continue_on_error: true
      - run: head -c 1048577 /dev/zero | tr '\0' x >> "$GITHUB_STEP_SUMMARY"
      - run: |
          test ! -s "$GITHUB_STEP_SUMMARY"
          printf '\n  \n' >> "$GITHUB_STEP_SUMMARY"
      - run: rm "$GITHUB_STEP_SUMMARY" && echo "elsewhere" > link-target && ln -s "$PWD/link-target" "$GITHUB_STEP_SUMMARY"
      - run: |
          test -f "$GITHUB_STEP_SUMMARY" && test ! -L "$GITHUB_STEP_SUMMARY" && test ! -s "$GITHUB_STEP_SUMMARY"
          head -c 1048576 /dev/zero | tr '\0' y >> "$GITHUB_STEP_SUMMARY"
  fails:
    steps:
      - run: echo "why it failed" >> "$GANTRY_STEP_SUMMARY"; exit 1
      - run: echo "never" >> "$GANTRY_STEP_SUMMARY"
`)
	if r := b.waitRun(t, run); r.Status != store.RunFailed {
		t.Fatalf("run %s, want failed (job fails)", r.Status)
	}
	ok, _ := b.jobByKey(t, run, "ok")
	if ok.Status != store.JobSuccess {
		t.Fatalf("job ok %s:\n%s", ok.Status, b.jobLog(t, run, "ok"))
	}
	wantParts(t, "ok", b.summaryParts(t, ok.ID),
		"0:# Title\n| a | b |\n|---|---|\n| 1 | 2 |\n",
		"2:token ***\n",
		"3:failed, but said so\n",
		"7:"+strings.Repeat("y", store.MaxSummaryBytes))
	warnings := b.summaryWarnings(t, ok.ID)
	if len(warnings) != 2 ||
		!strings.HasPrefix(warnings[0], "4:step head -c 1048577") || !strings.Contains(warnings[0], "the step summary is not kept: it is 1.0 MiB, more than the 1 MiB a step's summary may be") ||
		!strings.HasPrefix(warnings[1], "6:step rm ") || !strings.Contains(warnings[1], "is a symlink, not the file the step was given") {
		t.Errorf("warnings %q, want steps 4 (too large) and 6 (a symlink)", warnings)
	}
	fails, _ := b.jobByKey(t, run, "fails")
	wantParts(t, "fails", b.summaryParts(t, fails.ID), "0:why it failed\n")
}

// TestStepSummaryBound: a job keeps the summaries of 20 steps; a later step's is not
// kept, and its warning says so.
func TestStepSummaryBound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 1)
	var steps strings.Builder
	for i := range store.MaxSummarySteps + 1 {
		fmt.Fprintf(&steps, "      - run: echo 'part %d' >> \"$GANTRY_STEP_SUMMARY\"\n", i)
	}
	run := b.submit(t, "jobs:\n  a:\n    steps:\n"+steps.String())
	b.wantSuccess(t, run)
	a, _ := b.jobByKey(t, run, "a")
	if parts := b.summaryParts(t, a.ID); len(parts) != store.MaxSummarySteps || parts[19] != "19:part 19\n" {
		t.Errorf("%d parts kept (%q), want %d", len(parts), parts, store.MaxSummarySteps)
	}
	if w := b.summaryWarnings(t, a.ID); len(w) != 1 || !strings.HasPrefix(w[0], "20:") || !strings.Contains(w[0], "a job keeps the summaries of 20 steps") {
		t.Errorf("warnings %q, want one of step 20", w)
	}
}

// TestStepSummaryResent: the coordinator keeps a step's summary but its answer is lost
// on the way back: the worker sends it again, and the job still has one part.
func TestStepSummaryResent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target, err := url.Parse(b.url)
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int32
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		if strings.HasSuffix(r.Request.URL.Path, "/summary") && sent.Add(1) == 1 {
			return errors.New("answer lost on the way back")
		}
		return nil
	}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	startAgent(t, front.URL, slog.LevelInfo)
	run := b.submit(t, "jobs:\n  a: {steps: [{run: 'echo once >> \"$GANTRY_STEP_SUMMARY\"'}, {run: 'echo twice >> \"$GANTRY_STEP_SUMMARY\"'}]}\n")
	b.wantSuccess(t, run)
	if n := sent.Load(); n != 3 {
		t.Errorf("the summaries were sent %d times, want 3 (the first again)", n)
	}
	a, _ := b.jobByKey(t, run, "a")
	wantParts(t, "a", b.summaryParts(t, a.ID), "0:once\n", "1:twice\n")
}

// TestStepSummaryOlderCoordinator: a coordinator without the summaries feature is sent
// none, and the job's log says that they are not kept.
func TestStepSummaryOlderCoordinator(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target, err := url.Parse(b.url)
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int32
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		switch {
		case strings.HasSuffix(r.Request.URL.Path, "/register"):
			return withoutFeature(r, featureSummaries)
		case strings.HasSuffix(r.Request.URL.Path, "/summary"):
			sent.Add(1)
		}
		return nil
	}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	startAgent(t, front.URL, slog.LevelInfo)
	run := b.submit(t, "jobs:\n  a: {steps: [{run: 'echo x >> \"$GANTRY_STEP_SUMMARY\"'}, {run: 'echo y >> \"$GANTRY_STEP_SUMMARY\"'}]}\n")
	b.wantSuccess(t, run)
	if n := sent.Load(); n != 0 {
		t.Errorf("%d summaries sent to a coordinator that keeps none", n)
	}
	if log := b.jobLog(t, run, "a"); strings.Count(log, "step summaries are not kept: the coordinator is of a version that does not keep them") != 1 {
		t.Errorf("the log does not say once that summaries are not kept:\n%s", log)
	}
}

// TestActionSummaries: a composite action's steps write one summary, the step's; a
// JavaScript action's main and post each write their own, the post's after the job's
// last step.
func TestActionSummaries(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is needed for JavaScript actions: install nodejs (scripts/deps.sh does)")
	}
	b, r := actionsBundle(t, t.TempDir())
	_, run := b.submitActions(t, r, `on: push
jobs:
  t:
    runs-on: ubuntu-latest
    steps:
      - name: make actions
        run: |
          mkdir -p .github/actions/comp .github/actions/js
          cat > .github/actions/comp/action.yml <<'EOF'
          runs:
            using: composite
            steps:
              - shell: sh
                run: echo "comp one" >> "$GITHUB_STEP_SUMMARY"
              - shell: bash
                run: echo "comp two" >> "$GITHUB_STEP_SUMMARY"
          EOF
          cat > .github/actions/js/action.yml <<'EOF'
          runs:
            using: node20
            main: main.js
            post: post.js
          EOF
          echo 'require("fs").appendFileSync(process.env.GITHUB_STEP_SUMMARY, "js main\n")' > .github/actions/js/main.js
          echo 'require("fs").appendFileSync(process.env.GITHUB_STEP_SUMMARY, "js post\n")' > .github/actions/js/post.js
          echo "made" >> "$GITHUB_STEP_SUMMARY"
      - uses: ./.github/actions/comp
      - uses: ./.github/actions/js
      - run: echo "last" >> "$GITHUB_STEP_SUMMARY"
`)
	id := uuidOf(t, run)
	b.wantSuccess(t, id)
	job, _ := b.jobByKey(t, id, "t")
	wantParts(t, "t", b.summaryParts(t, job.ID), "0:made\n", "1:comp one\ncomp two\n", "2:js main\n", "3:last\n", "4:js post\n")
}

// TestStepSummaryRefused: a summary the coordinator refuses is not sent again, the job
// goes on, and a warning of its step says why.
func TestStepSummaryRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target, err := url.Parse(b.url)
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int32
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		if strings.HasSuffix(r.Request.URL.Path, "/summary") {
			sent.Add(1)
			r.StatusCode = http.StatusBadRequest
			r.Body = io.NopCloser(strings.NewReader(`{"error": {"code": "bad_request", "message": "no room", "details": []}}`))
			r.ContentLength = -1
			r.Header.Del("Content-Length")
		}
		return nil
	}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	startAgent(t, front.URL, slog.LevelInfo)
	run := b.submit(t, "jobs:\n  a: {steps: [{run: 'true'}, {run: 'echo x >> \"$GANTRY_STEP_SUMMARY\"'}]}\n")
	b.wantSuccess(t, run)
	a, _ := b.jobByKey(t, run, "a")
	if n := sent.Load(); n != 1 {
		t.Errorf("the refused summary was sent %d times, want once", n)
	}
	if w := b.summaryWarnings(t, a.ID); len(w) != 1 || !strings.HasPrefix(w[0], "1:the coordinator did not keep the step summary") || !strings.Contains(w[0], "no room") {
		t.Errorf("warnings %q, want one of step 1 saying the coordinator refused it", w)
	}
}
