package web_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/secret"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/web"
)

// TestHandlerServesProjectPages: the projects list and a project's page are the app's own
// routes, so a reload or a shared link gets the app with 200.
func TestHandlerServesProjectPages(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(web.Handler())
	t.Cleanup(ts.Close)
	for _, p := range []string{"/projects", "/projects/shop"} {
		res, err := http.Get(ts.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s, want 200", p, res.Status)
		}
	}
}

// projectsCoordinator is a coordinator with auth on and a secrets key, which the project
// pages need; they run no job, so it has no worker.
type projectsCoordinator struct {
	url, admin, reader string
	tokens             store.Tokens
}

func startProjectsCoordinator(t *testing.T) *projectsCoordinator {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "gantry.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, secret.KeySize)
	_, _ = rand.Read(key)
	kr, err := secret.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	srv := api.New(api.Config{Store: st, Auth: true, UI: web.Handler(), Secrets: kr, MirrorsDir: t.TempDir()})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
		_ = st.Close()
	})
	c := &projectsCoordinator{url: ts.URL, tokens: st}
	if c.admin, err = api.IssueToken(ctx, st, "admin", store.RoleAdmin, ""); err != nil {
		t.Fatal(err)
	}
	if c.reader, err = api.IssueToken(ctx, st, "reader", store.RoleRead, ""); err != nil {
		t.Fatal(err)
	}
	return c
}

// call sends a JSON request with the admin token and decodes the answer into out.
func (c *projectsCoordinator) call(t *testing.T, method, path string, body any, want int, out any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, c.url+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.admin)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	got, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("%s %s: %s: %s", method, path, res.Status, got)
	}
	if out != nil {
		if err := json.Unmarshal(got, out); err != nil {
			t.Fatal(err)
		}
	}
}

// signIn keeps token for the tab, as the sign-in form does, without a round of 401s.
func (b *browser) signIn(origin, token string) {
	b.t.Helper()
	b.do("open the sign-in page", chromedp.Navigate(origin+"/signin"), chromedp.WaitVisible(chromedp.ID("token")))
	b.eval(`(sessionStorage.setItem("gantry.token", ` + js(token) + `), "kept")`)
}

// pageHolds reports whether s appears anywhere in the page: its markup, its text or the
// value of any form field (a value set from script is not in the markup).
func (b *browser) pageHolds(s string) bool {
	b.t.Helper()
	return b.eval(`String(document.documentElement.outerHTML.includes(`+js(s)+`) || document.body.innerText.includes(`+js(s)+`) ||
		[...document.querySelectorAll("input, textarea")].some(el => el.value.includes(`+js(s)+`)))`) == "true"
}

