package web_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gantry-ci/gantry/internal/agent"
	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/scheduler"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/web"
)

// These tests drive the real dashboard in headless Chromium against a real coordinator
// (SQLite, a blob dir, the scheduler loops) and a real worker running real processes.

// waitFor bounds every action and every wait in the page; the whole browser session has
// browserTimeout, a bound for a test that hangs, not for a slow one (a busy machine
// stretches a session of many steps).
const (
	waitFor        = 20 * time.Second
	browserTimeout = 3 * time.Minute
)

type coordinator struct {
	url   string
	st    store.Store
	token string // a write token, with auth on
}

// startCoordinator runs a coordinator serving the dashboard, the scheduler loops and one
// worker, until the test ends. With auth, it makes a write token for the test.
func startCoordinator(t *testing.T, auth bool) *coordinator {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "gantry.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	// A blob store, for the artifacts: a job with needs fetches its needs' artifacts
	// before its first step, and fails when the artifact routes are off.
	blobs, err := blob.OpenDir(t.TempDir(), blob.Options{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	srv := api.New(api.Config{Store: st, Blobs: blobs, Auth: auth, UI: web.Handler(),
		HeartbeatEvery: 200 * time.Millisecond, LeaseTTL: 5 * time.Second})
	handler := srv.Handler()
	ts := httptest.NewServer(handler)
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
		_ = st.Close()
	})
	c := &coordinator{url: ts.URL, st: st}
	var register string
	if auth {
		if c.token, err = api.IssueToken(ctx, st, "dashboard test", store.RoleWrite, ""); err != nil {
			t.Fatal(err)
		}
		if register, err = api.IssueToken(ctx, st, "worker", store.RoleRegister, ""); err != nil {
			t.Fatal(err)
		}
	}

	// Both stop when the test's context ends, before the cleanups above run.
	var wg sync.WaitGroup
	wg.Go(func() { scheduler.New(scheduler.Config{Store: st}).Run(ctx) })
	w := agent.New(agent.Config{Server: ts.URL, Token: register, Name: "w", MaxJobs: 4, WorkDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	wg.Go(func() {
		if err := w.Run(ctx, ctx); err != nil && ctx.Err() == nil {
			t.Errorf("worker: %v", err)
		}
	})
	t.Cleanup(wg.Wait)
	return c
}

// submit posts a pipeline through the API and returns the run's id and its jobs' ids by key.
func (c *coordinator) submit(t *testing.T, yaml string) (string, map[string]string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, c.url+"/api/v1/runs", strings.NewReader(yaml))
	req.Header.Set("Content-Type", "application/yaml")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %s: %s", res.Status, body)
	}
	var run struct {
		ID   string `json:"id"`
		Jobs []struct{ ID, Key string }
	}
	if err := json.Unmarshal(body, &run); err != nil {
		t.Fatal(err)
	}
	jobs := map[string]string{}
	for _, j := range run.Jobs {
		jobs[j.Key] = j.ID
	}
	return run.ID, jobs
}

