package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/store"
)

type tokenView struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	Role       string   `json:"role"`
	Labels     []string `json:"labels"`
	Projects   []string `json:"projects"`
	WorkerID   string   `json:"worker_id"`
	ParentID   string   `json:"parent_id"`
	CreatedAt  string   `json:"created_at"`
	ExpiresAt  string   `json:"expires_at"`
	RevokedAt  string   `json:"revoked_at"`
	LastUsedAt string   `json:"last_used_at"`
	Token      string   `json:"token"`
	User       string   `json:"user"`
}

func withAuth(t *testing.T) *bundle {
	return setupWith(t, func(c *api.Config) { c.Auth = true })
}

// createToken creates a token over the API with an admin token and returns the answer.
func (b *bundle) createToken(t *testing.T, admin, body string) tokenView {
	t.Helper()
	r := b.do(t, http.MethodPost, "/api/v1/tokens", "application/json", body, bearer(admin))
	if r.status != http.StatusCreated {
		t.Fatalf("create token %s: %d %s", body, r.status, r.body)
	}
	var v tokenView
	r.decode(t, &v)
	return v
}

func (b *bundle) listTokens(t *testing.T, admin, query string) []tokenView {
	t.Helper()
	r := b.do(t, http.MethodGet, "/api/v1/tokens"+query, "", "", bearer(admin))
	if r.status != http.StatusOK {
		t.Fatalf("list tokens: %d %s", r.status, r.body)
	}
	var v struct {
		Tokens []tokenView `json:"tokens"`
	}
	r.decode(t, &v)
	return v.Tokens
}

type registered struct {
	WorkerID   string `json:"worker_id"`
	Credential string `json:"credential"`
}

func (b *bundle) register(t *testing.T, token, body string) (response, registered) {
	t.Helper()
	r := b.do(t, http.MethodPost, "/api/v1/agent/register", "application/json", body, bearer(token))
	var reg registered
	if r.status == http.StatusOK {
		r.decode(t, &reg)
	}
	return r, reg
}

func (b *bundle) mustRegister(t *testing.T, token, body string) registered {
	t.Helper()
	r, reg := b.register(t, token, body)
	if r.status != http.StatusOK || reg.Credential == "" {
		t.Fatalf("register %s: %d %s", body, r.status, r.body)
	}
	return reg
}

func (b *bundle) claimWith(t *testing.T, credential, body string) (response, claimView) {
	t.Helper()
	r := b.do(t, http.MethodPost, "/api/v1/agent/claim", "application/json", body, bearer(credential))
	var v claimView
	if r.status == http.StatusOK {
		r.decode(t, &v)
	}
	return r, v
}

