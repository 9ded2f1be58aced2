package api_test

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/secret"
	"github.com/gantry-ci/gantry/internal/store"
)

func testKeyring(t *testing.T) *secret.Keyring {
	t.Helper()
	k := make([]byte, secret.KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	kr, err := secret.NewKeyring(k)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

type secretView struct {
	Project     string `json:"project"`
	Name        string `json:"name"`
	Environment string `json:"environment"`
	KeyID       string `json:"key_id"`
	UpdatedAt   string `json:"updated_at"`
}

// TestSecretsAreWriteOnly: a secret goes in over REST and no answer ever gives it back:
// set, replace, get, list, delete all answer metadata.
func TestSecretsAreWriteOnly(t *testing.T) {
	t.Parallel()
	kr := testKeyring(t)
	b := setupWith(t, func(c *api.Config) { c.Secrets = kr })
	if err := b.store.CreateProject(t.Context(), &store.Project{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	const value = "write-only-value-777"
	var answers []string
	put := func(path, body string, want int) {
		t.Helper()
		r := b.do(t, http.MethodPut, path, "application/json", body, nil)
		if r.status != want {
			t.Fatalf("PUT %s: %d %s", path, r.status, r.body)
		}
		answers = append(answers, string(r.body))
	}
	put("/api/v1/projects/web/secrets/DEPLOY_KEY", `{"value": "`+value+`"}`, http.StatusCreated)
	put("/api/v1/projects/web/secrets/DEPLOY_KEY", `{"value": "`+value+`-2"}`, http.StatusOK)
	put("/api/v1/projects/web/secrets/DEPLOY_KEY", `{"value": "`+value+`-prod", "environment": "production"}`, http.StatusCreated)

	r := b.get(t, "/api/v1/projects/web/secrets")
	answers = append(answers, string(r.body))
	var list struct {
		Secrets []secretView `json:"secrets"`
	}
	r.decode(t, &list)
	if len(list.Secrets) != 2 || list.Secrets[0].Name != "DEPLOY_KEY" || list.Secrets[0].Environment != "" ||
		list.Secrets[1].Environment != "production" || list.Secrets[0].KeyID != kr.PrimaryID() || list.Secrets[0].UpdatedAt == "" {
		t.Errorf("list = %s", r.body)
	}
	r = b.get(t, "/api/v1/projects/web/secrets/DEPLOY_KEY?environment=production")
	answers = append(answers, string(r.body))
	var one secretView
	r.decode(t, &one)
	if r.status != http.StatusOK || one.Environment != "production" {
		t.Errorf("get = %d %s", r.status, r.body)
	}
	for _, a := range answers {
		if strings.Contains(a, value) || strings.Contains(a, "value") {
			t.Errorf("an answer holds the value: %s", a)
		}
	}
	// Stored sealed, and bound to its name: the store holds no value.
	sc, err := b.store.GetSecret(t.Context(), store.SecretKey{Project: "web", Name: "DEPLOY_KEY"})
	if err != nil || strings.Contains(string(sc.Ciphertext), value) {
		t.Fatalf("stored secret: %v", err)
	}
	got, err := kr.Open(secret.Sealed{KeyID: sc.KeyID, WrappedKey: sc.WrappedKey, Ciphertext: sc.Ciphertext},
		secret.Scope{Project: "web", Name: "DEPLOY_KEY"})
	if err != nil || string(got) != value+"-2" {
		t.Fatalf("open stored secret = %q, %v", got, err)
	}

	r = b.do(t, http.MethodDelete, "/api/v1/projects/web/secrets/DEPLOY_KEY", "", "", nil)
	if r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	expectError(t, b.get(t, "/api/v1/projects/web/secrets/DEPLOY_KEY"), http.StatusNotFound, "not_found")
	expectError(t, b.do(t, http.MethodDelete, "/api/v1/projects/web/secrets/DEPLOY_KEY", "", "", nil), http.StatusNotFound, "not_found")

	// Setting and deleting are audited, by name, never with the value.
	entries, err := b.store.ListAudit(t.Context(), store.ListAuditParams{Project: "web", Action: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range entries {
		actions = append(actions, e.Action+" "+e.Target)
		if strings.Contains(string(e.Details), value) {
			t.Errorf("audit entry %s holds the value: %s", e.Action, e.Details)
		}
	}
	if got := strings.Join(actions, ", "); got != "secret.deleted DEPLOY_KEY, secret.set DEPLOY_KEY, secret.set DEPLOY_KEY, secret.set DEPLOY_KEY" {
		t.Errorf("audit = %s", got)
	}
}

func TestSecretRequestsRefused(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) { c.Secrets = testKeyring(t) })
	if err := b.store.CreateProject(t.Context(), &store.Project{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"lower case name", "/api/v1/projects/web/secrets/deploy_key", `{"value": "x"}`, 400, "bad_request"},
		{"name with a dash", "/api/v1/projects/web/secrets/A-B", `{"value": "x"}`, 400, "bad_request"},
		{"no value", "/api/v1/projects/web/secrets/A", `{}`, 400, "bad_request"},
		{"empty value", "/api/v1/projects/web/secrets/A", `{"value": ""}`, 400, "bad_request"},
		{"unknown field", "/api/v1/projects/web/secrets/A", `{"value": "sekrit-in-body", "x": 1}`, 400, "bad_request"},
		{"bad environment", "/api/v1/projects/web/secrets/A", `{"value": "x", "environment": "a b"}`, 400, "bad_request"},
		{"too large", "/api/v1/projects/web/secrets/A", `{"value": "` + strings.Repeat("v", api.MaxSecretBytes+1) + `"}`, 400, "bad_request"},
	} {
		r := b.do(t, http.MethodPut, tc.path, "application/json", tc.body, nil)
		e := expectError(t, r, tc.status, tc.code)
		if strings.Contains(e.Error.Message, "sekrit") {
			t.Errorf("%s: the error quotes the body: %s", tc.name, r.body)
		}
	}

	// A project is made on first use, as a run makes it.
	if r := b.do(t, http.MethodPut, "/api/v1/projects/fresh/secrets/A", "application/json", `{"value": "x-1"}`, nil); r.status != http.StatusCreated {
		t.Errorf("set a secret of a new project: %d %s", r.status, r.body)
	}
	expectError(t, b.get(t, "/api/v1/projects/nope/secrets"), http.StatusNotFound, "not_found")

	// Without a key the routes say how to configure one.
	nokey := setup(t)
	if err := nokey.store.CreateProject(t.Context(), &store.Project{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	e := expectError(t, nokey.do(t, http.MethodPut, "/api/v1/projects/web/secrets/A", "application/json", `{"value": "x"}`, nil),
		http.StatusServiceUnavailable, "no_secrets_key")
	if !strings.Contains(e.Error.Message, "--secrets-key-file") {
		t.Errorf("message = %q", e.Error.Message)
	}
}

// TestSecretRoutesAreAdmins: only an admin token may touch secrets.
func TestSecretRoutesAreAdmins(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) { c.Secrets = testKeyring(t); c.Auth = true })
	if err := b.store.CreateProject(t.Context(), &store.Project{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	tokens := map[store.Role]string{}
	for _, role := range []store.Role{store.RoleRead, store.RoleWrite, store.RoleAdmin} {
		tk, err := api.IssueToken(t.Context(), b.store, string(role), role, "")
		if err != nil {
			t.Fatal(err)
		}
		tokens[role] = tk
	}
	for _, rt := range []struct{ method, path, body string }{
		{http.MethodPut, "/api/v1/projects/web/secrets/A", `{"value": "v-123"}`},
		{http.MethodGet, "/api/v1/projects/web/secrets", ""},
		{http.MethodGet, "/api/v1/projects/web/secrets/A", ""},
		{http.MethodPut, "/api/v1/projects/web/secret-settings", `{"secrets_for_forks": false}`},
		{http.MethodDelete, "/api/v1/projects/web/secrets/A", ""},
	} {
		for _, role := range []store.Role{store.RoleRead, store.RoleWrite} {
			r := b.do(t, rt.method, rt.path, "application/json", rt.body, map[string]string{"Authorization": "Bearer " + tokens[role]})
			if r.status != http.StatusForbidden {
				t.Errorf("%s %s as %s: %d, want 403", rt.method, rt.path, role, r.status)
			}
		}
		r := b.do(t, rt.method, rt.path, "application/json", rt.body, map[string]string{"Authorization": "Bearer " + tokens[store.RoleAdmin]})
		if r.status >= 300 {
			t.Errorf("%s %s as admin: %d %s", rt.method, rt.path, r.status, r.body)
		}
	}
}

// TestClaimGivesOnlyReferencedSecrets: a claim answer carries exactly the secrets the job's
// env refers to; no other answer carries any; and the coordinator masks a secret in log
// lines a worker sent unmasked (an old worker), on the replica that handed the job out
// and, resolving it from the store, on another.
func TestClaimGivesOnlyReferencedSecrets(t *testing.T) {
	t.Parallel()
	kr := testKeyring(t)
	b := setupWith(t, func(c *api.Config) { c.Secrets = kr })
	const used, unused = "used-secret-value-1", "unused-admin-value-2"
	for name, v := range map[string]string{"USED": used, "ADMIN": unused} {
		if r := b.do(t, http.MethodPut, "/api/v1/projects/web/secrets/"+name, "application/json", `{"value": "`+v+`"}`, nil); r.status != http.StatusCreated {
			t.Fatalf("set %s: %d %s", name, r.status, r.body)
		}
	}
	run := b.post(t, "/api/v1/runs", `{"project": "web", "pipeline": "jobs:\n  a:\n    env: {X: '${{ secrets.USED }}'}\n    steps: [{run: echo $X}]\n"}`)
	if run.status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", run.status, run.body)
	}
	r := b.post(t, "/api/v1/agent/claim", `{"worker_id": "w", "wait": "0s"}`)
	var claim struct {
		Jobs []struct {
			ID      string            `json:"id"`
			Secrets map[string]string `json:"secrets"`
			Lease   struct {
				Token string `json:"token"`
			} `json:"lease"`
		} `json:"jobs"`
	}
	r.decode(t, &claim)
	if len(claim.Jobs) != 1 || len(claim.Jobs[0].Secrets) != 1 || claim.Jobs[0].Secrets["USED"] != used {
		t.Fatalf("claim answer: %s", r.body)
	}
	if strings.Contains(string(r.body), unused) {
		t.Fatalf("the claim answer holds a secret the job does not refer to: %s", r.body)
	}
	job := claim.Jobs[0]
	var runID struct {
		ID string `json:"id"`
	}
	run.decode(t, &runID)
	for _, path := range []string{"/api/v1/runs/" + runID.ID, "/api/v1/jobs/" + job.ID, "/api/v1/runs?project=web"} {
		if body := string(b.get(t, path).body); strings.Contains(body, used) {
			t.Errorf("GET %s holds the value: %s", path, body)
		}
	}

	// An old worker sends the value unmasked: the coordinator masks it.
	b64 := base64.StdEncoding.EncodeToString([]byte(used))
	b.appendLogs(t, job.ID, mustJSON(t, map[string]any{"token": job.Lease.Token, "lines": []logs.Line{
		{Seq: 1, TS: 1, Stream: logs.Stdout, Text: "value " + used},
		{Seq: 2, TS: 2, Stream: logs.Stdout, Text: "base64 " + b64},
	}}))
	// Another replica on the same store, which did not hand the job out, resolves it.
	other := httptest.NewServer(api.New(api.Config{Store: b.store, Logger: testLogger(t), Clock: b.clock, Secrets: kr}).Handler())
	t.Cleanup(other.Close)
	replica := &bundle{store: b.store, clock: b.clock, url: other.URL}
	replica.appendLogs(t, job.ID, mustJSON(t, map[string]any{"token": job.Lease.Token, "lines": []logs.Line{
		{Seq: 3, TS: 3, Stream: logs.Stdout, Text: "replica " + used},
	}}))
	// This replica learns of the other's lines from a notice, a moment later: poll.
	lines := b.readLines(t, "/api/v1/jobs/"+job.ID+"/logs")
	for deadline := time.Now().Add(10 * time.Second); len(lines) < 3 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond) // polling the log with a deadline
		lines = b.readLines(t, "/api/v1/jobs/"+job.ID+"/logs")
	}
	if len(lines) != 3 || lines[0].Text != "value ***" || lines[1].Text != "base64 ***" || lines[2].Text != "replica ***" {
		t.Errorf("stored lines: %+v", lines)
	}
}

// TestSecretEnvOfAReplayIsNotKept: secret_env is sealed, not shown, and a submission that
// replays an idempotency key keeps no second copy of it.
func TestSecretEnvOfAReplayIsNotKept(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) { c.Secrets = testKeyring(t) })
	body := `{"project": "web", "pipeline": "jobs: {a: {steps: [{run: 'true'}]}}", "env": {"PLAIN": "p"}, "secret_env": {"TOKEN": "secret-env-value-9"}}`
	for i, want := range []int{http.StatusAccepted, http.StatusOK} {
		r := b.do(t, http.MethodPost, "/api/v1/runs", "application/json", body, map[string]string{"Idempotency-Key": "k1"})
		if r.status != want || strings.Contains(string(r.body), "secret-env-value-9") {
			t.Fatalf("submission %d: %d %s", i+1, r.status, r.body)
		}
	}
	sealed, err := b.store.SealedSecrets(t.Context(), "none")
	if err != nil || len(sealed) != 1 || sealed[0].Name != "TOKEN" || sealed[0].Scope == "" {
		t.Fatalf("sealed secrets = %+v, %v; want the first submission's TOKEN only", sealed, err)
	}
	expectError(t, b.do(t, http.MethodPost, "/api/v1/runs", "application/json",
		`{"pipeline": "jobs: {a: {steps: [{run: 'true'}]}}", "env": {"T": "x"}, "secret_env": {"T": "y"}}`, nil), http.StatusBadRequest, "bad_request")
	if sealed, _ := b.store.SealedSecrets(t.Context(), "none"); len(sealed) != 1 {
		t.Errorf("a refused submission kept secret env: %d rows", len(sealed))
	}
}
