package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gantry-ci/gantry/internal/store"
)

// inViewport is a JavaScript check that the element of selector is drawn (not hidden,
// with a size) and lies within the window's width.
func inViewport(selector string) string {
	return fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el) return false;
		const r = el.getBoundingClientRect(); const cs = getComputedStyle(el);
		return cs.display !== "none" && cs.visibility !== "hidden" && r.width > 0 && r.height > 0 &&
			r.left >= 0 && r.right <= window.innerWidth + 0.5; })()`, selector)
}

// getJSON reads an API answer into v.
func (c *coordinator) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, c.url+path, nil)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// waitRunOver polls the run through the API until it has ended, for at most 30 s.
func (c *coordinator) waitRunOver(t *testing.T, runID string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var r struct {
			Status string `json:"status"`
		}
		c.getJSON(t, "/api/v1/runs/"+runID, &r)
		switch r.Status {
		case "success", "failed", "cancelled":
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still %s after 30s", runID, r.Status)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}

// TestDashboardRerunsASucceededJob: Re-run job on a job that succeeded starts attempt 2
// (and its dependent again); the job page lists both attempts with who started them,
// and attempt 1's log and steps open from the list; at a phone's width too.
func TestDashboardRerunsASucceededJob(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	b := newBrowser(t, nil)
	runID, jobs := c.submit(t, `
name: rerun
jobs:
  build:
    steps:
      - name: compile
        run: echo "built by attempt $GANTRY_ATTEMPT"
  after:
    needs: [build]
    steps: [ { run: echo after } ]
`)
	b.do("open the job", chromedp.Navigate(c.url+"/jobs/"+jobs["build"]), chromedp.WaitVisible(chromedp.CSS(`#log`)))
	b.waitJS("the job passed", `document.querySelector("#job-status [data-status]").dataset.status === "success" &&
		document.querySelector("#log").innerText.includes("built by attempt 1")`)
	b.waitJS("re-run offered for a success", `!document.querySelector("#retry-job").disabled &&
		document.querySelector("#retry-job").textContent === "Re-run job" && !document.querySelector("#attempts")`)
	// A job is re-run once its dependents have finished (409 before): the run must be over.
	c.waitRunOver(t, runID)

	b.do("re-run", chromedp.Click(chromedp.ID("retry-job")))
	b.waitJS("attempt 2 ran and is followed", `document.querySelector("#job-status [data-status]").dataset.status === "success" &&
		document.querySelectorAll("#attempts li").length === 2 &&
		document.querySelector("#log").innerText.includes("built by attempt 2") &&
		!document.querySelector("#log").innerText.includes("built by attempt 1")`)
	first := `document.querySelector('#attempts li[data-attempt="1"]')`
	second := `document.querySelector('#attempts li[data-attempt="2"]')`
	b.waitJS("both attempts listed, with who started them", first+`.dataset.status === "success" &&
		`+first+`.innerText.includes("Attempt 1 of 2") && `+first+`.innerText.includes("started by the run") &&
		`+second+`.innerText.includes("Attempt 2 of 2") && `+second+`.innerText.includes("re-run by anonymous") &&
		!!`+second+`.querySelector('button[aria-pressed="true"]')`)

	b.eval(`(document.querySelector('#attempts li[data-attempt="1"] button').click(), "shown")`)
	b.waitJS("attempt 1's log and steps", `document.querySelector("#log").innerText.includes("built by attempt 1") &&
		!document.querySelector("#log").innerText.includes("built by attempt 2") &&
		document.querySelector('#attempts li[data-attempt="1"] button').getAttribute("aria-pressed") === "true" &&
		document.querySelector('.steps li[data-status="success"] .step-name').textContent === "compile"`)
	b.screenshot("job-rerun-attempts")

	// What needs the job ran again after it. A re-run goes past max_attempts (1), so the
	// attempt reads "2", not "2 of 1".
	b.do("open the run", chromedp.Navigate(c.url+"/runs/"+runID), chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	b.waitJS("after ran twice", `document.querySelector('tr[data-key="after"]').dataset.status === "success" &&
		document.querySelector('tr[data-key="after"] td:nth-child(3)').textContent === "2" &&
		document.querySelector('tr[data-key="build"] td:nth-child(3)').textContent === "2"`)

	b.do("a phone's width", chromedp.EmulateViewport(400, 800), chromedp.Navigate(c.url+"/jobs/"+jobs["build"]),
		chromedp.WaitVisible(chromedp.CSS(`#attempts`)))
	b.waitJS("the attempts fit", inViewport(`#attempts li[data-attempt="2"]`)+` && `+inViewport(`#attempts li[data-attempt="1"] button`)+
		` && `+inViewport(`#retry-job`))
	b.screenshot("job-rerun-attempts-phone")
}

