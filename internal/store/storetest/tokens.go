package storetest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var tokenTests = []test{
	{"CreateAndLookup", testTokens},
	{"ScopeAndExpiry", testTokenScope},
	{"ListHidesAgentsUnlessAsked", testTokenList},
	{"RevokeCascadesToCredentials", testTokenRevoke},
	{"CredentialOfRevokedParentRefused", testTokenRevokedParent},
	{"TouchRecordsLastUse", testTokenTouch},
	{"ClaimOnlyScopedProjects", testClaimProjects},
}

func testTokens(t *testing.T, h Harness) {
	_, b := setup(t, h)
	hash := strings.Repeat("ab", 32)
	tk := &store.Token{Name: "ci", Role: store.RoleAgent, Hash: hash, WorkerID: "w1"}
	if err := b.s.CreateToken(b.ctx, tk); err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	got, err := b.s.LookupToken(b.ctx, hash)
	if err != nil {
		t.Fatalf("LookupToken: %v", err)
	}
	if got.ID != tk.ID || got.Name != "ci" || got.Role != store.RoleAgent || got.WorkerID != "w1" {
		t.Errorf("LookupToken = %+v, want %+v", got, tk)
	}
	wantTime(t, "CreatedAt", got.CreatedAt, b.clk.Now())
	_, err = b.s.LookupToken(b.ctx, strings.Repeat("cd", 32))
	wantErr(t, "LookupToken of an unknown hash", err, store.ErrNotFound)
	wantErr(t, "CreateToken with a taken hash", b.s.CreateToken(b.ctx, &store.Token{Name: "x", Role: store.RoleRead, Hash: hash}), store.ErrConflict)
	wantErr(t, "CreateToken without a hash", b.s.CreateToken(b.ctx, &store.Token{Name: "x", Role: store.RoleRead}), store.ErrInvalid)
}

// hashN is a distinct well-formed hash per n.
func hashN(n int) string { return strings.Repeat(string(rune('a'+n)), 64) }

func (b *bundle) createToken(tk *store.Token) *store.Token {
	b.t.Helper()
	if err := b.s.CreateToken(b.ctx, tk); err != nil {
		b.t.Fatalf("CreateToken(%s): %v", tk.Name, err)
	}
	return tk
}

func (b *bundle) lookupToken(hash string) *store.Token {
	b.t.Helper()
	tk, err := b.s.LookupToken(b.ctx, hash)
	if err != nil {
		b.t.Fatalf("LookupToken: %v", err)
	}
	return tk
}

func testTokenScope(t *testing.T, h Harness) {
	_, b := setup(t, h)
	expires := b.clk.Now().Add(720 * time.Hour)
	reg := b.createToken(&store.Token{Name: "fleet", Role: store.RoleRegister, Hash: hashN(0),
		Labels: []string{"linux", "gpu"}, Projects: []string{"web", "api"}, ExpiresAt: expires})
	cred := b.createToken(&store.Token{Name: "worker w1", Role: store.RoleAgent, Hash: hashN(1), WorkerID: "w1",
		Labels: reg.Labels, Projects: reg.Projects, ExpiresAt: reg.ExpiresAt, ParentID: reg.ID})
	got := b.lookupToken(hashN(0))
	if !slices.Equal(got.Labels, []string{"linux", "gpu"}) || !slices.Equal(got.Projects, []string{"web", "api"}) {
		t.Errorf("register token scope = labels %q projects %q, want [linux gpu] [web api]", got.Labels, got.Projects)
	}
	wantTime(t, "ExpiresAt", got.ExpiresAt, expires)
	wantTime(t, "RevokedAt", got.RevokedAt, time.Time{})
	wantTime(t, "LastUsedAt", got.LastUsedAt, time.Time{})
	if got.ParentID != uuid.Nil {
		t.Errorf("register token ParentID = %s, want none", got.ParentID)
	}
	gc := b.lookupToken(hashN(1))
	if gc.ParentID != reg.ID || gc.ID != cred.ID || !slices.Equal(gc.Projects, []string{"web", "api"}) {
		t.Errorf("credential = %+v, want parent %s and the register token's scope", gc, reg.ID)
	}
	if !gc.Valid(b.clk.Now()) || gc.Valid(expires) || gc.Valid(expires.Add(time.Second)) {
		t.Errorf("Valid: want valid before %v and not from then on", expires)
	}
	plain := b.createToken(&store.Token{Name: "ops", Role: store.RoleAdmin, Hash: hashN(2)})
	gp := b.lookupToken(plain.Hash)
	if len(gp.Labels) != 0 || len(gp.Projects) != 0 || !gp.ExpiresAt.IsZero() || !gp.Valid(b.clk.Now().Add(1e6*time.Hour)) {
		t.Errorf("unscoped token = %+v, want no scope and no expiry", gp)
	}
	wantErr(t, "CreateToken under an unknown parent", b.s.CreateToken(b.ctx, &store.Token{Name: "x", Role: store.RoleAgent,
		Hash: hashN(3), ParentID: uuid.New()}), store.ErrNotFound)
}

