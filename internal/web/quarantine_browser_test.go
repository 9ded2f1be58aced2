package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/testreport"
)

// quarantineAnswer is a quarantine as GET /api/v1/projects/{name}/tests/quarantine lists it.
type quarantineAnswer struct {
	Suite     string `json:"suite"`
	Name      string `json:"name"`
	Owner     string `json:"owner"`
	Reason    string `json:"reason"`
	CreatedAt string `json:"created_at"`
	ExpiresAt string `json:"expires_at"`
}

// quarantines reads project web's quarantines in force through the API.
func (c *coordinator) quarantines(t *testing.T) []quarantineAnswer {
	t.Helper()
	var qs []quarantineAnswer
	c.getJSON(t, "/api/v1/projects/web/tests/quarantine", &qs)
	return qs
}

// checkQuarantine fails the test unless the API lists exactly one quarantine, of test
// tests.web.name with owner and reason, ending days days after a moment between from and to.
func checkQuarantine(t *testing.T, c *coordinator, name, owner, reason string, days int, from, to time.Time) {
	t.Helper()
	qs := c.quarantines(t)
	if len(qs) != 1 || qs[0].Suite != "tests.web" || qs[0].Name != name || qs[0].Owner != owner || qs[0].Reason != reason {
		t.Fatalf("the API's quarantines: %+v; want only tests.web.%s, owner %q, reason %q", qs, name, owner, reason)
	}
	until, err := time.Parse(time.RFC3339Nano, qs[0].ExpiresAt)
	if err != nil {
		t.Fatal(err)
	}
	d := time.Duration(days) * 24 * time.Hour
	if until.Before(from.Add(d).Add(-time.Second)) || until.After(to.Add(d).Add(time.Second)) {
		t.Errorf("the quarantine ends at %s, want %d days after a moment between %s and %s", until, days, from, to)
	}
}

// refusals lets the browser log the API's refusals that a test provokes on purpose.
func refusals(codes ...string) func(chromedp.ConsoleMessage) bool {
	return func(m chromedp.ConsoleMessage) bool {
		for _, code := range codes {
			if strings.Contains(m.Text, "status of "+code) {
				return true
			}
		}
		return false
	}
}

