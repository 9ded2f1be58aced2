package web_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/gantry-ci/gantry/internal/agent"
)

// bigPipeline is 58 jobs in six columns: four to set up, eight builds, a matrix of 12 unit
// test jobs (one fails, one runs for two minutes), a matrix of 20 integration test jobs,
// three more test jobs, six packages and five deploys. Four jobs wait on the unit tests.
const bigPipeline = `
name: big-graph
jobs:
  checkout: {steps: [{run: "true"}]}
  lint: {needs: [checkout], steps: [{run: "true"}]}
  vet: {needs: [checkout], steps: [{run: "true"}]}
  deps: {needs: [checkout], steps: [{run: "true"}]}
  build-api: {needs: [deps], steps: [{run: "true"}]}
  build-web: {needs: [deps], steps: [{run: "true"}]}
  build-worker: {needs: [deps], steps: [{run: "true"}]}
  build-cli: {needs: [deps], steps: [{run: "true"}]}
  build-docs: {needs: [deps], steps: [{run: "true"}]}
  build-proto: {needs: [deps], steps: [{run: "true"}]}
  build-image: {needs: [deps], steps: [{run: "true"}]}
  build-migrations: {needs: [deps], steps: [{run: "true"}]}
  unit:
    needs: [build-api, build-worker, lint]
    matrix: {go: ["1.25", "1.26"], shard: [1, 2, 3, 4, 5, 6]}
    steps:
      - run: |
          case "${{ matrix.go }}/${{ matrix.shard }}" in
            1.26/3) echo "shard 3 failed"; exit 1 ;;
            1.26/6) sleep 120 ;;
          esac
  integration:
    name: "Integration ${{ matrix.db }} #${{ matrix.shard }}"
    needs: [build-api, build-proto, vet]
    matrix: {db: [sqlite, postgres, mysql, cockroach], shard: [1, 2, 3, 4, 5]}
    steps: [{run: "true"}]
  e2e: {needs: [build-web, build-api], steps: [{run: "true"}]}
  race: {needs: [build-worker], steps: [{run: "true"}]}
  fuzz: {needs: [build-proto], steps: [{run: "true"}]}
  package-api: {needs: [unit, integration, build-api], steps: [{run: "true"}]}
  package-web: {needs: [e2e, build-web], steps: [{run: "true"}]}
  package-worker: {needs: [unit, race, build-worker], steps: [{run: "true"}]}
  package-cli: {needs: [build-cli, fuzz], steps: [{run: "true"}]}
  package-docs: {needs: [build-docs], steps: [{run: "true"}]}
  package-image: {needs: [build-image, build-migrations, integration], steps: [{run: "true"}]}
  deploy-staging: {needs: [package-api, package-web, package-worker], steps: [{run: "true"}]}
  smoke: {needs: [package-api], steps: [{run: "true"}]}
  deploy-docs: {needs: [package-docs], steps: [{run: "true"}]}
  deploy-image: {needs: [package-image], steps: [{run: "true"}]}
  release-notes: {needs: [package-cli], steps: [{run: "true"}]}
`

// addWorker runs one more worker against the coordinator until the test ends, so that a
// large run settles sooner.
func addWorker(t *testing.T, c *coordinator, name string, maxJobs int) {
	t.Helper()
	ctx := t.Context()
	w := agent.New(agent.Config{Server: c.url, Name: name, MaxJobs: maxJobs, WorkDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := w.Run(ctx, ctx); err != nil && ctx.Err() == nil {
			t.Errorf("worker %s: %v", name, err)
		}
	})
	t.Cleanup(wg.Wait)
}

type apiJob struct {
	ID     string `json:"id"`
	Key    string `json:"key"`
	Status string `json:"status"`
}