func testTokenList(t *testing.T, h Harness) {
	_, b := setup(t, h)
	reg := b.createToken(&store.Token{Name: "fleet", Role: store.RoleRegister, Hash: hashN(0)})
	b.clk.Advance(time.Second)
	b.createToken(&store.Token{Name: "worker w1", Role: store.RoleAgent, Hash: hashN(1), WorkerID: "w1", ParentID: reg.ID})
	b.clk.Advance(time.Second)
	b.createToken(&store.Token{Name: "ops", Role: store.RoleAdmin, Hash: hashN(2)})
	names := func(ts []*store.Token) []string {
		var out []string
		for _, tk := range ts {
			out = append(out, tk.Name)
		}
		return out
	}
	ts, err := b.s.ListTokens(b.ctx, store.ListTokensParams{})
	if err != nil {
		t.Fatalf("ListTokens: %v", err)
	}
	if got := names(ts); !slices.Equal(got, []string{"fleet", "ops"}) {
		t.Errorf("ListTokens = %q, want [fleet ops] (oldest first, no worker credentials)", got)
	}
	ts, err = b.s.ListTokens(b.ctx, store.ListTokensParams{Agents: true})
	if err != nil {
		t.Fatalf("ListTokens(Agents): %v", err)
	}
	if got := names(ts); !slices.Equal(got, []string{"fleet", "worker w1", "ops"}) {
		t.Errorf("ListTokens(Agents) = %q, want [fleet, worker w1, ops]", got)
	}
}

func testTokenRevoke(t *testing.T, h Harness) {
	_, b := setup(t, h)
	reg := b.createToken(&store.Token{Name: "fleet", Role: store.RoleRegister, Hash: hashN(0)})
	b.createToken(&store.Token{Name: "worker w1", Role: store.RoleAgent, Hash: hashN(1), WorkerID: "w1", ParentID: reg.ID})
	b.createToken(&store.Token{Name: "worker w2", Role: store.RoleAgent, Hash: hashN(2), WorkerID: "w2", ParentID: reg.ID})
	other := b.createToken(&store.Token{Name: "other fleet", Role: store.RoleRegister, Hash: hashN(3)})
	b.createToken(&store.Token{Name: "worker w3", Role: store.RoleAgent, Hash: hashN(4), WorkerID: "w3", ParentID: other.ID})
	b.clk.Advance(time.Minute)
	revokedAt := b.clk.Now()
	if err := b.s.RevokeToken(b.ctx, reg.ID); err != nil {
		t.Fatalf("RevokeToken: %v", err)
	}
	for i := 0; i <= 2; i++ {
		tk := b.lookupToken(hashN(i))
		wantTime(t, tk.Name+" RevokedAt", tk.RevokedAt, revokedAt)
		if tk.Valid(b.clk.Now()) {
			t.Errorf("%s is still valid after its register token was revoked", tk.Name)
		}
	}
	for i := 3; i <= 4; i++ {
		if tk := b.lookupToken(hashN(i)); !tk.Valid(b.clk.Now()) {
			t.Errorf("%s was revoked with another register token", tk.Name)
		}
	}
	// Revoking again keeps the first time.
	b.clk.Advance(time.Minute)
	if err := b.s.RevokeToken(b.ctx, reg.ID); err != nil {
		t.Fatalf("RevokeToken again: %v", err)
	}
	wantTime(t, "RevokedAt after a second revoke", b.lookupToken(hashN(0)).RevokedAt, revokedAt)
	wantErr(t, "RevokeToken of an unknown id", b.s.RevokeToken(b.ctx, uuid.New()), store.ErrNotFound)
}

