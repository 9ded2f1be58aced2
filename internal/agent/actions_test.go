package agent

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/actions"
	"github.com/gantry-ci/gantry/internal/actions/actionstest"
	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
	"github.com/google/uuid"
)

// actionsBundle is a coordinator whose actions come from source, with a worker.
func actionsBundle(t *testing.T, source string) (*bundle, *actions.Resolver) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlitetest.Path(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src, err := actions.ParseSource(source)
	if err != nil {
		t.Fatal(err)
	}
	res := &actions.Resolver{Source: src, MirrorsDir: t.TempDir()}
	srv := httptest.NewServer(api.New(api.Config{Store: st, HeartbeatEvery: 200 * time.Millisecond, LeaseTTL: 5 * time.Second,
		Blobs: newBlobs(t, t.TempDir()), Actions: res}).Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = st.Close()
	})
	b := &bundle{st: st, url: srv.URL}
	b.start(t, 2)
	return b, res
}

// submitActions makes a run of a workflow as the coordinator does: its actions pinned.
func (b *bundle) submitActions(t *testing.T, r *actions.Resolver, wf string) (*pipeline.Plan, string) {
	t.Helper()
	p, err := pipeline.Compile([]byte(wf), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err = r.Pin(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	payload := json.RawMessage(`{"ref": "refs/heads/main", "repository": {"full_name": "acme/app"}, "head_commit": {"message": "fix: things"}}`)
	run, _, _, err := b.st.CreateRun(t.Context(), store.CreateRunParams{Plan: p,
		Trigger: store.Trigger{Branch: "main", Repository: "acme/app", Event: "push", Actor: "mona", Payload: &payload}})
	if err != nil {
		t.Fatal(err)
	}
	return p, run.ID.String()
}

const actionsWorkflow = `on: push
jobs:
  t:
    runs-on: ubuntu-latest
    steps:
      - id: hi
        uses: acme/greet@v1
        with:
          who: world
          sign-off: yours
      - run: test "${{ steps.hi.outputs.message }}" = "Hello, world from acme/app"
      - id: sh
        uses: acme/tools/shout@v1
        with:
          text: quiet
      - run: test "${{ steps.sh.outputs.loud }}" = "HELLO, QUIET FROM ACME/APP"
      - name: make a local action
        run: |
          mkdir -p .github/actions/local
          cat > .github/actions/local/action.yml <<'EOF'
          inputs:
            n: {default: '2'}
          outputs:
            twice: {value: '@{ steps.x.outputs.v }}'}
          runs:
            using: composite
            steps:
              - id: x
                shell: sh
                run: echo "v=$(( @{ inputs.n }} * 2 ))" >> "$GITHUB_OUTPUT"
          EOF
          sed -i 's/@{/$\{{/g' .github/actions/local/action.yml
      - id: local
        uses: ./.github/actions/local
        with:
          n: 21
      - run: |
          test "${{ steps.local.outputs.twice }}" = 42
          test "$GITHUB_ACTIONS" = true && test "$CI" = true && test "$GITHUB_REPOSITORY" = acme/app
          test "$RUNNER_OS" = Linux && test -d "$RUNNER_TEMP" && test -s "$GITHUB_EVENT_PATH"
          grep -q '"full_name": "acme/app"' "$GITHUB_EVENT_PATH"
`

// TestActions runs a workflow of a JavaScript action (with a default that reads the
// github context, state, and a post step), a composite action of a repository's
// directory that uses it, and a local action made by an earlier step, all fetched from
// bare repositories of a local directory: outputs flow from each to later steps, the
// post step runs after the last step, and the run records the commit of each action.
func TestActions(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is needed for JavaScript actions: install nodejs (scripts/deps.sh does)")
	}
	dir := t.TempDir()
	greet := actionstest.Repo(t, dir, "acme", "greet", actionstest.Greet, "v1")
	tools := actionstest.Repo(t, dir, "acme", "tools", actionstest.Shout, "v1")
	b, r := actionsBundle(t, dir)
	p, run := b.submitActions(t, r, actionsWorkflow)
	if pin := p.Jobs[0].Steps[0].Actions["acme/greet@v1"]; pin.Commit != greet || !strings.HasSuffix(pin.URL, "/acme/greet.git") {
		t.Errorf("greet pinned to %+v, want commit %s", pin, greet)
	}
	shout := p.Jobs[0].Steps[2].Actions
	if shout["acme/tools/shout@v1"].Commit != tools || shout["acme/greet@v1"].Commit != greet {
		t.Errorf("shout's pins = %+v, want tools at %s and the greet it uses at %s", shout, tools, greet)
	}
	b.wantSuccess(t, uuidOf(t, run))
	log := b.jobLog(t, uuidOf(t, run), "t")
	for _, want := range []string{
		"Hello, world from acme/app",
		"signed off: yours",
		"action acme/greet@v1 in ",
		"Hello, quiet from acme/app",
		"post of greet: greeted world",
		"post of greet: greeted quiet",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "never, nothing failed") {
		t.Errorf("a composite step with if: failure() ran though nothing failed:\n%s", log)
	}
	// Posts run after the last step, the last action's first.
	last := strings.LastIndex(log, "step test \"")
	quiet, world := strings.Index(log, "post of greet: greeted quiet"), strings.Index(log, "post of greet: greeted world")
	if !(last < quiet && quiet < world) {
		t.Errorf("posts ran out of order (last step at %d, quiet's post at %d, world's at %d):\n%s", last, quiet, world, log)
	}

	// A tag moved after the run was made does not change what its attempts run: the
	// pin does. A new run takes the new commit.
	moved := actionstest.Repo(t, dir, "acme", "greet", map[string]string{"dist/main.js": actionstest.Greet["dist/main.js"] + "console.log('version two');\n"}, "v1")
	if moved == greet {
		t.Fatal("the tag did not move")
	}
	r.Fresh = time.Nanosecond
	p2, _ := b.submitActions(t, r, actionsWorkflow)
	if got := p2.Jobs[0].Steps[0].Actions["acme/greet@v1"].Commit; got != moved {
		t.Errorf("a new run pinned greet to %s, want the moved tag's %s", got, moved)
	}
}

// TestActionFailures: a failing JavaScript action fails its step with its exit code and
// the job, its post still runs (post-if: always()); a later step with if: failure() runs.
func TestActionFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	actionstest.Repo(t, dir, "acme", "greet", actionstest.Greet, "v1")
	b, r := actionsBundle(t, dir)
	_, run := b.submitActions(t, r, `on: push
jobs:
  t:
    runs-on: ubuntu-latest
    steps:
      - uses: acme/greet@v1
        with: {who: x, fail: 'true'}
      - run: echo "skipped, a step failed"
      - if: failure()
        run: echo "cleanup after failure"
`)
	id := uuidOf(t, run)
	if r := b.waitRun(t, id); r.Status != store.RunFailed {
		t.Fatalf("run %s, want failed", r.Status)
	}
	job, steps := b.jobByKey(t, id, "t")
	if job.ExitCode == nil || *job.ExitCode != 3 {
		t.Errorf("job exit code %v, want the action's 3", job.ExitCode)
	}
	if steps[0].Status != store.StepFailed || steps[1].Status != store.StepSkipped || steps[2].Status != store.StepSuccess {
		t.Errorf("steps %s %s %s, want failed skipped success", steps[0].Status, steps[1].Status, steps[2].Status)
	}
	log := b.jobLog(t, id, "t")
	if !strings.Contains(log, "failing as asked") || !strings.Contains(log, "post of greet: greeted x") || !strings.Contains(log, "cleanup after failure") {
		t.Errorf("log:\n%s", log)
	}

	// A worker (or image) without node fails a JavaScript action's step saying so.
	_, run = b.submitActions(t, r, `on: push
jobs:
  t:
    runs-on: ubuntu-latest
    env: {PATH: /nonexistent}
    steps:
      - uses: acme/greet@v1
        with: {who: x}
`)
	id = uuidOf(t, run)
	if r := b.waitRun(t, id); r.Status != store.RunFailed {
		t.Fatalf("run without node: %s, want failed", r.Status)
	}
	if job, _ := b.jobByKey(t, id, "t"); job.ExitCode == nil || *job.ExitCode != 127 {
		t.Errorf("job exit code %v, want 127", job.ExitCode)
	}
	if log := b.jobLog(t, id, "t"); !strings.Contains(log, "is a JavaScript action (runs.using: node20) and needs Node.js, but no node is on the step's PATH (/nonexistent)") {
		t.Errorf("log:\n%s", log)
	}
}

