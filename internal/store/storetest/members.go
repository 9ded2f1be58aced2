package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var memberTests = []test{
	{"PutListDelete", testMembers},
	{"Audited", testMembersAudited},
	{"GoWithProject", testMembersGoWithProject},
	{"TokenUser", testTokenUser},
	{"ListRunsOfProjects", testListRunsOfProjects},
}

func (b *bundle) putMember(project uuid.UUID, who string, role store.Role) *store.Member {
	b.t.Helper()
	m := &store.Member{ProjectID: project, Principal: who, Role: role}
	if err := b.s.PutMember(b.ctx, m); err != nil {
		b.t.Fatalf("PutMember(%s, %s): %v", who, role, err)
	}
	return m
}

func principals(ms []*store.Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Project + "/" + m.Principal + ":" + string(m.Role)
	}
	return out
}

func testMembers(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.project("web")
	b.project("api")
	web, api := b.projectID("web"), b.projectID("api")
	first := b.putMember(web, "carol", store.RoleViewer)
	if first.Project != "web" {
		t.Errorf("PutMember filled Project = %q, want web", first.Project)
	}
	wantTime(t, "CreatedAt", first.CreatedAt, b.clk.Now())
	b.clk.Advance(time.Minute)
	changed := b.putMember(web, "carol", store.RoleMaintainer)
	wantTime(t, "CreatedAt after a role change", changed.CreatedAt, first.CreatedAt)
	wantTime(t, "UpdatedAt after a role change", changed.UpdatedAt, b.clk.Now())
	b.putMember(web, "alice", store.RoleDeveloper)
	b.putMember(api, "alice", store.RoleViewer)

	got, err := b.s.ListMembers(b.ctx, web)
	if err != nil {
		t.Fatalf("ListMembers: %v", err)
	}
	if want := []string{"web/alice:developer", "web/carol:maintainer"}; !slices.Equal(principals(got), want) {
		t.Errorf("ListMembers(web) = %q, want %q", principals(got), want)
	}
	got, err = b.s.Memberships(b.ctx, "alice")
	if err != nil {
		t.Fatalf("Memberships: %v", err)
	}
	if want := []string{"api/alice:viewer", "web/alice:developer"}; !slices.Equal(principals(got), want) {
		t.Errorf("Memberships(alice) = %q, want %q", principals(got), want)
	}
	if got, err = b.s.Memberships(b.ctx, "nobody"); err != nil || len(got) != 0 {
		t.Errorf("Memberships(nobody) = %q, %v; want none", principals(got), err)
	}

	for _, bad := range []store.Member{
		{ProjectID: web, Principal: "dan", Role: store.RoleAdmin},
		{ProjectID: web, Principal: "dan", Role: store.RoleWrite},
		{ProjectID: web, Principal: "", Role: store.RoleViewer},
		{ProjectID: web, Principal: " dan", Role: store.RoleViewer},
	} {
		wantErr(t, "PutMember("+bad.Principal+", "+string(bad.Role)+")", b.s.PutMember(b.ctx, &bad), store.ErrInvalid)
	}
	wantErr(t, "PutMember in a missing project", b.s.PutMember(b.ctx,
		&store.Member{ProjectID: store.NewID(), Principal: "dan", Role: store.RoleViewer}), store.ErrNotFound)

	if err := b.s.DeleteMember(b.ctx, web, "alice"); err != nil {
		t.Fatalf("DeleteMember: %v", err)
	}
	wantErr(t, "DeleteMember twice", b.s.DeleteMember(b.ctx, web, "alice"), store.ErrNotFound)
	got, _ = b.s.Memberships(b.ctx, "alice")
	if want := []string{"api/alice:viewer"}; !slices.Equal(principals(got), want) {
		t.Errorf("Memberships(alice) after removal from web = %q, want %q", principals(got), want)
	}
}

func testMembersAudited(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.project("web")
	web := b.projectID("web")
	if err := b.s.PutMember(b.audited("member.added", "web", "alice"),
		&store.Member{ProjectID: web, Principal: "alice", Role: store.RoleDeveloper}); err != nil {
		t.Fatalf("PutMember: %v", err)
	}
	if err := b.s.DeleteMember(b.audited("member.removed", "web", "alice"), web, "alice"); err != nil {
		t.Fatalf("DeleteMember: %v", err)
	}
	// A refused change leaves no entry.
	wantErr(t, "DeleteMember of no member", b.s.DeleteMember(b.audited("member.removed", "web", "bob"), web, "bob"), store.ErrNotFound)
	got, err := b.s.ListAudit(b.ctx, store.ListAuditParams{Action: "member"})
	if err != nil {
		t.Fatalf("ListAudit: %v", err)
	}
	if want := []string{"member.removed", "member.added"}; !slices.Equal(actions(got), want) {
		t.Errorf("audit = %q, want %q", actions(got), want)
	}
}

func testMembersGoWithProject(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.project("web")
	b.putMember(b.projectID("web"), "alice", store.RoleViewer)
	if err := b.s.DeleteProject(b.ctx, "web"); err != nil {
		t.Fatalf("DeleteProject: %v", err)
	}
	// A project of the same name made later starts with no members.
	b.project("web")
	got, err := b.s.Memberships(b.ctx, "alice")
	if err != nil || len(got) != 0 {
		t.Errorf("Memberships(alice) after the project was deleted = %q, %v; want none", principals(got), err)
	}
}

func testTokenUser(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.createToken(&store.Token{Name: "laptop", User: "alice", Role: store.RoleDeveloper, Hash: hashN(0),
		Projects: []string{store.ScopeAll}})
	b.createToken(&store.Token{Name: "bob", Role: store.RoleViewer, Hash: hashN(1)})
	got := b.lookupToken(hashN(0))
	if got.User != "alice" || got.Principal() != "alice" || got.Role != store.RoleDeveloper ||
		!slices.Equal(got.Projects, []string{store.ScopeAll}) {
		t.Errorf("token = user %q role %q projects %q, want alice developer [*]", got.User, got.Role, got.Projects)
	}
	if got := b.lookupToken(hashN(1)); got.User != "" || got.Principal() != "bob" {
		t.Errorf("token without a user: User %q Principal %q, want \"\" and bob", got.User, got.Principal())
	}
}

func testListRunsOfProjects(t *testing.T, h Harness) {
	_, b := setup(t, h)
	const yaml = "name: one\njobs:\n  a:\n    steps: [{run: \"true\"}]\n"
	web, _ := b.createRun(yaml, store.CreateRunParams{Project: "web"})
	b.createRun(yaml, store.CreateRunParams{Project: "api"})
	runs, err := b.s.ListRuns(b.ctx, store.ListRunsParams{ProjectIDs: []uuid.UUID{web.ProjectID}})
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	if len(runs) != 1 || runs[0].ID != web.ID {
		t.Errorf("ListRuns(web's id) = %d runs, want web's one", len(runs))
	}
	runs, err = b.s.ListRuns(b.ctx, store.ListRunsParams{ProjectIDs: []uuid.UUID{}})
	if err != nil || len(runs) != 0 {
		t.Errorf("ListRuns(no projects) = %d runs, %v; want none", len(runs), err)
	}
	if runs, _ = b.s.ListRuns(b.ctx, store.ListRunsParams{}); len(runs) != 2 {
		t.Errorf("ListRuns() = %d runs, want 2", len(runs))
	}
}
