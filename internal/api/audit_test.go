package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/source/sourcetest"
	"github.com/gantry-ci/gantry/internal/store"
)

type auditView struct {
	ID         string         `json:"id"`
	Time       string         `json:"time"`
	ActorID    string         `json:"actor_id"`
	Actor      string         `json:"actor"`
	Action     string         `json:"action"`
	Project    string         `json:"project"`
	Target     string         `json:"target"`
	Details    map[string]any `json:"details"`
	RemoteAddr string         `json:"remote_addr"`
}

type auditPage struct {
	Entries    []auditView `json:"entries"`
	NextCursor string      `json:"next_cursor"`
}

// listAudit reads GET /api/v1/audit?query with header, failing unless it answers 200;
// raw is the body, for checks that nothing secret is in it.
func (b *bundle) listAudit(t *testing.T, query string, header map[string]string) (page auditPage, raw string) {
	t.Helper()
	r := b.do(t, http.MethodGet, "/api/v1/audit"+query, "", "", header)
	if r.status != http.StatusOK {
		t.Fatalf("GET /api/v1/audit%s: %d %s", query, r.status, r.body)
	}
	r.decode(t, &page)
	return page, string(r.body)
}

func auditActions(es []auditView) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Action
	}
	return out
}

// tokenID returns the id of the token whose secret is given.
func tokenID(t *testing.T, st store.Store, secret string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(secret))
	tk, err := st.LookupToken(t.Context(), hex.EncodeToString(sum[:]))
	if err != nil {
		t.Fatalf("look up token: %v", err)
	}
	return tk.ID.String()
}

// TestAuditTokensAndProjects: creating and revoking a token and creating, updating and
// deleting a project each append one entry naming the admin who did it and from where,
// and no secret; a refused action appends none; only admins read the log.
func TestAuditTokensAndProjects(t *testing.T) {
	t.Parallel()
	mirrors := t.TempDir()
	b := setupWith(t, func(c *api.Config) { c.Auth, c.MirrorsDir = true, mirrors })
	admin := issue(t, b.store, store.RoleAdmin)
	adminID := tokenID(t, b.store, admin)
	hdr := bearer(admin)
	repo := sourcetest.NewRepo(t)
	repo.Commit("refs/heads/main", map[string]string{"README": "x\n"})

	created := b.createToken(t, admin, `{"name": "deployer", "role": "register", "labels": ["linux"], "expires_in": "24h"}`)
	if r := b.do(t, http.MethodDelete, "/api/v1/tokens/"+created.ID, "", "", hdr); r.status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	r := b.do(t, http.MethodPost, "/api/v1/projects", "application/json",
		mustJSON(t, map[string]any{"name": "web", "repo_url": repo.URL(), "default_branch": "main"}), hdr)
	if r.status != http.StatusCreated {
		t.Fatalf("create project: %d %s", r.status, r.body)
	}
	var p projectView
	r.decode(t, &p)
	r = b.do(t, http.MethodPatch, "/api/v1/projects/web", "application/json", `{"rotate_webhook_secret": true, "pipeline_path": "ci.yml"}`, hdr)
	if r.status != http.StatusOK {
		t.Fatalf("update project: %d %s", r.status, r.body)
	}
	var upd projectView
	r.decode(t, &upd)
	if r := b.do(t, http.MethodDelete, "/api/v1/projects/web", "", "", hdr); r.status != http.StatusNoContent {
		t.Fatalf("delete project: %d %s", r.status, r.body)
	}
	// Refused actions did nothing and record nothing.
	expectError(t, b.do(t, http.MethodDelete, "/api/v1/tokens/0190aaaa-0000-7000-8000-000000000001", "", "", hdr), http.StatusNotFound, "not_found")
	expectError(t, b.do(t, http.MethodDelete, "/api/v1/projects/web", "", "", hdr), http.StatusNotFound, "not_found")

	page, raw := b.listAudit(t, "", hdr)
	want := []string{"project.deleted", "project.updated", "project.created", "token.revoked", "token.created"}
	if got := auditActions(page.Entries); !slices.Equal(got, want) {
		t.Fatalf("audit = %q, want %q", got, want)
	}
	for _, secret := range []string{created.Token, p.WebhookSecret, upd.WebhookSecret, admin} {
		if secret == "" || strings.Contains(raw, secret) {
			t.Errorf("the audit log shows a secret (%q) or one was never made: %s", secret, raw)
		}
	}
	for _, e := range page.Entries {
		if e.Actor != "admin" || e.ActorID != adminID || !strings.HasPrefix(e.RemoteAddr, "127.0.0.1:") || e.ID == "" || e.Time == "" {
			t.Errorf("%s: actor %q (%s) from %q, want admin (%s) from 127.0.0.1", e.Action, e.Actor, e.ActorID, e.RemoteAddr, adminID)
		}
	}
	tokenCreated, tokenRevoked, projUpdated := page.Entries[4], page.Entries[3], page.Entries[1]
	if tokenCreated.Target != created.ID || tokenRevoked.Target != created.ID || tokenCreated.Project != "" {
		t.Errorf("token entries target %q and %q, want the token %s", tokenCreated.Target, tokenRevoked.Target, created.ID)
	}
	if tokenCreated.Details["role"] != "register" || tokenCreated.Details["name"] != "deployer" || tokenCreated.Details["expires_at"] == nil {
		t.Errorf("token.created details = %v, want its name, role and expiry", tokenCreated.Details)
	}
	if projUpdated.Project != "web" || projUpdated.Target != "web" {
		t.Errorf("project.updated names project %q target %q, want web", projUpdated.Project, projUpdated.Target)
	}
	if changed, _ := projUpdated.Details["changed"].([]any); !slices.Equal(changed, []any{"pipeline_path", "webhook_secret"}) {
		t.Errorf("project.updated details = %v, want changed [pipeline_path webhook_secret]", projUpdated.Details)
	}

	// Filters and paging.
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"?action=token", []string{"token.revoked", "token.created"}},
		{"?action=project.created", []string{"project.created"}},
		{"?project=web", []string{"project.deleted", "project.updated", "project.created"}},
		{"?actor=admin&action=token.revoked", []string{"token.revoked"}},
		{"?actor=" + adminID + "&project=web&action=project.deleted", []string{"project.deleted"}},
		{"?actor=someone", []string{}},
		{"?target=web", []string{"project.deleted", "project.updated", "project.created"}},
		{"?target=nothing", []string{}},
		{"?since=" + url.QueryEscape(b.clock.Now().Format("2006-01-02T15:04:05Z07:00")), want},
	} {
		if page, _ := b.listAudit(t, tc.query, hdr); !slices.Equal(auditActions(page.Entries), tc.want) {
			t.Errorf("GET /api/v1/audit%s = %q, want %q", tc.query, auditActions(page.Entries), tc.want)
		}
	}
	var paged []string
	query := "?limit=2"
	for range 5 {
		page, _ := b.listAudit(t, query, hdr)
		paged = append(paged, auditActions(page.Entries)...)
		if page.NextCursor == "" {
			break
		}
		query = "?limit=2&before=" + page.NextCursor
	}
	if !slices.Equal(paged, want) {
		t.Errorf("paged by two = %q, want %q", paged, want)
	}

	// Bad filters are 400s; only admins read.
	for _, q := range []string{"?action=Token!", "?action=.token", "?limit=0", "?limit=501", "?before=nope",
		"?since=yesterday", "?project=%00", "?before=0190aaaa-0000-7000-8000-000000000001&cursor=0190aaaa-0000-7000-8000-000000000002"} {
		expectError(t, b.do(t, http.MethodGet, "/api/v1/audit"+q, "", "", hdr), http.StatusBadRequest, "bad_request")
	}
	for _, role := range []store.Role{store.RoleWrite, store.RoleRead, store.RoleRegister} {
		expectError(t, b.do(t, http.MethodGet, "/api/v1/audit", "", "", bearer(issue(t, b.store, role))), http.StatusForbidden, "forbidden")
	}
	expectError(t, b.do(t, http.MethodGet, "/api/v1/audit", "", "", nil), http.StatusUnauthorized, "unauthorized")
}

