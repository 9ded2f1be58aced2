package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store"
)

// TestGitHubTokenSecret: a project names the secret that secrets.GITHUB_TOKEN and
// github.token read (github_token_secret, default GITHUB_TOKEN), also a project a run
// made; a claimed job gets that secret's value as GITHUB_TOKEN, and the read is audited
// under the secret's own name.
func TestGitHubTokenSecret(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) { c.Secrets = testKeyring(t) })
	const token, other = "mapped-token-value-31", "plain-github-token-32"
	for name, v := range map[string]string{"CI_BOT_TOKEN": token, "GITHUB_TOKEN": other} {
		if r := b.do(t, http.MethodPut, "/api/v1/projects/web/secrets/"+name, "application/json", `{"value": "`+v+`"}`, nil); r.status != http.StatusCreated {
			t.Fatalf("set %s: %d %s", name, r.status, r.body)
		}
	}
	var p struct {
		GitHubTokenSecret string `json:"github_token_secret"`
	}
	b.get(t, "/api/v1/projects/web").decode(t, &p)
	if p.GitHubTokenSecret != "GITHUB_TOKEN" {
		t.Errorf("github_token_secret of a new project = %q, want the default GITHUB_TOKEN", p.GitHubTokenSecret)
	}
	for body, field := range map[string]string{`{"github_token_secret": "lower"}`: "github_token_secret", `{"github_token_secret": "A-B"}`: "github_token_secret"} {
		e := expectError(t, b.do(t, http.MethodPatch, "/api/v1/projects/web", "application/json", body, nil), http.StatusUnprocessableEntity, "invalid_project")
		if len(e.Error.Details) != 1 || e.Error.Details[0].Path != field {
			t.Errorf("PATCH %s: %+v", body, e.Error)
		}
	}
	// The project was made on first use and has no repository: the setting needs none.
	r := b.do(t, http.MethodPatch, "/api/v1/projects/web", "application/json", `{"github_token_secret": "CI_BOT_TOKEN"}`, nil)
	r.decode(t, &p)
	if r.status != http.StatusOK || p.GitHubTokenSecret != "CI_BOT_TOKEN" {
		t.Fatalf("PATCH github_token_secret: %d %s", r.status, r.body)
	}

	claimToken := func(wf string) (map[string]string, string) {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"project": "web", "pipeline": wf})
		if r := b.post(t, "/api/v1/runs", string(body)); r.status != http.StatusAccepted {
			t.Fatalf("submit: %d %s", r.status, r.body)
		}
		r := b.post(t, "/api/v1/agent/claim", `{"worker_id": "w", "labels": ["x"], "wait": "0s"}`)
		var claim struct {
			Jobs []struct {
				Secrets      map[string]string `json:"secrets"`
				SecretsError string            `json:"secrets_error"`
			} `json:"jobs"`
		}
		r.decode(t, &claim)
		if len(claim.Jobs) != 1 {
			t.Fatalf("claim answer: %s", r.body)
		}
		return claim.Jobs[0].Secrets, claim.Jobs[0].SecretsError
	}
	// Read through an expression (optional, as on GitHub) and in Gantry's own env.
	for _, wf := range []string{
		"on: push\njobs:\n  a:\n    runs-on: x\n    steps:\n      - run: echo ${{ github.token }}\n",
		"jobs:\n  a:\n    runs_on: [x]\n    env: {T: '${{ secrets.GITHUB_TOKEN }}'}\n    steps: [{run: echo $T}]\n",
	} {
		if got, failure := claimToken(wf); got["GITHUB_TOKEN"] != token || len(got) != 1 || failure != "" {
			t.Errorf("%q: claimed secrets %v, %q; want GITHUB_TOKEN holding CI_BOT_TOKEN's value", wf, got, failure)
		}
	}
	entries, err := b.store.ListAudit(t.Context(), store.ListAuditParams{Project: "web", Action: "secret.read"})
	if err != nil || len(entries) != 2 || entries[0].Target != "CI_BOT_TOKEN" || !strings.Contains(string(entries[0].Details), `"as":"GITHUB_TOKEN"`) {
		t.Errorf("audit of the reads = %+v, %v", entries, err)
	}

	// A mapped secret that is not set fails a job that needs it, naming both names.
	if r := b.do(t, http.MethodDelete, "/api/v1/projects/web/secrets/CI_BOT_TOKEN", "", "", nil); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	_, failure := claimToken("jobs:\n  a:\n    runs_on: [x]\n    env: {T: '${{ secrets.GITHUB_TOKEN }}'}\n    steps: [{run: echo $T}]\n")
	if want := "secret GITHUB_TOKEN (the project's github_token_secret, CI_BOT_TOKEN) is not set for project web"; failure != want {
		t.Errorf("secrets_error = %q, want %q", failure, want)
	}

	// Back to the default: GITHUB_TOKEN is the secret of that name again.
	r = b.do(t, http.MethodPatch, "/api/v1/projects/web", "application/json", `{"github_token_secret": ""}`, nil)
	r.decode(t, &p)
	if r.status != http.StatusOK || p.GitHubTokenSecret != "GITHUB_TOKEN" {
		t.Fatalf("PATCH back to the default: %d %s", r.status, r.body)
	}
	if got, _ := claimToken("on: push\njobs:\n  a:\n    runs-on: x\n    steps:\n      - run: echo ${{ secrets.GITHUB_TOKEN }}\n"); got["GITHUB_TOKEN"] != other {
		t.Errorf("claimed secrets %v; want the secret named GITHUB_TOKEN", got)
	}
}
