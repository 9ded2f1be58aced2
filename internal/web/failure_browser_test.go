package web_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// failingPipeline fails its unit job in step "test" with exit code 3 after printing an
// error; deploy, which needs it, is skipped.
const failingPipeline = `
name: breaks
jobs:
  unit:
    steps:
      - name: compile
        run: echo compiled fine
      - name: test
        run: |
          echo "=== RUN TestSum"
          echo "--- FAIL: TestSum"
          echo "sum_test.go:9: want 3, got 4" >&2
          exit 3
  deploy:
    needs: [unit]
    steps: [ { run: echo deployed } ]
`

// createRun stores a run of yaml with trigger tr straight in the store, as a webhook or a
// dispatch would, so the test controls the commit, branch, event and actor it shows.
func (c *coordinator) createRun(t *testing.T, yaml string, tr store.Trigger) (string, map[string]string) {
	t.Helper()
	plan, err := pipeline.Compile([]byte(yaml), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run, jobs, _, err := c.st.CreateRun(t.Context(), store.CreateRunParams{Project: "web", Trigger: tr, Definition: []byte(yaml), Plan: plan})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, j := range jobs {
		ids[j.Key] = j.ID.String()
	}
	return run.ID.String(), ids
}

// visible is JavaScript true when the element sel selects is drawn inside the window's
// width: not hidden, with a size, and not cut off at the right.
func visible(sel string) string {
	return fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (!e || e.closest("[hidden]")) return false;
		const r = e.getBoundingClientRect(); const s = getComputedStyle(e);
		return r.width > 0 && r.height > 0 && s.visibility !== "hidden" && s.display !== "none" && r.right <= innerWidth + 1; })()`, js(sel))
}

// TestDashboardSaysWhyARunFailed: a failing run's page opens with a box naming the job,
// the step, the exit code and the error line, linked into the job's log at that line; at
// desktop and phone widths.
func TestDashboardSaysWhyARunFailed(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	runID, jobs := c.createRun(t, failingPipeline, store.Trigger{Branch: "main", Ref: "refs/heads/main", Event: "push"})
	b := newBrowser(t, nil)

	for _, width := range []int64{1280, 390} {
		b.do(fmt.Sprintf("open the run at %d px", width), chromedp.EmulateViewport(width, 844), chromedp.Navigate(c.url+"/runs/"+runID))
		b.waitJS("the failure box", visible("#failure .failure-reason"))
		box := b.eval(`document.querySelector("#failure").innerText`)
		for _, want := range []string{"Why it failed", "unit: step test failed with exit code 3", "unit", "test", "exit code 3",
			"sum_test.go:9: want 3, got 4", "--- FAIL: TestSum"} {
			if !strings.Contains(box, want) {
				t.Errorf("at %d px the failure box lacks %q; it reads:\n%s", width, want, box)
			}
		}
		if strings.Contains(box, "compiled fine") {
			t.Errorf("at %d px the box shows the compile step's output, not only the failed step's:\n%s", width, box)
		}
		// The box comes before the graph: it is what a user sees first.
		if got := b.eval(`String(document.querySelector("#failure").getBoundingClientRect().top < document.querySelector("svg.dag").getBoundingClientRect().top)`); got != "true" {
			t.Errorf("at %d px the failure box is not above the graph", width)
		}
		for _, sel := range []string{".failure-job", ".failure-step", ".failure-kind", ".failure-lines"} {
			if b.eval(`String(`+visible("#failure "+sel)+`)`) != "true" {
				t.Errorf("at %d px %s is not visible within the window", width, sel)
			}
		}
		if got := b.eval(`String(document.documentElement.scrollWidth)`); got != fmt.Sprint(width) {
			t.Errorf("the run page is %s px wide in a %d px window", got, width)
		}
		b.screenshot(fmt.Sprintf("failure-%d", width))
	}

	// The error line links to its line in the job's log.
	href := b.eval(`document.querySelector("#failure .failure-lines a").getAttribute("href")`)
	if !strings.HasPrefix(href, "/jobs/"+jobs["unit"]+"#L") {
		t.Fatalf("the error line links to %q, want the unit job's log at a line", href)
	}
	line := strings.TrimPrefix(href, "/jobs/"+jobs["unit"]+"#L")
	b.do("follow the error line", chromedp.Click(chromedp.CSS(`#failure .failure-lines a`)))
	b.waitJS("the job page", `location.pathname === "/jobs/`+jobs["unit"]+`" && location.hash === "#L`+line+`"`)
	b.waitJS("the error line in the log", `!!document.querySelector("main") && document.querySelector("main").innerText.includes("--- FAIL: TestSum")`)

	// A page opened while the run goes on shows the box when the run fails, live.
	slowID, _ := c.createRun(t, "name: later\njobs:\n  slow:\n    steps:\n      - name: wait then fail\n        run: |\n          sleep 2\n          echo \"disk full\" >&2\n          exit 5\n",
		store.Trigger{Event: "api"})
	b.do("open the running run", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(c.url+"/runs/"+slowID))
	b.waitJS("the run page", `!!document.querySelector("#run-status [data-status]")`)
	if b.eval(`document.querySelector("#run-status [data-status]").dataset.status`) == "failed" {
		t.Fatal("the run had failed before its page opened: the test proves nothing")
	}
	if b.eval(`String(`+visible("#failure")+`)`) != "false" {
		t.Error("a run that has not failed shows a failure box")
	}
	b.waitJS("the failure box, live", visible("#failure .failure-reason")+` && document.querySelector("#failure").innerText.includes("exit code 5") &&
		document.querySelector("#failure").innerText.includes("disk full")`)
}