// TestDashboardRerunsFailedJobs: Re-run failed jobs on a failed run runs the failed job
// and what it skipped, not what passed; the run ends green.
func TestDashboardRerunsFailedJobs(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	b := newBrowser(t, nil)
	runID, _ := c.submit(t, `
name: flaky
jobs:
  lint:
    steps: [ { run: echo lint } ]
  test:
    steps: [ { run: test "$GANTRY_ATTEMPT" -gt 1 } ]
  deploy:
    needs: [lint, test]
    steps: [ { run: echo deploy } ]
`)
	b.do("a phone's width", chromedp.EmulateViewport(400, 800))
	b.do("open the run", chromedp.Navigate(c.url+"/runs/"+runID), chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	b.waitJS("the run failed", `document.querySelector("#run-status [data-status]").dataset.status === "failed" &&
		document.querySelector('tr[data-key="deploy"]').dataset.status === "skipped"`)
	b.waitJS("both re-runs offered, on screen", `!document.querySelector("#retry-run").disabled && !document.querySelector("#rerun-all").disabled &&
		document.querySelector("#retry-run").textContent === "Re-run failed jobs" && `+inViewport("#retry-run")+` && `+inViewport("#rerun-all"))
	b.screenshot("run-failed-rerun-phone")

	b.do("a desktop's width", chromedp.EmulateViewport(1280, 800))
	b.do("re-run the failed jobs", chromedp.Click(chromedp.ID("retry-run")))
	b.waitJS("the run passed", `document.querySelector("#run-status [data-status]").dataset.status === "success" &&
		[...document.querySelectorAll("tbody tr")].every(r => r.dataset.status === "success")`)
	attempt := func(key string) string {
		return b.eval(`document.querySelector('tr[data-key="` + key + `"] td:nth-child(3)').textContent`)
	}
	if a, tst, d := attempt("lint"), attempt("test"), attempt("deploy"); a[:1] != "1" || tst[:1] != "2" || d[:1] != "1" {
		t.Errorf("attempts after re-running the failed jobs: lint %q, test %q, deploy %q; want 1, 2, 1", a, tst, d)
	}
	b.screenshot("run-failed-rerun-passed")
}

// TestDashboardCancelAsksFirst: Cancel run opens a dialog; Escape and Keep running
// keep the run going; Cancel run in the dialog cancels it; the dialog fits a phone.
func TestDashboardCancelAsksFirst(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	b := newBrowser(t, nil)
	runID, jobs := c.submit(t, `
name: long
jobs:
  wait:
    steps: [ { run: sleep 120 } ]
`)
	// The job page's Cancel job asks too.
	b.do("open the job", chromedp.Navigate(c.url+"/jobs/"+jobs["wait"]), chromedp.WaitVisible(chromedp.CSS(`#log`)))
	b.waitJS("the job running", `document.querySelector("#job-status [data-status]").dataset.status === "running"`)
	b.do("cancel the job", chromedp.Click(chromedp.ID("cancel-job")))
	b.waitJS("the job's dialog asks", `document.querySelector("#confirm-dialog") && document.querySelector("#confirm-dialog").open &&
		document.querySelector("#confirm-h").textContent === "Cancel this job?" && `+inViewport("#confirm-no"))
	b.do("Escape", chromedp.KeyEvent("\x1b"))
	b.waitJS("the dialog closed, the job running", `!document.querySelector("#confirm-dialog") &&
		document.querySelector("#job-status [data-status]").dataset.status === "running" && !document.querySelector("#cancel-job").disabled`)

	b.do("open the run", chromedp.Navigate(c.url+"/runs/"+runID), chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	b.waitJS("the job running", `document.querySelector('.node[data-key="wait"]').dataset.status === "running"`)
	dialogShown := `document.querySelector("#confirm-dialog") && document.querySelector("#confirm-dialog").open && ` +
		inViewport("#confirm-dialog") + ` && document.querySelector("#confirm-h").textContent === "Cancel this run?" &&
		document.activeElement === document.querySelector("#confirm-no")`
	noDialog := `!document.querySelector("#confirm-dialog")`

	b.do("cancel", chromedp.Click(chromedp.ID("cancel-run")))
	b.waitJS("the dialog asks, Keep running focused", dialogShown)
	b.screenshot("cancel-dialog")
	b.do("Escape", chromedp.KeyEvent("\x1b"))
	b.waitJS("the dialog closed", noDialog)

	b.do("cancel again", chromedp.Click(chromedp.ID("cancel-run")))
	b.waitJS("the dialog asks again", dialogShown)
	b.do("keep running", chromedp.Click(chromedp.ID("confirm-no")))
	b.waitJS("the dialog closed", noDialog)
	// Nothing was asked of the server: the run and its job still run, uncancelled.
	var run struct {
		Status          string `json:"status"`
		CancelRequested bool   `json:"cancel_requested"`
		Jobs            []struct {
			Status string `json:"status"`
		} `json:"jobs"`
	}
	c.getJSON(t, "/api/v1/runs/"+runID, &run)
	if run.Status != "running" || run.CancelRequested || run.Jobs[0].Status != "running" {
		t.Fatalf("after Escape and Keep running the run is %+v, want running, not cancel-requested", run)
	}
	if got := b.eval(`document.querySelector("#cancel-run").disabled + " " + document.querySelector("#run-status [data-status]").dataset.status`); got != "false running" {
		t.Errorf("cancel button disabled, run status = %q; want false running", got)
	}

	b.do("a phone's width", chromedp.EmulateViewport(400, 800))
	b.do("cancel on a phone", chromedp.Click(chromedp.ID("cancel-run")))
	b.waitJS("the dialog fits a phone", dialogShown+` && `+inViewport("#confirm-yes")+` && `+inViewport("#confirm-no"))
	b.screenshot("cancel-dialog-phone")
	b.do("confirm", chromedp.Click(chromedp.ID("confirm-yes")))
	b.waitJS("the run cancelled", noDialog+` && document.querySelector("#run-status [data-status]").dataset.status === "cancelled"`)
}

// TestDashboardApprovalsInboxAndRunPage: two deploys wait for approval; the header
// counts them and the inbox lists both; one is approved from its run page, after which
// the inbox and the count show only the other; rejecting it from the inbox asks first
// and empties the inbox. At a phone's width the inbox fits.
func TestDashboardApprovalsInboxAndRunPage(t *testing.T) {
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
		Approvers: []string{"role:admin"}}); err != nil {
		t.Fatal(err)
	}
	const ship = `
name: ship
jobs:
  deploy:
    environment: production
    steps: [ { run: echo deployed } ]
`
	run1, jobs1 := c.submit(t, ship)
	_, jobs2 := c.submit(t, ship)
	b := newBrowser(t, nil)

	b.do("open the inbox", chromedp.Navigate(c.url+"/approvals"), chromedp.WaitVisible(chromedp.ID("inbox")))
	item := func(job string) string { return `document.querySelector('.inbox-item[data-job="` + job + `"]')` }
	b.waitJS("both waiting, counted in the header", item(jobs1["deploy"])+` && `+item(jobs2["deploy"])+` &&
		document.querySelector("#approvals-count").textContent === "2" && `+inViewport("#approvals-count")+` &&
		`+item(jobs1["deploy"])+`.innerText.includes("production") && /#\d+ in /.test(`+item(jobs1["deploy"])+`.innerText)`)
	b.screenshot("approvals-inbox")

	b.do("open the first run", chromedp.Navigate(c.url+"/runs/"+run1), chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	b.waitJS("approve offered on the run page", `document.querySelector('tr[data-key="deploy"]').dataset.status === "waiting_approval" &&
		`+inViewport(`tr[data-key="deploy"] [data-decide="approve"]`))
	b.eval(`(document.querySelector('tr[data-key="deploy"] [data-decide="approve"]').click(), "approved")`)
	b.waitJS("the approved deploy ran", `document.querySelector('tr[data-key="deploy"]').dataset.status === "success" &&
		!document.querySelector('[data-decide]') && document.querySelector("#run-status [data-status]").dataset.status === "success"`)

	b.do("a phone's width", chromedp.EmulateViewport(400, 800), chromedp.Navigate(c.url+"/approvals"),
		chromedp.WaitVisible(chromedp.ID("inbox")))
	b.waitJS("only the second waits", `!`+item(jobs1["deploy"])+` && `+item(jobs2["deploy"])+` &&
		document.querySelector("#approvals-count").textContent === "1" && `+
		inViewport(`.inbox-item[data-job="`+jobs2["deploy"]+`"] [data-decide="reject"]`))
	b.screenshot("approvals-inbox-phone")
	b.eval(`(document.querySelector('.inbox-item [data-decide="reject"]').click(), "asked")`)
	b.waitJS("reject asks first", `document.querySelector("#confirm-dialog") && document.querySelector("#confirm-dialog").open &&
		document.querySelector("#confirm-h").textContent === "Reject deploy?" && `+inViewport("#confirm-yes"))
	b.do("reject", chromedp.Click(chromedp.ID("confirm-yes")))
	b.waitJS("the inbox is empty", `document.querySelector("#inbox-empty") && document.querySelector("#approvals-count").hidden &&
		getComputedStyle(document.querySelector("#approvals-count")).display === "none"`)
	var job struct {
		Status      string `json:"status"`
		FailureKind string `json:"failure_kind"`
	}
	c.getJSON(t, "/api/v1/jobs/"+jobs2["deploy"], &job)
	if job.Status != "failed" || job.FailureKind != "rejected" {
		t.Errorf("the rejected deploy is %+v, want failed rejected", job)
	}
}