func testTokenRevokedParent(t *testing.T, h Harness) {
	_, b := setup(t, h)
	reg := b.createToken(&store.Token{Name: "fleet", Role: store.RoleRegister, Hash: hashN(0)})
	if err := b.s.RevokeToken(b.ctx, reg.ID); err != nil {
		t.Fatalf("RevokeToken: %v", err)
	}
	err := b.s.CreateToken(b.ctx, &store.Token{Name: "worker w1", Role: store.RoleAgent, Hash: hashN(1), WorkerID: "w1", ParentID: reg.ID})
	wantErr(t, "CreateToken under a revoked register token", err, store.ErrConflict)
	_, err = b.s.LookupToken(b.ctx, hashN(1))
	wantErr(t, "LookupToken of the refused credential", err, store.ErrNotFound)
}

func testTokenTouch(t *testing.T, h Harness) {
	_, b := setup(t, h)
	tk := b.createToken(&store.Token{Name: "ops", Role: store.RoleAdmin, Hash: hashN(0)})
	b.clk.Advance(time.Hour)
	used := b.clk.Now()
	if err := b.s.TouchToken(b.ctx, tk.ID, used); err != nil {
		t.Fatalf("TouchToken: %v", err)
	}
	wantTime(t, "LastUsedAt", b.lookupToken(tk.Hash).LastUsedAt, used)
	// A late touch carrying an older time never moves the mark back.
	if err := b.s.TouchToken(b.ctx, tk.ID, used.Add(-time.Minute)); err != nil {
		t.Fatalf("TouchToken: %v", err)
	}
	wantTime(t, "LastUsedAt after an older touch", b.lookupToken(tk.Hash).LastUsedAt, used)
}

func testClaimProjects(t *testing.T, h Harness) {
	_, b := setup(t, h)
	const yaml = "jobs:\n  a: { steps: [ { run: 'true' } ] }\n"
	_, web := b.createRun(yaml, store.CreateRunParams{Project: "web"})
	_, api := b.createRun(yaml, store.CreateRunParams{Project: "api"})
	_, other := b.createRun(yaml, store.CreateRunParams{Project: "other"})
	b.expectNoClaim(store.ClaimParams{Max: 8, Projects: []string{"nosuch"}})
	cs := b.claim(store.ClaimParams{Max: 8, Projects: []string{"web", "api"}})
	got := map[uuid.UUID]bool{}
	for _, c := range cs {
		got[c.Job.ID] = true
	}
	if len(cs) != 2 || !got[web[0].ID] || !got[api[0].ID] {
		t.Fatalf("Claim scoped to web and api took %d jobs, want exactly the web and api ones", len(cs))
	}
	b.expectNoClaim(store.ClaimParams{Max: 8, Projects: []string{"web", "api"}})
	cs = b.claim(store.ClaimParams{Max: 8})
	if len(cs) != 1 || cs[0].Job.ID != other[0].ID {
		t.Fatalf("unscoped Claim took %d jobs, want the other project's one", len(cs))
	}
}
