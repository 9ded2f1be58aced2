package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gantry-ci/gantry/internal/store"
)

// junitPipeline is a run whose unit job writes a JUnit report of suite tests.web: cases
// (testcase elements) after passing generated passes, and exits 1 when fail is set, as a
// test runner with failures does.
func junitPipeline(passing int, fail bool, cases ...string) string {
	var script strings.Builder
	script.WriteString("{\necho '<testsuites><testsuite name=\"tests.web\">'\n")
	if passing > 0 {
		fmt.Fprintf(&script, "for i in $(seq -w 1 %d); do echo \"<testcase classname=\\\"tests.web\\\" name=\\\"test_pass_$i\\\" time=\\\"0.001\\\"/>\"; done\n", passing)
	}
	script.WriteString("cat <<'EOF'\n" + strings.Join(cases, "\n") + "\nEOF\necho '</testsuite></testsuites>'\n} > junit.xml\n")
	if fail {
		script.WriteString("exit 1\n")
	}
	var yaml strings.Builder
	yaml.WriteString("name: tests\njobs:\n  unit:\n    steps:\n      - run: |\n")
	for _, l := range strings.Split(strings.TrimSuffix(script.String(), "\n"), "\n") {
		yaml.WriteString("          " + l + "\n")
	}
	yaml.WriteString("    reports:\n      junit: junit.xml\n")
	return yaml.String()
}

func passedCase(name string) string {
	return `<testcase classname="tests.web" name="` + name + `" time="0.010"/>`
}

func failedCase(name, message, output string) string {
	return `<testcase classname="tests.web" name="` + name + `" file="tests/web.py" line="12" time="1.250"><failure message="` +
		message + `">` + output + `</failure></testcase>`
}