// TestTokenEndpoints: admins create, list and revoke tokens over REST; the secret is
// shown once and never listed; nobody else may manage tokens; bad input is a 400.
func TestTokenEndpoints(t *testing.T) {
	t.Parallel()
	b := withAuth(t)
	admin := issue(t, b.store, store.RoleAdmin)
	writer := issue(t, b.store, store.RoleWrite)

	created := b.createToken(t, admin, `{"name": "linux fleet", "role": "register", "labels": ["linux", "amd64"], "projects": ["web"], "expires_in": "720h"}`)
	if !strings.HasPrefix(created.Token, "gtk_") || created.ID == "" || created.Role != "register" ||
		!slices.Equal(created.Labels, []string{"linux", "amd64"}) || !slices.Equal(created.Projects, []string{"web"}) {
		t.Fatalf("created token = %+v", created)
	}
	if want := b.clock.Now().Add(720 * time.Hour).UTC().Format(time.RFC3339); !strings.HasPrefix(created.ExpiresAt, want[:19]) {
		t.Errorf("expires_at = %q, want %s", created.ExpiresAt, want)
	}

	for _, tc := range []struct{ name, body string }{
		{"no name", `{"role": "read"}`},
		{"no role", `{"name": "x"}`},
		{"agent role", `{"name": "x", "role": "agent"}`},
		{"unknown role", `{"name": "x", "role": "root"}`},
		{"scoped admin", `{"name": "x", "role": "admin", "labels": ["linux"]}`},
		{"comma in a label", `{"name": "x", "role": "register", "labels": ["a,b"]}`},
		{"empty project", `{"name": "x", "role": "register", "projects": [""]}`},
		{"bad expiry", `{"name": "x", "role": "register", "expires_in": "soon"}`},
		{"negative expiry", `{"name": "x", "role": "register", "expires_in": "-1h"}`},
		{"unknown field", `{"name": "x", "role": "read", "secret": "mine"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectError(t, b.do(t, http.MethodPost, "/api/v1/tokens", "application/json", tc.body, bearer(admin)), http.StatusBadRequest, "bad_request")
		})
	}

	// A token that maintains no project manages none: it lists none, makes none, and
	// another's token is missing to it.
	if got := b.listTokens(t, writer, ""); len(got) != 0 {
		t.Errorf("a write token lists %d tokens, want none", len(got))
	}
	expectError(t, b.do(t, http.MethodPost, "/api/v1/tokens", "application/json", `{"name": "x", "role": "admin"}`, bearer(writer)),
		http.StatusForbidden, "forbidden")
	expectError(t, b.do(t, http.MethodDelete, "/api/v1/tokens/"+created.ID, "", "", bearer(writer)), http.StatusNotFound, "not_found")
	// A register token is a worker's, not a user's: it manages no token, its own included.
	expectError(t, b.do(t, http.MethodDelete, "/api/v1/tokens/"+created.ID, "", "", bearer(created.Token)), http.StatusForbidden, "forbidden")

	list := b.listTokens(t, admin, "")
	var found *tokenView
	for i := range list {
		if list[i].ID == created.ID {
			found = &list[i]
		}
	}
	if found == nil || found.Name != "linux fleet" || found.Token != "" || found.RevokedAt != "" {
		t.Fatalf("listed tokens %+v: want the register token, without its secret", list)
	}
	raw := b.do(t, http.MethodGet, "/api/v1/tokens", "", "", bearer(admin)).body
	sum := sha256.Sum256([]byte(created.Token))
	if strings.Contains(string(raw), created.Token) || strings.Contains(string(raw), hex.EncodeToString(sum[:])) {
		t.Fatalf("the token list shows a secret or its hash: %s", raw)
	}
	// The admin token was used to list: its last use is recorded.
	for _, tk := range list {
		if tk.Role == "admin" && tk.LastUsedAt == "" {
			t.Errorf("admin token %s: last_used_at not recorded", tk.ID)
		}
	}

	reg := b.mustRegister(t, created.Token, `{"name": "w1", "labels": ["linux"]}`)
	if agents := b.listTokens(t, admin, "?agents=true"); !slices.ContainsFunc(agents, func(v tokenView) bool {
		return v.Role == "agent" && v.WorkerID == reg.WorkerID && v.ParentID == created.ID && slices.Equal(v.Projects, []string{"web"})
	}) {
		t.Errorf("?agents=true lists %+v: want the worker's credential under its register token, with its scope", agents)
	}
	if plain := b.listTokens(t, admin, ""); slices.ContainsFunc(plain, func(v tokenView) bool { return v.Role == "agent" }) {
		t.Errorf("the default list shows worker credentials: %+v", plain)
	}

	if r := b.do(t, http.MethodDelete, "/api/v1/tokens/"+created.ID, "", "", bearer(admin)); r.status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	expectError(t, b.do(t, http.MethodDelete, "/api/v1/tokens/0190a0a0-0000-7000-8000-000000000000", "", "", bearer(admin)),
		http.StatusNotFound, "not_found")
	expectError(t, b.do(t, http.MethodDelete, "/api/v1/tokens/nope", "", "", bearer(admin)), http.StatusBadRequest, "bad_request")
	// Revoked: the register token and the credential of the worker it enrolled.
	if r, _ := b.register(t, created.Token, `{"name": "w2"}`); r.status != http.StatusUnauthorized {
		t.Errorf("register with a revoked token: %d %s, want 401", r.status, r.body)
	}
	r, _ := b.claimWith(t, reg.Credential, fmt.Sprintf(`{"worker_id": %q, "wait": "0s"}`, reg.WorkerID))
	if e := expectError(t, r, http.StatusUnauthorized, "unauthorized"); !strings.Contains(e.Error.Message, "revoked") {
		t.Errorf("claim with a revoked credential: %q, want it to say revoked", e.Error.Message)
	}
	for _, tk := range b.listTokens(t, admin, "?agents=true") {
		if (tk.ID == created.ID || tk.ParentID == created.ID) && tk.RevokedAt == "" {
			t.Errorf("token %s (%s) not marked revoked", tk.ID, tk.Name)
		}
	}
}

// TestRegisterTokenScope: a worker enrolled with a scoped register token may declare only
// the token's labels and claims only the token's projects' jobs.
func TestRegisterTokenScope(t *testing.T) {
	t.Parallel()
	b := withAuth(t)
	admin := issue(t, b.store, store.RoleAdmin)
	writer := issue(t, b.store, store.RoleWrite)
	fleet := b.createToken(t, admin, `{"name": "web fleet", "role": "register", "labels": ["linux", "amd64"], "projects": ["web"]}`)

	r, _ := b.register(t, fleet.Token, `{"name": "w", "labels": ["linux", "deploy"]}`)
	expectError(t, r, http.StatusForbidden, "forbidden")
	reg := b.mustRegister(t, fleet.Token, `{"name": "w", "labels": ["linux"]}`)

	job := `jobs:\n  a: {runs_on: [linux], steps: [{run: echo a}]}\n`
	submit := func(project string) {
		body := fmt.Sprintf(`{"project": %q, "pipeline": "%s"}`, project, job)
		if r := b.do(t, http.MethodPost, "/api/v1/runs", "application/json", body, bearer(writer)); r.status != http.StatusAccepted {
			t.Fatalf("submit to %s: %d %s", project, r.status, r.body)
		}
	}
	submit("billing")
	submit("web")
	submit("billing")

	claim := func(labels string) (response, claimView) {
		return b.claimWith(t, reg.Credential, fmt.Sprintf(`{"worker_id": %q, "labels": %s, "max": 8, "wait": "0s"}`, reg.WorkerID, labels))
	}
	// The credential carries the scope: declaring more labels at claim time is refused too.
	r, _ = claim(`["linux", "deploy"]`)
	expectError(t, r, http.StatusForbidden, "forbidden")
	r, got := claim(`["linux"]`)
	if r.status != http.StatusOK || len(got.Jobs) != 1 {
		t.Fatalf("claim: %d %s, want the one web job", r.status, r.body)
	}
	if jr := b.do(t, http.MethodGet, "/api/v1/runs/"+got.Jobs[0].RunID, "", "", bearer(writer)); !strings.Contains(string(jr.body), `"project":"web"`) {
		t.Errorf("claimed a job of run %s", jr.body)
	}
	if _, again := claim(`["linux"]`); len(again.Jobs) != 0 {
		t.Errorf("a web-scoped worker claimed %d more jobs, of other projects", len(again.Jobs))
	}
	// An unscoped register token enrolls workers that take anything.
	any := b.mustRegister(t, issue(t, b.store, store.RoleRegister), `{"name": "any", "labels": ["linux", "deploy"]}`)
	if _, all := b.claimWith(t, any.Credential, fmt.Sprintf(`{"worker_id": %q, "labels": ["linux"], "max": 8, "wait": "0s"}`, any.WorkerID)); len(all.Jobs) != 2 {
		t.Errorf("an unscoped worker claimed %d jobs, want the 2 billing ones", len(all.Jobs))
	}
}

// TestTokenExpiry: an expired register token gets 401, and so does the credential of a
// worker it enrolled, which inherits its expiry.
func TestTokenExpiry(t *testing.T) {
	t.Parallel()
	b := withAuth(t)
	admin := issue(t, b.store, store.RoleAdmin)
	fleet := b.createToken(t, admin, `{"name": "short", "role": "register", "expires_in": "1h"}`)
	reg := b.mustRegister(t, fleet.Token, `{"name": "w"}`)
	claim := fmt.Sprintf(`{"worker_id": %q, "wait": "0s"}`, reg.WorkerID)
	if r, _ := b.claimWith(t, reg.Credential, claim); r.status != http.StatusOK {
		t.Fatalf("claim before expiry: %d %s", r.status, r.body)
	}
	b.clock.Advance(time.Hour)
	r, _ := b.register(t, fleet.Token, `{"name": "late"}`)
	if e := expectError(t, r, http.StatusUnauthorized, "unauthorized"); !strings.Contains(e.Error.Message, "expired") {
		t.Errorf("register with an expired token: %q, want it to say expired", e.Error.Message)
	}
	r, _ = b.claimWith(t, reg.Credential, claim)
	expectError(t, r, http.StatusUnauthorized, "unauthorized")
}

// TestLeaseBoundToWorker: a valid lease token used with another worker's credential is
// refused with 403 on every job-scoped write, and changes nothing; on a coordinator
// that did not hand out the lease (another replica, or after a restart) too.
func TestLeaseBoundToWorker(t *testing.T) {
	t.Parallel()
	bs, err := blob.OpenDir(t.TempDir(), blob.Options{Secret: []byte(strings.Repeat("s", 32))})
	if err != nil {
		t.Fatal(err)
	}
	b := setupWith(t, func(c *api.Config) { c.Auth = true; c.Blobs = bs })
	// A second coordinator on the same store, which never saw the claim.
	other := httptest.NewServer(api.New(api.Config{Store: b.store, Logger: testLogger(t), Clock: b.clock, Auth: true, Blobs: bs}).Handler())
	t.Cleanup(other.Close)
	b2 := &bundle{store: b.store, clock: b.clock, url: other.URL}

	register := issue(t, b.store, store.RoleRegister)
	b.do(t, http.MethodPost, "/api/v1/runs", "application/json", diamond, bearer(issue(t, b.store, store.RoleWrite)))
	w1 := b.mustRegister(t, register, `{"name": "w1"}`)
	w2 := b.mustRegister(t, register, `{"name": "w2"}`)
	_, got := b.claimWith(t, w1.Credential, fmt.Sprintf(`{"worker_id": %q, "wait": "0s"}`, w1.WorkerID))
	if len(got.Jobs) != 1 {
		t.Fatalf("w1 claimed %d jobs, want 1", len(got.Jobs))
	}
	j := got.Jobs[0]
	reader := bearer(issue(t, b.store, store.RoleRead))
	before := b.do(t, http.MethodGet, "/api/v1/jobs/"+j.ID, "", "", reader)
	lease := fmt.Sprintf(`"token": %q`, j.Lease.Token)
	writes := []struct{ path, body string }{
		{"start", "{" + lease + "}"},
		{"heartbeat", "{" + lease + "}"},
		{"steps/0", "{" + lease + `, "status": "running"}`},
		{"logs", "{" + lease + `, "lines": [{"seq": 1, "ts": 1, "stream": "stdout", "text": "forged"}]}`},
		{"artifacts", "{" + lease + `, "artifacts": [{"name": "x", "sha256": "` + strings.Repeat("a", 64) + `", "size": 1}]}`},
		{"inputs", "{" + lease + "}"},
		{"complete", "{" + lease + `, "status": "success"}`},
	}
	for _, srv := range []*bundle{b, b2} {
		for _, wr := range writes {
			r := srv.do(t, http.MethodPost, "/api/v1/agent/jobs/"+j.ID+"/"+wr.path, "application/json", wr.body, bearer(w2.Credential))
			if r.status != http.StatusForbidden {
				t.Errorf("%s with w1's lease and w2's credential on %s: %d %s, want 403", wr.path, srv.url, r.status, r.body)
			}
		}
	}
	after := b.do(t, http.MethodGet, "/api/v1/jobs/"+j.ID, "", "", reader)
	if before.status != http.StatusOK || string(after.body) != string(before.body) {
		t.Errorf("the refused writes changed the job:\nbefore %s\nafter  %s", before.body, after.body)
	}
	if logs := b.do(t, http.MethodGet, "/api/v1/jobs/"+j.ID+"/logs", "", "", reader); logs.status != http.StatusOK || strings.Contains(string(logs.body), "forged") {
		t.Errorf("a refused log batch was stored: %s", logs.body)
	}
	// The holder's own writes go through, on either coordinator.
	for _, srv := range []*bundle{b2, b} {
		if r := srv.do(t, http.MethodPost, "/api/v1/agent/jobs/"+j.ID+"/heartbeat", "application/json", "{"+lease+"}", bearer(w1.Credential)); r.status != http.StatusOK {
			t.Errorf("w1's heartbeat on %s: %d %s", srv.url, r.status, r.body)
		}
	}
	if r := b2.do(t, http.MethodPost, "/api/v1/agent/jobs/"+j.ID+"/complete", "application/json", "{"+lease+`, "status": "success"}`, bearer(w1.Credential)); r.status != http.StatusOK {
		t.Errorf("w1's complete: %d %s", r.status, r.body)
	}
	// A lease token that is not the job's current one is still the store's 409.
	expectError(t, b2.do(t, http.MethodPost, "/api/v1/agent/jobs/"+j.ID+"/heartbeat", "application/json", `{"token": "stale"}`, bearer(w2.Credential)),
		http.StatusConflict, "lease_lost")
}