// TestDashboardShowsProjects: a project, its secrets and an environment made over the API
// show on the Projects page and the project's page: settings, hook URL, badge, secrets'
// names (never a value, nor the webhook secret), environments and outbound webhooks; a
// read token sees a note where the admin-only parts were; both pages fit 400 px.
func TestDashboardShowsProjects(t *testing.T) {
	t.Parallel()
	c := startProjectsCoordinator(t)
	bare := filepath.Join(t.TempDir(), "shop.git")
	if out, err := exec.Command("git", "init", "--quiet", "--bare", "-b", "main", bare).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	var project struct {
		WebhookSecret string `json:"webhook_secret"`
	}
	c.call(t, http.MethodPost, "/api/v1/projects", map[string]any{"name": "shop", "repo_url": "file://" + bare,
		"provider": "gitea", "default_branch": "main", "pipeline_path": "ci/gantry.yml"}, http.StatusCreated, &project)
	if project.WebhookSecret == "" {
		t.Fatal("the created project's answer has no webhook secret")
	}
	const deployKey, npmToken = "dk-VALUE-5f1e2d9c", "npm-VALUE-77aa01"
	c.call(t, http.MethodPut, "/api/v1/projects/shop/secrets/DEPLOY_KEY", map[string]any{"value": deployKey, "environment": "production"}, http.StatusCreated, nil)
	c.call(t, http.MethodPut, "/api/v1/projects/shop/secrets/NPM_TOKEN", map[string]any{"value": npmToken}, http.StatusCreated, nil)
	c.call(t, http.MethodPut, "/api/v1/projects/shop/environments/production", map[string]any{"branches": []string{"main"},
		"tags": []string{"v*"}, "required_approvals": 1, "approvers": []string{"release-managers"}, "approval_timeout": "2h"}, http.StatusOK, nil)
	c.call(t, http.MethodPost, "/api/v1/projects/shop/webhooks", map[string]any{"url": "https://hooks.example.com/gantry"}, http.StatusCreated, nil)

	// A read token's 403s on the admin-only parts, and the 404 of a project that does not
	// exist, are logged by the browser; they are what the page answers with its notes.
	b := newBrowser(t, func(m chromedp.ConsoleMessage) bool {
		return (strings.Contains(m.Text, "status of 403") &&
			(strings.HasSuffix(m.URL, "/secrets") || strings.HasSuffix(m.URL, "/secret-settings") || strings.HasSuffix(m.URL, "/webhooks"))) ||
			(strings.Contains(m.Text, "status of 404") && strings.HasSuffix(m.URL, "/api/v1/projects/nope"))
	})
	b.signIn(c.url, c.admin)

	// The Projects page, from the nav link.
	b.do("open the projects page", chromedp.Navigate(c.url+"/"), chromedp.WaitVisible(chromedp.CSS(`a[data-nav="projects"]`)),
		chromedp.Click(chromedp.CSS(`a[data-nav="projects"]`)), chromedp.WaitVisible(chromedp.CSS(`tr[data-project="shop"]`)))
	if got := b.eval(`document.querySelector('a[data-nav="projects"]').getAttribute("aria-current")`); got != "page" {
		t.Errorf("the Projects link is not marked current: %q", got)
	}
	row := b.eval(`document.querySelector('tr[data-project="shop"]').innerText`)
	for _, want := range []string{"shop", "file://" + bare, "gitea", "ci/gantry.yml", "main"} {
		if !strings.Contains(row, want) {
			t.Errorf("the project's row %q lacks %q", row, want)
		}
	}
	if got := b.eval(`document.querySelector('tr[data-project="shop"] a[aria-label="Runs of shop"]').getAttribute("href")`); got != "/?project=shop" {
		t.Errorf("the runs link goes to %s, want the runs filtered by project", got)
	}
	if !b.pageHolds("file://"+bare) || b.pageHolds(project.WebhookSecret) {
		t.Error("the projects page does not show the repository, or shows the webhook secret")
	}
	b.screenshot("projects")

	// The project's page.
	b.do("open the project", chromedp.Click(chromedp.CSS(`tr[data-project="shop"] td:first-child a`)),
		chromedp.WaitVisible(chromedp.ID("project-settings")))
	if got := b.eval(`location.pathname`); got != "/projects/shop" {
		t.Fatalf("the project link went to %s", got)
	}
	b.waitJS("the secrets' names", `!!document.querySelector('#secrets tr[data-secret="DEPLOY_KEY"][data-environment="production"]') &&
		document.querySelector('#secrets tr[data-secret="NPM_TOKEN"]').innerText.includes("all environments") &&
		document.querySelector("#secrets-for-forks").textContent === "Pull requests from forks do not get secrets."`)
	b.waitJS("the environment", `!!document.querySelector('#environments tr[data-environment="production"]')`)
	env := b.eval(`document.querySelector('#environments tr[data-environment="production"]').innerText`)
	for _, want := range []string{"production", "main", "v*", "1", "release-managers", "2h0m0s"} {
		if !strings.Contains(env, want) {
			t.Errorf("the environment's row %q lacks %q", env, want)
		}
	}
	b.waitJS("the outbound webhook", `document.querySelector("#webhooks tbody") && document.querySelector("#webhooks tbody").innerText.includes("https://hooks.example.com/gantry") &&
		document.querySelector("#webhooks tbody").innerText.includes("run.finished")`)
	if got := b.eval(`document.querySelector("#hook-url").value`); got != c.url+"/api/v1/hooks/gitea/shop" {
		t.Errorf("the hook URL is %q, want %s/api/v1/hooks/gitea/shop", got, c.url)
	}
	b.waitJS("the badge drawn", `document.querySelector("#badge-img").complete && document.querySelector("#badge-img").naturalWidth > 0`)
	if got := b.eval(`document.querySelector("#badge-markdown").value`); got != "[![shop]("+c.url+"/api/v1/projects/shop/badge.svg)]("+c.url+"/?project=shop)" {
		t.Errorf("the badge's markdown is %q", got)
	}
	settings := b.eval(`document.querySelector("#project-settings").innerText`)
	for _, want := range []string{"file://" + bare, "gitea", "ci/gantry.yml", "main", "Webhook secret"} {
		if !strings.Contains(settings, want) {
			t.Errorf("the settings %q lack %q", settings, want)
		}
	}
	for what, v := range map[string]string{"DEPLOY_KEY's value": deployKey, "NPM_TOKEN's value": npmToken, "the webhook secret": project.WebhookSecret} {
		if b.pageHolds(v) {
			t.Errorf("the project page shows %s", what)
		}
	}
	b.screenshot("project")

	b.do("narrow the window", chromedp.EmulateViewport(400, 800), chromedp.Navigate(c.url+"/projects/shop"),
		chromedp.WaitVisible(chromedp.ID("project-settings")))
	b.waitJS("the narrow page loaded", `!!document.querySelector('#secrets tr[data-secret="DEPLOY_KEY"]') && !!document.querySelector("#webhooks tbody")`)
	if got := b.eval(`String(document.documentElement.scrollWidth)`); got != "400" {
		t.Errorf("the project page is %s px wide in a 400 px window", got)
	}
	b.screenshot("project-narrow")
	b.do("the projects page, narrow", chromedp.Navigate(c.url+"/projects"), chromedp.WaitVisible(chromedp.CSS(`tr[data-project="shop"]`)))
	if got := b.eval(`String(document.documentElement.scrollWidth)`); got != "400" {
		t.Errorf("the projects page is %s px wide in a 400 px window", got)
	}
	b.do("back to a wide window", chromedp.EmulateViewport(1280, 800))

	// A read token: environments still show; secrets and webhooks say they need an admin.
	b.eval(`(sessionStorage.setItem("gantry.token", ` + js(c.reader) + `), "kept")`)
	b.do("open the project as a reader", chromedp.Navigate(c.url+"/projects/shop"), chromedp.WaitVisible(chromedp.ID("project-settings")))
	b.waitJS("the admin notes", `document.querySelector("#secrets-body .note") && document.querySelector("#secrets-body .note").textContent.includes("needs an admin token") &&
		document.querySelector("#webhooks-body .note") && document.querySelector("#webhooks-body .note").textContent.includes("needs an admin token") &&
		!!document.querySelector('#environments tr[data-environment="production"]')`)
	if b.pageHolds("DEPLOY_KEY") {
		t.Error("a read token sees the secrets' names")
	}
	b.screenshot("project-reader")

	b.do("open a project that does not exist", chromedp.Navigate(c.url+"/projects/nope"))
	b.waitJS("not found", `document.querySelector("main .error") && document.querySelector("main .error").innerText.startsWith("Not found")`)
}

