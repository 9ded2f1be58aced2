package api_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store"
)

// TestNewProjectNames: a new project's name is [a-z0-9][a-z0-9._-]*, at most
// api.MaxProjectName bytes, whether it is created, or made on first use by a run, a
// workflow or an environment; anything else answers 400 with the rule and creates nothing. A project whose
// name was stored before the rule keeps taking runs.
func TestNewProjectNames(t *testing.T) {
	t.Parallel()
	b := hookSetup(t)
	create := func(name string) response {
		return b.post(t, "/api/v1/projects", mustJSON(t, map[string]any{"name": name, "repo_url": "https://git.example.com/o/r.git",
			"provider": "gitea", "default_branch": "main"}))
	}
	submit := func(name string) response {
		return b.post(t, "/api/v1/runs", mustJSON(t, map[string]any{"pipeline": simplePipeline, "project": name}))
	}
	workflow := func(name string) response {
		return b.post(t, "/api/v1/workflows", mustJSON(t, map[string]any{"name": "nightly", "project": name, "definition": simplePipeline}))
	}
	bad := []string{"", " ", "../x", "..", ".", "a/b", "\u202e", "web\u202eppa", "Web", "-web", ".web", "_web", "web app",
		"wéb", "web\x00", "web/", "web?x", "web%2fx", strings.Repeat("a", api.MaxProjectName+1)}
	for _, name := range bad {
		for how, send := range map[string]func(string) response{"create": create, "submit": submit, "workflow": workflow} {
			if name == "" && how != "create" {
				continue // the default project
			}
			if how != "create" && (len(name) > api.MaxProjectName || strings.ContainsRune(name, 0)) {
				continue // refused by the older rule, which TestProjectNameValidation holds
			}
			r := send(name)
			e := expectError(t, r, http.StatusBadRequest, "bad_request")
			if !strings.Contains(e.Error.Message, api.ProjectNameRule) {
				t.Errorf("%s %q: message %q does not give the rule", how, name, e.Error.Message)
			}
		}
	}
	// An environment (or a secret) set first makes its project too.
	for _, name := range []string{"Web", "web app", "\u202e", "-web", "..x"} {
		r := b.do(t, http.MethodPut, "/api/v1/projects/"+url.PathEscape(name)+"/environments/production", "application/json", `{"branches": ["main"]}`, nil)
		e := expectError(t, r, http.StatusBadRequest, "bad_request")
		if !strings.Contains(e.Error.Message, api.ProjectNameRule) {
			t.Errorf("environment of %q: message %q does not give the rule", name, e.Error.Message)
		}
	}
	list, err := b.store.ListProjects(t.Context())
	if err != nil || len(list) != 0 {
		t.Fatalf("bad names made projects %v (%v)", list, err)
	}

	for _, name := range []string{"web", "a", "0", "web-app", "web.app_2", "9lives", strings.Repeat("a", api.MaxProjectName)} {
		if r := create(name); r.status != http.StatusCreated {
			t.Errorf("create %q: %d %s", name, r.status, r.body)
		}
	}
	if r := submit("made-on-first-use"); r.status != http.StatusAccepted {
		t.Errorf("submit to a new, good name: %d %s", r.status, r.body)
	}
	if r := submit(""); r.status != http.StatusAccepted {
		t.Errorf("submit to the default project: %d %s", r.status, r.body)
	}

	// Names stored before the rule keep working.
	if err := b.store.CreateProject(t.Context(), &store.Project{Name: "Legacy App", RepoURL: "https://git.example.com/o/legacy.git", Provider: "gitea"}); err != nil {
		t.Fatal(err)
	}
	if r := submit("Legacy App"); r.status != http.StatusAccepted {
		t.Errorf("submit to a project named before the rule: %d %s", r.status, r.body)
	}
	if r := workflow("Legacy App"); r.status != http.StatusCreated {
		t.Errorf("workflow of a project named before the rule: %d %s", r.status, r.body)
	}
}
