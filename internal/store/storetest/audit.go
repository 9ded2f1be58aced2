package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var auditTests = []test{
	{"AppendAndList", testAuditAppendList},
	{"Filters", testAuditFilters},
	{"Paging", testAuditPaging},
	{"InvalidEntriesRefused", testAuditInvalid},
	{"TokensRecordInTheirTransaction", testAuditTokens},
	{"ProjectsRecordInTheirTransaction", testAuditProjects},
}

// listAudit lists with p, failing the test on error.
func (b *bundle) listAudit(p store.ListAuditParams) []*store.AuditEntry {
	b.t.Helper()
	es, err := b.s.ListAudit(b.ctx, p)
	if err != nil {
		b.t.Fatalf("ListAudit(%+v): %v", p, err)
	}
	return es
}

func (b *bundle) appendAudit(e store.AuditEntry) *store.AuditEntry {
	b.t.Helper()
	if err := b.s.AppendAudit(b.ctx, &e); err != nil {
		b.t.Fatalf("AppendAudit(%s): %v", e.Action, err)
	}
	return &e
}

// actions gives the entries' actions in order, to compare whole listings at once.
func actions(es []*store.AuditEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Action
	}
	return out
}

func testAuditAppendList(t *testing.T, h Harness) {
	_, b := setup(t, h)
	if got := b.listAudit(store.ListAuditParams{}); len(got) != 0 {
		t.Fatalf("ListAudit of a new store = %d entries, want none", len(got))
	}
	first := b.appendAudit(store.AuditEntry{ActorID: "0190aaaa-0000-7000-8000-000000000001", Actor: "ops",
		Action: "token.created", Target: "t1", Details: json.RawMessage(`{ "role": "admin",  "labels": ["a"] }`),
		RemoteAddr: "192.0.2.1:5555"})
	if first.ID == uuid.Nil {
		t.Fatal("AppendAudit left ID unset")
	}
	wantTime(t, "Time", first.Time, b.clk.Now())
	b.clk.Advance(time.Second)
	second := b.appendAudit(store.AuditEntry{Actor: store.ActorSystem, Action: "approval.rejected", Project: "web", Target: "job-1"})

	got := b.listAudit(store.ListAuditParams{})
	if len(got) != 2 || got[0].ID != second.ID || got[1].ID != first.ID {
		t.Fatalf("ListAudit = %v, want newest first [approval.rejected token.created]", actions(got))
	}
	e := got[1]
	if e.ActorID != first.ActorID || e.Actor != "ops" || e.Action != "token.created" || e.Project != "" ||
		e.Target != "t1" || e.RemoteAddr != "192.0.2.1:5555" {
		t.Errorf("read back %+v, want %+v", e, first)
	}
	wantTime(t, "read Time", e.Time, first.Time)
	var details map[string]any
	if err := json.Unmarshal(e.Details, &details); err != nil || details["role"] != "admin" {
		t.Errorf("details = %s (%v), want the role admin", e.Details, err)
	}
	if got[0].Project != "web" || string(got[0].Details) != "{}" {
		t.Errorf("entry without details: project %q details %s, want web and {}", got[0].Project, got[0].Details)
	}
	wantTime(t, "second Time", got[0].Time, first.Time.Add(time.Second))
}

func testAuditFilters(t *testing.T, h Harness) {
	_, b := setup(t, h)
	alice := "0190aaaa-0000-7000-8000-00000000000a"
	for _, e := range []store.AuditEntry{
		{ActorID: alice, Actor: "alice", Action: "token.created", Target: "t1"},
		{ActorID: alice, Actor: "alice", Action: "project.created", Project: "web", Target: "web"},
		{Actor: store.ActorAnonymous, Action: "token.revoked", Target: "t1"},
		{Actor: "bob", ActorID: "0190bbbb-0000-7000-8000-00000000000b", Action: "secret.set", Project: "web", Target: "API_KEY"},
		// Shares "token" as a string prefix but not as a segment: never a token action.
		{Actor: "bob", Action: "tokenizer.ran", Project: "api"},
		// An underscore is a LIKE wildcard; an exact filter must not treat it as one.
		{Actor: store.ActorSystem, Action: "secret.read_by_job", Project: "api", Target: "API_KEY"},
		{Actor: store.ActorSystem, Action: "secret.readXby_job", Project: "api"},
	} {
		b.clk.Advance(time.Minute)
		b.appendAudit(e)
	}
	for _, tc := range []struct {
		name string
		p    store.ListAuditParams
		want []string
	}{
		{"project", store.ListAuditParams{Project: "web"}, []string{"secret.set", "project.created"}},
		{"action segment prefix", store.ListAuditParams{Action: "token"}, []string{"token.revoked", "token.created"}},
		{"action prefix with a dot", store.ListAuditParams{Action: "token."}, []string{"token.revoked", "token.created"}},
		{"exact action", store.ListAuditParams{Action: "token.created"}, []string{"token.created"}},
		{"underscore is no wildcard", store.ListAuditParams{Action: "secret.read_by_job"}, []string{"secret.read_by_job"}},
		{"unknown action", store.ListAuditParams{Action: "approval"}, []string{}},
		{"actor by name", store.ListAuditParams{Actor: "alice"}, []string{"project.created", "token.created"}},
		{"actor by token id", store.ListAuditParams{Actor: alice}, []string{"project.created", "token.created"}},
		{"anonymous", store.ListAuditParams{Actor: store.ActorAnonymous}, []string{"token.revoked"}},
		{"target", store.ListAuditParams{Target: "web"}, []string{"project.created"}},
		{"project and target", store.ListAuditParams{Project: "web", Target: "API_KEY"}, []string{"secret.set"}},
		{"since", store.ListAuditParams{Since: epoch.Add(6 * time.Minute)}, []string{"secret.readXby_job", "secret.read_by_job"}},
		{"combined", store.ListAuditParams{Project: "api", Action: "secret", Actor: store.ActorSystem},
			[]string{"secret.readXby_job", "secret.read_by_job"}},
		{"limit", store.ListAuditParams{Limit: 2}, []string{"secret.readXby_job", "secret.read_by_job"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := actions(b.with(t).listAudit(tc.p)); !slices.Equal(got, tc.want) {
				t.Errorf("ListAudit(%+v) = %q, want %q", tc.p, got, tc.want)
			}
		})
	}
}