// TestDashboardQuarantinesTests: a flaky test is quarantined from the project's Tests page
// and released there, and a failing one from a run's Tests tab, each checked through the
// API (owner, reason, expiry). The dialog opens with Enter and takes the focus, Escape
// closes it and gives the focus back; the API's 400 for an owner of spaces is shown in
// the dialog, which keeps what was typed; Keep quarantined keeps the quarantine; the
// lists show each change at once; the dialog and the page fit 400 px. A job's page shows
// its attempt's tests as the run's tab does: the counts at the top linking down to them,
// the failing ones with their messages and output; and an earlier attempt's, its own.
func TestDashboardQuarantinesTests(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	if err := c.st.CreateProject(t.Context(), &store.Project{Name: "web", DefaultBranch: "main"}); err != nil {
		t.Fatal(err)
	}
	const c1 = "c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1"
	// test_flaky fails, then passes on c1: flaky. test_broken fails both times.
	r1, jobs1 := c.push(t, "main", c1, junitPipeline(3, true,
		failedCase("test_broken", "want 200, got 500", "login_test.go:41: want 200, got 500"),
		failedCase("test_flaky", "timed out after 5s", "=== RUN test_flaky\nwaiting for the server")))
	c.push(t, "main", c1, junitPipeline(3, true, failedCase("test_broken", "want 200, got 500", "still broken"), passedCase("test_flaky")))

	// The project's Tests page: quarantine the flaky test.
	b := newBrowser(t, refusals("400"))
	b.do("open the project's tests", chromedp.Navigate(c.url+"/projects/web/tests"))
	flaky := `#flaky-tests li[data-test="tests.web.test_flaky"]`
	b.waitJS("the flaky test, with Quarantine", `document.querySelectorAll("#flaky-tests > li").length === 1 &&
		!!document.querySelector(`+js(flaky+` button.quarantine-button`)+`) && !!document.querySelector("#no-quarantine")`)
	b.do("open the dialog with the keyboard", chromedp.Focus(chromedp.CSS(flaky+` button.quarantine-button`)), chromedp.KeyEvent("\r"))
	b.waitJS("the dialog, the owner's field focused", `(() => {
		const d = document.querySelector("#quarantine-dialog");
		return d && d.open && document.activeElement.id === "quarantine-owner" &&
			document.querySelector("#quarantine-test").textContent === "tests.web.test_flaky" &&
			document.querySelector("#quarantine-for").value === "14d" &&
			document.querySelector('label[for="quarantine-owner"]').textContent === "Owner" &&
			document.querySelector('label[for="quarantine-for"]').textContent === "For" &&
			document.querySelector('label[for="quarantine-reason"]').textContent.startsWith("Reason");
	})()`)
	b.do("close it with Escape", chromedp.KeyEvent(kb.Escape))
	b.waitJS("the dialog gone, the focus back on Quarantine", `!document.querySelector("#quarantine-dialog") &&
		document.activeElement.matches(`+js(flaky+` button.quarantine-button`)+`)`)
	if n := len(c.quarantines(t)); n != 0 {
		t.Fatalf("closing the dialog quarantined %d tests", n)
	}

	// An owner of spaces passes the form and not the API: its 400 is said in the dialog,
	// and nothing typed is lost.
	b.do("open the dialog", chromedp.Click(chromedp.CSS(flaky+` button.quarantine-button`)), chromedp.WaitVisible(chromedp.ID("quarantine-owner")))
	b.do("fill it in with an owner of spaces", chromedp.SendKeys(chromedp.ID("quarantine-owner"), "   "),
		chromedp.SetValue(chromedp.ID("quarantine-for"), "30d"),
		chromedp.SendKeys(chromedp.ID("quarantine-reason"), "races on CI"),
		chromedp.Click(chromedp.ID("quarantine-submit")))
	b.waitJS("the API's refusal in the dialog, what was typed kept", `(() => {
		const err = document.querySelector("#quarantine-error");
		return err && !err.hidden && err.getAttribute("role") === "alert" && err.textContent.startsWith("Could not quarantine it: ") &&
			err.textContent.includes("an owner is required") && document.querySelector("#quarantine-dialog").open &&
			document.querySelector("#quarantine-owner").value === "   " && document.querySelector("#quarantine-for").value === "30d" &&
			document.querySelector("#quarantine-reason").value === "races on CI" && !document.querySelector("#quarantine-submit").disabled;
	})()`)
	if n := len(c.quarantines(t)); n != 0 {
		t.Fatalf("a refused quarantine left %d quarantines", n)
	}
	b.screenshot("quarantine-refused")

	from := time.Now()
	b.do("name the owner and submit again", chromedp.SetValue(chromedp.ID("quarantine-owner"), "alice"),
		chromedp.Click(chromedp.ID("quarantine-submit")))
	b.waitJS("the quarantine in the table, the flaky test marked", `(() => {
		const rows = [...document.querySelectorAll("#quarantine-table tbody tr")];
		return !document.querySelector("#quarantine-dialog") && rows.length === 1 && rows[0].dataset.test === "tests.web.test_flaky" &&
			rows[0].cells[1].textContent === "alice" && rows[0].cells[2].textContent === "races on CI" &&
			!!rows[0].querySelector("button.release-button") &&
			!!document.querySelector(`+js(flaky+` .quarantine-tag`)+`) && !document.querySelector(`+js(flaky+` button.quarantine-button`)+`) &&
			document.querySelector("#quarantine-message").textContent.startsWith("tests.web.test_flaky is quarantined until ") &&
			document.activeElement.id === "quarantine-message";
	})()`)
	checkQuarantine(t, c, "test_flaky", "alice", "races on CI", 30, from, time.Now())

	// Release asks first; Keep quarantined keeps it.
	release := `#quarantine-table tr[data-test="tests.web.test_flaky"] button.release-button`
	b.do("release, then keep it", chromedp.Click(chromedp.CSS(release)), chromedp.WaitVisible(chromedp.ID("confirm-no")))
	if got := b.eval(`document.querySelector("#confirm-h").textContent + "|" + document.activeElement.id`); got != "Release tests.web.test_flaky?|confirm-no" {
		t.Errorf("the release's question and focus: %s", got)
	}
	b.do("keep it quarantined", chromedp.Click(chromedp.ID("confirm-no")))
	b.waitJS("the dialog gone", `!document.querySelector("#confirm-dialog")`)
	if n := len(c.quarantines(t)); n != 1 {
		t.Fatalf("Keep quarantined left %d quarantines, want 1", n)
	}

	// At a phone's width: the page, the release's question and the quarantine dialog fit.
	b.do("a phone's width", chromedp.EmulateViewport(400, 800))
	b.waitJS("the page and its table's Release fit 400 px", `document.documentElement.scrollWidth <= 400 && `+inViewport(release))
	b.do("release it", chromedp.Click(chromedp.CSS(release)), chromedp.WaitVisible(chromedp.ID("confirm-yes")))
	b.waitJS("the question fits", inViewport("#confirm-dialog")+` && `+inViewport("#confirm-yes"))
	b.screenshot("quarantine-release-phone")
	b.do("confirm", chromedp.Click(chromedp.ID("confirm-yes")))
	b.waitJS("no quarantine, Quarantine offered again", `!!document.querySelector("#no-quarantine") &&
		!!document.querySelector(`+js(flaky+` button.quarantine-button`)+`) && !document.querySelector(`+js(flaky+` .quarantine-tag`)+`) &&
		document.querySelector("#quarantine-message").textContent === "tests.web.test_flaky is released from quarantine."`)
	if qs := c.quarantines(t); len(qs) != 0 {
		t.Fatalf("after the release the API lists %+v", qs)
	}
	b.do("open the dialog", chromedp.Click(chromedp.CSS(flaky+` button.quarantine-button`)), chromedp.WaitVisible(chromedp.ID("quarantine-owner")))
	b.waitJS("the dialog fits", inViewport("#quarantine-dialog")+` && `+inViewport("#quarantine-submit")+` && `+inViewport("#quarantine-reason")+
		` && document.documentElement.scrollWidth <= 400`)
	b.screenshot("quarantine-dialog-phone")

	// A run's Tests tab: quarantine a failing test for the default 14 days, then release it.
	b = newBrowser(t, nil)
	b.do("open the run's tests", chromedp.Navigate(c.url+"/runs/"+r1+"?tab=tests"))
	broken := `#failing-tests li[data-test="tests.web.test_broken"]`
	b.waitJS("the failing tests, with Quarantine", `document.querySelectorAll("#failing-tests > li").length === 2 &&
		!!document.querySelector(`+js(broken+` button.quarantine-button`)+`)`)
	b.do("quarantine test_broken", chromedp.Click(chromedp.CSS(broken+` button.quarantine-button`)),
		chromedp.WaitVisible(chromedp.ID("quarantine-owner")), chromedp.SendKeys(chromedp.ID("quarantine-owner"), "bob"))
	from = time.Now()
	b.do("submit with Enter", chromedp.KeyEvent("\r"))
	b.waitJS("test_broken marked quarantined, with Release", `(() => {
		const li = document.querySelector(`+js(broken)+`);
		return !document.querySelector("#quarantine-dialog") && li && !!li.querySelector(".quarantine-tag") &&
			!!li.querySelector("button.release-button") && !li.querySelector("button.quarantine-button") &&
			document.querySelector("#tests-headline").textContent.endsWith("(1 quarantined)") &&
			document.querySelector("#tests-message").textContent.includes("owned by bob");
	})()`)
	checkQuarantine(t, c, "test_broken", "bob", "", 14, from, time.Now())
	b.screenshot("run-tests-quarantined")
	b.do("release it", chromedp.Click(chromedp.CSS(broken+` button.release-button`)), chromedp.WaitVisible(chromedp.ID("confirm-yes")),
		chromedp.Click(chromedp.ID("confirm-yes")))
	b.waitJS("test_broken no longer quarantined", `(() => {
		const li = document.querySelector(`+js(broken)+`);
		return li && !li.querySelector(".quarantine-tag") && !!li.querySelector("button.quarantine-button") &&
			!document.querySelector("#tests-headline").textContent.includes("quarantined");
	})()`)
	if qs := c.quarantines(t); len(qs) != 0 {
		t.Fatalf("after the release the API lists %+v", qs)
	}

	// The job's page: its tests, as the run's tab shows them.
	var jv runTestsAnswer
	c.getJSON(t, "/api/v1/jobs/"+jobs1["unit"]+"/tests?status=failed,errored", &jv)
	if jv.Total != 5 || len(jv.Tests) != 2 || jv.Tests[0].Name != "test_broken" || jv.Tests[1].Name != "test_flaky" {
		t.Fatalf("the job's tests are not what the test needs: %+v", jv)
	}
	b = newBrowser(t, nil)
	b.do("open the job", chromedp.Navigate(c.url+"/jobs/"+jobs1["unit"]), chromedp.WaitVisible(chromedp.CSS(`#log`)))
	b.waitJS("the job's failing tests, with their messages and output", `(() => {
		const items = [...document.querySelectorAll("#job-tests #failing-tests > li")];
		const msg = (li) => li.querySelector(".test-message").textContent, out = (li) => li.querySelector(".test-output pre").textContent;
		return !document.querySelector("#job-tests").hidden && document.querySelector("#job-tests-count").textContent === "2 failed of 5" &&
			document.querySelector("#job-tests-count").getAttribute("href") === "#job-tests" &&
			document.querySelector("#tests-counts").textContent === "5 tests: 2 failed, 3 passed" &&
			items.map((li) => li.dataset.test).join(" ") === "tests.web.test_broken tests.web.test_flaky" &&
			msg(items[0]) === "want 200, got 500" && out(items[0]) === "login_test.go:41: want 200, got 500" &&
			msg(items[1]) === "timed out after 5s" && out(items[1]).includes("waiting for the server") &&
			items.every((li) => li.querySelector("button.verdict") && li.querySelector("button.quarantine-button") && !li.querySelector("a.test-log"));
	})()`)
	b.do("show the other tests", chromedp.Click(chromedp.ID("show-other-tests")))
	b.waitJS("the passed tests, without a job column", `(() => {
		const rows = [...document.querySelectorAll("#job-tests #other-tests tbody tr")];
		return rows.length === 3 && rows.every((r) => r.dataset.status === "passed" && r.cells.length === 3) &&
			document.querySelector("#other-tests-shown").textContent === "3 of 3 shown." && document.querySelector("#show-other-tests").hidden;
	})()`)
	// Clicked from the page itself: the job's page is drawn again as it polls, and a node
	// found before a redraw is gone by the click.
	b.eval(`(document.querySelector("#job-tests-count").click(), "followed")`)
	b.waitJS("the tests in view", `location.hash === "#job-tests" && document.querySelector("#job-tests").getBoundingClientRect().top < innerHeight / 2`)
	b.screenshot("job-tests")
	b.do("narrow the window", chromedp.EmulateViewport(400, 800))
	b.waitJS("the job's tests fit 400 px", `document.documentElement.scrollWidth <= 400 && `+inViewport(`#job-tests #failing-tests > li`))

	// A job whose attempt 1 failed a test and whose attempt 2 passed it: each attempt
	// shows its own tests.
	_, jobs3 := c.push(t, "feature", "c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3", attemptsPipeline)
	b = newBrowser(t, nil)
	b.do("open the job", chromedp.Navigate(c.url+"/jobs/"+jobs3["unit"]), chromedp.WaitVisible(chromedp.CSS(`#log`)))
	b.waitJS("attempt 1's failing test", `document.querySelector("#job-tests-count").textContent === "1 failed of 2" &&
		document.querySelector("#job-tests #failing-tests > li .test-message").textContent === "failed on attempt 1"`)
	b.do("re-run the job", chromedp.Click(chromedp.ID("retry-job")))
	b.waitJS("attempt 2's tests, none failed", `document.querySelector("#job-status [data-status]").dataset.status === "success" &&
		document.querySelectorAll("#attempts li").length === 2 && document.querySelector("#job-tests-count").textContent === "2, none failed" &&
		document.querySelectorAll("#job-tests #failing-tests > li").length === 0 && document.querySelector("#tests-headline").textContent === "No failing tests."`)
	// Clicked from the page itself: the attempts are drawn again as the page polls.
	b.eval(`(document.querySelector('#attempts li[data-attempt="1"] button').click(), "shown")`)
	b.waitJS("attempt 1's tests again", `document.querySelector("#job-tests-count").textContent === "1 failed of 2" &&
		document.querySelector("#job-tests #failing-tests > li").dataset.test === "tests.web.test_attempt" &&
		document.querySelector("#job-tests #failing-tests > li .test-message").textContent === "failed on attempt 1"`)
}