// waitRunJobs polls the run through the API (with the coordinator's token, when auth is
// on) until ok says its jobs are where the test wants them.
func waitRunJobs(t *testing.T, c *coordinator, runID string, within time.Duration, ok func(map[string]apiJob) bool) map[string]apiJob {
	t.Helper()
	deadline := time.Now().Add(within)
	var last map[string]apiJob
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, c.url+"/api/v1/runs/"+runID, nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var run struct{ Jobs []apiJob }
		err = json.NewDecoder(res.Body).Decode(&run)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		last = map[string]apiJob{}
		for _, j := range run.Jobs {
			last[j.Key] = j
		}
		if ok(last) {
			return last
		}
		time.Sleep(100 * time.Millisecond)
	}
	var states []string
	for k, j := range last {
		states = append(states, k+"="+j.Status)
	}
	t.Fatalf("the run did not settle within %s: %s", within, strings.Join(states, " "))
	return nil
}

// insideAll is a script that says which of the elements selected by sel have a box that
// is not inside the graph's visible box (the scrolling wrap, less its border).
func insideAll(sel string) string {
	return `(() => {
		const wrap = document.querySelector(".dag-wrap").getBoundingClientRect();
		const out = [];
		for (const el of document.querySelectorAll(` + js(sel) + `)) {
			const r = el.getBoundingClientRect();
			if (r.width === 0 || r.left < wrap.left - 0.5 || r.right > wrap.right + 0.5 || r.top < wrap.top - 0.5 || r.bottom > wrap.bottom + 0.5)
				out.push((el.closest("[data-vid]") || el).dataset.vid + " " + JSON.stringify([r.left, r.right, r.top, r.bottom]));
		}
		return out.length ? "outside the graph's box (" + JSON.stringify([wrap.left, wrap.right, wrap.top, wrap.bottom]) + "): " + out.join("; ") : "";
	})()`
}

// namesFit is a script that lists the instances of the unit matrix whose name, as
// drawn, is not their differing matrix values or does not fit inside their node.
const namesFit = `(() => {
	const bad = [];
	for (const a of document.querySelectorAll('.dag .node[data-key^="unit ("]')) {
		const want = a.dataset.key.slice("unit (".length, -1);
		const t = a.querySelector(".node-name");
		const shown = [...t.querySelectorAll("tspan")].map((s) => s.textContent).join(" ").replace(/\s+/g, " ");
		const r = a.querySelector("rect").getBoundingClientRect(), b = t.getBoundingClientRect();
		if (shown !== want) bad.push(a.dataset.key + " shows " + JSON.stringify(shown));
		else if (b.left < r.left || b.right > r.right || b.top < r.top || b.bottom > r.bottom) bad.push(a.dataset.key + " runs out of its node");
	}
	return bad.join("; ");
})()`

