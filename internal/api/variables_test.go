package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store"
)

type variableView struct {
	Project     string `json:"project"`
	Name        string `json:"name"`
	Environment string `json:"environment"`
	Value       string `json:"value"`
	CreatedAt   string `json:"created_at"`
	UpdatedAt   string `json:"updated_at"`
}

// TestVariables: set, replace, get, list and delete a project's variables, project-wide
// and per environment; values come back, names in upper case; changes are audited.
func TestVariables(t *testing.T) {
	t.Parallel()
	b := setup(t)
	put := func(path, body string, want int) variableView {
		t.Helper()
		r := b.do(t, http.MethodPut, path, "application/json", body, nil)
		if r.status != want {
			t.Fatalf("PUT %s: %d %s", path, r.status, r.body)
		}
		var v variableView
		r.decode(t, &v)
		return v
	}
	// The project is made on first use, as a run or a secret makes it.
	v := put("/api/v1/projects/web/variables/greeting", `{"value": "hello"}`, http.StatusCreated)
	if v.Project != "web" || v.Name != "GREETING" || v.Value != "hello" || v.Environment != "" || v.CreatedAt == "" {
		t.Errorf("PUT answered %+v", v)
	}
	if v := put("/api/v1/projects/web/variables/GREETING", `{"value": "hello again"}`, http.StatusOK); v.Value != "hello again" {
		t.Errorf("replace answered %+v", v)
	}
	put("/api/v1/projects/web/variables/REGION", `{"value": "eu-prod", "environment": "production"}`, http.StatusCreated)
	put("/api/v1/projects/web/variables/MULTI", `{"value": "line one\nline two"}`, http.StatusCreated)

	var list struct {
		Variables []variableView `json:"variables"`
	}
	b.get(t, "/api/v1/projects/web/variables").decode(t, &list)
	var got []string
	for _, v := range list.Variables {
		got = append(got, fmt.Sprintf("%s/%s=%q", v.Environment, v.Name, v.Value))
	}
	if want := `/GREETING="hello again", /MULTI="line one\nline two", production/REGION="eu-prod"`; strings.Join(got, ", ") != want {
		t.Errorf("list = %s; want %s", strings.Join(got, ", "), want)
	}
	var one variableView
	r := b.get(t, "/api/v1/projects/web/variables/region?environment=production")
	r.decode(t, &one)
	if r.status != http.StatusOK || one.Value != "eu-prod" {
		t.Errorf("get = %d %s", r.status, r.body)
	}
	expectError(t, b.get(t, "/api/v1/projects/web/variables/REGION"), http.StatusNotFound, "not_found")

	if r := b.do(t, http.MethodDelete, "/api/v1/projects/web/variables/REGION?environment=production", "", "", nil); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	expectError(t, b.do(t, http.MethodDelete, "/api/v1/projects/web/variables/REGION?environment=production", "", "", nil), http.StatusNotFound, "not_found")

	entries, err := b.store.ListAudit(t.Context(), store.ListAuditParams{Project: "web", Action: "variable"})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range entries {
		actions = append(actions, e.Action+" "+e.Target)
	}
	if got := strings.Join(actions, ", "); got != "variable.deleted REGION, variable.set MULTI, variable.set REGION, variable.set GREETING, variable.set GREETING" {
		t.Errorf("audit = %s", got)
	}
}

// TestVariableRequestsRefused: every bad request answers a 4xx that says what is wrong
// and changes nothing.
func TestVariableRequestsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if r := b.do(t, http.MethodPut, "/api/v1/projects/web/variables/KEEP", "application/json", `{"value": "kept"}`, nil); r.status != http.StatusCreated {
		t.Fatalf("set KEEP: %d %s", r.status, r.body)
	}
	for _, tc := range []struct {
		name, path, body string
		status           int
		code, msg        string
	}{
		{"starts with a digit", "/api/v1/projects/web/variables/1X", `{"value": "x"}`, 400, "bad_request", "not starting with a digit or GITHUB_"},
		{"GitHub's prefix", "/api/v1/projects/web/variables/github_sha", `{"value": "x"}`, 400, "bad_request", "GITHUB_"},
		{"a dash", "/api/v1/projects/web/variables/A-B", `{"value": "x"}`, 400, "bad_request", "letters, digits and _"},
		{"too long a name", "/api/v1/projects/web/variables/" + strings.Repeat("N", 129), `{"value": "x"}`, 400, "bad_request", "at most 128 bytes"},
		{"no value", "/api/v1/projects/web/variables/KEEP", `{}`, 400, "bad_request", `"value" is required`},
		{"a value that is not text", "/api/v1/projects/web/variables/KEEP", `{"value": 3}`, 400, "bad_request", "decode request"},
		{"unknown field", "/api/v1/projects/web/variables/KEEP", `{"value": "x", "secret": true}`, 400, "bad_request", "unknown field"},
		{"bad environment", "/api/v1/projects/web/variables/KEEP", `{"value": "x", "environment": "a b"}`, 400, "bad_request", "environment"},
		{"too large", "/api/v1/projects/web/variables/KEEP", `{"value": "` + strings.Repeat("v", store.MaxVariableBytes+1) + `"}`, 400, "bad_request", "the most is 49152"},
		{"a new project's bad name", "/api/v1/projects/Web%20Site/variables/X", `{"value": "x"}`, 400, "bad_request", ""},
	} {
		r := b.do(t, http.MethodPut, tc.path, "application/json", tc.body, nil)
		if e := expectError(t, r, tc.status, tc.code); !strings.Contains(e.Error.Message, tc.msg) {
			t.Errorf("%s: message %q, want it to say %q", tc.name, e.Error.Message, tc.msg)
		}
	}
	expectError(t, b.get(t, "/api/v1/projects/web/variables/KEEP?environment=a%20b"), http.StatusBadRequest, "bad_request")
	expectError(t, b.get(t, "/api/v1/projects/nope/variables"), http.StatusNotFound, "not_found")
	expectError(t, b.get(t, "/api/v1/projects/nope/variables/X"), http.StatusNotFound, "not_found")

	// A limit reached is a conflict, and nothing is lost.
	for i := range store.MaxEnvironmentVariables {
		if r := b.do(t, http.MethodPut, fmt.Sprintf("/api/v1/projects/web/variables/V%d", i), "application/json",
			`{"value": "x", "environment": "production"}`, nil); r.status != http.StatusCreated {
			t.Fatalf("set V%d: %d %s", i, r.status, r.body)
		}
	}
	e := expectError(t, b.do(t, http.MethodPut, "/api/v1/projects/web/variables/ONE_MORE", "application/json",
		`{"value": "x", "environment": "production"}`, nil), http.StatusConflict, "conflict")
	if !strings.Contains(e.Error.Message, "100 variables in environment production, the most it may have") {
		t.Errorf("limit message = %q", e.Error.Message)
	}
	var v variableView
	b.get(t, "/api/v1/projects/web/variables/KEEP").decode(t, &v)
	if v.Value != "kept" {
		t.Errorf("KEEP after refused requests = %+v", v)
	}
	var list struct {
		Variables []variableView `json:"variables"`
	}
	b.get(t, "/api/v1/projects/web/variables").decode(t, &list)
	if len(list.Variables) != 1+store.MaxEnvironmentVariables {
		t.Errorf("%d variables after refused requests, want %d", len(list.Variables), 1+store.MaxEnvironmentVariables)
	}
}

