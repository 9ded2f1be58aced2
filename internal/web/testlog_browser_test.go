package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gantry-ci/gantry/internal/store"
)

// TestDashboardTestLogLink: a failing test's Log link on the run's Tests tab opens its
// job's log searched for the test's name, with every line shown and the last line that
// the job's step printed that names it (where the test tool printed the failure) marked
// and in view: not the first (where it started the test), nor Gantry's own line about
// the report after the steps.
func TestDashboardTestLogLink(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	if err := c.st.CreateProject(t.Context(), &store.Project{Name: "web", DefaultBranch: "main"}); err != nil {
		t.Fatal(err)
	}
	yaml := "name: tests\njobs:\n  unit:\n    steps:\n      - run: |\n" +
		"          echo '=== RUN test_login'\n" +
		"          for i in $(seq 1 300); do echo \"log line $i\"; done\n" +
		"          echo '--- FAIL: test_login (0.25s)'\n" +
		"          echo 'the summary'\n" +
		"          echo '<testsuite name=\"tests.web\"><testcase classname=\"tests.web\" name=\"test_login\"><failure message=\"no\"/></testcase></testsuite>' > junit.xml\n" +
		"          exit 1\n" +
		"    reports:\n      junit: junit.xml\n"
	run, jobs := c.push(t, "main", "c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1", yaml)

	b := newBrowser(t, nil)
	b.do("open the run's tests", chromedp.Navigate(c.url+"/runs/"+run+"?tab=tests"))
	b.waitJS("the failing test with its Log link", `(() => {
		const a = document.querySelector("#failing-tests > li a.test-log");
		return a && a.getAttribute("href") === "/jobs/`+jobs["unit"]+`#find=test_login";
	})()`)
	b.do("follow it", chromedp.Click(chromedp.CSS(`#failing-tests > li a.test-log`)))
	b.waitJS("the log searched for the test, at its last mention", `(() => {
		const cur = document.querySelector("#log .line.current");
		if (!cur || document.querySelector("#log-search").value !== "test_login" || document.querySelector("#log-search-mode").value !== "all") return false;
		const box = document.querySelector("#log").getBoundingClientRect(), r = cur.getBoundingClientRect();
		return cur.textContent.includes("--- FAIL: test_login") && r.bottom > box.top && r.top < box.bottom &&
			document.querySelectorAll("#log .line.hit").length >= 2;
	})()`)
}
