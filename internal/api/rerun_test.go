package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store"
)

type attemptView struct {
	Attempt   int    `json:"attempt"`
	Status    string `json:"status"`
	Cause     string `json:"cause"`
	StartedBy string `json:"started_by"`
	Current   bool   `json:"current"`
	Steps     []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
	} `json:"steps"`
}

type rerunJobView struct {
	ID       string        `json:"id"`
	Key      string        `json:"key"`
	Status   string        `json:"status"`
	Attempts []attemptView `json:"attempts"`
}

// finishAll claims and completes every job there is to run, with outcome by key
// (success when absent).
func (b *bundle) finishAll(t *testing.T, outcome map[string]store.JobStatus) {
	t.Helper()
	ctx := context.Background()
	for range 100 {
		cs, err := b.store.Claim(ctx, store.ClaimParams{WorkerID: "w1", Max: 10, LeaseTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) == 0 {
			return
		}
		for _, c := range cs {
			st := outcome[c.Job.Key]
			if st == "" {
				st = store.JobSuccess
			}
			p := store.CompleteParams{LeaseRef: store.LeaseRef{JobID: c.Job.ID, Token: c.Lease.Token}, Status: st}
			stepStatus := store.StepSuccess
			if st == store.JobFailed {
				p.FailureKind, stepStatus = store.FailureExit, store.StepFailed
			}
			p.Steps = []store.StepUpdate{{Index: 0, Status: store.StepRunning}, {Index: 0, Status: stepStatus}}
			if _, err := b.store.CompleteJob(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestRerunOverREST: a developer re-runs a job that succeeded and sees both attempts; a
// viewer may not; a run is re-run (failed or all) once finished; bad requests say what
// to send; each re-run is audited with its actor.
func TestRerunOverREST(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) { c.Auth = true })
	ctx := context.Background()
	tok := map[string]string{}
	for name, role := range map[string]store.Role{"root": store.RoleAdmin, "dev": store.RoleWrite, "viewer": store.RoleRead} {
		secret, err := api.IssueToken(ctx, b.store, name, role, "")
		if err != nil {
			t.Fatal(err)
		}
		tok[name] = secret
	}
	const chain = "name: chain\njobs:\n  a: {steps: [{name: build, run: \"true\"}]}\n  b: {needs: [a], steps: [{run: \"true\"}]}\n"
	body, _ := json.Marshal(map[string]any{"pipeline": chain, "project": "web"})
	r := b.do(t, http.MethodPost, "/api/v1/runs", "application/json", string(body), bearer(tok["root"]))
	if r.status != http.StatusAccepted {
		t.Fatalf("create run: %d %s", r.status, r.body)
	}
	var run struct {
		ID   string         `json:"id"`
		Jobs []rerunJobView `json:"jobs"`
	}
	r.decode(t, &run)
	a := run.Jobs[0].ID
	post := func(who, path, body string) response {
		ct := ""
		if body != "" {
			ct = "application/json"
		}
		return b.do(t, http.MethodPost, path, ct, body, bearer(tok[who]))
	}
	expectError(t, post("dev", "/api/v1/jobs/"+a+"/rerun", ""), http.StatusConflict, "conflict")
	b.finishAll(t, nil)

	expectError(t, post("viewer", "/api/v1/jobs/"+a+"/rerun", ""), http.StatusForbidden, "forbidden")
	expectError(t, post("dev", "/api/v1/jobs/"+a+"/rerun", `{"jobs": "all"}`), http.StatusBadRequest, "bad_request")
	r = post("dev", "/api/v1/jobs/"+a+"/rerun", "")
	var j rerunJobView
	r.decode(t, &j)
	if r.status != http.StatusAccepted || j.Status != "queued" || len(j.Attempts) != 2 ||
		j.Attempts[0].Status != "success" || j.Attempts[0].Cause != "run" || len(j.Attempts[0].Steps) != 1 ||
		j.Attempts[0].Steps[0].Name != "build" || j.Attempts[0].Steps[0].Status != "success" ||
		!j.Attempts[1].Current || j.Attempts[1].Attempt != 2 || j.Attempts[1].Cause != "rerun" || j.Attempts[1].StartedBy != "dev" {
		t.Fatalf("re-run of a succeeded job: %d %s", r.status, r.body)
	}
	// The job that needs it waits for it again; the run runs again.
	expectError(t, post("dev", "/api/v1/runs/"+run.ID+"/rerun", `{"jobs": "all"}`), http.StatusConflict, "conflict")
	b.finishAll(t, map[string]store.JobStatus{"b": store.JobFailed})

	e := expectError(t, post("dev", "/api/v1/runs/"+run.ID+"/rerun", `{"jobs": "most"}`), http.StatusBadRequest, "bad_request")
	if !strings.Contains(e.Error.Message, `"failed"`) {
		t.Errorf("bad jobs: %q does not say what to send", e.Error.Message)
	}
	expectError(t, post("dev", "/api/v1/runs/"+run.ID+"/rerun", ""), http.StatusBadRequest, "bad_request")
	r = post("dev", "/api/v1/runs/"+run.ID+"/rerun", `{"jobs": "failed"}`)
	var after struct {
		Status   string         `json:"status"`
		Jobs     []rerunJobView `json:"jobs"`
		Reopened []string       `json:"reopened_jobs"`
	}
	r.decode(t, &after)
	if r.status != http.StatusAccepted || after.Status != "running" || after.Jobs[0].Status != "success" || after.Jobs[1].Status != "queued" ||
		len(after.Reopened) != 1 || after.Reopened[0] != after.Jobs[1].ID {
		t.Fatalf("re-run failed: %d %s", r.status, r.body)
	}
	b.finishAll(t, nil)
	expectError(t, post("dev", "/api/v1/runs/"+run.ID+"/retry", ""), http.StatusConflict, "conflict")
	r = post("dev", "/api/v1/runs/"+run.ID+"/rerun", `{"jobs": "all"}`)
	r.decode(t, &after)
	if r.status != http.StatusAccepted || len(after.Reopened) != 2 {
		t.Fatalf("re-run all: %d %s", r.status, r.body)
	}

	audit, err := b.store.ListAudit(ctx, store.ListAuditParams{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, e := range audit {
		if strings.HasSuffix(e.Action, ".rerun") {
			got[e.Actor+" "+e.Action]++
			if e.Project != "web" {
				t.Errorf("audit entry %s names project %q", e.Action, e.Project)
			}
		}
	}
	if got["dev job.rerun"] != 1 || got["dev run.rerun"] != 2 || len(got) != 2 {
		t.Errorf("re-run audit entries %v, want dev job.rerun 1, dev run.rerun 2", got)
	}
}

// TestApprovalsInbox: the inbox lists what waits for the caller's approval, in projects
// they see, until they approve; one who may not approve is told who may.
func TestApprovalsInbox(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) { c.Auth = true })
	ctx := context.Background()
	tok := map[string]string{}
	for name, role := range map[string]store.Role{"root": store.RoleAdmin, "alice": store.RoleWrite, "bob": store.RoleWrite} {
		secret, err := api.IssueToken(ctx, b.store, name, role, "")
		if err != nil {
			t.Fatal(err)
		}
		tok[name] = secret
	}
	// carol is named an approver, but her token sees only project web.
	carol, err := api.IssueScopedToken(ctx, b.store, &store.Token{Name: "carol", Role: store.RoleDeveloper, Projects: []string{"web"}})
	if err != nil {
		t.Fatal(err)
	}
	tok["carol"] = carol
	if err := b.store.CreateProject(ctx, &store.Project{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	if r := b.do(t, http.MethodPut, "/api/v1/projects/shop/environments/production", "application/json",
		`{"required_approvals": 1, "approvers": ["alice", "carol", "role:admin"]}`, bearer(tok["root"])); r.status != http.StatusOK {
		t.Fatalf("PUT environment: %d %s", r.status, r.body)
	}
	j := b.submitDeploy(t, bearer(tok["root"]))
	inbox := func(who string) []struct {
		Job         rerunJobView `json:"job"`
		Project     string       `json:"project"`
		Environment string       `json:"environment"`
		RunID       string       `json:"run_id"`
	} {
		t.Helper()
		r := b.do(t, http.MethodGet, "/api/v1/approvals", "", "", bearer(tok[who]))
		var out struct {
			Approvals []struct {
				Job         rerunJobView `json:"job"`
				Project     string       `json:"project"`
				Environment string       `json:"environment"`
				RunID       string       `json:"run_id"`
			} `json:"approvals"`
		}
		if r.status != http.StatusOK {
			t.Fatalf("GET approvals as %s: %d %s", who, r.status, r.body)
		}
		r.decode(t, &out)
		return out.Approvals
	}
	if got := inbox("alice"); len(got) != 1 || got[0].Job.ID != j.ID || got[0].Project != "shop" || got[0].Environment != "production" || got[0].RunID == "" {
		t.Fatalf("alice's inbox: %+v", got)
	}
	if got := inbox("root"); len(got) != 1 {
		t.Errorf("root's inbox (role:admin approves): %+v", got)
	}
	if got := inbox("bob"); len(got) != 0 {
		t.Errorf("bob, no approver, has %d in his inbox", len(got))
	}
	if got := inbox("carol"); len(got) != 0 {
		t.Errorf("carol, an approver whose token does not see shop, has %d in her inbox", len(got))
	}
	e := expectError(t, b.do(t, http.MethodPost, "/api/v1/jobs/"+j.ID+"/approve", "", "", bearer(tok["bob"])), http.StatusForbidden, "forbidden")
	if want := "environment production is approved by alice, carol or anyone with the admin role or higher on the project"; !strings.Contains(e.Error.Message, want) {
		t.Errorf("bob's refusal %q does not say %q", e.Error.Message, want)
	}
	if r := b.do(t, http.MethodPost, "/api/v1/jobs/"+j.ID+"/approve", "", "", bearer(tok["alice"])); r.status != http.StatusOK {
		t.Fatalf("alice approves: %d %s", r.status, r.body)
	}
	if got := inbox("alice"); len(got) != 0 {
		t.Errorf("alice's inbox after she approved: %+v", got)
	}
}
