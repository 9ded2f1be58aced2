package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/gantry-ci/gantry/internal/store"
)

// TestDashboardApprovesAJob: a job whose environment needs an approval shows "Waiting for
// approval" on its page with Approve and Reject; Approve (with auth off, as anonymous)
// queues it and the worker runs it.
func TestDashboardApprovesAJob(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	ctx := t.Context()
	if err := c.st.CreateProject(ctx, &store.Project{Name: "default"}); err != nil {
		t.Fatal(err)
	}
	p, err := c.st.GetProjectByName(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.st.PutEnvironment(ctx, &store.Environment{ProjectID: p.ID, Name: "production", RequiredApprovals: 1,
		Approvers: []string{"release-managers", "role:admin"}}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, nil)
	_, jobs := c.submit(t, `
name: ship
jobs:
  deploy:
    environment: production
    steps: [ { run: echo deployed } ]
`)
	b.do("open the job", chromedp.Navigate(c.url+"/jobs/"+jobs["deploy"]), chromedp.WaitVisible(chromedp.CSS(`#job-status`)))
	b.waitJS("the job waits for approval", `document.querySelector("#job-status [data-status]").dataset.status === "waiting_approval" &&
		document.querySelector("#approval h2").textContent === "Waiting for approval" &&
		document.querySelector("#approval-environment").textContent === "production" &&
		document.querySelector("#approval").innerText.includes("release-managers, role:admin") &&
		document.querySelector("#job-waiting").textContent === "waiting for approval (0 of 1)" &&
		!document.querySelector("#approve-job").disabled && !document.querySelector("#reject-job").disabled`)
	b.screenshot("job-waiting-approval")

	b.do("comment", chromedp.SendKeys(chromedp.ID("approval-comment"), "ship it"))
	b.do("approve", chromedp.Click(chromedp.ID("approve-job")))
	b.waitJS("the approved job ran", `document.querySelector("#job-status [data-status]").dataset.status === "success" &&
		document.querySelector('#approval-decisions li[data-decision="approved"]').innerText.includes("anonymous") &&
		document.querySelector('#approval-decisions li[data-decision="approved"]').innerText.includes("ship it") &&
		document.querySelector("#approval h2").textContent === "Approval" && !document.querySelector("#approve-job")`)
	b.waitJS("its log", `document.querySelector("#log").innerText.includes("deployed")`)
}
