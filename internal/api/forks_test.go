package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// TestForkJobsGetNoSecretsUntilApproved: a job of a pull request from a fork is given
// neither the project's secrets nor its repository credential, and its claim says why;
// the same job in an environment that needs approval gets both once an approver approved
// it; a run that is not from a fork gets them as before.
func TestForkJobsGetNoSecretsUntilApproved(t *testing.T) {
	t.Parallel()
	kr := testKeyring(t)
	b := setupWith(t, func(c *api.Config) { c.Secrets = kr; c.MirrorsDir = t.TempDir() })
	b.createProject(t, map[string]any{"name": "private", "repo_url": privateURL, "provider": "github",
		"default_branch": "main", "repo_token_secret": "REPO_TOKEN"})
	for name, value := range map[string]string{"REPO_TOKEN": "repo-token-value-0123", "DEPLOY_KEY": "deploy-key-value-4567"} {
		if r := b.do(t, http.MethodPut, "/api/v1/projects/private/secrets/"+name, "application/json", `{"value": "`+value+`"}`, nil); r.status != http.StatusCreated {
			t.Fatalf("set secret %s: %d %s", name, r.status, r.body)
		}
	}
	if r := b.do(t, http.MethodPut, "/api/v1/projects/private/environments/review", "application/json",
		`{"required_approvals": 1, "approvers": ["alice"]}`, nil); r.status != http.StatusOK {
		t.Fatalf("PUT environment: %d %s", r.status, r.body)
	}
	const yaml = "jobs:\n  build:\n    env: {KEY: '${{ secrets.DEPLOY_KEY }}'}\n    steps: [{run: 'true'}]\n" +
		"  gated:\n    environment: {name: review}\n    env: {KEY: '${{ secrets.DEPLOY_KEY }}'}\n    steps: [{run: 'true'}]\n"
	newRun := func(fork bool) *store.Run {
		t.Helper()
		plan, err := pipeline.Compile([]byte(yaml), pipeline.Options{})
		if err != nil {
			t.Fatal(err)
		}
		tr := store.Trigger{Ref: "refs/heads/main", Branch: "main", SHA: strings.Repeat("b", 40), Event: "push", CloneURL: privateURL}
		if fork {
			tr = store.Trigger{Ref: "refs/pull/3/head", SHA: strings.Repeat("c", 40), Event: "pull_request", PRNumber: 3, Fork: true, CloneURL: privateURL}
		}
		run, _, _, err := b.store.CreateRun(t.Context(), store.CreateRunParams{Project: "private", Plan: plan, Definition: []byte(yaml), Trigger: tr})
		if err != nil {
			t.Fatal(err)
		}
		return run
	}
	type claimed struct {
		ID           string            `json:"id"`
		Key          string            `json:"key"`
		Secrets      map[string]string `json:"secrets"`
		SecretsError string            `json:"secrets_error"`
		Withheld     string            `json:"repo_credentials_withheld"`
		Creds        *struct {
			Token string `json:"token"`
		} `json:"repo_credentials"`
	}
	claim := func() []claimed {
		t.Helper()
		r := b.post(t, "/api/v1/agent/claim", `{"worker_id": "w", "wait": "0s", "max": 4}`)
		var v struct {
			Jobs []claimed `json:"jobs"`
		}
		r.decode(t, &v)
		return v.Jobs
	}

	fork := newRun(true)
	jobs := claim()
	if len(jobs) != 1 || jobs[0].Key != "build" {
		t.Fatalf("claimed %+v; want build alone (gated waits for approval)", jobs)
	}
	if j := jobs[0]; j.Creds != nil || len(j.Secrets) != 0 || !strings.Contains(j.SecretsError, "pull request from a fork") ||
		!strings.Contains(j.Withheld, "gives forks no secrets and no repository credential") {
		t.Errorf("fork job's claim = %+v; want no secret, no credential, and why", j)
	}
	var full struct {
		Jobs []struct {
			ID     string `json:"id"`
			Key    string `json:"key"`
			Status string `json:"status"`
		} `json:"jobs"`
	}
	b.get(t, "/api/v1/runs/"+fork.ID.String()).decode(t, &full)
	gated := ""
	for _, j := range full.Jobs {
		if j.Key == "gated" {
			gated = j.ID
		}
	}
	if gated == "" {
		t.Fatalf("no gated job in %+v", full)
	}
	if r := b.do(t, http.MethodPost, "/api/v1/jobs/"+gated+"/approve", "", "", nil); r.status != http.StatusOK {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	jobs = claim()
	if len(jobs) != 1 || jobs[0].Key != "gated" {
		t.Fatalf("claimed %+v; want the approved job", jobs)
	}
	if j := jobs[0]; j.Creds == nil || j.Creds.Token != "repo-token-value-0123" || j.Secrets["DEPLOY_KEY"] != "deploy-key-value-4567" ||
		j.SecretsError != "" || j.Withheld != "" {
		t.Errorf("approved fork job's claim = %+v; want its secret and the credential", j)
	}

	newRun(false)
	for _, j := range claim() {
		if j.Key == "build" && (j.Creds == nil || j.Secrets["DEPLOY_KEY"] == "" || j.Withheld != "") {
			t.Errorf("push job's claim = %+v; want its secret and the credential", j)
		}
	}
}