// TestActionsOverHTTP resolves and fetches actions from a git server over HTTP (git
// http-backend on loopback), the way a mirror such as Gitea serves them, and refuses a
// run whose action cannot be resolved, naming the action and the source tried.
func TestActionsOverHTTP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	greet := actionstest.Repo(t, dir, "acme", "greet", actionstest.Greet, "v1")
	base := actionstest.Serve(t, dir)
	b, _ := actionsBundle(t, base+"/{owner}/{repo}.git")

	post := func(def string) (int, string) {
		t.Helper()
		res, err := http.Post(b.url+"/api/v1/runs", "application/yaml", strings.NewReader(def))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	code, body := post("on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n      - id: g\n        uses: acme/greet@" + greet + "\n        with: {who: http}\n      - run: test \"${{ steps.g.outputs.message }}\" = 'Hello, http from '\n")
	if code != http.StatusAccepted {
		t.Fatalf("POST /api/v1/runs: %d %s", code, body)
	}
	id := runIDFrom(t, body)
	b.wantSuccess(t, id)
	if log := b.jobLog(t, id, "t"); !strings.Contains(log, base+"/acme/greet.git at "+greet) {
		t.Errorf("the log does not say where the action came from:\n%s", log)
	}

	for _, c := range []struct{ uses, want string }{
		{"acme/missing@v1", "acme/missing@v1 could not be resolved from " + base + "/acme/missing.git"},
		{"acme/greet@v9", `has no branch, tag or commit \"v9\"`},
		{"acme/greet/nodir@v1", "nodir at "},
	} {
		code, body := post("jobs:\n  t:\n    steps:\n      - uses: " + c.uses + "\n")
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, c.want) {
			t.Errorf("uses %s: %d %s, want 422 saying %q", c.uses, code, body, c.want)
		}
	}
}

