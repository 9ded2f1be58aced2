package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store"
)

const deployPipeline = "name: ship\njobs:\n  deploy:\n    environment: {name: production, url: \"https://shop.example.com\"}\n    steps: [{run: ./deploy}]\n"

type approvalJobView struct {
	ID          string `json:"id"`
	Status      string `json:"status"`
	Reason      string `json:"reason"`
	FailureKind string `json:"failure_kind"`
	Environment *struct {
		Name string `json:"name"`
		URL  string `json:"url"`
	} `json:"environment"`
	Waiting *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"waiting"`
	Approval *struct {
		Environment string   `json:"environment"`
		Required    int      `json:"required"`
		Approvers   []string `json:"approvers"`
		Decisions   []struct {
			Approver string `json:"approver"`
			Decision string `json:"decision"`
			Comment  string `json:"comment"`
		} `json:"decisions"`
	} `json:"approval"`
}

// submitDeploy creates a run of deployPipeline on main in project shop and returns its job.
func (b *bundle) submitDeploy(t *testing.T, h map[string]string) approvalJobView {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"pipeline": deployPipeline, "project": "shop", "ref": "refs/heads/main"})
	r := b.do(t, http.MethodPost, "/api/v1/runs", "application/json", string(body), h)
	if r.status != http.StatusAccepted {
		t.Fatalf("create run: %d %s", r.status, r.body)
	}
	var run struct {
		Jobs []approvalJobView `json:"jobs"`
	}
	r.decode(t, &run)
	return b.job(t, run.Jobs[0].ID, h)
}

func (b *bundle) job(t *testing.T, id string, h map[string]string) approvalJobView {
	t.Helper()
	r := b.do(t, http.MethodGet, "/api/v1/jobs/"+id, "", "", h)
	if r.status != http.StatusOK {
		t.Fatalf("get job: %d %s", r.status, r.body)
	}
	var j approvalJobView
	r.decode(t, &j)
	return j
}

// TestApprovalsOverREST: admins set environments; a job waits for approval, visibly; only
// the approvers named (by token name) decide; N distinct approvals queue it; a rejection
// fails it naming who; each decision is in the audit log.
func TestApprovalsOverREST(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) { c.Auth = true })
	ctx := context.Background()
	tok := map[string]string{}
	for name, role := range map[string]store.Role{"root": store.RoleAdmin, "alice": store.RoleWrite, "bob": store.RoleRead, "mallory": store.RoleWrite} {
		secret, err := api.IssueToken(ctx, b.store, name, role, "")
		if err != nil {
			t.Fatal(err)
		}
		tok[name] = secret
	}
	if err := b.store.CreateProject(ctx, &store.Project{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	const envPath = "/api/v1/projects/shop/environments/production"
	const rules = `{"branches": ["main"], "required_approvals": 2, "approvers": ["alice", "bob"], "approval_timeout": "2h"}`
	expectError(t, b.do(t, http.MethodPut, envPath, "application/json", rules, bearer(tok["alice"])), http.StatusForbidden, "forbidden")
	for _, bad := range []string{`{"branches": ["[x"]}`, `{"approval_timeout": "soon"}`, `{"required_approvals": 1}`, `{"approvers": ["role:owner"]}`, `{"requried_approvals": 1}`} {
		expectError(t, b.do(t, http.MethodPut, envPath, "application/json", bad, bearer(tok["root"])), http.StatusBadRequest, "bad_request")
	}
	expectError(t, b.do(t, http.MethodPut, "/api/v1/projects/shop/environments/pro%20d", "application/json", rules, bearer(tok["root"])), http.StatusBadRequest, "bad_request")
	// An environment may be defined before its project's first run: the project is made
	// on first use, as a run or a secret makes it.
	if r := b.do(t, http.MethodPut, "/api/v1/projects/new/environments/production", "application/json", rules, bearer(tok["root"])); r.status != http.StatusOK {
		t.Errorf("PUT environment of a project with no run yet: %d %s", r.status, r.body)
	} else if _, err := b.store.GetProjectByName(ctx, "new"); err != nil {
		t.Errorf("the project of an environment defined first: %v", err)
	}
	if r := b.do(t, http.MethodPut, envPath, "application/json", rules, bearer(tok["root"])); r.status != http.StatusOK {
		t.Fatalf("PUT environment as admin: %d %s", r.status, r.body)
	}
	r := b.do(t, http.MethodGet, "/api/v1/projects/shop/environments", "", "", bearer(tok["bob"]))
	var list struct {
		Environments []struct {
			Name              string   `json:"name"`
			RequiredApprovals int      `json:"required_approvals"`
			Approvers         []string `json:"approvers"`
			ApprovalTimeout   string   `json:"approval_timeout"`
		} `json:"environments"`
	}
	r.decode(t, &list)
	if r.status != http.StatusOK || len(list.Environments) != 1 || list.Environments[0].ApprovalTimeout != "2h0m0s" || list.Environments[0].RequiredApprovals != 2 {
		t.Fatalf("list environments: %d %s", r.status, r.body)
	}

	// The admin submits: a ref a developer gives by hand satisfies no branch rule
	// (TestUnverifiedRefs).
	j := b.submitDeploy(t, bearer(tok["root"]))
	if j.Status != "waiting_approval" || j.Environment == nil || j.Environment.Name != "production" || j.Environment.URL != "https://shop.example.com" ||
		j.Approval == nil || j.Approval.Required != 2 || len(j.Approval.Approvers) != 2 || j.Waiting == nil ||
		j.Waiting.Code != "approval" || j.Waiting.Message != "waiting for approval (0 of 2)" {
		t.Fatalf("submitted deploy: %+v", j)
	}
	approve := func(who, body string) response {
		return b.do(t, http.MethodPost, "/api/v1/jobs/"+j.ID+"/approve", "application/json", body, bearer(tok[who]))
	}
	expectError(t, approve("mallory", ""), http.StatusForbidden, "forbidden")
	expectError(t, approve("alice", `{"comment": 7}`), http.StatusBadRequest, "bad_request")
	if r := approve("alice", `{"comment": "looks good"}`); r.status != http.StatusOK {
		t.Fatalf("alice approves: %d %s", r.status, r.body)
	}
	if r := approve("alice", ""); r.status != http.StatusOK {
		t.Fatalf("alice approves again: %d %s", r.status, r.body)
	}
	j = b.job(t, j.ID, bearer(tok["bob"]))
	if j.Status != "waiting_approval" || j.Waiting == nil || j.Waiting.Message != "waiting for approval (1 of 2: alice approved)" ||
		len(j.Approval.Decisions) != 1 || j.Approval.Decisions[0].Approver != "alice" {
		t.Fatalf("after alice approved twice: %+v", j)
	}
	r = approve("bob", "")
	var after approvalJobView
	r.decode(t, &after)
	if r.status != http.StatusOK || after.Status != "queued" {
		t.Fatalf("bob approves: %d %s; want queued", r.status, r.body)
	}
	expectError(t, approve("alice", ""), http.StatusConflict, "conflict")

	j = b.submitDeploy(t, bearer(tok["root"]))
	r = b.do(t, http.MethodPost, "/api/v1/jobs/"+j.ID+"/reject", "application/json", `{"comment": "not today"}`, bearer(tok["bob"]))
	r.decode(t, &after)
	if r.status != http.StatusOK || after.Status != "failed" || after.FailureKind != "rejected" || after.Reason != "rejected by bob" {
		t.Fatalf("bob rejects: %d %s", r.status, r.body)
	}

	audit, err := b.store.ListAudit(ctx, store.ListAuditParams{Action: "approval"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, e := range audit {
		got[e.Actor+" "+e.Action]++
		if e.Project != "shop" {
			t.Errorf("audit entry %s names project %q", e.Action, e.Project)
		}
	}
	if got["alice approval.granted"] != 2 || got["bob approval.granted"] != 1 || got["bob approval.rejected"] != 1 {
		t.Errorf("audit entries %v", got)
	}
	if r := b.do(t, http.MethodDelete, envPath, "", "", bearer(tok["alice"])); r.status != http.StatusForbidden {
		t.Errorf("DELETE environment as write: %d", r.status)
	}
	if r := b.do(t, http.MethodDelete, envPath, "", "", bearer(tok["root"])); r.status != http.StatusNoContent {
		t.Errorf("DELETE environment as admin: %d %s", r.status, r.body)
	}
	expectError(t, b.do(t, http.MethodGet, envPath, "", "", bearer(tok["root"])), http.StatusNotFound, "not_found")
}

// TestApprovalWithAuthOff: with auth off the caller is anonymous and may decide.
func TestApprovalWithAuthOff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if err := b.store.CreateProject(ctx, &store.Project{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	if r := b.do(t, http.MethodPut, "/api/v1/projects/shop/environments/production", "application/json",
		`{"required_approvals": 1, "approvers": ["alice"]}`, nil); r.status != http.StatusOK {
		t.Fatalf("PUT environment: %d %s", r.status, r.body)
	}
	j := b.submitDeploy(t, nil)
	r := b.do(t, http.MethodPost, "/api/v1/jobs/"+j.ID+"/approve", "", "", nil)
	var after approvalJobView
	r.decode(t, &after)
	if r.status != http.StatusOK || after.Status != "queued" || len(after.Approval.Decisions) != 1 || after.Approval.Decisions[0].Approver != "anonymous" {
		t.Fatalf("anonymous approval: %d %s", r.status, r.body)
	}
}
