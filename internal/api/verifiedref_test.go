package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/source/sourcetest"
	"github.com/gantry-ci/gantry/internal/store"
)

// shipPipeline builds, then deploys to production, which only main may do.
const shipPipeline = "name: ship\non: [push, dispatch]\njobs:\n  build:\n    cache: {key: deps, paths: [vendor]}\n    steps: [{run: make}]\n" +
	"  deploy:\n    environment: production\n    steps: [{run: ./deploy}]\n"

// TestUnverifiedRefs: a developer who names main by hand (a submitted run, or a dispatch
// of a workflow they registered) gets a run marked unverified whose deploy fails naming
// why, whose caches go to a scope of their own, and which posts no commit status; the
// same ref from the repository itself (a dispatch of the project) or from the admin
// deploys, writes main's caches and reports.
func TestUnverifiedRefs(t *testing.T) {
	t.Parallel()
	bs, err := blob.OpenDir(t.TempDir(), blob.Options{Secret: []byte(strings.Repeat("s", 32))})
	if err != nil {
		t.Fatal(err)
	}
	mirrors := t.TempDir()
	b := setupWith(t, func(c *api.Config) { c.Auth, c.MirrorsDir, c.Blobs = true, mirrors, bs })
	ctx := context.Background()
	admin := issue(t, b.store, store.RoleAdmin)
	dev, err := api.IssueToken(ctx, b.store, "dev", store.RoleWrite, "")
	if err != nil {
		t.Fatal(err)
	}
	repo := sourcetest.NewRepo(t)
	mainSHA := repo.Commit("refs/heads/main", map[string]string{".gantry.yml": shipPipeline})
	if r := b.do(t, http.MethodPost, "/api/v1/projects", "application/json", mustJSON(t, map[string]any{"name": "app",
		"repo_url": repo.URL(), "provider": "generic", "default_branch": "main"}), bearer(admin)); r.status != http.StatusCreated {
		t.Fatalf("create project: %d %s", r.status, r.body)
	}
	if r := b.do(t, http.MethodPut, "/api/v1/projects/app/environments/production", "application/json",
		`{"branches": ["main"]}`, bearer(admin)); r.status != http.StatusOK {
		t.Fatalf("PUT environment: %d %s", r.status, r.body)
	}
	r := b.do(t, http.MethodPost, "/api/v1/workflows", "application/json",
		mustJSON(t, map[string]any{"project": "app", "name": "ship", "definition": shipPipeline}), bearer(dev))
	if r.status != http.StatusCreated {
		t.Fatalf("create workflow: %d %s", r.status, r.body)
	}
	var wf workflowView
	r.decode(t, &wf)
	reg := b.mustRegister(t, issue(t, b.store, store.RoleRegister), `{"name": "w", "labels": []}`)

	statuses := func() int {
		t.Helper()
		r := b.do(t, http.MethodGet, "/api/v1/outbox?state=pending", "", "", bearer(admin))
		var v struct{ Messages []outboxView }
		r.decode(t, &v)
		n := 0
		for _, m := range v.Messages {
			if m.Topic == store.TopicStatus {
				n++
			}
		}
		return n
	}
	submit := mustJSON(t, map[string]any{"pipeline": shipPipeline, "project": "app", "ref": "refs/heads/main", "sha": mainSHA})
	const unverified = "branch main is not verified (it came from no signed webhook, no read of the repository and no admin) and may not deploy to production"
	tests := []struct {
		name, path, body, token string
		verified                bool
		scope                   string
	}{
		{"a developer's submitted run", "/api/v1/runs", submit, dev, false, "unverified/main"},
		{"a developer's dispatch of their workflow", "/api/v1/workflows/" + wf.ID + "/dispatches", `{"ref": "main"}`, dev, false, "unverified/main"},
		{"a developer's dispatch of the repository's file", "/api/v1/projects/app/dispatches", `{"ref": "main"}`, dev, true, "main"},
		{"the admin's submitted run", "/api/v1/runs", submit, admin, true, "main"},
	}
	for _, tt := range tests {
		before := statuses()
		r := b.do(t, http.MethodPost, tt.path, "application/json", tt.body, bearer(tt.token))
		if r.status != http.StatusAccepted {
			t.Fatalf("%s: %d %s", tt.name, r.status, r.body)
		}
		var run runView
		r.decode(t, &run)
		b.do(t, http.MethodGet, "/api/v1/runs/"+run.ID, "", "", bearer(tt.token)).decode(t, &run)
		if run.RefVerified != tt.verified || run.Trigger.Ref != "refs/heads/main" || run.Trigger.SHA != mainSHA {
			t.Errorf("%s: ref_verified %v, trigger %+v; want %v, main at %s", tt.name, run.RefVerified, run.Trigger, tt.verified, mainSHA)
		}
		var deploy approvalJobView
		for _, j := range run.Jobs {
			if j.Key == "deploy" {
				deploy = b.job(t, j.ID, bearer(tt.token))
			}
		}
		if tt.verified && deploy.Status != "queued" {
			t.Errorf("%s: deploy %s (%s); want queued", tt.name, deploy.Status, deploy.Reason)
		}
		if !tt.verified && (deploy.Status != "failed" || deploy.FailureKind != "not_allowed" || deploy.Reason != unverified) {
			t.Errorf("%s: deploy %s %s (%q); want failed not_allowed (%q)", tt.name, deploy.Status, deploy.FailureKind, deploy.Reason, unverified)
		}
		if got := statuses() - before; tt.verified != (got > 0) {
			t.Errorf("%s: %d commit statuses enqueued; want some only when the ref is verified", tt.name, got)
		}

		// The build job saves a cache: in main's scope only when main is verified.
		_, c := b.claimWith(t, reg.Credential, `{"worker_id": "`+reg.WorkerID+`", "wait": "0s", "max": 4}`)
		var id, token string
		for _, j := range c.Jobs {
			if j.RunID == run.ID && j.Key == "build" {
				id, token = j.ID, j.Lease.Token
			}
			if j.RunID == run.ID && j.Key == "deploy" && !tt.verified {
				t.Errorf("%s: a worker was given the deploy", tt.name)
			}
		}
		if id == "" {
			t.Fatalf("%s: build not claimed: %+v", tt.name, c)
		}
		save := mustJSON(t, map[string]any{"token": token, "key": "deps", "sha256": digest(tt.name), "size": len(tt.name)})
		r = b.do(t, http.MethodPost, "/api/v1/agent/jobs/"+id+"/caches/save", "application/json", save, bearer(reg.Credential))
		var ans struct {
			Scope string `json:"scope"`
		}
		r.decode(t, &ans)
		if r.status != http.StatusOK || ans.Scope != tt.scope {
			t.Errorf("%s: cache save answered %d %s; want scope %q", tt.name, r.status, r.body, tt.scope)
		}
		restore := mustJSON(t, map[string]any{"token": token, "key": "deps"})
		r = b.do(t, http.MethodPost, "/api/v1/agent/jobs/"+id+"/caches/restore", "application/json", restore, bearer(reg.Credential))
		if want := `"scopes":["` + tt.scope + `"`; !strings.Contains(string(r.body), want) {
			t.Errorf("%s: cache restore answered %s; want it to read %s first", tt.name, r.body, tt.scope)
		}
	}
}
