package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

const privateURL = "https://git.example.com/octo-org/private.git"

// TestProjectRepoCredentialSettings: a project names the secrets of its repository's
// credential over REST; the names are shown, checked against each other and the remote's
// kind, and cleared with "".
func TestProjectRepoCredentialSettings(t *testing.T) {
	t.Parallel()
	b := hookSetup(t)
	bad := []struct {
		name  string
		req   map[string]any
		field string
	}{
		{"token over ssh", map[string]any{"repo_url": "git@github.com:o/r.git", "repo_token_secret": "TOKEN"}, "repo_token_secret"},
		{"key over https", map[string]any{"repo_url": privateURL, "repo_ssh_key_secret": "KEY"}, "repo_ssh_key_secret"},
		{"both", map[string]any{"repo_url": privateURL, "repo_token_secret": "TOKEN", "repo_ssh_key_secret": "KEY"}, "repo_ssh_key_secret"},
		{"not a secret name", map[string]any{"repo_url": privateURL, "repo_token_secret": "my-token"}, "repo_token_secret"},
		{"user without token", map[string]any{"repo_url": privateURL, "repo_token_user": "bot"}, "repo_token_user"},
		{"known hosts without key", map[string]any{"repo_url": "ssh://git@git.example.com/o/r.git", "repo_known_hosts_secret": "HOSTS"}, "repo_known_hosts_secret"},
	}
	for _, c := range bad {
		c.req["name"], c.req["default_branch"] = "bad", "main"
		e := expectError(t, b.post(t, "/api/v1/projects", mustJSON(t, c.req)), http.StatusUnprocessableEntity, "invalid_project")
		found := false
		for _, d := range e.Error.Details {
			found = found || d.Path == c.field
		}
		if !found {
			t.Errorf("%s: details %+v do not name %s", c.name, e.Error.Details, c.field)
		}
	}

	b.createProject(t, map[string]any{"name": "private", "repo_url": privateURL, "provider": "gitlab",
		"default_branch": "main", "repo_token_secret": "REPO_TOKEN", "repo_token_user": "ci-bot"})
	var got map[string]any
	b.get(t, "/api/v1/projects/private").decode(t, &got)
	if got["repo_token_secret"] != "REPO_TOKEN" || got["repo_token_user"] != "ci-bot" {
		t.Errorf("project = %v; want its credential's secret names", got)
	}
	r := b.do(t, http.MethodPatch, "/api/v1/projects/private", "application/json",
		`{"repo_url": "ssh://git@git.example.com/octo-org/private.git", "default_branch": "main", "repo_token_secret": "", "repo_token_user": "",
		  "repo_ssh_key_secret": "DEPLOY_KEY", "repo_known_hosts_secret": "KNOWN_HOSTS"}`, nil)
	if r.status != http.StatusOK {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	got = nil
	r.decode(t, &got)
	if got["repo_ssh_key_secret"] != "DEPLOY_KEY" || got["repo_known_hosts_secret"] != "KNOWN_HOSTS" || got["repo_token_secret"] != nil {
		t.Errorf("patched project = %v", got)
	}
}

// TestRepoTokenOverPlainHTTP: a token goes to an http:// repo_url only on a host the
// admin allows plain HTTP for (--allow-plain-http): elsewhere the project is refused with
// what to do, on create and on update; an allowed host's jobs are told so with their
// credential, and only they.
func TestRepoTokenOverPlainHTTP(t *testing.T) {
	t.Parallel()
	kr := testKeyring(t)
	b := setupWith(t, func(c *api.Config) {
		c.Secrets, c.MirrorsDir, c.AllowPlainHTTP = kr, t.TempDir(), []string{"git.internal:8080", "mirror.lan"}
	})
	refused := func(r response) {
		t.Helper()
		e := expectError(t, r, http.StatusUnprocessableEntity, "invalid_project")
		if len(e.Error.Details) != 1 || e.Error.Details[0].Path != "repo_token_secret" ||
			!strings.Contains(e.Error.Message, "plain http") || !strings.Contains(e.Error.Message, "use an https:// repo_url") ||
			!strings.Contains(e.Error.Message, "--allow-plain-http ") {
			t.Errorf("answer %s; want repo_token_secret refused, naming https:// and --allow-plain-http", r.body)
		}
	}
	for _, repo := range []string{"http://git.example.com/o/r.git", "http://git.internal/o/r.git", "http://git.internal:9090/o/r.git"} {
		refused(b.post(t, "/api/v1/projects", mustJSON(t, map[string]any{"name": "plain", "repo_url": repo, "provider": "gitea",
			"default_branch": "main", "repo_token_secret": "REPO_TOKEN"})))
	}
	// Without a token, or over https, or on an allowed host (by name and port, or by
	// name), it is taken.
	b.createProject(t, map[string]any{"name": "public-plain", "repo_url": "http://git.example.com/o/pub.git", "provider": "gitea", "default_branch": "main"})
	b.createProject(t, map[string]any{"name": "tls", "repo_url": privateURL, "provider": "gitea", "default_branch": "main", "repo_token_secret": "REPO_TOKEN"})
	b.createProject(t, map[string]any{"name": "lan", "repo_url": "http://mirror.lan:3000/o/r.git", "provider": "gitea", "default_branch": "main", "repo_token_secret": "REPO_TOKEN"})
	b.createProject(t, map[string]any{"name": "internal", "repo_url": "http://git.internal:8080/o/r.git", "provider": "gitea", "default_branch": "main", "repo_token_secret": "REPO_TOKEN"})
	// An update cannot bring the two together either way.
	refused(b.do(t, http.MethodPatch, "/api/v1/projects/public-plain", "application/json", `{"repo_token_secret": "REPO_TOKEN"}`, nil))
	refused(b.do(t, http.MethodPatch, "/api/v1/projects/tls", "application/json", `{"repo_url": "http://git.example.com/o/r.git"}`, nil))

	// The claim of an allowed host's job carries the allowance; an https one's does not.
	const yaml = "jobs:\n  co:\n    steps: [{run: 'true'}]\n"
	claimFor := func(project, cloneURL string) map[string]any {
		t.Helper()
		if r := b.do(t, http.MethodPut, "/api/v1/projects/"+project+"/secrets/REPO_TOKEN", "application/json", `{"value": "tok-123456"}`, nil); r.status != http.StatusCreated {
			t.Fatalf("set secret: %d %s", r.status, r.body)
		}
		plan, err := pipeline.Compile([]byte(yaml), pipeline.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := b.store.CreateRun(t.Context(), store.CreateRunParams{Project: project, Plan: plan, Definition: []byte(yaml),
			Trigger: store.Trigger{Ref: "refs/heads/main", Branch: "main", SHA: strings.Repeat("a", 40), Event: "push", CloneURL: cloneURL}}); err != nil {
			t.Fatal(err)
		}
		var v struct {
			Jobs []struct {
				Creds map[string]any `json:"repo_credentials"`
			} `json:"jobs"`
		}
		r := b.post(t, "/api/v1/agent/claim", `{"worker_id": "w", "wait": "0s"}`)
		r.decode(t, &v)
		if len(v.Jobs) != 1 || v.Jobs[0].Creds == nil {
			t.Fatalf("claim: %s", r.body)
		}
		return v.Jobs[0].Creds
	}
	if c := claimFor("lan", "http://mirror.lan:3000/o/r.git"); c["allow_plain_http"] != true {
		t.Errorf("claim of an allowed http host = %v, want allow_plain_http", c)
	}
	if c := claimFor("tls", privateURL); c["allow_plain_http"] != nil {
		t.Errorf("claim of an https repository = %v, want no allow_plain_http", c)
	}
}

// TestClaimCarriesRepoCredential: the claim answer of a job that checks out its project's
// private repository carries the credential from the project's secrets; a job with
// checkout: false, and a run of another repository, get none; the coordinator masks the
// token in lines a worker sent; no other answer holds it; a missing secret fails the job.
func TestClaimCarriesRepoCredential(t *testing.T) {
	t.Parallel()
	kr := testKeyring(t)
	mirrors := t.TempDir()
	b := setupWith(t, func(c *api.Config) { c.Secrets = kr; c.MirrorsDir = mirrors })
	b.createProject(t, map[string]any{"name": "private", "repo_url": privateURL, "provider": "gitea",
		"default_branch": "main", "repo_token_secret": "REPO_TOKEN"})
	const token = "gitea-token-value-0123"
	if r := b.do(t, http.MethodPut, "/api/v1/projects/private/secrets/REPO_TOKEN", "application/json", `{"value": "`+token+`"}`, nil); r.status != http.StatusCreated {
		t.Fatalf("set secret: %d %s", r.status, r.body)
	}
	const yaml = "jobs:\n  co:\n    steps: [{run: 'true'}]\n  skip:\n    checkout: false\n    steps: [{run: 'true'}]\n"
	newRun := func(cloneURL string) {
		t.Helper()
		plan, err := pipeline.Compile([]byte(yaml), pipeline.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := b.store.CreateRun(t.Context(), store.CreateRunParams{Project: "private", Plan: plan, Definition: []byte(yaml),
			Trigger: store.Trigger{Ref: "refs/heads/main", Branch: "main", SHA: strings.Repeat("a", 40), Event: "push", CloneURL: cloneURL}}); err != nil {
			t.Fatal(err)
		}
	}
	type claimed struct {
		ID           string `json:"id"`
		Key          string `json:"key"`
		SecretsError string `json:"secrets_error"`
		Lease        struct {
			Token string `json:"token"`
		} `json:"lease"`
		Creds *struct {
			Token    string `json:"token"`
			Username string `json:"username"`
		} `json:"repo_credentials"`
	}
	claimAll := func() map[string]claimed {
		t.Helper()
		r := b.post(t, "/api/v1/agent/claim", `{"worker_id": "w", "wait": "0s", "max": 2}`)
		var v struct {
			Jobs []claimed `json:"jobs"`
		}
		r.decode(t, &v)
		out := map[string]claimed{}
		for _, j := range v.Jobs {
			out[j.Key] = j
		}
		if len(out) != 2 {
			t.Fatalf("claim: %s", r.body)
		}
		return out
	}

	newRun(privateURL)
	jobs := claimAll()
	co := jobs["co"]
	if co.Creds == nil || co.Creds.Token != token || co.Creds.Username != token || co.SecretsError != "" {
		t.Fatalf("checkout job's claim = %+v; want the token, with itself as Gitea's user", co)
	}
	if jobs["skip"].Creds != nil {
		t.Errorf("a checkout: false job was given the repository credential")
	}
	// An old worker sends the token unmasked: the coordinator masks it.
	b.appendLogs(t, co.ID, mustJSON(t, map[string]any{"token": co.Lease.Token, "lines": []logs.Line{
		{Seq: 1, TS: 1, Stream: logs.Stdout, Text: "token " + token},
	}}))
	if lines := b.readLines(t, "/api/v1/jobs/"+co.ID+"/logs"); len(lines) != 1 || lines[0].Text != "token ***" {
		t.Errorf("stored lines: %+v", lines)
	}
	for _, path := range []string{"/api/v1/jobs/" + co.ID, "/api/v1/projects/private", "/api/v1/runs?project=private"} {
		if body := string(b.get(t, path).body); strings.Contains(body, token) {
			t.Errorf("GET %s holds the token: %s", path, body)
		}
	}

	// A run of another repository (a clone URL the project does not name) gets nothing:
	// the token goes to its own host only.
	newRun("https://elsewhere.example.com/x.git")
	if c := claimAll()["co"]; c.Creds != nil {
		t.Errorf("a run of another repository was given the credential: %+v", c)
	}

	// Without the secret, a checkout job fails with what to set; checkout: false does not.
	if r := b.do(t, http.MethodDelete, "/api/v1/projects/private/secrets/REPO_TOKEN", "", "", nil); r.status != http.StatusNoContent {
		t.Fatalf("delete secret: %d %s", r.status, r.body)
	}
	newRun(privateURL)
	jobs = claimAll()
	if e := jobs["co"].SecretsError; !strings.Contains(e, "secret REPO_TOKEN (repo_token_secret) is not set") {
		t.Errorf("secrets_error = %q", e)
	}
	if e := jobs["skip"].SecretsError; e != "" {
		t.Errorf("checkout: false job's secrets_error = %q", e)
	}

	// A dispatch names the missing secret too, before any fetch.
	expectError(t, b.post(t, "/api/v1/projects/private/dispatches", `{"ref": "main"}`), http.StatusUnprocessableEntity, "repo_credential")
}