func uuidOf(t *testing.T, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// runIDFrom reads the id of the run POST /api/v1/runs answered.
func runIDFrom(t *testing.T, body string) uuid.UUID {
	t.Helper()
	var v struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return uuidOf(t, v.ID)
}

// TestWorkerExpressions runs a workflow whose ${{ }} Gantry's references cannot say
// (operators, functions, github.event, secrets.GITHUB_TOKEN, needs in an expression):
// the worker evaluates each when its step runs, as GitHub does, in run, name, env,
// with: and the job's outputs; a secret the project does not have reads as "" and the
// log says so; an expression that fails fails its step, saying which.
func TestWorkerExpressions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	actionstest.Repo(t, dir, "acme", "greet", actionstest.Greet, "v1")
	b, r := actionsBundle(t, dir)
	_, run := b.submitActions(t, r, `on: push
jobs:
  a:
    runs-on: ubuntu-latest
    outputs:
      o: ${{ steps.s.outputs.v == 'x' && 'yes' || 'no' }}
    env:
      J: ${{ github.repository_owner }}-${{ github.event_name == 'push' && 'pushed' || 'other' }}
    steps:
      - id: s
        run: echo "v=x" >> "$GITHUB_OUTPUT"
      - name: check ${{ steps.s.outputs.v == 'x' && 'ok' || 'bad' }}
        env:
          TOK: ${{ secrets.GITHUB_TOKEN }}
          M: ${{ toJSON(fromJSON('{"a":[1,2]}').a) }}
        run: |
          test "$J" = acme-pushed
          test "${{ steps.s.outputs.v != '' && 'set' || 'unset' }}" = set
          test -z "$TOK"
          test "${{ github.event.repository.full_name }}" = acme/app
          test "${{ contains(github.ref, 'main') }}" = true
          test "${{ hashFiles('nothing/**') }}" = ""
          test "$(echo $M | tr -d ' \n')" = "[1,2]"
      - id: g
        uses: acme/greet@v1
        with:
          who: ${{ format('{0}!', github.event_name == 'push' && 'pusher' || 'nobody') }}
      - run: test "${{ steps.g.outputs.message }}" = "Hello, pusher! from acme/app"
      - if: startsWith(github.event.head_commit.message, 'fix:') && github.repository_owner == 'acme'
        run: |
          test "$GITHUB_ACTOR" = mona
          grep -q '"message": "fix: things"' "$GITHUB_EVENT_PATH"
          echo "webhook payload read"
      - if: github.actor == 'someone-else'
        run: echo "never, mona started it"
  b:
    needs: a
    runs-on: ubuntu-latest
    steps:
      - run: test "${{ needs.a.outputs.o == 'yes' && 'good' || 'bad' }}" = good
      - run: echo "${{ fromJSON('not json') }}"
  c:
    needs: b
    if: always()
    runs-on: ubuntu-latest
    steps:
      - run: test "${{ needs.b.result }}" = failure && test "${{ needs.b.result == 'failure' }}" = true
`)
	id := uuidOf(t, run)
	if r := b.waitRun(t, id); r.Status != store.RunFailed {
		t.Fatalf("run %s, want failed (b's last step)", r.Status)
	}
	jobA, _ := b.jobByKey(t, id, "a")
	if jobA.Status != store.JobSuccess {
		t.Fatalf("job a %s:\n%s", jobA.Status, b.jobLog(t, id, "a"))
	}
	logA := b.jobLog(t, id, "a")
	if !strings.Contains(logA, "step check ok") || !strings.Contains(logA, "GITHUB_TOKEN") || !strings.Contains(logA, "read as empty") ||
		!strings.Contains(logA, "webhook payload read") || strings.Contains(logA, "\nnever, mona started it") ||
		!strings.Contains(logA, "if: github.actor == 'someone-else' was false") {
		t.Errorf("job a's log:\n%s", logA)
	}
	_, steps := b.jobByKey(t, id, "b")
	if steps[0].Status != store.StepSuccess || steps[1].Status != store.StepFailed {
		t.Errorf("job b's steps %s %s, want success failed:\n%s", steps[0].Status, steps[1].Status, b.jobLog(t, id, "b"))
	}
	if log := b.jobLog(t, id, "b"); !strings.Contains(log, "fromJSON('not json')") {
		t.Errorf("job b's log does not say which expression failed:\n%s", log)
	}
	if jobC, _ := b.jobByKey(t, id, "c"); jobC.Status != store.JobSuccess {
		t.Errorf("job c %s: needs.b.result does not read failure in a step's text:\n%s", jobC.Status, b.jobLog(t, id, "c"))
	}
}

