package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardShowsWhyAJobWaits: a job no worker can take says so on its graph node (in
// a word, and in full in its tooltip), in the run's job table and on its own page.
func TestDashboardShowsWhyAJobWaits(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	b := newBrowser(t, nil)
	runID, jobs := c.submit(t, `
name: stuck
jobs:
  build:
    runs_on: [windows-latest]
    steps: [ { run: echo never } ]
  ok:
    steps: [ { run: echo fine } ]
`)
	const msg = "waiting: no worker has labels [windows-latest]"
	b.do("open the run", chromedp.Navigate(c.url+"/runs/"+runID), chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	b.waitJS("the node says why build waits", `(() => {
		const n = document.querySelector('.node[data-key="build"]');
		return n.dataset.waiting === "no_worker" && n.querySelector(".node-status").textContent === "queued \u00b7 no worker" &&
			n.querySelector("title").textContent.includes(`+js(msg)+`) && n.getAttribute("aria-label").includes(`+js(msg)+`);
	})()`)
	b.waitJS("the job table says it", `document.querySelector('tr[data-key="build"] .waiting').textContent === `+js(msg))
	b.waitJS("the job that ran waits for nothing", `(() => {
		const n = document.querySelector('.node[data-key="ok"]');
		return n.dataset.status === "success" && n.dataset.waiting === "" && !document.querySelector('tr[data-key="ok"] .waiting');
	})()`)
	b.screenshot("run-waiting")

	b.do("open the job", chromedp.Navigate(c.url+"/jobs/"+jobs["build"]), chromedp.WaitVisible(chromedp.CSS(`#job-status`)))
	b.waitJS("the job page says why it waits", `document.querySelector("#job-waiting") &&
		document.querySelector("#job-waiting").textContent === `+js(msg)+` && document.querySelector("#job-waiting").dataset.code === "no_worker"`)
}
