package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestRunPageMarksAnUnverifiedRef: a run a developer submitted naming main shows its
// ref on the run page marked "(unverified)", with why in its title.
func TestRunPageMarksAnUnverifiedRef(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, true) // c.token is a write token: a developer's
	body := `{"pipeline": "name: mine\njobs:\n  a: {steps: [{run: echo a}]}\n", "ref": "refs/heads/main"}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, c.url+"/api/v1/runs", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var run struct {
		ID          string `json:"id"`
		RefVerified bool   `json:"ref_verified"`
	}
	if err := json.Unmarshal(raw, &run); err != nil || res.StatusCode != http.StatusAccepted || run.RefVerified {
		t.Fatalf("submit: %s %s", res.Status, raw)
	}
	b := newBrowser(t, nil)
	b.signIn(c.url, c.token)
	b.do("open the run", chromedp.Navigate(c.url+"/runs/"+run.ID), chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	b.waitJS("the ref marked unverified", `[...document.querySelectorAll("dl.meta div")].some(d =>
		d.querySelector("dt").textContent === "Ref" && d.querySelector("dd").textContent === "refs/heads/main (unverified)" &&
		d.querySelector("dd .unverified").title.includes("no environment's branch rules"))`)
}