// TestCheckoutSteps: actions/checkout of another ref, of another repository of the same
// forge, and a second checkout run as steps where the workflow has them, each into its
// path, with GitHub's outputs; the job's own checkout of the run's commit stays as it was.
func TestCheckoutSteps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old := actionstest.Repo(t, dir, "acme", "app", map[string]string{"VERSION": "1\n"}, "v1")
	head := actionstest.Repo(t, dir, "acme", "app", map[string]string{"VERSION": "2\n", "src/main.go": "package main\n"})
	other := actionstest.Repo(t, dir, "acme", "docs", map[string]string{"README": "docs\n"})
	b, r := actionsBundle(t, dir)
	p, err := pipeline.Compile([]byte(`on: push
jobs:
  t:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: mkdir -p old && echo stale > old/VERSION && echo x > old/leftover
      - id: old
        uses: actions/checkout@v4
        with: {ref: v1, path: old}
      - id: docs
        if: github.event_name == 'push'
        uses: actions/checkout@v4
        with: {repository: acme/docs, path: site, fetch-depth: 0}
      - uses: actions/checkout@v4
        with: {path: sparse, sparse-checkout: .github}
      - run: |
          test "$(cat VERSION)" = 2
          test "$(cat old/VERSION)" = 1 && test ! -e old/leftover
          test "$(cat site/README)" = docs
          test -e sparse/VERSION && test ! -e sparse/src
          test "${{ steps.old.outputs.commit }}" = "`+old+`"
          test "${{ steps.docs.outputs.commit }}" = "`+other+`"
`), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Jobs[0].Checkout == nil || p.Jobs[0].Checkout.Skip {
		t.Fatalf("the first plain checkout is the job's: %+v", p.Jobs[0].Checkout)
	}
	if p, err = r.Pin(t.Context(), p); err != nil || len(p.Jobs[0].Steps[0].Actions) != 0 {
		t.Fatalf("pinning a native checkout step: %v, %+v (nothing is fetched for it)", err, p.Jobs[0].Steps[0].Actions)
	}
	run, _, _, err := b.st.CreateRun(t.Context(), store.CreateRunParams{Plan: p, Trigger: store.Trigger{Branch: "main", Repository: "acme/app",
		Event: "push", SHA: head, CloneURL: "file://" + dir + "/acme/app.git"}})
	if err != nil {
		t.Fatal(err)
	}
	b.wantSuccess(t, run.ID)
	if log := b.jobLog(t, run.ID, "t"); !strings.Contains(log, "acme/docs.git at "+other+" into site") {
		t.Errorf("log:\n%s", log)
	}
	for in, want := range map[[3]string]string{
		{"https://github.com/acme/app.git", "acme/app", "acme/docs"}: "https://github.com/acme/docs.git",
		{"https://git.example.com/acme/app", "acme/app", "o/r"}:      "https://git.example.com/o/r",
		{"https://git.example.com/elsewhere", "acme/app", "o/r"}:     "",
	} {
		if got := siblingRepository(in[0], in[1], in[2]); got != want {
			t.Errorf("siblingRepository(%q, %q, %q) = %q, want %q", in[0], in[1], in[2], got, want)
		}
	}
}

