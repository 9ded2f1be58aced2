package web_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardShowsClaimedNameAndEnvironmentURL: a job whose name: reads what its need
// left shows it as written on its page until it is claimed, then as evaluated, without a
// reload; its environment's url, which reads its step's output, is shown as a link once
// the job ended.
func TestDashboardShowsClaimedNameAndEnvironmentURL(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	b := newBrowser(t, nil)
	dir := t.TempDir()
	prepared, published := filepath.Join(dir, "prepare"), filepath.Join(dir, "publish")
	_, jobs := c.submit(t, fmt.Sprintf(`
name: release
jobs:
  prepare:
    outputs: {version: "${{ steps.v.outputs.version }}"}
    steps:
      - id: v
        run: |
          for i in $(seq 600); do [ -e %[1]s ] && break; sleep 0.05; done
          echo "version=1.2.3" >> "$GANTRY_OUTPUT"
  publish:
    needs: [prepare]
    name: "Publish ${{ needs.prepare.outputs.version }}"
    environment: {name: pages, url: "${{ steps.deployment.outputs.page_url }}"}
    steps:
      - id: deployment
        run: |
          echo "page_url=https://example.org/v${{ needs.prepare.outputs.version }}/" >> "$GANTRY_OUTPUT"
          for i in $(seq 600); do [ -e %[2]s ] && exit 0; sleep 0.05; done
          exit 1
`, prepared, published))
	b.do("open the job", chromedp.Navigate(c.url+"/jobs/"+jobs["publish"]), chromedp.WaitVisible(chromedp.CSS(`#job-status`)))
	b.waitJS("the name as written", `document.querySelector("h1").textContent === "Publish ${{ needs.prepare.outputs.version }}" &&
		document.querySelector("#job-environment").textContent === "pages" && !document.querySelector("#job-environment-url")`)

	if err := os.WriteFile(prepared, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b.waitJS("the name as evaluated while the job runs", `document.querySelector("#job-status [data-status]").dataset.status === "running" &&
		document.querySelector("h1").textContent === "Publish 1.2.3" && document.title.startsWith("Publish 1.2.3") &&
		!document.querySelector("#job-environment-url")`)

	if err := os.WriteFile(published, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b.waitJS("the url once the job ended", `document.querySelector("#job-status [data-status]").dataset.status === "success" &&
		document.querySelector("#job-environment-url").getAttribute("href") === "https://example.org/v1.2.3/"`)
	b.screenshot("job-claimed-name-environment-url")
}