func testAuditPaging(t *testing.T, h Harness) {
	_, b := setup(t, h)
	var want []uuid.UUID
	// Many entries at one instant: paging follows ids, which stay ordered when times tie.
	for i := range 7 {
		e := b.appendAudit(store.AuditEntry{Actor: "ops", Action: "project.updated", Project: "web", Target: fmt.Sprint(i)})
		want = append(want, e.ID)
	}
	slices.Reverse(want)
	var got []uuid.UUID
	p := store.ListAuditParams{Project: "web", Limit: 3}
	for range 10 {
		page := b.listAudit(p)
		for _, e := range page {
			got = append(got, e.ID)
		}
		if len(page) < p.Limit {
			break
		}
		p.Before = page[len(page)-1].ID
	}
	if !slices.Equal(got, want) {
		t.Errorf("paged ids = %v\nwant %v", got, want)
	}
}

func testAuditInvalid(t *testing.T, h Harness) {
	_, b := setup(t, h)
	for _, tc := range []struct {
		name string
		e    store.AuditEntry
	}{
		{"no action", store.AuditEntry{Actor: "ops"}},
		{"no actor", store.AuditEntry{Action: "token.created"}},
		{"details not JSON", store.AuditEntry{Actor: "ops", Action: "token.created", Details: json.RawMessage(`{"role":`)}},
		{"details not an object", store.AuditEntry{Actor: "ops", Action: "token.created", Details: json.RawMessage(`["admin"]`)}},
		{"details null", store.AuditEntry{Actor: "ops", Action: "token.created", Details: json.RawMessage(`null`)}},
		{"details too large", store.AuditEntry{Actor: "ops", Action: "token.created",
			Details: json.RawMessage(`{"x":"` + strings.Repeat("a", store.MaxAuditDetails) + `"}`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, "AppendAudit", b.s.AppendAudit(b.ctx, &tc.e), store.ErrInvalid)
		})
	}
	wantErr(t, "AppendAudit(nil)", b.s.AppendAudit(b.ctx, nil), store.ErrInvalid)
	if got := b.listAudit(store.ListAuditParams{}); len(got) != 0 {
		t.Errorf("refused entries were stored: %v", actions(got))
	}
}

// audited returns the context of an action ops does, recorded as action on target.
func (b *bundle) audited(action, project, target string) context.Context {
	return store.WithAudit(b.ctx, store.AuditEntry{ActorID: "0190aaaa-0000-7000-8000-0000000000aa", Actor: "ops",
		Action: action, Project: project, Target: target, RemoteAddr: "198.51.100.7:4000"})
}

