package storetest

import (
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
)

var tokenTests = []test{
	{"CreateAndLookup", testTokens},
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
