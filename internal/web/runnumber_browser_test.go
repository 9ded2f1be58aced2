package web_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardShowsRunNumbers: runs of one second are told apart by their number in
// their project, on the runs list and on the run page (heading, crumbs, title), at
// desktop and phone widths; a job's page names its run so too.
func TestDashboardShowsRunNumbers(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	const yaml = "name: numbered\njobs:\n  a:\n    steps: [{run: 'true'}]\n"
	ids := make([]string, 3)
	var jobs map[string]string
	for i := range ids {
		var js map[string]string
		ids[i], js = c.submit(t, yaml)
		if i == 1 {
			jobs = js
		}
	}
	b := newBrowser(t, nil)
	// shown is JS that is true when the element sel matches is drawn on screen, inside
	// the window's width, and reads text.
	shown := func(sel, text string) string {
		return fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (!e) return false;
			const r = e.getBoundingClientRect(), s = getComputedStyle(e);
			return r.width > 0 && r.height > 0 && r.left >= 0 && r.right <= window.innerWidth &&
				s.visibility === "visible" && s.display !== "none" && Number(s.opacity) > 0 && e.innerText.trim() === %s; })()`, js(sel), js(text))
	}
	for _, size := range []struct {
		name string
		w, h int64
	}{{"desktop", 1280, 800}, {"phone", 400, 800}} {
		b.do(size.name+": open the runs list", chromedp.EmulateViewport(size.w, size.h), chromedp.Navigate(c.url+"/"),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-run-id="`+ids[2]+`"]`)))
		for i, id := range ids {
			b.waitJS(fmt.Sprintf("%s: run %d's row shows #%d", size.name, i+1, i+1),
				shown(`tr[data-run-id="`+id+`"] .run-number`, fmt.Sprintf("#%d", i+1)))
		}
		// The id's start, alike for runs made in the same second, is not shown beside it.
		if got := b.eval(`[...document.querySelectorAll("tr[data-run-id]")].filter((r) => r.innerText.includes(r.dataset.runId.slice(0, 8))).length + ""`); got != "0" {
			t.Errorf("%s: %s runs list rows show their id's start beside the number", size.name, got)
		}
		b.screenshot("run-numbers-list-" + size.name)

		b.do(size.name+": open run #2", chromedp.Navigate(c.url+"/runs/"+ids[1]), chromedp.WaitVisible(chromedp.CSS(`h1 .run-number`)))
		b.waitJS(size.name+": the heading shows #2", shown(`h1 .run-number`, "#2"))
		b.waitJS(size.name+": the heading reads the run's name and number",
			`document.querySelector("h1").innerText.trim() === "numbered #2"`)
		b.waitJS(size.name+": the crumbs name the project and number",
			`document.querySelector("p.crumbs").innerText.trim() === "Runs / default #2"`)
		b.waitJS(size.name+": the title names the run", `document.title.includes("numbered #2")`)
		b.screenshot("run-numbers-run-" + size.name)

		b.do(size.name+": open a job of run #2", chromedp.Navigate(c.url+"/jobs/"+jobs["a"]),
			chromedp.WaitVisible(chromedp.CSS(`p.crumbs a[href="/runs/`+ids[1]+`"]`)))
		b.waitJS(size.name+": the job's crumbs name its run's number", shown(`p.crumbs a[href="/runs/`+ids[1]+`"]`, "default #2"))
	}
}