func testAuditTokens(t *testing.T, h Harness) {
	_, b := setup(t, h)
	tk := &store.Token{ID: store.NewID(), Name: "ci", Role: store.RoleWrite, Hash: hashN(0)}
	if err := b.s.CreateToken(b.audited("token.created", "", tk.ID.String()), tk); err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	// A token refused (its hash is taken) was not created: it leaves no entry.
	err := b.s.CreateToken(b.audited("token.created", "", "dup"), &store.Token{Name: "dup", Role: store.RoleRead, Hash: hashN(0)})
	wantErr(t, "CreateToken of a taken hash", err, store.ErrConflict)
	// Nor does an action whose entry is invalid: it is refused before anything is done.
	bad := store.WithAudit(b.ctx, store.AuditEntry{Action: "token.created"})
	wantErr(t, "CreateToken with an entry without an actor", b.s.CreateToken(bad, &store.Token{Name: "x", Role: store.RoleRead, Hash: hashN(1)}), store.ErrInvalid)
	if _, err := b.s.LookupToken(b.ctx, hashN(1)); err == nil {
		t.Error("a token whose audit entry was refused was created")
	}
	wantErr(t, "RevokeToken of an unknown id", b.s.RevokeToken(b.audited("token.revoked", "", "nope"), store.NewID()), store.ErrNotFound)
	b.clk.Advance(time.Second)
	if err := b.s.RevokeToken(b.audited("token.revoked", "", tk.ID.String()), tk.ID); err != nil {
		t.Fatalf("RevokeToken: %v", err)
	}
	// Without an entry in the context nothing is recorded: workers registering, tests.
	b.createToken(&store.Token{Name: "quiet", Role: store.RoleRead, Hash: hashN(2)})

	got := b.listAudit(store.ListAuditParams{})
	if !slices.Equal(actions(got), []string{"token.revoked", "token.created"}) {
		t.Fatalf("audit = %q, want [token.revoked token.created]", actions(got))
	}
	for _, e := range got {
		if e.Target != tk.ID.String() || e.Actor != "ops" || e.RemoteAddr != "198.51.100.7:4000" {
			t.Errorf("%s entry = %+v, want target %s by ops from 198.51.100.7:4000", e.Action, e, tk.ID)
		}
	}
	wantTime(t, "revoked entry Time", got[0].Time, b.clk.Now())
}

func testAuditProjects(t *testing.T, h Harness) {
	_, b := setup(t, h)
	if err := b.s.CreateProject(b.audited("project.created", "web", "web"), connected("web")); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	wantErr(t, "CreateProject of a connected name",
		b.s.CreateProject(b.audited("project.created", "web", "web"), connected("web")), store.ErrConflict)
	p := connected("web")
	p.DefaultBranch = "trunk"
	if err := b.s.UpdateProject(b.audited("project.updated", "web", "web"), p); err != nil {
		t.Fatalf("UpdateProject: %v", err)
	}
	wantErr(t, "UpdateProject of an unknown name",
		b.s.UpdateProject(b.audited("project.updated", "nope", "nope"), connected("nope")), store.ErrNotFound)
	// A project with runs is not deleted, and its deletion is not recorded.
	b.createRun("jobs: {a: {steps: [{run: 'true'}]}}", store.CreateRunParams{Project: "busy"})
	wantErr(t, "DeleteProject with runs", b.s.DeleteProject(b.audited("project.deleted", "busy", "busy"), "busy"), store.ErrConflict)
	if err := b.s.DeleteProject(b.audited("project.deleted", "web", "web"), "web"); err != nil {
		t.Fatalf("DeleteProject: %v", err)
	}
	got := b.listAudit(store.ListAuditParams{})
	if !slices.Equal(actions(got), []string{"project.deleted", "project.updated", "project.created"}) {
		t.Fatalf("audit = %q, want [project.deleted project.updated project.created]", actions(got))
	}
	// The entries outlive the project they speak of.
	if n := len(b.listAudit(store.ListAuditParams{Project: "web"})); n != 3 {
		t.Errorf("entries of the deleted project = %d, want 3", n)
	}
}

// AuditAppendOnly proves that the database itself, not only the store's interface,
// refuses to change the audit log: exec runs one statement on dsn with the driver's own
// client, as someone with the database's credentials would, and must fail for UPDATE,
// DELETE and (where the database has it) TRUNCATE of the audit table.
func AuditAppendOnly(t *testing.T, h Harness, exec func(ctx context.Context, dsn, stmt string) error, truncate bool) {
	t.Helper()
	ctx := t.Context()
	dsn := h.NewDSN(t)
	s, err := h.Open(ctx, dsn, clock.NewFake(epoch))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	e := &store.AuditEntry{Actor: "ops", Action: "token.created", Target: "t1"}
	if err := s.AppendAudit(ctx, e); err != nil {
		t.Fatalf("AppendAudit: %v", err)
	}
	stmts := []string{
		`UPDATE audit SET actor = 'someone else'`,
		`UPDATE audit SET action = 'token.viewed' WHERE target = 't1'`,
		`DELETE FROM audit`,
		`DELETE FROM audit WHERE target = 't1'`,
	}
	if truncate {
		stmts = append(stmts, `TRUNCATE audit`)
	}
	for _, stmt := range stmts {
		if err := exec(ctx, dsn, stmt); err == nil {
			t.Errorf("%s: the database took it", stmt)
		} else if !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: err = %v, want the audit log's append-only refusal", stmt, err)
		}
	}
	// Appending still works, and the first entry is as it was.
	if err := s.AppendAudit(ctx, &store.AuditEntry{Actor: "ops", Action: "token.revoked", Target: "t1"}); err != nil {
		t.Fatalf("AppendAudit after the refusals: %v", err)
	}
	got, err := s.ListAudit(ctx, store.ListAuditParams{})
	if err != nil {
		t.Fatalf("ListAudit: %v", err)
	}
	if len(got) != 2 || got[1].ID != e.ID || got[1].Actor != "ops" || got[1].Action != "token.created" {
		t.Errorf("audit after the refusals = %+v, want the first entry untouched and one more", got)
	}
}