// TestDashboardLargeGraph: a run of 58 jobs with two matrices fits one screen, its
// matrices drawn as one node each with their instances counted, a failed instance one
// click away; a matrix opens in place with its instances' differing names in full;
// hovering or focusing a job lights up what it needs and what needs it and dims the rest;
// edges never share an end; in a phone-wide window the graph scrolls in its own box, says
// so, and the page does not scroll sideways.
func TestDashboardLargeGraph(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	addWorker(t, c, "w2", 8)
	runID, _ := c.submit(t, bigPipeline)
	jobs := waitRunJobs(t, c, runID, 90*time.Second, func(js map[string]apiJob) bool {
		if len(js) != 58 {
			return false
		}
		open := 0
		for _, j := range js {
			switch j.Status {
			case "success", "failed", "skipped", "cancelled":
			default:
				open++
			}
		}
		return js["unit (go=1.26, shard=6)"].Status == "running" && js["unit (go=1.26, shard=3)"].Status == "failed" &&
			js["package-api"].Status == "pending" && open == 5
	})

	b := newBrowser(t, nil)
	b.do("open the run", chromedp.Navigate(c.url+"/runs/"+runID), chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	b.waitJS("the unit matrix counted", `(() => {
		const g = document.querySelector('.dag .node.group[data-group="unit"]');
		return g && g.querySelector(".node-name").textContent === "\u25b8 unit \u00d712" &&
			[...g.querySelectorAll(".group-summary tspan")].map((s) => s.textContent).join(" ") === "10 passed, 1 failed, 1 running" &&
			g.dataset.status === "failed" && g.getAttribute("aria-expanded") === "false";
	})()`)
	// A matrix whose jobs have names of their own is called by what those names share.
	if got := b.eval(`(() => { const g = document.querySelector('.dag .node.group[data-group="integration"]');
		return g.querySelector(".node-name").textContent + " / " + [...g.querySelectorAll(".group-summary tspan")].map((s) => s.textContent).join(" ") })()`); got != "\u25b8 Integration \u00d720 / 20 passed" {
		t.Errorf("the integration matrix says %q, want \u25b8 Integration \u00d720 / 20 passed", got)
	}
	// The bar shows the counts: ten parts of twelve green, one red, one blue.
	if got := b.eval(`[...document.querySelectorAll('.dag .node.group[data-group="unit"] .group-bar rect')].map((r) =>
		getComputedStyle(r).fill + " " + Math.round(r.getBoundingClientRect().width / document.querySelector('.dag .node.group[data-group="unit"] .group-bar').getBoundingClientRect().width * 12)).join(", ")`); got != "rgb(26, 127, 55) 10, rgb(209, 36, 47) 1, rgb(9, 105, 218) 1" {
		t.Errorf("the unit matrix's bar: %s", got)
	}
	b.screenshot("graph-desktop")

	// Collapsed, the 58 jobs are 28 nodes, and the graph fits one screen in width and height.
	if got := b.eval(`String(document.querySelectorAll(".dag .node").length)`); got != "28" {
		t.Errorf("%s nodes, want 28 (26 jobs and 2 matrices)", got)
	}
	if got := b.eval(`String(Math.round(document.querySelector("svg.dag").getBoundingClientRect().height))`); atoi(t, got) > 800 {
		t.Errorf("the graph is %s px tall, more than a 800 px window", got)
	} else {
		t.Logf("the collapsed graph is %s px tall", got)
	}
	if got := b.eval(insideAll(".dag .node > rect:first-of-type, .dag .failed-link")); got != "" {
		t.Error(got)
	}
	if got := b.eval(`(() => { const w = document.querySelector(".dag-wrap"); return w.scrollWidth + " " + w.clientWidth + " " + document.querySelector(".dag-hint").offsetHeight })()`); strings.Fields(got)[0] != strings.Fields(got)[1] || strings.Fields(got)[2] != "0" {
		t.Errorf("at 1280 px the graph scrolls (scroll width, width, hint height: %s)", got)
	}
	// No two edges end, or start, at one point: each meets its node at a port of its own.
	if got := b.eval(`(() => {
		const starts = new Map(), ends = new Map(), dup = [];
		for (const p of document.querySelectorAll(".dag .edges path")) {
			const n = p.getAttribute("d").match(/-?[\d.]+/g).map(Number);
			const s = n.slice(0, 2).join(","), e = n.slice(-2).join(",");
			if (starts.has(s)) dup.push("start " + s + ": " + starts.get(s) + " and " + p.dataset.to);
			if (ends.has(e)) dup.push("end " + e + ": " + ends.get(e) + " and " + p.dataset.from);
			starts.set(s, p.dataset.to); ends.set(e, p.dataset.from);
		}
		return document.querySelectorAll(".dag .edges path").length + " " + dup.join("; ");
	})()`); strings.TrimSpace(got) != "42" {
		t.Errorf("edges (count, then shared ends): %s", got)
	}

	// The failed instance is a link on the matrix's node.
	if got := b.eval(`(() => { const a = document.querySelector(".dag .failed-link");
		return a.getAttribute("href") + " " + [...a.querySelectorAll("tspan")].map((s) => s.textContent).join(" ") })()`); got != "/jobs/"+jobs["unit (go=1.26, shard=3)"].ID+" \u2717 go=1.26, shard=3" {
		t.Errorf("the failed link: %s", got)
	}

	// Hovering package-api lights up its needs (build-api and both matrices) and what
	// needs it (deploy-staging, smoke), and the edges between, and dims the rest.
	center := b.eval(`(() => { const a = document.querySelector('.dag .node[data-key="package-api"]');
		a.scrollIntoView({block: "center"}); const r = a.getBoundingClientRect(); return (r.left + r.width / 2) + " " + (r.top + r.height / 2) })()`)
	var x, y float64
	if _, err := fmt.Sscan(center, &x, &y); err != nil {
		t.Fatalf("the node's centre %q: %v", center, err)
	}
	b.do("hover package-api", chromedp.MouseEvent(chromedp.MouseMoved, x, y))
	const style = `((sel, what) => { const el = document.querySelector(sel); return el ? getComputedStyle(el)[what] : "missing " + sel })`
	b.waitJS("package-api's needs and dependents lit, the rest dimmed", `(() => {
		const s = `+style+`;
		return s('.dag .node[data-key="build-api"] > rect', "strokeWidth") === "3px" &&
			s('.dag .node[data-group="unit"] > rect', "strokeWidth") === "3px" &&
			s('.dag .node[data-group="integration"] > rect', "strokeWidth") === "3px" &&
			s('.dag .node[data-key="deploy-staging"] > rect', "strokeWidth") === "3px" &&
			s('.dag .node[data-key="smoke"] > rect', "strokeWidth") === "3px" &&
			s('.dag .node[data-key="lint"]', "opacity") === "0.3" &&
			s('.dag .node[data-key="deploy-docs"]', "opacity") === "0.3" &&
			s('.dag .node[data-key="build-api"]', "opacity") === "1" &&
			s('.dag .edges path[data-from="job:build-api"][data-to="job:package-api"]', "strokeWidth") === "2.5px" &&
			s('.dag .edges path[data-from="matrix:unit"][data-to="job:package-api"]', "opacity") === "1" &&
			s('.dag .edges path[data-from="job:deps"][data-to="job:build-web"]', "opacity") === "0.15";
	})()`)
	if got := b.eval(style + `('.dag .node[data-key="lint"] > rect', "strokeWidth")`); got == "3px" {
		t.Error("lint, which package-api does not need, is lit")
	}
	b.screenshot("graph-hover")
	b.do("move the pointer away", chromedp.MouseEvent(chromedp.MouseMoved, 2, 2))
	b.waitJS("nothing dimmed", style+`('.dag .node[data-key="lint"]', "opacity") === "1"`)

	// Focus does the same from the keyboard.
	b.eval(`(document.querySelector('.dag .node[data-key="deploy-docs"]').focus(), "")`)
	b.waitJS("deploy-docs's need lit on focus", `(() => { const s = `+style+`;
		return s('.dag .node[data-key="package-docs"] > rect', "strokeWidth") === "3px" && s('.dag .node[data-key="checkout"]', "opacity") === "0.3" })()`)

	// The arrow keys walk the graph: right to a job that needs this one, left to one it
	// needs, down to the next node of the column.
	b.do("arrow right from build-api", chromedp.Focus(chromedp.CSS(`.dag .node[data-key="build-api"]`)), chromedp.KeyEvent(kb.ArrowRight))
	if got := b.eval(`document.activeElement.dataset.vid || ""`); got != "matrix:unit" && got != "matrix:integration" && got != "job:e2e" {
		t.Errorf("ArrowRight from build-api focused %q, want a job that needs it", got)
	}
	b.do("arrow left", chromedp.KeyEvent(kb.ArrowLeft))
	if got := b.eval(`document.activeElement.dataset.vid || ""`); got != "job:build-api" && got != "job:build-worker" && got != "job:build-proto" && got != "job:build-web" {
		t.Errorf("ArrowLeft focused %q, want a build the job needs", got)
	}
	b.do("arrow down from build-api", chromedp.Focus(chromedp.CSS(`.dag .node[data-key="build-api"]`)), chromedp.KeyEvent(kb.ArrowDown))
	if got := b.eval(`(() => { const a = document.activeElement, from = document.querySelector('.dag .node[data-key="build-api"] rect').getBoundingClientRect(), to = a.querySelector("rect").getBoundingClientRect();
		return (a.dataset.key || "").startsWith("build-") && Math.abs(to.left - from.left) < 1 && to.top > from.bottom ? "" : a.dataset.vid })()`); got != "" {
		t.Errorf("ArrowDown from build-api focused %s, want the build below it", got)
	}

	// Enter on the matrix opens it in place: its twelve instances, each named by what
	// sets it apart from the others, in full.
	b.do("open the unit matrix with Enter", chromedp.Focus(chromedp.CSS(`.dag .node.group[data-group="unit"]`)), chromedp.KeyEvent("\r"))
	b.waitJS("the instances", `document.querySelector('.dag .node.group[data-group="unit"]').getAttribute("aria-expanded") === "true" &&
		document.querySelectorAll('.dag .node[data-key^="unit ("]').length === 12`)
	if got := b.eval(namesFit); got != "" {
		t.Errorf("instance names: %s", got)
	}
	if got := b.eval(`document.activeElement.dataset.vid || document.activeElement.outerHTML.slice(0, 80)`); got != "matrix:unit" {
		t.Errorf("after opening the matrix the focus is on %s, want the matrix", got)
	}
	if got := b.eval(insideAll(`.dag .node[data-key^="unit ("] > rect`)); got != "" {
		t.Error(got)
	}
	if got := b.eval(style + `('.dag .node[data-key="unit (go=1.26, shard=3)"] > rect', "fill")`); got != "rgb(209, 36, 47)" {
		t.Errorf("the failed instance is %s, want red", got)
	}
	b.screenshot("graph-expanded")
	b.do("close it with a click", chromedp.Click(chromedp.CSS(`.dag .node.group[data-group="unit"] .node-name`)))
	b.waitJS("the matrix closed", `document.querySelector('.dag .node.group[data-group="unit"]').getAttribute("aria-expanded") === "false" &&
		document.querySelectorAll('.dag .node[data-key^="unit ("]').length === 0`)

	// From the keyboard, the failed instance is the next stop after its matrix, and Space
	// opens and closes the matrix as Enter does.
	b.do("tab from the matrix", chromedp.Focus(chromedp.CSS(`.dag .node.group[data-group="unit"]`)), chromedp.KeyEvent("\t"))
	if got := b.eval(`document.activeElement.getAttribute("class") + " " + document.activeElement.getAttribute("href")`); got != "failed-link /jobs/"+jobs["unit (go=1.26, shard=3)"].ID {
		t.Errorf("Tab after the matrix focused %s, want its failed instance's link", got)
	}
	b.do("Space on the matrix", chromedp.Focus(chromedp.CSS(`.dag .node.group[data-group="unit"]`)), chromedp.KeyEvent(" "))
	b.waitJS("the matrix open", `document.querySelectorAll('.dag .node[data-key^="unit ("]').length === 12`)
	b.do("Space again", chromedp.KeyEvent(" "))
	b.waitJS("the matrix closed", `document.querySelectorAll('.dag .node[data-key^="unit ("]').length === 0 &&
		document.querySelector('.dag .node.group[data-group="unit"]').getAttribute("aria-expanded") === "false"`)

	// The counts follow the run live: cancelling the running instance makes it one
	// cancelled, and the matrix keeps the focus.
	b.do("focus the matrix", chromedp.Focus(chromedp.CSS(`.dag .node.group[data-group="unit"]`)))
	res, err := http.Post(c.url+"/api/v1/jobs/"+jobs["unit (go=1.26, shard=6)"].ID+"/cancel", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		t.Fatalf("cancel the running instance: %s", res.Status)
	}
	b.waitJS("the counts, live", `[...document.querySelectorAll('.dag .node.group[data-group="unit"] .group-summary tspan')].map((s) => s.textContent).join(" ") === "10 passed, 1 failed, 1 cancelled" &&
		document.querySelector('.dag .node.group[data-group="unit"]').dataset.status === "failed"`)
	if got := b.eval(`document.activeElement.dataset.vid || document.activeElement.outerHTML.slice(0, 80)`); got != "matrix:unit" {
		t.Errorf("after the live change the focus is on %s, want the matrix", got)
	}

	// A smaller window (1024 px) still shows every column, with narrower nodes.
	b.do("a 1024 px window", chromedp.EmulateViewport(1024, 768), chromedp.Navigate(c.url+"/runs/"+runID),
		chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	if got := b.eval(insideAll(".dag .node > rect:first-of-type")); got != "" {
		t.Errorf("at 1024 px: %s", got)
	}
	if got := b.eval(`String(document.querySelector(".dag-hint").offsetHeight)`); got != "0" {
		t.Errorf("at 1024 px the hint to scroll shows (%s px tall)", got)
	}
	b.screenshot("graph-1024")
	if got := b.eval(timelineWhole); got != "" {
		t.Errorf("at 1024 px the timeline cuts names: %s", got)
	}

	// A phone: the graph scrolls inside its box, which says so and shades the side where
	// more is; the page does not scroll sideways.
	b.do("a phone-wide window", chromedp.EmulateViewport(400, 800), chromedp.Navigate(c.url+"/runs/"+runID),
		chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	b.waitJS("the hint", `document.querySelector(".dag-hint").offsetHeight > 0`)
	if got := b.eval(`document.scrollingElement.scrollWidth + " " + innerWidth`); strings.Fields(got)[0] != strings.Fields(got)[1] {
		t.Errorf("the page scrolls sideways at 400 px (scroll width, window width): %s", got)
	}
	if got := b.eval(`(() => { const r = document.querySelector(".dag-hint").getBoundingClientRect(); return r.left >= 0 && r.right <= innerWidth ? "" : JSON.stringify(r) })()`); got != "" {
		t.Errorf("the hint is out of the window: %s", got)
	}
	if got := b.eval(`getComputedStyle(document.querySelector(".dag-frame"), "::after").opacity + " " + getComputedStyle(document.querySelector(".dag-frame"), "::before").opacity`); got != "1 0" {
		t.Errorf("the shades (right, left): %s, want 1 0", got)
	}
	if got := b.eval(`String(Math.round(document.querySelector("svg.dag").getBoundingClientRect().height))`); atoi(t, got) > 800 {
		t.Errorf("at 400 px the graph is %s px tall", got)
	}
	if got := b.eval(insideAll(`.dag .node[data-key="checkout"] > rect, .dag .node[data-key="lint"] > rect`)); got != "" {
		t.Error(got)
	}
	b.screenshot("graph-phone")
	if got := b.eval(timelineWhole); got != "" {
		t.Errorf("at 400 px the timeline cuts names: %s", got)
	}
	b.eval(`(() => { const w = document.querySelector(".dag-wrap"); w.scrollLeft = w.scrollWidth; return "" })()`)
	b.waitJS("the left shade", `getComputedStyle(document.querySelector(".dag-frame"), "::before").opacity === "1" &&
		getComputedStyle(document.querySelector(".dag-frame"), "::after").opacity === "0"`)
	if got := b.eval(insideAll(`.dag .node[data-key^="deploy-"] > rect, .dag .node[data-key="smoke"] > rect, .dag .node[data-key="release-notes"] > rect`)); got != "" {
		t.Errorf("scrolled to its end: %s", got)
	}
	b.screenshot("graph-phone-end")

	// Opened on a phone, the instances' names are still whole.
	b.do("open the unit matrix", chromedp.Click(chromedp.CSS(`.dag .node.group[data-group="unit"] .node-name`)))
	b.waitJS("the instances", `document.querySelectorAll('.dag .node[data-key^="unit ("]').length === 12`)
	if got := b.eval(namesFit); got != "" {
		t.Errorf("instance names at 400 px: %s", got)
	}
	if got := b.eval(`document.scrollingElement.scrollWidth + " " + innerWidth`); strings.Fields(got)[0] != strings.Fields(got)[1] {
		t.Errorf("with the matrix open the page scrolls sideways: %s", got)
	}
	b.screenshot("graph-phone-expanded")
}

// timelineWhole is a script that names the timeline's labels drawn cut (wider than
// their box, or out of the window), "" when each is whole; matrix instances differ only at
// the end of their names.
const timelineWhole = `(() => {
	const ls = [...document.querySelectorAll(".timeline .tl-label")];
	if (ls.length < 50) return "only " + ls.length + " labels";
	return ls.filter((l) => { const r = l.getBoundingClientRect();
		return l.scrollWidth > l.clientWidth + 1 || r.left < 0 || r.right > innerWidth || l.textContent === "" }).
		map((l) => l.textContent + " (" + l.scrollWidth + " in " + l.clientWidth + ")").slice(0, 3).join("; ") })()`

func atoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}
