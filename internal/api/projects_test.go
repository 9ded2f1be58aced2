package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/source/sourcetest"
)

func TestProjectsAPI(t *testing.T) {
	t.Parallel()
	b := hookSetup(t)
	repo := sourcetest.NewRepo(t)
	repo.Commit("refs/heads/trunk", map[string]string{"README": "x\n"})
	repo.Git(repo.Bare, "symbolic-ref", "HEAD", "refs/heads/trunk")

	p := b.createProject(t, map[string]any{"name": "web", "repo_url": repo.URL(), "provider": "gitea",
		"pipeline_path": "ci/gantry.yml", "api_base_url": "https://git.example.org", "api_token_file": "/etc/gantry/gitea.token"})
	if p.DefaultBranch != "trunk" {
		t.Errorf("default branch = %q, want trunk, learned from the repository's HEAD", p.DefaultBranch)
	}
	if len(p.WebhookSecret) != 64 || p.PipelinePath != "ci/gantry.yml" || p.Provider != "gitea" || p.CreatedAt == "" {
		t.Errorf("created = %+v", p)
	}

	// The secret is never shown again.
	r := b.get(t, "/api/v1/projects/web")
	if r.status != http.StatusOK || strings.Contains(string(r.body), p.WebhookSecret) {
		t.Fatalf("get project: %d %s", r.status, r.body)
	}
	var got projectView
	r.decode(t, &got)
	if !got.WebhookSecretSet || got.APITokenFile != "/etc/gantry/gitea.token" || got.RepoURL != repo.URL() {
		t.Errorf("get project = %+v", got)
	}
	r = b.get(t, "/api/v1/projects")
	var list struct {
		Projects []projectView `json:"projects"`
	}
	r.decode(t, &list)
	if len(list.Projects) != 1 || list.Projects[0].Name != "web" || strings.Contains(string(r.body), p.WebhookSecret) {
		t.Errorf("list = %s", r.body)
	}

	// Updates change what they name; a rotated secret is shown once.
	r = b.do(t, http.MethodPatch, "/api/v1/projects/web", "application/json", `{"rotate_webhook_secret": true, "default_branch": "main"}`, nil)
	if r.status != http.StatusOK {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	var upd projectView
	r.decode(t, &upd)
	if upd.WebhookSecret == "" || upd.WebhookSecret == p.WebhookSecret || upd.DefaultBranch != "main" || upd.PipelinePath != "ci/gantry.yml" {
		t.Errorf("patched = %+v", upd)
	}
	r = b.do(t, http.MethodPatch, "/api/v1/projects/web", "application/json", `{"api_token_file": ""}`, nil)
	var upd2 projectView
	r.decode(t, &upd2)
	if r.status != http.StatusOK || upd2.WebhookSecret != "" || upd2.APITokenFile != "" || upd2.DefaultBranch != "main" {
		t.Errorf("second patch: %d %+v", r.status, upd2)
	}

	// Mistakes are named field by field, and store nothing.
	e := expectError(t, b.do(t, http.MethodPost, "/api/v1/projects", "application/json",
		`{"name": "bad", "provider": "svn", "pipeline_path": "../x.yml", "api_base_url": "ftp://x", "api_token_file": "rel/token", "webhook_secret": ""}`, nil),
		http.StatusUnprocessableEntity, "invalid_project")
	var fields []string
	for _, d := range e.Error.Details {
		fields = append(fields, d.Path)
	}
	if strings.Join(fields, ",") != "webhook_secret,repo_url,provider,pipeline_path,api_base_url,api_token_file" {
		t.Errorf("problems named %v; body %+v", fields, e)
	}
	expectError(t, b.do(t, http.MethodPost, "/api/v1/projects", "application/json",
		`{"name": "pw", "repo_url": "https://user:hunter2@example.com/x.git", "default_branch": "main"}`, nil),
		http.StatusUnprocessableEntity, "invalid_project")
	expectError(t, b.do(t, http.MethodPost, "/api/v1/projects", "application/json", `{"name": "x", "colour": "red"}`, nil),
		http.StatusBadRequest, "bad_request")
	expectError(t, b.do(t, http.MethodPost, "/api/v1/projects", "application/json",
		`{"name": "web", "repo_url": "`+repo.URL()+`", "default_branch": "main"}`, nil), http.StatusConflict, "conflict")
	expectError(t, b.do(t, http.MethodPatch, "/api/v1/projects/web", "application/json", `{"name": "renamed"}`, nil),
		http.StatusUnprocessableEntity, "invalid_project")
	expectError(t, b.do(t, http.MethodPatch, "/api/v1/projects/nope", "application/json", `{}`, nil), http.StatusNotFound, "not_found")
	// An unreachable remote with no default branch given cannot be made.
	e = expectError(t, b.do(t, http.MethodPost, "/api/v1/projects", "application/json",
		`{"name": "gone", "repo_url": "file:///nonexistent/repo.git"}`, nil), http.StatusUnprocessableEntity, "invalid_project")
	if len(e.Error.Details) != 1 || e.Error.Details[0].Path != "default_branch" {
		t.Errorf("unreachable remote: %+v", e)
	}
	if r := b.get(t, "/api/v1/projects/gone"); r.status != http.StatusNotFound {
		t.Errorf("a refused project was stored: %d", r.status)
	}

	// A project with runs is not deleted; one without is.
	b.createRun(t, "web", "refs/heads/main")
	expectError(t, b.do(t, http.MethodDelete, "/api/v1/projects/web", "", "", nil), http.StatusConflict, "conflict")
	b.createProject(t, map[string]any{"name": "idle", "repo_url": repo.URL(), "default_branch": "main"})
	if r := b.do(t, http.MethodDelete, "/api/v1/projects/idle", "", "", nil); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	expectError(t, b.get(t, "/api/v1/projects/idle"), http.StatusNotFound, "not_found")
}