// TestDashboardRunsListTellsRunsApart: the runs list shows each run's true state, commit
// message, author, branch, event and actor, and a failed run's reason; the filters hide
// runs that do not match, change the total and stay in the URL; at desktop and phone
// widths.
func TestDashboardRunsListTellsRunsApart(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	failed, _ := c.createRun(t, failingPipeline, store.Trigger{Branch: "main", Ref: "refs/heads/main", Event: "push",
		Actor: "ada", Verified: store.RefFromWebhook, Message: "Make the sum faster\n\nIt was slow.", AuthorName: "Ada Lovelace"})
	waiting, _ := c.createRun(t, "name: stuck\njobs:\n  gpu: {runs_on: [gpu], steps: [{run: \"true\"}]}\n",
		store.Trigger{Branch: "dev", Ref: "refs/heads/dev", Event: "pull_request", Actor: "bob", Verified: store.RefFromWebhook})
	fine, _ := c.createRun(t, "name: fine\njobs:\n  ok: {steps: [{run: \"true\"}]}\n",
		store.Trigger{Branch: "dev", Ref: "refs/heads/dev", Event: "push", Actor: "bob", Verified: store.RefFromWebhook})
	b := newBrowser(t, nil)
	row := func(id string) string { return `tr[data-run-id="` + id + `"]` }

	for _, width := range []int64{1280, 390} {
		b.do(fmt.Sprintf("open the runs list at %d px", width), chromedp.EmulateViewport(width, 844), chromedp.Navigate(c.url+"/"))
		b.waitJS("the failed run's reason", visible(row(failed)+" .run-reason"))
		b.waitJS("the finished run", `document.querySelector('`+row(fine)+`').dataset.state === "success"`)
		reason := b.eval(`document.querySelector('` + row(failed) + ` .run-reason').innerText`)
		if !strings.Contains(reason, "unit: step test failed with exit code 3") {
			t.Errorf("at %d px the failed run's reason reads %q", width, reason)
		}
		if got := b.eval(`getComputedStyle(document.querySelector('` + row(failed) + ` .run-reason')).color`); got != "rgb(209, 36, 47)" {
			t.Errorf("at %d px the reason's colour is %s, want the failed colour", width, got)
		}
		commit := b.eval(`document.querySelector('` + row(failed) + ` .run-commit').innerText`)
		if !strings.Contains(commit, "Make the sum faster") || strings.Contains(commit, "It was slow") || !strings.Contains(commit, "Ada Lovelace") {
			t.Errorf("at %d px the commit reads %q, want its first line and its author", width, commit)
		}
		if b.eval(`String(`+visible(row(failed)+" .run-commit")+`)`) != "true" {
			t.Errorf("at %d px the commit message is not visible", width)
		}
		// A run whose only job waits for a worker no one has says so, not "running".
		state := b.eval(`document.querySelector('` + row(waiting) + ` .badge').innerText`)
		if !strings.Contains(state, "waiting for a worker") {
			t.Errorf("at %d px the waiting run's state reads %q", width, state)
		}
		if width == 1280 {
			trig := b.eval(`document.querySelector('` + row(failed) + `').innerText`)
			for _, want := range []string{"main", "push", "ada"} {
				if !strings.Contains(trig, want) {
					t.Errorf("the failed run's row lacks %q: %q", want, trig)
				}
			}
		}
		b.waitJS("the total", `document.querySelector("#runs-total").innerText === "3 runs"`)
		if got := b.eval(`String(document.documentElement.scrollWidth)`); got != fmt.Sprint(width) {
			t.Errorf("the runs list is %s px wide in a %d px window", got, width)
		}
		b.screenshot(fmt.Sprintf("runs-%d", width))

		// Filter by branch: the failed run (main) goes, the total follows, the URL keeps it.
		b.do("filter by branch dev", chromedp.SetValue(chromedp.ID("f-branch"), "dev"),
			chromedp.Click(chromedp.CSS(`form.filters button[type="submit"]`)))
		b.waitJS("two runs match", `document.querySelector("#runs-total").innerText === "2 runs match" && !document.querySelector('`+row(failed)+`')`)
		if b.eval(`String(`+visible(row(fine))+`)`) != "true" || b.eval(`String(`+visible(row(waiting))+`)`) != "true" {
			t.Errorf("at %d px the dev runs are not both shown", width)
		}
		if got := b.eval(`location.search`); got != "?branch=dev" {
			t.Errorf("the URL's query is %q, want ?branch=dev", got)
		}
		// And by event: only the pull request's run is left.
		b.do("filter by event", chromedp.SetValue(chromedp.ID("f-event"), "pull_request"),
			chromedp.Click(chromedp.CSS(`form.filters button[type="submit"]`)))
		b.waitJS("one run matches", `document.querySelector("#runs-total").innerText === "1 run match" &&
			document.querySelectorAll("tbody tr").length === 1 && !!document.querySelector('`+row(waiting)+`')`)
		// A status and an actor from the URL, as a link would give them.
		b.do("filter from the URL", chromedp.Navigate(c.url+"/?status=failed&actor=ada"))
		b.waitJS("only the failed run", `document.querySelector("#runs-total").innerText === "1 run match" &&
			document.querySelectorAll("tbody tr").length === 1 && !!document.querySelector('`+row(failed)+`')`)
		if got := b.eval(`document.querySelector("#f-actor").value + " " + document.querySelector("#f-status").value`); got != "ada failed" {
			t.Errorf("the form shows the URL's filters as %q", got)
		}
		b.screenshot(fmt.Sprintf("runs-filtered-%d", width))
	}
}