// attemptsPipeline's unit job reports test_attempt failed on its first attempt, and
// passed on any other.
const attemptsPipeline = `name: attempts
jobs:
  unit:
    steps:
      - run: |
          if [ "$GANTRY_ATTEMPT" = 1 ]; then
            echo '<testsuite name="tests.web"><testcase classname="tests.web" name="test_attempt"><failure message="failed on attempt 1">first</failure></testcase><testcase classname="tests.web" name="test_ok"/></testsuite>' > junit.xml
            exit 1
          fi
          echo '<testsuite name="tests.web"><testcase classname="tests.web" name="test_attempt"/><testcase classname="tests.web" name="test_ok"/></testsuite>' > junit.xml
    reports:
      junit: junit.xml
`

// TestDashboardQuarantineRefused: with auth on, a developer's token may not quarantine or
// release (both take maintainer): the API's 403 is said in the dialog, which keeps what
// was typed, and beside the quarantines, whose row stays; nothing changes.
func TestDashboardQuarantineRefused(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, true)
	if err := c.st.CreateProject(t.Context(), &store.Project{Name: "web", DefaultBranch: "main"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.st.PutQuarantine(t.Context(), store.PutQuarantineParams{Project: "web", Test: testreport.TestID{Suite: "tests.web", Name: "test_other"},
		Owner: "dana", Reason: "kept", ExpiresAt: time.Now().Add(48 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	r1, _ := c.push(t, "main", "c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1", junitPipeline(1, true, failedCase("test_broken", "boom", "broken")))

	b := newBrowser(t, refusals("403"))
	b.signIn(c.url, c.token)
	b.do("open the run's tests", chromedp.Navigate(c.url+"/runs/"+r1+"?tab=tests"))
	broken := `#failing-tests li[data-test="tests.web.test_broken"]`
	b.do("quarantine test_broken", chromedp.WaitVisible(chromedp.CSS(broken+` button.quarantine-button`)),
		chromedp.Click(chromedp.CSS(broken+` button.quarantine-button`)), chromedp.WaitVisible(chromedp.ID("quarantine-owner")),
		chromedp.SendKeys(chromedp.ID("quarantine-owner"), "carol"), chromedp.SetValue(chromedp.ID("quarantine-for"), "7d"),
		chromedp.SendKeys(chromedp.ID("quarantine-reason"), "the fixture races"), chromedp.Click(chromedp.ID("quarantine-submit")))
	b.waitJS("the refusal in the dialog, what was typed kept", `(() => {
		const err = document.querySelector("#quarantine-error");
		return err && !err.hidden && err.textContent.includes("may not do this") && err.textContent.includes("maintainer") &&
			document.querySelector("#quarantine-dialog").open && document.querySelector("#quarantine-owner").value === "carol" &&
			document.querySelector("#quarantine-for").value === "7d" && document.querySelector("#quarantine-reason").value === "the fixture races";
	})()`)
	b.screenshot("quarantine-forbidden")
	b.do("cancel", chromedp.Click(chromedp.ID("quarantine-cancel")))
	b.waitJS("the dialog gone, the test not quarantined", `!document.querySelector("#quarantine-dialog") &&
		!document.querySelector(`+js(broken+` .quarantine-tag`)+`)`)

	b.do("open the project's tests", chromedp.Navigate(c.url+"/projects/web/tests"))
	release := `#quarantine-table tr[data-test="tests.web.test_other"] button.release-button`
	b.do("release test_other", chromedp.WaitVisible(chromedp.CSS(release)), chromedp.Click(chromedp.CSS(release)),
		chromedp.WaitVisible(chromedp.ID("confirm-yes")), chromedp.Click(chromedp.ID("confirm-yes")))
	b.waitJS("the refusal beside the quarantines, the row kept", `(() => {
		const m = document.querySelector("#quarantine-message");
		return m.textContent.startsWith("Could not release tests.web.test_other: ") && m.textContent.includes("maintainer") &&
			m.classList.contains("error") && !!document.querySelector(`+js(release)+`) && !document.querySelector(`+js(release)+`).disabled;
	})()`)

	qs, err := c.st.ListQuarantines(t.Context(), store.ListQuarantinesParams{Project: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0].Test.Name != "test_other" || qs[0].Owner != "dana" {
		t.Fatalf("after two refusals the quarantines are %+v; want test_other's alone, as it was", qs)
	}
}
