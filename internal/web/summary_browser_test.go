package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardShowsSummaries: the run page shows each job's summary, and the job page
// its attempt's, its steps' in order, rendered from Markdown: a heading (a level below the page's own) and a table
// with its alignment. A step that writes <script>, an onerror= handler or a javascript:
// link sees it shown as text, and nothing of it runs; a job without a summary shows
// none. The page's own renderer, the second lock, drops what the server would never
// send too.
func TestDashboardShowsSummaries(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	b := newBrowser(t, nil)
	runID, jobs := c.submit(t, `
name: summaries
jobs:
  report:
    steps:
      - run: |
          cat >> "$GANTRY_STEP_SUMMARY" <<'EOF'
          # Test report

          | suite | passed | failed |
          |:--|--:|--:|
          | unit | 42 | 0 |
          EOF
      - run: |
          cat >> "$GITHUB_STEP_SUMMARY" <<'EOF'
          ## Second step

          <script>window.pwned = "script"</script>

          <img src=x onerror="window.pwned = 'onerror'">

          [click me](javascript:window.pwned='link')
          EOF
  quiet:
    steps: [ { run: echo nothing } ]
`)
	b.do("open the run", chromedp.Navigate(c.url+"/runs/"+runID), chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	b.waitJS("the run succeeded", `document.querySelector("#run-status [data-status]").dataset.status === "success"`)
	b.waitJS("report's summary, rendered", `(() => {
		const box = document.querySelector("#summaries");
		const s = document.querySelector('#summaries article.summary[data-key="report"]');
		if (!box || box.hidden || !s) return false;
		const h = s.querySelector(".markdown h3"), h2 = s.querySelector(".markdown h4");
		const th = [...s.querySelectorAll(".markdown table th")].map((x) => x.textContent);
		const td = [...s.querySelectorAll(".markdown table td")];
		return h && h.textContent === "Test report" && h2 && h2.textContent === "Second step" &&
			h.compareDocumentPosition(h2) === Node.DOCUMENT_POSITION_FOLLOWING &&
			th.join(",") === "suite,passed,failed" && td[1].textContent === "42" &&
			getComputedStyle(td[1]).textAlign === "right" && getComputedStyle(td[0]).textAlign === "left" &&
			s.querySelector(".summary-job a").getAttribute("href").startsWith("/jobs/");
	})()`)
	b.waitJS("the payloads shown as text, none run", `(() => {
		const s = document.querySelector('#summaries article.summary[data-key="report"]');
		const text = s.innerText;
		const link = [...s.querySelectorAll("a")].find((a) => a.textContent === "click me");
		return text.includes('<script>window.pwned = "script"</script>') &&
			text.includes(`+"`<img src=x onerror=\"window.pwned = 'onerror'\">`"+`) &&
			!s.querySelector("script, img, [onerror], [onclick]") &&
			link && !link.hasAttribute("href") && window.pwned === undefined;
	})()`)
	b.waitJS("no summary for the job that wrote none", `document.querySelectorAll("#summaries article.summary").length === 1 &&
		!document.querySelector('#summaries article.summary[data-key="quiet"]')`)
	b.do("scroll to the summaries", chromedp.ScrollIntoView(chromedp.CSS(`#summaries`)))
	b.screenshot("run-summaries")
	b.do("click the link that is not one", chromedp.Click(chromedp.CSS(`#summaries .markdown p a`)))
	b.waitJS("nothing ran, the page stayed", `window.pwned === undefined && location.pathname === "/runs/`+runID+`"`)

	b.do("open the job", chromedp.Navigate(c.url+"/jobs/"+jobs["report"]), chromedp.WaitVisible(chromedp.CSS(`#log`)))
	b.waitJS("the job's summary below its log", `(() => {
		const s = document.querySelector("#job-summary");
		return s && !s.hidden && s.querySelector(".markdown h3").textContent === "Test report" &&
			s.querySelector(".markdown td[align=right]").textContent === "42" &&
			s.innerText.includes("<script>") && !s.querySelector("script, img") && window.pwned === undefined;
	})()`)
	b.do("open the job that wrote none", chromedp.Navigate(c.url+"/jobs/"+jobs["quiet"]), chromedp.WaitVisible(chromedp.CSS(`#log`)))
	b.waitJS("no summary", `document.querySelector("#job-status [data-status]").dataset.status === "success" &&
		document.querySelector("#log").innerText.includes("nothing") && document.querySelector("#job-summary").hidden`)

	// The page's renderer on HTML the API never sends: elements and attributes it does
	// not know go, their text stays, and links and images keep only safe URLs. Chromium
	// reports the handlers and styles the page's CSP blocks in the document the HTML is
	// parsed in, where nothing runs anyway: those reports, and only those, are expected
	// of this second browser.
	blocked := func(m chromedp.ConsoleMessage) bool {
		return strings.Contains(m.Text, "violates the following Content Security Policy directive") &&
			(strings.Contains(m.Text, "inline event handler") || strings.Contains(m.Text, "inline style"))
	}
	b = newBrowser(t, blocked)
	b.do("open the run again", chromedp.Navigate(c.url+"/runs/"+runID), chromedp.WaitVisible(chromedp.CSS(`#summaries .markdown`)))
	b.do("render hostile HTML in the page", chromedp.Evaluate[chromedp.Void](`(async () => {
		const app = [...document.scripts].find((s) => s.src.endsWith("/app.js")).src;
		const { summaryContent } = await import(app.replace(/app\.js$/, "summary.js"));
		const el = summaryContent('<h1 onclick="window.pwned2=1">T</h1><img src=x onerror="window.pwned2=2">' +
			'<script>window.pwned2=3<\/script><a href="javascript:window.pwned2=4">js</a><a href="https://example.com/">ok</a>' +
			'<iframe srcdoc="<script>parent.pwned2=5<\/script>">framed</iframe><input type=text value=x>' +
			'<img src="https://tracker.example/p.png" alt="pixel"><table><tr><td style="color:red" align="right">c</td></tr></table>');
		el.id = "hostile";
		document.querySelector("main").append(el);
	})()`))
	b.waitJS("only what is safe of it", `(() => {
		const el = document.querySelector("#hostile");
		if (!el) return false;
		const link = (text) => [...el.querySelectorAll("a")].find((a) => a.textContent === text);
		return el.querySelector("h3").textContent === "T" && !el.querySelector("[onclick], [onerror], [style], script, iframe, img, input") &&
			!link("js").hasAttribute("href") && link("ok").getAttribute("href") === "https://example.com/" &&
			link("ok").rel.includes("noopener") && link("image: pixel").getAttribute("href") === "https://tracker.example/p.png" &&
			el.querySelector("td").getAttribute("align") === "right" && el.innerText.includes("framed") &&
			window.pwned2 === undefined;
	})()`)
}