// TestSelfActions: $/dir runs an action of the run's own repository at the run's commit,
// with no checkout, whatever the workspace holds.
func TestSelfActions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	action := "runs:\n  using: composite\n  steps:\n    - shell: sh\n      run: echo \"self ${{ github.repository }} $(cat \"$GITHUB_ACTION_PATH/VERSION\")\"\n"
	actionstest.Repo(t, dir, "acme", "app", map[string]string{".github/actions/hi/action.yml": action, ".github/actions/hi/VERSION": "1\n"})
	head := actionstest.Repo(t, dir, "acme", "app", map[string]string{".github/actions/hi/action.yml": action, ".github/actions/hi/VERSION": "2\n"})
	b, r := actionsBundle(t, dir)
	p, err := pipeline.Compile([]byte(`on: push
jobs:
  t:
    runs-on: ubuntu-latest
    steps:
      - run: test ! -e .github
      - uses: $/.github/actions/hi
      - uses: $/.github/actions/missing
`), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p, err = r.Pin(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	run, _, _, err := b.st.CreateRun(t.Context(), store.CreateRunParams{Plan: p, Trigger: store.Trigger{Branch: "main", Repository: "acme/app",
		Event: "push", SHA: head, CloneURL: "file://" + dir + "/acme/app.git"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.waitRun(t, run.ID); got.Status != store.RunFailed {
		t.Fatalf("run %s, want failed (the second action is not in the repository)", got.Status)
	}
	wantLog(t, b.jobLog(t, run.ID, "t"), "self acme/app 2", "$/ actions: file://"+dir+"/acme/app.git at "+head,
		"the run's repository has no .github/actions/missing/action.yml at "+head)
	if _, err := pipeline.ParseUses("$/../x"); err == nil {
		t.Error("$/../x leaves the repository, and is accepted")
	}
}