// TestVariableRoutesAreMaintainers': with authentication on, only a maintainer of the
// project (or an admin) reads or changes its variables.
func TestVariableRoutesAreMaintainers(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) { c.Auth = true })
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
		{http.MethodPut, "/api/v1/projects/web/variables/A", `{"value": "v"}`},
		{http.MethodGet, "/api/v1/projects/web/variables", ""},
		{http.MethodGet, "/api/v1/projects/web/variables/A", ""},
		{http.MethodDelete, "/api/v1/projects/web/variables/A", ""},
	} {
		r := b.do(t, rt.method, rt.path, "application/json", rt.body, nil)
		if r.status != http.StatusUnauthorized {
			t.Errorf("%s %s without a token: %d, want 401", rt.method, rt.path, r.status)
		}
		for _, role := range []store.Role{store.RoleRead, store.RoleWrite} {
			r := b.do(t, rt.method, rt.path, "application/json", rt.body, map[string]string{"Authorization": "Bearer " + tokens[role]})
			if r.status != http.StatusForbidden {
				t.Errorf("%s %s as %s: %d, want 403", rt.method, rt.path, role, r.status)
			}
		}
		r = b.do(t, rt.method, rt.path, "application/json", rt.body, map[string]string{"Authorization": "Bearer " + tokens[store.RoleAdmin]})
		if r.status >= 300 {
			t.Errorf("%s %s as admin: %d %s", rt.method, rt.path, r.status, r.body)
		}
	}
}

// TestClaimGivesTheJobsVariables: a claimed job's trigger holds what the job reads as
// vars.NAME, its environment's over the project's, and no other environment's.
func TestClaimGivesTheJobsVariables(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for path, body := range map[string]string{
		"GREETING": `{"value": "hello"}`, "REGION": `{"value": "eu"}`,
		"REGION?prod": `{"value": "eu-prod", "environment": "production"}`,
		"TIER":        `{"value": "gold", "environment": "staging"}`,
	} {
		name, _, _ := strings.Cut(path, "?")
		if r := b.do(t, http.MethodPut, "/api/v1/projects/web/variables/"+name, "application/json", body, nil); r.status != http.StatusCreated {
			t.Fatalf("set %s: %d %s", path, r.status, r.body)
		}
	}
	wf := "on: push\njobs:\n  deploy:\n    runs-on: x\n    environment: production\n    steps: [{run: 'echo ${{ vars.REGION }}'}]\n"
	body, _ := json.Marshal(map[string]string{"project": "web", "pipeline": wf})
	if r := b.post(t, "/api/v1/runs", string(body)); r.status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	r := b.post(t, "/api/v1/agent/claim", `{"worker_id": "w", "labels": ["x"], "wait": "0s"}`)
	var claim struct {
		Jobs []struct {
			Trigger map[string]json.RawMessage `json:"trigger"`
		} `json:"jobs"`
	}
	r.decode(t, &claim)
	if len(claim.Jobs) != 1 {
		t.Fatalf("claim answer: %s", r.body)
	}
	tr := claim.Jobs[0].Trigger
	if got := string(tr["vars"]); got != `{"GREETING":"hello","REGION":"eu-prod"}` {
		t.Errorf("claimed job's vars = %s", got)
	}
	if _, ok := tr["environment_vars"]; ok {
		t.Errorf("the claim answer holds other environments' variables: %s", r.body)
	}
}
