package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store"
)

// TestApproverIdentities: a maintainer cannot make identities. A token it makes acts for
// the maintainer, whatever it is called, and naming another user is refused; so it can
// neither approve as two approvers nor as the admin. Two approvals need two users, which
// only the admin vouches for.
func TestApproverIdentities(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) { c.Auth = true })
	ctx := context.Background()
	ops, err := api.IssueToken(ctx, b.store, "ops", store.RoleAdmin, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.store.CreateProject(ctx, &store.Project{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	maya := b.createToken(t, ops, `{"name": "maya", "role": "maintainer", "projects": ["shop"]}`).Token
	const envPath = "/api/v1/projects/shop/environments/production"
	setEnv := func(rules string) {
		t.Helper()
		if r := b.do(t, http.MethodPut, envPath, "application/json", rules, bearer(maya)); r.status != http.StatusOK {
			t.Fatalf("PUT environment: %d %s", r.status, r.body)
		}
	}
	approve := func(j approvalJobView, token string) response {
		return b.do(t, http.MethodPost, "/api/v1/jobs/"+j.ID+"/approve", "application/json", "", bearer(token))
	}

	// Naming another user is the admin's alone.
	for _, body := range []string{
		`{"name": "a", "user": "alice", "role": "viewer", "projects": ["shop"]}`,
		`{"name": "o", "user": "ops", "role": "maintainer", "projects": ["shop"]}`,
	} {
		expectError(t, b.do(t, http.MethodPost, "/api/v1/tokens", "application/json", body, bearer(maya)), http.StatusForbidden, "forbidden")
	}
	// A token named after someone else acts for its maker.
	minted := map[string]tokenView{}
	for _, name := range []string{"alice", "bob", "ops"} {
		tk := b.createToken(t, maya, `{"name": "`+name+`", "role": "viewer", "projects": ["shop"]}`)
		if tk.User != "maya" {
			t.Errorf("maya's token %q acts for %q; want maya", name, tk.User)
		}
		minted[name] = tk
	}
	if tk := b.createToken(t, maya, `{"name": "maya-ci", "user": "maya", "role": "developer", "projects": ["shop"]}`); tk.User != "maya" {
		t.Errorf("maya's token naming herself acts for %q", tk.User)
	}
	setEnv(`{"required_approvals": 2, "approvers": ["alice", "bob", "ops"]}`)
	j := b.submitDeploy(t, bearer(ops))
	for _, name := range []string{"alice", "bob", "ops"} {
		expectError(t, approve(j, minted[name].Token), http.StatusForbidden, "forbidden")
	}
	if j = b.job(t, j.ID, bearer(ops)); j.Status != "waiting_approval" || len(j.Approval.Decisions) != 0 {
		t.Fatalf("after maya's tokens tried: %+v", j)
	}
	// The admin vouches for the users it names: their approvals count.
	alice := b.createToken(t, ops, `{"name": "alice-laptop", "user": "alice", "role": "viewer", "projects": ["shop"]}`)
	if alice.User != "alice" {
		t.Errorf("the admin's token for alice acts for %q", alice.User)
	}
	if r := approve(j, alice.Token); r.status != http.StatusOK {
		t.Fatalf("alice approves: %d %s", r.status, r.body)
	}
	if r := approve(j, ops); r.status != http.StatusOK {
		t.Fatalf("ops approves: %d %s", r.status, r.body)
	}
	if j = b.job(t, j.ID, bearer(ops)); j.Status != "queued" {
		t.Fatalf("after alice and ops: %s; want queued", j.Status)
	}

	// Two tokens of one maintainer are one approver, however many the rule needs.
	setEnv(`{"required_approvals": 2, "approvers": ["role:maintainer"]}`)
	maya2 := b.createToken(t, maya, `{"name": "maya-2", "role": "maintainer", "projects": ["shop"]}`)
	j = b.submitDeploy(t, bearer(ops))
	for _, tk := range []string{maya, maya2.Token} {
		if r := approve(j, tk); r.status != http.StatusOK {
			t.Fatalf("maya approves: %d %s", r.status, r.body)
		}
	}
	if j = b.job(t, j.ID, bearer(ops)); j.Status != "waiting_approval" || len(j.Approval.Decisions) != 1 || j.Approval.Decisions[0].Approver != "maya" {
		t.Fatalf("after two of maya's tokens approved: %+v; want still waiting, one decision by maya", j)
	}
	mike := b.createToken(t, ops, `{"name": "mike", "role": "maintainer", "projects": ["shop"]}`)
	if r := approve(j, mike.Token); r.status != http.StatusOK {
		t.Fatalf("mike approves: %d %s", r.status, r.body)
	}
	if j = b.job(t, j.ID, bearer(ops)); j.Status != "queued" {
		t.Fatalf("after maya and mike: %s; want queued", j.Status)
	}
}

// TestPreventSelfReview: by default the user who started a run may approve it, as on
// GitHub; an environment with prevent_self_review refuses their approval (not their
// rejection), and another approver's counts.
func TestPreventSelfReview(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) { c.Auth = true })
	ctx := context.Background()
	ops, err := api.IssueToken(ctx, b.store, "ops", store.RoleAdmin, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.store.CreateProject(ctx, &store.Project{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	alice := b.createToken(t, ops, `{"name": "alice-laptop", "user": "alice", "role": "developer", "projects": ["shop"]}`).Token
	bob := b.createToken(t, ops, `{"name": "bob", "role": "developer", "projects": ["shop"]}`).Token
	const envPath = "/api/v1/projects/shop/environments/production"
	approve := func(j approvalJobView, token string) response {
		return b.do(t, http.MethodPost, "/api/v1/jobs/"+j.ID+"/approve", "application/json", "", bearer(token))
	}

	// Allowed by default.
	if r := b.do(t, http.MethodPut, envPath, "application/json", `{"required_approvals": 1, "approvers": ["alice", "bob"]}`, bearer(ops)); r.status != http.StatusOK ||
		!strings.Contains(string(r.body), `"prevent_self_review":false`) {
		t.Fatalf("PUT environment: %d %s", r.status, r.body)
	}
	j := b.submitDeploy(t, bearer(alice))
	if r := approve(j, alice); r.status != http.StatusOK || b.job(t, j.ID, bearer(ops)).Status != "queued" {
		t.Fatalf("alice approves her own run where it is allowed: %d %s", r.status, r.body)
	}

	if r := b.do(t, http.MethodPut, envPath, "application/json", `{"required_approvals": 1, "approvers": ["alice", "bob"], "prevent_self_review": true}`,
		bearer(ops)); r.status != http.StatusOK {
		t.Fatalf("PUT environment: %d %s", r.status, r.body)
	}
	r := b.do(t, http.MethodGet, envPath, "", "", bearer(bob))
	if !strings.Contains(string(r.body), `"prevent_self_review":true`) {
		t.Errorf("GET environment: %s; want prevent_self_review", r.body)
	}
	j = b.submitDeploy(t, bearer(alice))
	e := expectError(t, approve(j, alice), http.StatusForbidden, "forbidden")
	if !strings.Contains(e.Error.Message, "prevents self-review") {
		t.Errorf("alice's self-approval refused with %q; want it to say why", e.Error.Message)
	}
	if j = b.job(t, j.ID, bearer(ops)); j.Status != "waiting_approval" || len(j.Approval.Decisions) != 0 {
		t.Fatalf("after alice's refused approval: %+v", j)
	}
	if r := approve(j, bob); r.status != http.StatusOK || b.job(t, j.ID, bearer(ops)).Status != "queued" {
		t.Fatalf("bob approves alice's run: %d %s", r.status, r.body)
	}
	// Rejecting one's own run stays allowed.
	j = b.submitDeploy(t, bearer(alice))
	if r := b.do(t, http.MethodPost, "/api/v1/jobs/"+j.ID+"/reject", "application/json", "", bearer(alice)); r.status != http.StatusOK ||
		b.job(t, j.ID, bearer(ops)).Status != "failed" {
		t.Fatalf("alice rejects her own run: %d %s", r.status, r.body)
	}
}
