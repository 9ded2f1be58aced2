package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardShowsWorkflowCommands: a step's ::group:: is a fold in the job's log, shut
// until clicked, its title showing; a search finds a line inside it; its ::error:: and
// ::warning:: lines are marked by level and listed as annotations on the job's page and
// its run's, each linking to its line, which opens the fold it is in.
func TestDashboardShowsWorkflowCommands(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	b := newBrowser(t, nil)
	runID, jobs := c.submit(t, `
name: commands
jobs:
  lint:
    steps:
      - run: |
          echo before
          echo '::group::Install deps'
          echo 'FOLDED-LINE one'
          echo '::error file=go.mod,line=3,title=Deps::stale go.sum'
          echo '::endgroup::'
          echo '::warning::careful now'
          echo after
`)
	b.do("open the job", chromedp.Navigate(c.url+"/jobs/"+jobs["lint"]), chromedp.WaitVisible(chromedp.CSS(`#log`)))
	b.waitJS("the job succeeded", `document.querySelector("#job-status [data-status]").dataset.status === "success"`)
	b.waitJS("the log's last line", `document.querySelector("#log").innerText.includes("after")`)
	b.waitJS("the fold's title, shut", `(() => {
		const f = document.querySelector("#log .line.fold-start");
		return f && f.innerText.includes("Install deps") && f.getAttribute("aria-expanded") === "false" &&
			!document.querySelector("#log").innerText.includes("FOLDED-LINE") &&
			!document.querySelector("#log").innerText.includes("endgroup");
	})()`)
	b.waitJS("the warning outside the fold, marked", `[...document.querySelectorAll("#log .line.level-warning")].some(l => !l.hidden && l.innerText.includes("Warning: careful now"))`)
	b.waitJS("the annotations above the log", `(() => {
		const items = [...document.querySelectorAll("#annotations li.annotation")];
		return !document.querySelector("#annotations").hidden && items.length === 2 &&
			items[0].dataset.level === "error" && items[0].innerText.includes("go.mod:3") && items[0].innerText.includes("Deps") &&
			items[0].innerText.includes("stale go.sum") && items[1].dataset.level === "warning";
	})()`)
	b.screenshot("job-commands-shut")

	// Clicked in the page in one step: the log viewer redraws its rows as the page
	// scrolls, so a node found first and clicked after (chromedp.Click) may be gone.
	b.eval(`(document.querySelector("#log .fold-toggle").click(), "opened")`)
	b.waitJS("the fold open", `document.querySelector("#log .line.fold-start").getAttribute("aria-expanded") === "true" &&
		document.querySelector("#log").innerText.includes("FOLDED-LINE one") &&
		[...document.querySelectorAll("#log .line.level-error")].some(l => !l.hidden && l.innerText.includes("Error: stale go.sum"))`)
	b.eval(`(document.querySelector("#log .fold-toggle").click(), "shut")`)
	b.waitJS("the fold shut", `!document.querySelector("#log").innerText.includes("FOLDED-LINE")`)

	b.do("search the log", chromedp.SendKeys(chromedp.ID("log-search"), "folded-line"))
	b.waitJS("the search finds the line in the shut fold", seen(`
		visibleRows().length === 1 && visibleRows()[0].innerText.includes("FOLDED-LINE one")`))
	b.do("clear the search", chromedp.Evaluate[chromedp.Void](`(() => {
		const s = document.querySelector("#log-search");
		s.value = "";
		s.dispatchEvent(new Event("input"));
	})()`))
	b.waitJS("the fold shut again", `!document.querySelector("#log").innerText.includes("FOLDED-LINE")`)

	b.do("follow the error's link", chromedp.Click(chromedp.CSS(`#annotations li[data-level="error"] a`)))
	b.waitJS("its line shown, its fold opened", `(() => {
		const l = document.querySelector("#log .line.target");
		return l && l.dataset.level === "error" && !l.hidden &&
			document.querySelector("#log .line.fold-start").getAttribute("aria-expanded") === "true";
	})()`)
	b.screenshot("job-commands-open")

	b.do("open the run", chromedp.Navigate(c.url+"/runs/"+runID), chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	b.waitJS("the run's annotations", `(() => {
		const items = [...document.querySelectorAll("#annotations li.annotation")];
		return items.length === 2 && items[0].innerText.includes("lint") &&
			items[0].querySelector("a").getAttribute("href").startsWith("/jobs/`+jobs["lint"]+`#L");
	})()`)
}
