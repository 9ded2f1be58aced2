package api_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store"
)

// TestMaintainerTokens: a maintainer of a project makes, lists and revokes tokens scoped to
// the projects it maintains, in a role up to maintainer; anything more is refused and
// changes nothing; another's token is missing to it; and what it did is audited under its
// name.
func TestMaintainerTokens(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) { c.Auth = true })
	admin := issue(t, b.store, store.RoleAdmin)
	for _, p := range []string{"web", "api"} {
		if r := b.do(t, http.MethodPost, "/api/v1/runs", "application/json", `{"project": "`+p+`", "pipeline": "name: x\njobs:\n  a: {steps: [{run: make}]}\n"}`, bearer(admin)); r.status != http.StatusAccepted {
			t.Fatalf("run in %s: %d %s", p, r.status, r.body)
		}
	}
	maya := b.createToken(t, admin, `{"name": "maya", "role": "maintainer", "projects": ["web"]}`)
	apiCI := b.createToken(t, admin, `{"name": "api-ci", "role": "developer", "projects": ["api"]}`)

	webCI := b.createToken(t, maya.Token, `{"name": "web-ci", "role": "developer", "projects": ["web"], "expires_in": "720h"}`)
	if webCI.Role != "developer" || !slices.Equal(webCI.Projects, []string{"web"}) || webCI.Token == "" {
		t.Fatalf("maya's token %+v", webCI)
	}
	if r := b.do(t, http.MethodGet, "/api/v1/runs?project=web", "", "", bearer(webCI.Token)); r.status != http.StatusOK {
		t.Errorf("the new token reads web's runs: %d %s", r.status, r.body)
	}
	before := b.listTokens(t, admin, "")
	for _, body := range []string{
		`{"name": "x", "role": "admin"}`,
		`{"name": "x", "role": "register", "projects": ["web"]}`,
		`{"name": "x", "role": "maintainer", "projects": ["web", "api"]}`,
		`{"name": "x", "role": "viewer", "projects": ["all"]}`,
		`{"name": "x", "role": "viewer"}`,
		`{"name": "x", "role": "read", "projects": ["web"]}`,
		`{"name": "x", "role": "viewer", "projects": ["nope"]}`,
	} {
		expectError(t, b.do(t, http.MethodPost, "/api/v1/tokens", "application/json", body, bearer(maya.Token)), http.StatusForbidden, "forbidden")
	}
	if after := b.listTokens(t, admin, ""); len(after) != len(before) {
		t.Errorf("refused creates made tokens: %d, then %d", len(before), len(after))
	}

	var names []string
	for _, tk := range b.listTokens(t, maya.Token, "") {
		names = append(names, tk.Name)
	}
	if want := []string{"maya", "web-ci"}; !slices.Equal(names, want) {
		t.Errorf("maya lists %q, want %q", names, want)
	}
	expectError(t, b.do(t, http.MethodDelete, "/api/v1/tokens/"+apiCI.ID, "", "", bearer(maya.Token)), http.StatusNotFound, "not_found")
	if r := b.do(t, http.MethodDelete, "/api/v1/tokens/"+webCI.ID, "", "", bearer(maya.Token)); r.status != http.StatusNoContent {
		t.Fatalf("maya revokes web-ci: %d %s", r.status, r.body)
	}
	if r := b.do(t, http.MethodGet, "/api/v1/runs?project=web", "", "", bearer(webCI.Token)); r.status != http.StatusUnauthorized {
		t.Errorf("the revoked token still works: %d", r.status)
	}
	if r := b.do(t, http.MethodGet, "/api/v1/runs?project=api", "", "", bearer(apiCI.Token)); r.status != http.StatusOK {
		t.Errorf("api-ci, which maya may not revoke, stopped working: %d", r.status)
	}

	page, _ := b.listAudit(t, "?action=token", bearer(admin))
	var mine []string
	for _, e := range page.Entries {
		if e.Actor == "maya" {
			mine = append(mine, e.Action+" "+e.Target)
		}
	}
	if want := []string{"token.revoked " + webCI.ID, "token.created " + webCI.ID}; !slices.Equal(mine, want) {
		t.Errorf("maya's audit entries %q, want %q", mine, want)
	}
}