// chromium finds the browser: GANTRY_CHROMIUM, then the usual names on PATH.
func chromium() string {
	if p := os.Getenv("GANTRY_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

type browser struct {
	ctx  context.Context
	t    *testing.T
	shot string // screenshot directory

	mu     sync.Mutex
	errors []string // console errors and uncaught exceptions
	allow  func(chromedp.ConsoleMessage) bool
}

// newBrowser starts headless Chromium at 1280x800 for the test. Console errors and
// uncaught exceptions in the page fail the test, unless allow accepts them.
func newBrowser(t *testing.T, allow func(chromedp.ConsoleMessage) bool, extra ...chromedp.ExecAllocatorOption) *browser {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the browser tests start Chromium, a few seconds each (make test runs them)")
	}
	path := chromium()
	if path == "" {
		if testing.Short() {
			t.Skip("no Chromium found; the browser tests need it (apt-get install -y chromium, or set GANTRY_CHROMIUM)")
		}
		t.Fatal("no Chromium found: install it (apt-get install -y chromium) or set GANTRY_CHROMIUM to its path; " +
			"use -short to skip the browser tests")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.WindowSize(1280, 800),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox refuses to start
	)
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	b := &browser{t: t, allow: allow}
	// The window size includes the browser's own frame; the page gets exactly this.
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		cancelBrowser()
		cancelAlloc()
		t.Fatalf("start Chromium (%s): %v", path, err)
	}
	ctx, cancel := context.WithTimeout(bctx, browserTimeout)
	b.ctx = ctx
	messages := chromedp.Console(bctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if (m.Type == chromedp.ConsoleError || m.IsException()) && (b.allow == nil || !b.allow(m)) {
				b.mu.Lock()
				b.errors = append(b.errors, fmt.Sprintf("%s:%d %s", m.URL, m.Line+1, m.Text))
				b.mu.Unlock()
			}
		}
	})
	t.Cleanup(func() {
		cancel()
		cancelBrowser()
		cancelAlloc()
		wg.Wait()
		for _, e := range b.errors {
			t.Errorf("browser console: %s", e)
		}
	})
	b.shot = screenshotDir(t)
	return b
}