// TestAuditAnonymous: with auth off there is no token to name; the actor is anonymous.
func TestAuditAnonymous(t *testing.T) {
	t.Parallel()
	b := hookSetup(t)
	repo := sourcetest.NewRepo(t)
	repo.Commit("refs/heads/main", map[string]string{"README": "x\n"})
	b.createProject(t, map[string]any{"name": "web", "repo_url": repo.URL(), "default_branch": "main"})
	page, _ := b.listAudit(t, "", nil)
	if len(page.Entries) != 1 {
		t.Fatalf("audit = %+v, want one entry", page.Entries)
	}
	e := page.Entries[0]
	if e.Action != "project.created" || e.Actor != "anonymous" || e.ActorID != "" || e.Project != "web" {
		t.Errorf("entry = %+v, want project.created of web by anonymous", e)
	}
	var details struct {
		Changed []string `json:"changed"`
	}
	b2, _ := json.Marshal(e.Details)
	if err := json.Unmarshal(b2, &details); err != nil || !slices.Contains(details.Changed, "repo_url") {
		t.Errorf("details = %v, want the settings given", e.Details)
	}
}

// TestAuditLargeDetails: a token scoped to the most labels allowed is still made; its
// entry notes the size of the scope instead of keeping it.
func TestAuditLargeDetails(t *testing.T) {
	t.Parallel()
	b := withAuth(t)
	admin := issue(t, b.store, store.RoleAdmin)
	labels := make([]string, 100)
	for i := range labels {
		labels[i] = strings.Repeat(string(rune('a'+i%26)), 199) + string(rune('a'+i/26))
	}
	created := b.createToken(t, admin, mustJSON(t, map[string]any{"name": "big fleet", "role": "register", "labels": labels}))
	page, _ := b.listAudit(t, "?action=token.created", bearer(admin))
	if len(page.Entries) != 1 || page.Entries[0].Target != created.ID {
		t.Fatalf("audit = %+v, want the token's creation", page.Entries)
	}
	d := page.Entries[0].Details
	if d["name"] != "big fleet" || d["role"] != "register" || !strings.Contains(fmt.Sprint(d["labels"]), "bytes, not recorded") {
		t.Errorf("details = %v, want the name and role kept and the labels noted by size", d)
	}
}
