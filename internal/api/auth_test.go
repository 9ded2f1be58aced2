package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store"
)

func issue(t *testing.T, st store.Store, role store.Role) string {
	t.Helper()
	secret, err := api.IssueToken(context.Background(), st, string(role), role, "")
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

func bearer(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

func TestAuthRoles(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) { c.Auth = true })
	tokens := map[store.Role]string{}
	for _, role := range []store.Role{store.RoleAdmin, store.RoleWrite, store.RoleRead, store.RoleRegister} {
		tokens[role] = issue(t, b.store, role)
	}
	if strings.Contains(tokens[store.RoleRead], string(store.RoleRead)) || !strings.HasPrefix(tokens[store.RoleRead], "gtk_") {
		t.Fatalf("token %q: want an opaque gtk_ secret", tokens[store.RoleRead])
	}
	submit := func(token string) response {
		h := map[string]string{}
		if token != "" {
			h = bearer(token)
		}
		return b.do(t, http.MethodPost, "/api/v1/runs", "application/json", diamond, h)
	}
	expectError(t, submit(""), http.StatusUnauthorized, "unauthorized")
	expectError(t, submit("gtk_not-a-token"), http.StatusUnauthorized, "unauthorized")
	expectError(t, submit(tokens[store.RoleRead]), http.StatusForbidden, "forbidden")
	expectError(t, submit(tokens[store.RoleRegister]), http.StatusForbidden, "forbidden")
	for _, role := range []store.Role{store.RoleWrite, store.RoleAdmin} {
		if r := submit(tokens[role]); r.status != http.StatusAccepted {
			t.Errorf("submit with a %s token: %d %s", role, r.status, r.body)
		}
	}
	for _, role := range []store.Role{store.RoleRead, store.RoleWrite, store.RoleAdmin} {
		if r := b.do(t, http.MethodGet, "/api/v1/runs", "", "", bearer(tokens[role])); r.status != http.StatusOK {
			t.Errorf("list runs with a %s token: %d", role, r.status)
		}
	}
	expectError(t, b.do(t, http.MethodGet, "/api/v1/stats", "", "", bearer(tokens[store.RoleRegister])), http.StatusForbidden, "forbidden")
	if r := b.get(t, "/healthz"); r.status != http.StatusOK {
		t.Errorf("healthz without a token: %d", r.status)
	}
}

// TestAuthWorker: a worker registers with a register token, gets its own credential, and
// can use it only for itself.
func TestAuthWorker(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) { c.Auth = true })
	register := issue(t, b.store, store.RoleRegister)
	b.do(t, http.MethodPost, "/api/v1/runs", "application/json", diamond, bearer(issue(t, b.store, store.RoleWrite)))

	expectError(t, b.do(t, http.MethodPost, "/api/v1/agent/register", "application/json", `{"id": "w1", "name": "w1"}`, bearer(register)),
		http.StatusBadRequest, "bad_request")
	r := b.do(t, http.MethodPost, "/api/v1/agent/register", "application/json", `{"name": "w1"}`, bearer(register))
	var reg struct {
		WorkerID   string `json:"worker_id"`
		Credential string `json:"credential"`
	}
	r.decode(t, &reg)
	if r.status != http.StatusOK || reg.Credential == "" || reg.WorkerID == "" {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	claimAs := func(worker string) string { return fmt.Sprintf(`{"worker_id": %q, "wait": "0s"}`, worker) }
	expectError(t, b.do(t, http.MethodPost, "/api/v1/agent/claim", "application/json", claimAs(reg.WorkerID), bearer(register)),
		http.StatusForbidden, "forbidden")
	expectError(t, b.do(t, http.MethodPost, "/api/v1/agent/claim", "application/json", claimAs("w2"), bearer(reg.Credential)),
		http.StatusForbidden, "forbidden")
	r = b.do(t, http.MethodPost, "/api/v1/agent/claim", "application/json", claimAs(reg.WorkerID), bearer(reg.Credential))
	var got claimView
	r.decode(t, &got)
	if r.status != http.StatusOK || len(got.Jobs) != 1 {
		t.Fatalf("claim with the worker's credential: %d %s", r.status, r.body)
	}
	j := got.Jobs[0]
	complete := fmt.Sprintf(`{"token": %q, "status": "success"}`, j.Lease.Token)
	expectError(t, b.do(t, http.MethodPost, "/api/v1/agent/jobs/"+j.ID+"/complete", "application/json", complete, nil),
		http.StatusUnauthorized, "unauthorized")
	if r := b.do(t, http.MethodPost, "/api/v1/agent/jobs/"+j.ID+"/complete", "application/json", complete, bearer(reg.Credential)); r.status != http.StatusOK {
		t.Errorf("complete with the worker's credential: %d %s", r.status, r.body)
	}
}

func TestIssueTokenRejectsUnknownRole(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := api.IssueToken(context.Background(), b.store, "x", store.Role("root"), ""); err == nil {
		t.Error("IssueToken accepted the role root")
	}
}