// TestDashboardScopedTokenWorkersAndQueue: a token limited to some projects, which the
// API answers 403 on the server-wide workers and queue, gets a note saying why on those
// pages instead of an error, and a link to its runs.
func TestDashboardScopedTokenWorkersAndQueue(t *testing.T) {
	t.Parallel()
	c := startProjectsCoordinator(t)
	scoped, err := api.IssueScopedToken(t.Context(), c.tokens, &store.Token{Name: "shop-viewer", Role: store.RoleViewer, Projects: []string{"shop"}})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, func(m chromedp.ConsoleMessage) bool {
		return strings.Contains(m.Text, "status of 403") &&
			(strings.HasSuffix(m.URL, "/api/v1/workers") || strings.HasSuffix(m.URL, "/api/v1/stats"))
	})
	b.signIn(c.url, scoped)
	for _, page := range []struct{ path, heading string }{{"/workers", "Workers"}, {"/stats", "Queue"}} {
		b.do("open "+page.path, chromedp.Navigate(c.url+page.path), chromedp.WaitVisible(chromedp.ID("every-project-only")))
		note := b.eval(`document.querySelector("#every-project-only").innerText`)
		if !strings.Contains(note, "only a token of every project") || !strings.Contains(note, "yours is limited to some projects") {
			t.Errorf("%s: note %q does not say why", page.path, note)
		}
		if got := b.eval(`document.querySelector("#every-project-only a").getAttribute("href")`); got != "/" {
			t.Errorf("%s: the note links to %q, want the runs", page.path, got)
		}
		if got := b.eval(`document.querySelector("main h1").innerText`); got != page.heading {
			t.Errorf("%s: heading %q, want %q", page.path, got, page.heading)
		}
		if b.pageHolds("Something went wrong") || b.pageHolds("forbidden") {
			t.Errorf("%s: the page shows the raw 403", page.path)
		}
	}
	// A token of every project still sees the pages.
	b.signIn(c.url, c.reader)
	b.do("open the workers as a reader of every project", chromedp.Navigate(c.url+"/workers"),
		chromedp.WaitVisible(chromedp.CSS(`main table`)))
	b.waitJS("the workers loaded", `document.querySelector("main p.muted").textContent.includes("No worker has registered")`)
	if b.pageHolds("only a token of every project") {
		t.Error("a token of every project got the note")
	}
}
