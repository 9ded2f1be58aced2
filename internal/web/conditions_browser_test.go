package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardShowsWhyAJobWasSkipped: a job whose if: was false says why on its page.
func TestDashboardShowsWhyAJobWasSkipped(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	b := newBrowser(t, nil)
	_, jobs := c.submit(t, `
name: gated
jobs:
  deploy:
    if: branch == "main"
    steps: [ { run: echo never } ]
`)
	const reason = `if: branch == "main" was false`
	b.do("open the job", chromedp.Navigate(c.url+"/jobs/"+jobs["deploy"]), chromedp.WaitVisible(chromedp.CSS(`#job-status`)))
	b.waitJS("the job page says why it was skipped", `document.querySelector("#job-reason") &&
		document.querySelector("#job-reason").textContent === `+js(reason))
}