// waitRunEnded waits until run id has ended: a branch's summary is of its latest
// finished run.
func waitRunEnded(t *testing.T, c *coordinator, id string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		var run struct {
			Status string `json:"status"`
		}
		c.getJSON(t, "/api/v1/runs/"+id, &run)
		if run.Status == "success" || run.Status == "failed" || run.Status == "cancelled" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s after 30s, want it ended", id, run.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// push makes a run of project web from yaml as a signed webhook would, so its commit
// counts, and waits for its job unit to end: a verdict reads what was kept before its run.
// It returns the run's id and its jobs' ids by key.
func (c *coordinator) push(t *testing.T, branch, sha, yaml string) (string, map[string]string) {
	t.Helper()
	id, jobs := c.createRun(t, yaml, store.Trigger{Ref: "refs/heads/" + branch, Branch: branch, SHA: sha, Event: "push",
		Verified: store.RefFromWebhook})
	waitRunJobs(t, c, id, 60*time.Second, func(js map[string]apiJob) bool {
		return js["unit"].Status == "success" || js["unit"].Status == "failed"
	})
	return id, jobs
}

type runTestsAnswer struct {
	Counts   map[string]int `json:"counts"`
	Total    int            `json:"total"`
	Headline string         `json:"headline"`
	Tests    []struct {
		Suite   string `json:"suite"`
		Name    string `json:"name"`
		Status  string `json:"status"`
		Message string `json:"message"`
		Output  string `json:"output"`
		// Quarantined marks a failing test its project has quarantined.
		Quarantined bool `json:"quarantined"`
		Verdict     *struct {
			Kind string `json:"kind"`
			Why  string `json:"why"`
		} `json:"verdict"`
	} `json:"tests"`
}

// TestDashboardShowsTests: four runs of project web, on verified commits, run for real by
// the worker and report their tests in JUnit. The third run's page grows a Tests tab
// that says how many failed; in it the headline and counts are the API's, the failing
// tests come first in the API's order with their messages and verdicts (new, still
// failing, known broken, flaky), a verdict opens to its evidence, whose runs are links
// that land on those runs, each failing test has a sparkline of its latest results with
// this run outlined, a test named <script> with a message of markup is text and runs
// nothing, its output opens as text, the skipped and passed tests page in 100 at a time
// to the last, and a 400 px window does not scroll sideways. The project's Tests page
// lists main's failing tests (of run 5, its latest) newest failure first, each with the
// run and commit it began failing in, the run it last passed in, its verdict (opened
// with the keyboard) and its job, and main's slowest tests; another branch when asked,
// and what to do for a branch with no run; its flaky tests with their evidence; and its
// history box shows a test's results newest first, as a failing test's History link
// does.
func TestDashboardShowsTests(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	if err := c.st.CreateProject(t.Context(), &store.Project{Name: "web", DefaultBranch: "main"}); err != nil {
		t.Fatal(err)
	}
	push := func(branch, sha, yaml string) string {
		t.Helper()
		id, _ := c.push(t, branch, sha, yaml)
		return id
	}
	const (
		c1 = "c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1"
		m1 = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"
		c2 = "c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2"
		m2 = "a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2"
	)
	const hostile = "<script>window.pwned=1</script>"
	push("feature", c1, junitPipeline(0, true, failedCase("test_still", "want 1, got 2", "still broken"),
		passedCase("test_flaky"), passedCase("test_broken")))
	r2 := push("main", m1, junitPipeline(0, true, failedCase("test_broken", "boom on main", "broken on main"),
		passedCase("test_flaky"), passedCase("test_still"), passedCase("test_login")))
	r3 := push("feature", c2, junitPipeline(250, true,
		failedCase("test_broken", "boom again", "broken"),
		failedCase("test_still", "want 1, got 3", "still"),
		failedCase("test_flaky", "timed out after 5s", "=== RUN test_flaky\nwaiting for the server"),
		`<testcase classname="tests.web" name="&lt;script&gt;window.pwned=1&lt;/script&gt;" time="0.5">`+
			`<error message="&lt;img src=x onerror=&quot;window.pwned=2&quot;&gt;">&lt;b&gt;not bold&lt;/b&gt; &lt;script&gt;window.pwned=3&lt;/script&gt;</error></testcase>`,
		`<testcase classname="tests.web" name="test_skip"><skipped message="needs a browser"/></testcase>`,
		`<testcase classname="tests.web" name="test_retried" time="0.2"><flakyFailure message="connection reset"/></testcase>`))
	r4 := push("feature", c2, junitPipeline(0, false, passedCase("test_flaky")))
	// test_broken is quarantined now: its failure is still shown, and marked so.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, c.url+"/api/v1/projects/web/tests/quarantine",
		strings.NewReader(`{"suite": "tests.web", "name": "test_broken", "owner": "alice", "reason": "the fixture server races", "for": "14d"}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("quarantine test_broken: %s", res.Status)
	}

	var v runTestsAnswer
	c.getJSON(t, "/api/v1/runs/"+r3+"/tests?status=failed,errored", &v)
	if v.Total != 256 || v.Counts["failed"] != 3 || v.Counts["errored"] != 1 || v.Counts["skipped"] != 1 || v.Counts["passed"] != 251 ||
		v.Headline != "1 new failure, 1 still failing, 1 known broken, 1 known flaky (1 quarantined)" || len(v.Tests) != 4 {
		t.Fatalf("the run's tests are not what the test needs: %d %v %q, %d failing", v.Total, v.Counts, v.Headline, len(v.Tests))
	}
	type want struct {
		Test, Status, Message, Kind, Why string
		Quarantined                      bool
	}
	var failing []want
	for _, tv := range v.Tests {
		failing = append(failing, want{tv.Suite + "." + tv.Name, tv.Status, tv.Message, tv.Verdict.Kind, tv.Verdict.Why, tv.Quarantined})
	}
	for _, w := range failing {
		if w.Quarantined != (w.Test == "tests.web.test_broken") {
			t.Fatalf("the API marks %s quarantined: %v", w.Test, w.Quarantined)
		}
	}
	wantJSON, _ := json.Marshal(failing)

	b := newBrowser(t, nil)
	b.do("open the run", chromedp.Navigate(c.url+"/runs/"+r3), chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	b.waitJS("the Tests tab, saying how many failed", visible(`#tab-tests`)+` &&
		document.querySelector("#tab-tests").textContent === "Tests 4 failed" &&
		document.querySelector("#tab-overview").getAttribute("aria-selected") === "true"`)
	b.do("open the Tests tab", chromedp.Click(chromedp.ID("tab-tests")))
	b.waitJS("the tests shown in place of the graph", `location.search === "?tab=tests" && document.querySelector("#panel-overview").hidden &&
		!document.querySelector("#panel-tests").hidden && document.querySelectorAll("#failing-tests > li").length === 4`)
	if got := b.eval(`document.querySelector("#tests-headline").textContent`); got != v.Headline {
		t.Errorf("headline %q, want the API's %q", got, v.Headline)
	}
	if got, want := b.eval(`document.querySelector("#tests-counts").textContent`), "256 tests: 3 failed, 1 errored, 1 skipped, 251 passed"; got != want {
		t.Errorf("counts %q, want %q", got, want)
	}
	// The failing tests, in the API's order, with their statuses, messages and verdicts.
	if got := b.eval(`(() => {
		const want = ` + string(wantJSON) + `;
		const items = [...document.querySelectorAll("#failing-tests > li")];
		const words = {new: "new failure", still: "still failing", known: "known broken", flaky: "flaky"};
		const bad = [];
		want.forEach((w, i) => {
			const li = items[i], btn = li.querySelector("button.verdict");
			const got = {test: li.querySelector(".test-name").textContent, status: li.querySelector(".badge").dataset.status,
				message: li.querySelector(".test-message").textContent, kind: btn.dataset.verdict, why: btn.title,
				word: btn.firstChild.textContent, quarantined: !!li.querySelector(".quarantine-tag")};
			if (got.test !== w.Test || got.status !== w.Status || got.message !== w.Message || got.kind !== w.Kind ||
				got.why !== w.Why || got.word !== words[w.Kind] || got.quarantined !== w.Quarantined) bad.push(JSON.stringify({want: w, got}));
		});
		return bad.join("\n");
	})()`); got != "" {
		t.Errorf("failing tests differ from the API's:\n%s", got)
	}

	// A test named <script> with a message of markup: text, and nothing ran.
	hostileItem := `#failing-tests li[data-test=` + js("tests.web."+hostile) + `]`
	b.waitJS("the hostile test shown as text", `(() => {
		const li = document.querySelector(`+js(hostileItem)+`);
		return li && li.querySelector(".test-name").textContent === `+js("tests.web."+hostile)+` &&
			li.querySelector(".test-message").textContent === `+js(`<img src=x onerror="window.pwned=2">`)+` &&
			li.dataset.verdict === "new" && li.querySelector(".badge").dataset.status === "errored" &&
			!document.querySelector("#panel-tests script, #panel-tests img, #panel-tests b") && window.pwned === undefined;
	})()`)
	b.do("open its output", chromedp.Click(chromedp.CSS(hostileItem+` details.test-output summary`)))
	b.waitJS("its output, as text", `(() => {
		const pre = document.querySelector(`+js(hostileItem+` details.test-output[open] pre`)+`);
		return pre && pre.getBoundingClientRect().height > 0 && pre.textContent.includes("<b>not bold</b> <script>window.pwned=3</script>") &&
			!document.querySelector("#panel-tests script, #panel-tests b") && window.pwned === undefined;
	})()`)

	// The flaky test's sparkline: runs 1 to 4 oldest first, this run's failure outlined.
	flaky := `#failing-tests li[data-test="tests.web.test_flaky"]`
	b.waitJS("the flaky test's latest results", `(() => {
		const cells = [...document.querySelectorAll(`+js(flaky+` .spark-cell`)+`)];
		return cells.map((c) => c.dataset.status + (c.classList.contains("this-run") ? "*" : "")).join(" ") === "passed passed failed* passed" &&
			document.querySelector(`+js(flaky+` .spark`)+`).getAttribute("aria-label") === "Last 4 results, oldest first: 1 failed, 3 passed; the latest passed";
	})()`)
	b.waitJS("every failing test's sparkline", `[...document.querySelectorAll("#failing-tests > li")].every((li) => li.querySelector(".spark-cell.this-run"))`)

	// Its verdict opens to the evidence: the failure here and the pass in run 4, linked.
	b.do("open the flaky verdict", chromedp.Click(chromedp.CSS(flaky+` button.verdict`)))
	b.waitJS("the evidence", `(() => {
		const box = document.querySelector(`+js(flaky+` .verdict-detail`)+`);
		const links = box ? [...box.querySelectorAll("a.evidence-run")].map((a) => a.textContent + "=" + a.getAttribute("href")) : [];
		return box && !box.hidden && document.querySelector(`+js(flaky+` button.verdict`)+`).getAttribute("aria-expanded") === "true" &&
			box.querySelector(".verdict-why").textContent.startsWith("failed and passed on the same commit") &&
			links.join(" ") === "run #3=/projects/web/runs/3 run #4=/projects/web/runs/4";
	})()`)
	b.screenshot("run-tests")
	b.do("follow the evidence of the pass", chromedp.Click(chromedp.CSS(flaky+` a.evidence-run[href$="/4"]`)))
	b.waitJS("run 4's page", `location.pathname === "/runs/`+r4+`" && document.querySelector("h1").innerText.trim() === "tests #4"`)
	b.do("go back", chromedp.NavigateBack())
	b.waitJS("the Tests tab again, from its URL", `location.pathname === "/runs/`+r3+`" && location.search === "?tab=tests" &&
		!!document.querySelector('#tab-tests[aria-selected="true"]') && document.querySelectorAll("#failing-tests > li").length === 4`)

	// The skipped and passed tests, 100 at a time, skipped first.
	b.do("show the other tests", chromedp.Click(chromedp.ID("show-other-tests")))
	b.waitJS("the first 100", `document.querySelectorAll("#other-tests tbody tr").length === 100 &&
		document.querySelector("#other-tests tbody tr").dataset.status === "skipped" &&
		document.querySelector("#other-tests tbody tr").innerText.includes("needs a browser")`)
	for _, n := range []int{200, 252} {
		b.do("show more", chromedp.Click(chromedp.ID("show-other-tests")))
		b.waitJS(fmt.Sprintf("%d shown", n), fmt.Sprintf(`document.querySelectorAll("#other-tests tbody tr").length === %d`, n))
	}
	if got := b.eval(`(() => {
		const rows = [...document.querySelectorAll("#other-tests tbody tr")];
		const names = new Set(rows.map((r) => r.dataset.test));
		const retried = rows.find((r) => r.dataset.test === "tests.web.test_retried");
		return [document.querySelector("#other-tests-shown").textContent, String(document.querySelector("#show-other-tests").hidden),
			String(names.size), String(names.has("tests.web.test_pass_001") && names.has("tests.web.test_pass_250")),
			String(rows.slice(1).every((r) => r.dataset.status === "passed")),
			retried ? retried.querySelector(".rerun-tag").textContent : "no test_retried"].join("|");
	})()`); got != "252 of 252 shown.|true|252|true|true|passed after 1 failed rerun" {
		t.Errorf("the other tests, paged to the end: %s", got)
	}

	b.do("narrow the window", chromedp.EmulateViewport(400, 800))
	b.waitJS("the tests tab fits 400 px", `document.documentElement.scrollWidth <= 400`)
	b.screenshot("run-tests-narrow")
	b.do("widen the window", chromedp.EmulateViewport(1280, 800))

	// A failing test's History link: the project's Tests page, showing its results.
	b.do("open the flaky test's history", chromedp.Click(chromedp.CSS(flaky+` a.test-history`)))
	b.waitJS("its history, newest first", `(() => {
		const rows = [...document.querySelectorAll("#history-table tbody tr")], name = document.querySelector("#history-test");
		return location.pathname === "/projects/web/tests" && name && name.textContent === "tests.web.test_flaky" &&
			document.querySelector("#test-query").value === "tests.web.test_flaky" &&
			rows.map((r) => r.dataset.run + ":" + r.dataset.status).join(" ") === "4:passed 3:failed 2:passed 1:passed";
	})()`)

	// Run 5 on main, at m2: test_login fails for the first time (it passed in run 2),
	// test_broken fails again (it has failed on main since run 2), test_slow takes 3.5 s.
	r5 := push("main", m2, junitPipeline(0, true, failedCase("test_login", "login refused", "401"),
		failedCase("test_broken", "boom on main again", "broken"), `<testcase classname="tests.web" name="test_slow" time="3.5"/>`,
		passedCase("test_fast")))
	waitRunEnded(t, c, r5)
	var sum struct {
		Run *struct {
			Number int `json:"number"`
		} `json:"run"`
		Failing []struct {
			Name  string `json:"name"`
			Since struct {
				Run int `json:"run"`
			} `json:"since"`
			LastPass *struct {
				Run int `json:"run"`
			} `json:"last_pass"`
			Verdict struct {
				Kind string `json:"kind"`
			} `json:"verdict"`
		} `json:"failing"`
	}
	c.getJSON(t, "/api/v1/projects/web/tests/summary", &sum)
	if sum.Run == nil || sum.Run.Number != 5 || len(sum.Failing) != 2 || sum.Failing[0].Name != "test_login" || sum.Failing[0].Since.Run != 5 ||
		sum.Failing[0].LastPass == nil || sum.Failing[0].LastPass.Run != 2 || sum.Failing[0].Verdict.Kind != "new" ||
		sum.Failing[1].Name != "test_broken" || sum.Failing[1].Since.Run != 2 || sum.Failing[1].LastPass != nil || sum.Failing[1].Verdict.Kind != "known" {
		t.Fatalf("the API's summary of main is not what the test needs: %+v", sum)
	}

	// The project's Tests page, from the project's page, in a browser of its own (the
	// first one's time is spent).
	b = newBrowser(t, nil)
	b.do("open the project", chromedp.Navigate(c.url+"/projects/web"), chromedp.WaitVisible(chromedp.ID("project-tests")),
		chromedp.Click(chromedp.ID("project-tests")))
	b.waitJS("the flaky tests, latest first", `(() => {
		const items = [...document.querySelectorAll("#flaky-tests > li")];
		return location.pathname === "/projects/web/tests" &&
			items.map((li) => li.dataset.test).join(" ") === "tests.web.test_flaky tests.web.test_retried";
	})()`)
	if got := b.eval(`(() => {
		const li = document.querySelector('#flaky-tests li[data-test="tests.web.test_flaky"]');
		const links = [...li.querySelectorAll("a.evidence-run")].map((a) => a.textContent + "=" + a.getAttribute("href"));
		return [li.querySelector(".test-meta").textContent.includes("flipped on 1 commit"),
			li.querySelector(".evidence li").dataset.sha, links.join(" "),
			li.querySelector("a.test-name").getAttribute("href")].join("|");
	})()`); got != "true|"+c2+"|run #4=/runs/"+r4+" run #3=/runs/"+r3+"|/projects/web/tests?suite=tests.web&name=test_flaky" {
		t.Errorf("the flaky test's evidence: %s", got)
	}
	b.waitJS("the quarantined test, with its owner and reason", `(() => {
		const rows = [...document.querySelectorAll("#quarantine-table tbody tr")];
		return rows.length === 1 && rows[0].dataset.test === "tests.web.test_broken" &&
			[rows[0].cells[0].querySelector(".test-name"), rows[0].cells[1], rows[0].cells[2]].map((c) => c.textContent).join("|") ===
				"tests.web.test_broken|alice|the fixture server races";
	})()`)
	// Main's failing tests, newest failure first, each since its run and commit, with
	// the run it last passed in, its verdict and job; main's slowest tests.
	b.waitJS("main's failing tests", `(() => {
		const items = [...document.querySelectorAll("#branch-failing > li")];
		const link = (li, sel) => { const a = li.querySelector(sel); return a ? a.textContent + "=" + a.getAttribute("href") : "none"; };
		return document.querySelector("#failing-on-h").textContent === "Failing on main" &&
			document.querySelector("#summary-run-link").getAttribute("href") === "/runs/`+r5+`" &&
			document.querySelector("#summary-run").textContent.includes("4 tests, 2 failing.") &&
			items.map((li) => [li.dataset.test, li.dataset.status, li.dataset.verdict, li.querySelector("button.verdict").firstChild.textContent,
				link(li, "a.since-run"), link(li, "a.last-pass-run"), li.querySelector(".last-pass").textContent.startsWith("never passed on main"),
				li.querySelector(".failing-since .mono").title, !!li.querySelector(".quarantine-tag"), li.querySelector("a.test-log").textContent].join("|")).join("\n") ===
			`+js(strings.Join([]string{
		"tests.web.test_login|failed|new|new failure|run #5=/runs/" + r5 + "|run #2=/runs/" + r2 + "|false|" + m2 + "|false|unit",
		"tests.web.test_broken|failed|known|known broken|run #2=/runs/" + r2 + "|none|true|" + m1 + "|true|unit",
	}, "\n"))+`;
	})()`)
	b.waitJS("main's slowest tests", `[...document.querySelectorAll("#slowest-table tbody tr")].map((r) =>
		[...r.cells].map((c) => c.textContent.trim()).join(" ")).join(", ") === `+js("3.5s tests.web.test_slow unit ✓ passed, "+
		"1.3s tests.web.test_broken unit ✗ failed, 1.3s tests.web.test_login unit ✗ failed, 10ms tests.web.test_fast unit ✓ passed")+` &&
		document.querySelector("#slowest-on-h").textContent === "Slowest on main"`)
	b.do("open a verdict with the keyboard", chromedp.Focus(chromedp.CSS(`#branch-failing li[data-test="tests.web.test_login"] button.verdict`)),
		chromedp.KeyEvent("\r"))
	b.waitJS("why it is a new failure", `(() => {
		const btn = document.querySelector('#branch-failing li[data-test="tests.web.test_login"] button.verdict');
		const why = document.getElementById(btn.getAttribute("aria-controls"));
		return btn.getAttribute("aria-expanded") === "true" && !why.hidden && why.textContent === btn.title && why.textContent !== "";
	})()`)
	b.screenshot("project-tests")
	b.do("narrow the window", chromedp.EmulateViewport(400, 800))
	b.waitJS("main's failing and slowest tests fit 400 px", `document.documentElement.scrollWidth <= 400 &&
		document.querySelector("#branch-failing").getBoundingClientRect().right <= 400`)
	b.screenshot("project-tests-narrow")
	b.do("widen the window", chromedp.EmulateViewport(1280, 800))
	b.do("ask for branch feature", chromedp.SendKeys(chromedp.ID("summary-branch"), "feature"), chromedp.KeyEvent("\r"))
	b.waitJS("feature's latest run: no failure, its one test", `location.search === "?summary_branch=feature" &&
		document.querySelector("#failing-on-h").textContent === "Failing on feature" &&
		document.querySelector("#summary-run-link").getAttribute("href") === "/runs/`+r4+`" &&
		document.querySelector("#no-failing-on").textContent.startsWith("No test failed in run #4.") &&
		[...document.querySelectorAll("#slowest-table tbody tr")].map((r) => r.dataset.test).join(" ") === "tests.web.test_flaky"`)
	b.do("ask for a branch with no run", chromedp.SetValue(chromedp.ID("summary-branch"), "gone"), chromedp.Click(chromedp.ID("show-summary")))
	b.waitJS("what to do", `document.querySelector("#failing-on-h").textContent === "Failing on gone" &&
		document.querySelector("#summary-none").textContent.includes("A job names the test reports its steps write with reports:") &&
		!document.querySelector("#slowest-table") && document.querySelector("#summary-run").textContent === ""`)

	// The history box: a test typed as SUITE.NAME, its results as the API has them.
	var hist []struct {
		Run    int    `json:"run"`
		Status string `json:"status"`
		Branch string `json:"branch"`
	}
	c.getJSON(t, "/api/v1/projects/web/tests/history?test=tests.web.test_still", &hist)
	var wantRows []string
	for _, r := range hist {
		wantRows = append(wantRows, fmt.Sprintf("#%d %s %s", r.Run, r.Status, r.Branch))
	}
	if got := strings.Join(wantRows, ", "); got != "#3 failed feature, #2 passed main, #1 failed feature" {
		t.Fatalf("the API's history of test_still: %s", got)
	}
	b.do("look up a test", chromedp.SendKeys(chromedp.ID("test-query"), "tests.web.test_still"), chromedp.Click(chromedp.ID("show-history")))
	b.waitJS("its history", `(() => {
		const rows = [...document.querySelectorAll("#history-table tbody tr")];
		return location.search === "?test=tests.web.test_still" && rows.length === 3 && rows.map((r) => r.cells[0].textContent + " " +
			r.cells[1].querySelector(".badge").dataset.status + " " + r.cells[2].textContent).join(", ") === `+js(strings.Join(wantRows, ", "))+` &&
			document.querySelector("#history-count").textContent === "3 results, 2 failing, newest first." &&
			rows[0].querySelector("a").getAttribute("href") === "/runs/`+r3+`" &&
			[...document.querySelectorAll("#history-body .spark-cell")].map((c) => c.dataset.status).join(" ") === "failed passed failed";
	})()`)
	b.screenshot("project-test-history")
	b.do("narrow the window", chromedp.EmulateViewport(400, 800))
	b.waitJS("the project's tests fit 400 px", `document.documentElement.scrollWidth <= 400`)
}