// screenshotDir is the test's artifact directory with go test -artifacts, and a folder
// under the temp dir otherwise (ArtifactDir would be removed at the end of the test).
func screenshotDir(t *testing.T) string {
	if f := flag.Lookup("test.artifacts"); f != nil && f.Value.String() == "true" {
		return t.ArtifactDir()
	}
	dir := filepath.Join(os.TempDir(), "gantry-screenshots", t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitFor)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// waitJS waits until the JavaScript expression is true.
func (b *browser) waitJS(what, expr string) {
	b.t.Helper()
	ok, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr,
		chromedp.WithPollingTimeout(waitFor), chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil || !ok {
		page, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector("main") ? document.querySelector("main").innerText.slice(0, 2000) : ""`))
		b.t.Fatalf("waiting for %s: %v\npage: %s", what, err, page)
	}
}

func (b *browser) eval(expr string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(b.shot, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", p)
}

func js(s string) string { return fmt.Sprintf("%q", s) }

// TestDashboardFollowsARun: a run submitted through the API shows in the runs list; its
// graph turns green node by node; a job page shows a log line the moment the step
// prints it, with ANSI colours rendered and markup left as text; artifacts can be
// downloaded; the layout holds in a narrow window.
func TestDashboardFollowsARun(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	b := newBrowser(t, nil)
	runID, jobs := c.submit(t, `
name: dashboard-demo
jobs:
  build:
    steps:
      - name: compile
        run: |
          printf '\033[1;32mcompiled\033[0m <b>not markup</b>\n'
          mkdir -p out && echo binary > out/app
    artifacts: {paths: [out/app]}
  lint:
    steps: [ { run: echo lint ok } ]
  test:
    needs: [build]
    steps:
      - name: unit
        run: |
          echo starting tests
          sleep 4
          echo LIVE-MARKER all tests passed
  package:
    needs: [test, lint]
    steps: [ { run: echo packaged } ]
`)

	b.do("open the runs list", chromedp.Navigate(c.url+"/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-run-id="`+runID+`"]`)))
	b.screenshot("runs")

	b.do("open the run", chromedp.Click(chromedp.CSS(`tr[data-run-id="`+runID+`"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	if got := b.eval(`location.pathname`); got != "/runs/"+runID {
		t.Fatalf("the run link went to %s", got)
	}
	b.waitJS("the test job running", `document.querySelector('.node[data-key="test"]').dataset.status === "running"`)

	// The job page follows the log live: the marker is printed four seconds after the
	// first line, so it must arrive after the page has shown that line.
	b.do("open the test job", chromedp.Click(chromedp.CSS(`.node[data-key="test"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#log`)))
	if got := b.eval(`location.pathname`); got != "/jobs/"+jobs["test"] {
		t.Fatalf("the graph node went to %s", got)
	}
	b.waitJS("the first log line", `document.querySelector("#log").innerText.includes("starting tests")`)
	if b.eval(`String(document.querySelector("#log").innerText.includes("LIVE-MARKER"))`) == "true" ||
		b.eval(`document.querySelector("#job-status [data-status]").dataset.status`) != "running" {
		t.Fatal("the job had finished before the page showed its first line: the test proves nothing")
	}
	b.waitJS("the marker, live", `document.querySelector("#log").innerText.includes("LIVE-MARKER")`)
	b.waitJS("the job succeeded", `document.querySelector("#job-status [data-status]").dataset.status === "success"`)
	b.waitJS("the step succeeded with exit code 0", `[...document.querySelectorAll(".steps li")].some(s => s.dataset.status === "success" && s.dataset.exitCode === "0" && s.innerText.includes("unit"))`)
	if got := b.eval(`document.querySelector("#L3 a.ln").getAttribute("href")`); got != "#L3" {
		t.Errorf("line 3's number links to %q, want #L3", got)
	}
	b.screenshot("job")

	// Back on the run page every node turns green, in colour and in words.
	b.do("go back to the run", chromedp.NavigateBack(), chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	b.waitJS("every node green", `[...document.querySelectorAll(".node")].length === 4 &&
		[...document.querySelectorAll(".node")].every(n => n.dataset.status === "success" &&
			getComputedStyle(n.querySelector("rect")).fill === "rgb(26, 127, 55)" &&
			n.querySelector(".node-status").textContent === "success")`)
	b.waitJS("the run succeeded", `document.querySelector("#run-status [data-status]").dataset.status === "success"`)
	b.waitJS("the timeline", `document.querySelectorAll(".timeline .bar:not([hidden])").length === 4`)
	b.screenshot("run")

	// The build job: ANSI colours become styled text and markup stays text.
	b.do("open the build job", chromedp.Click(chromedp.CSS(`.node[data-key="build"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#log`)))
	b.waitJS("the coloured line", `!!document.querySelector("#log .ansi-fg-green.ansi-bold")`)
	if got := b.eval(`document.querySelector("#log .ansi-fg-green.ansi-bold").textContent`); got != "compiled" {
		t.Errorf("green bold text %q, want compiled", got)
	}
	if got := b.eval(`String(document.querySelectorAll("#log b").length) + " " + String(document.querySelector("#log").innerText.includes("<b>not markup</b>"))`); got != "0 true" {
		t.Errorf("markup in the log: %s <b> elements and literal text shown = %s", strings.Fields(got)[0], strings.Fields(got)[1])
	}
	b.waitJS("the artifact link", `!!document.querySelector('.artifacts a[href^="/api/v1/artifacts/"]')`)
	b.waitJS("the artifact's bytes", `(async () => (await (await fetch(document.querySelector('.artifacts a').href)).text()) === "binary\n")()`)

	// Search filters the lines on the page: what is drawn, not only what is marked.
	b.do("search the log", chromedp.SendKeys(chromedp.ID("log-search"), "compiled"))
	b.waitJS("one matching line", seen(`document.querySelector("#log-matches").textContent === "1 matching line" &&
		visibleRows().length === 1 && visibleRows()[0].innerText.includes("compiled")`))

	// A narrow window: nothing runs off the side of the page.
	b.do("narrow the window", chromedp.EmulateViewport(400, 800), chromedp.Navigate(c.url+"/runs/"+runID),
		chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	if got := b.eval(`String(document.documentElement.scrollWidth)`); got != "400" {
		t.Errorf("the run page is %s px wide in a 400 px window", got)
	}
	b.screenshot("run-narrow")
}

// TestDashboardCancelsARun: the cancel button stops a running job and the run shows
// cancelled.
func TestDashboardCancelsARun(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	b := newBrowser(t, nil)
	runID, _ := c.submit(t, `
name: long
jobs:
  wait:
    steps: [ { run: sleep 120 } ]
  after:
    needs: [wait]
    steps: [ { run: echo never } ]
`)
	b.do("open the run", chromedp.Navigate(c.url+"/runs/"+runID), chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	b.waitJS("the job running", `document.querySelector('.node[data-key="wait"]').dataset.status === "running"`)

	// The keyboard reaches the graph: Tab from the cancel button lands on the first node
	// (retry is disabled while the run goes on), and Enter opens its job.
	b.do("tab to the graph", chromedp.Focus(chromedp.ID("cancel-run")), chromedp.KeyEvent("\t"))
	if got := b.eval(`document.activeElement.dataset.key || document.activeElement.outerHTML.slice(0, 80)`); got != "wait" {
		t.Fatalf("Tab after the cancel button focused %s, want the node of job wait", got)
	}
	b.do("open the job with Enter", chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS(`#log`)))
	b.do("back to the run", chromedp.NavigateBack(), chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))

	b.do("cancel", chromedp.Click(chromedp.ID("cancel-run")), chromedp.WaitVisible(chromedp.ID("confirm-yes")),
		chromedp.Click(chromedp.ID("confirm-yes")))
	b.waitJS("the run cancelled", `document.querySelector("#run-status [data-status]").dataset.status === "cancelled" &&
		[...document.querySelectorAll(".node")].every(n => n.dataset.status === "cancelled")`)
	b.waitJS("retry offered", `!document.querySelector("#retry-run").disabled && document.querySelector("#cancel-run").disabled`)
	b.screenshot("run-cancelled")
}

// TestDashboardSignIn: with auth on, the dashboard sends you to sign in, refuses a
// wrong token, and with a right one shows the page you asked for, live over the
// WebSocket (which takes the token as access_token).
func TestDashboardSignIn(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, true)
	// The 401s of the sign-in itself are logged by the browser.
	b := newBrowser(t, func(m chromedp.ConsoleMessage) bool {
		return strings.Contains(m.Text, "status of 401")
	})
	runID, _ := c.submit(t, `
name: secured
jobs:
  a: { steps: [ { run: echo a } ] }
  b: { needs: [a], steps: [ { run: echo b } ] }
`)
	b.do("open a run", chromedp.Navigate(c.url+"/runs/"+runID), chromedp.WaitVisible(chromedp.ID("token")))
	if got := b.eval(`location.pathname + location.search`); got != "/signin?next="+url.QueryEscape("/runs/"+runID) {
		t.Errorf("sent to %s", got)
	}
	b.do("sign in with a wrong token", chromedp.SendKeys(chromedp.ID("token"), "gtk_wrong\r"))
	b.waitJS("the refusal", `!document.querySelector("#signin-error").hidden && document.querySelector("#signin-error").textContent.includes("not valid")`)
	b.screenshot("signin")

	b.eval(`document.querySelector("#token").value = ""`)
	b.do("sign in", chromedp.SendKeys(chromedp.ID("token"), c.token+"\r"),
		chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	if got := b.eval(`location.pathname`); got != "/runs/"+runID {
		t.Errorf("after signing in the page is %s, want the run", got)
	}
	b.waitJS("the graph green, live", `[...document.querySelectorAll(".node")].length === 2 &&
		[...document.querySelectorAll(".node")].every(n => n.dataset.status === "success")`)
	// The graph may be green from the run's first read, before the WebSocket is up: wait
	// for it (a token the socket refused keeps it at connecting... until the wait ends).
	b.waitJS("the WebSocket connected with the token", `document.querySelector(".live-state").textContent.includes("live")`)
	if got := b.eval(`sessionStorage.getItem("gantry.token") === ` + js(c.token) + ` ? "kept" : "lost"`); got != "kept" {
		t.Error("the token is not kept in sessionStorage")
	}

	b.do("sign out", chromedp.Click(chromedp.CSS(`#session button`)), chromedp.WaitVisible(chromedp.ID("token")))
	if got := b.eval(`String(sessionStorage.getItem("gantry.token"))`); got != "null" {
		t.Errorf("signing out left the token: %s", got)
	}
}

// TestDashboardRetriesAJob: a failed job shows its failure kind and exit code; the retry
// button starts a second attempt, whose log the page follows; the attempt buttons
// switch back to the first attempt's log.
func TestDashboardRetriesAJob(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	b := newBrowser(t, nil)
	_, jobs := c.submit(t, `
name: flaky
jobs:
  check:
    steps:
      - name: check
        run: echo "this is attempt $GANTRY_ATTEMPT"; test "$GANTRY_ATTEMPT" -gt 1 || exit 3
`)
	b.do("open the job", chromedp.Navigate(c.url+"/jobs/"+jobs["check"]), chromedp.WaitVisible(chromedp.CSS(`#log`)))
	b.waitJS("the job failed", `document.querySelector("#job-status [data-status]").dataset.status === "failed" &&
		document.querySelector("#failure-kind") && document.querySelector("#failure-kind").textContent === "failure"`)
	b.waitJS("the step's exit code", `document.querySelector('.steps li[data-status="failed"]').dataset.exitCode === "3"`)
	b.waitJS("the first attempt's log", `document.querySelector("#log").innerText.includes("this is attempt 1")`)

	b.do("retry", chromedp.Click(chromedp.ID("retry-job")))
	b.waitJS("the second attempt, followed", `document.querySelector("#job-status [data-status]").dataset.status === "success" &&
		document.querySelectorAll("#attempts button").length === 2 &&
		document.querySelector("#log").innerText.includes("this is attempt 2") &&
		!document.querySelector("#log").innerText.includes("this is attempt 1")`)
	// Show attempt 1, clicked from the page itself: the job page redraws its attempt
	// buttons as it polls, and a node chromedp looked up a moment earlier may be gone by
	// its click.
	b.eval(`(document.querySelector("#attempts button").click(), "shown")`)
	b.waitJS("the first attempt's log again", `document.querySelector("#log").innerText.includes("this is attempt 1") &&
		document.querySelector('#attempts button[aria-pressed="true"]').textContent === "Attempt 1 of 2" &&
		document.querySelector("#log-state").textContent.includes("attempt 2 followed")`)
	b.screenshot("job-attempts")
}

// TestDashboardSubmitsARun: a pipeline typed into the New run page starts a run whose
// nodes turn green; a broken one is refused with its mistakes and their lines.
func TestDashboardSubmitsARun(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	b := newBrowser(t, func(m chromedp.ConsoleMessage) bool { return strings.Contains(m.Text, "422") })
	b.do("open the new run page", chromedp.Navigate(c.url+"/"), chromedp.WaitVisible(chromedp.CSS(`a[data-nav="new"]`)),
		chromedp.Click(chromedp.CSS(`a[data-nav="new"]`)), chromedp.WaitVisible(chromedp.ID("pipeline")))

	b.do("type a broken pipeline", chromedp.SetValue(chromedp.ID("pipeline"), "name: broken\njobs:\n  a:\n    needs: [nope]\n    steps: [ { run: \"true\" } ]\n"),
		chromedp.Click(chromedp.ID("submit-run")))
	b.waitJS("the mistakes", `!document.querySelector("#submit-errors").hidden &&
		document.querySelector("#submit-errors").innerText.includes("nope") &&
		document.querySelector("#submit-errors").innerText.includes("line 4")`)
	if got := b.eval(`location.pathname`); got != "/runs/new" {
		t.Errorf("a refused pipeline went to %s", got)
	}

	b.do("type a good pipeline", chromedp.SetValue(chromedp.ID("pipeline"), "name: typed\njobs:\n  one: {steps: [{run: echo one}]}\n  two: {needs: [one], steps: [{run: echo two}]}\n"),
		chromedp.Click(chromedp.ID("submit-run")), chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	if got := b.eval(`location.pathname`); !strings.HasPrefix(got, "/runs/") || got == "/runs/new" {
		t.Fatalf("after submitting the page is %s, want the new run", got)
	}
	b.waitJS("both nodes green", `[...document.querySelectorAll(".node")].length === 2 &&
		[...document.querySelectorAll(".node")].every(n => n.dataset.status === "success")`)
	b.screenshot("submitted")
}

// TestPageOfAnotherSiteCannotSubmit: a page on another origin that the user happens to
// visit while gantry up runs (auth off, on loopback) tries the requests a browser lets
// any page send without asking the server first — fetch in no-cors mode with a
// text/plain body, and a form post — and then reads the API under a name it rebound to
// 127.0.0.1. None of it creates a run or reads an answer.
func TestPageOfAnotherSiteCannotSubmit(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	coord, err := url.Parse(c.url)
	if err != nil {
		t.Fatal(err)
	}
	// The attacker's site: another loopback address, so another origin and another site.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.2: %v", err)
	}
	const pipeline = "name: pwned\njobs:\n  a: {steps: [{run: 'echo pwned'}]}\n"
	page := `<!doctype html><title>cats</title><body>
<form id="f" method="POST" enctype="text/plain" action="` + c.url + `/api/v1/runs">
<input type="hidden" name="` + "name: pwned\njobs:\n  a: {steps: [{run: 'echo pwned'}]}\n#" + `" value="">
</form>
<script>
const send = (body) => fetch(` + js(c.url+"/api/v1/runs") + `, {method: "POST", mode: "no-cors", body});
// A string goes as text/plain; a Blob without a type goes with no Content-Type at all.
window.fetchDone = Promise.all([send(` + js(pipeline) + `), send(new Blob([` + js(pipeline) + `]))])
  .then(() => "sent", (e) => "error: " + e);
</script>`
	attacker := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, page)
	})}}
	attacker.Start()
	t.Cleanup(attacker.Close)

	// evil.test stands for a name whose DNS the attacker points at 127.0.0.1 once the
	// page has loaded (DNS rebinding): the browser then sends Host: evil.test.
	b := newBrowser(t, func(chromedp.ConsoleMessage) bool { return true },
		chromedp.Flag("host-resolver-rules", "MAP evil.test 127.0.0.1"))
	b.do("open the attacker's page", chromedp.Navigate(attacker.URL+"/"), chromedp.WaitReady("#f"))
	if got, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`window.fetchDone`, chromedp.EvalAsValue, chromedp.EvalAwaitPromise)); err != nil || got != "sent" {
		t.Fatalf("the no-cors fetch: %q, %v; want it sent (and refused by the server, unseen by the page)", got, err)
	}
	b.do("submit the form", chromedp.Evaluate[chromedp.Void](`document.getElementById("f").submit()`))
	if body := b.textAt(c.url); !strings.Contains(body, `"forbidden"`) {
		t.Errorf("the form post was answered %s, want a 403 forbidden", body)
	}

	rebound := "http://evil.test:" + coord.Port()
	b.do("read the API under a rebound name", chromedp.Navigate(rebound+"/api/v1/runs"))
	if body := b.textAt(rebound); !strings.Contains(body, "misdirected_request") {
		t.Errorf("GET /api/v1/runs as evil.test answered %s, want 421 misdirected_request", body)
	}

	runs, err := c.st.ListRuns(t.Context(), store.ListRunsParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 0 {
		t.Fatalf("the page of another site created %d runs (%s)", len(runs), runs[0].Name)
	}
}

// textAt waits until the page has navigated to origin and shows an error answer, and
// returns its text. A navigation destroys the page's JavaScript context, so evaluations
// that fail meanwhile are tried again.
func (b *browser) textAt(origin string) string {
	b.t.Helper()
	deadline := time.Now().Add(waitFor)
	var last string
	for time.Now().Before(deadline) {
		v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](
			`location.origin === `+js(origin)+` && document.body ? document.body.innerText : ""`))
		if err == nil && strings.Contains(v, `"error"`) {
			return v
		}
		last = fmt.Sprint(v, err)
		select {
		case <-b.ctx.Done():
			b.t.Fatalf("waiting for an answer from %s: %v", origin, b.ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	b.t.Fatalf("no answer from %s within %s; last: %s", origin, waitFor, last)
	return ""
}
