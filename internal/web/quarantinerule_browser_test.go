package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gantry-ci/gantry/internal/store"
)

// TestDashboardShowsQuarantineRule: the project's Tests page says the project's
// quarantine rule in words, with its owner, as the API has it; once the rule is removed,
// that there is none and how a maintainer sets one.
func TestDashboardShowsQuarantineRule(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	if err := c.st.CreateProject(t.Context(), &store.Project{Name: "web", DefaultBranch: "main"}); err != nil {
		t.Fatal(err)
	}
	send := func(method, body string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, c.url+"/api/v1/projects/web/tests/quarantine-rule", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode/100 != 2 {
			t.Fatalf("%s the quarantine rule: %s", method, res.Status)
		}
	}
	send(http.MethodPut, `{"flaky_commits": 3, "within": "7d", "for": "14d", "owner": "ana"}`)

	b := newBrowser(t, nil)
	b.do("open the project's tests", chromedp.Navigate(c.url+"/projects/web/tests"))
	b.waitJS("the rule in words, with its owner", `(() => {
		const p = document.querySelector("#quarantine-rule");
		return p && p.querySelector("strong") && p.querySelector("strong").textContent === "flaky on 3 commits within 7d: quarantined for 14d" &&
			p.textContent.startsWith("Quarantine rule: ") && p.textContent.includes("owned by ana");
	})()`)

	send(http.MethodDelete, "")
	b.do("open the page again", chromedp.Reload())
	b.waitJS("no rule, and how to set one", `(() => {
		const p = document.querySelector("#quarantine-rule");
		return p && !p.querySelector("strong") && p.textContent.startsWith("No quarantine rule") &&
			p.textContent.includes("gantry tests quarantine-rule");
	})()`)
}
