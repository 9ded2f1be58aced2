package store_test

import (
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
)

func TestEffectiveRole(t *testing.T) {
	t.Parallel()
	all := []string{store.ScopeAll}
	ab := []string{"a", "b"}
	tests := []struct {
		name string
		g    store.Grant
		want store.Role
	}{
		{"admin is the server admin", store.Grant{Role: store.RoleAdmin, Project: "a"}, store.RoleAdmin},
		{"admin ignores a scope", store.Grant{Role: store.RoleAdmin, Scope: []string{"b"}, Project: "a"}, store.RoleAdmin},
		{"register has no project role", store.Grant{Role: store.RoleRegister, Scope: all, Project: "a"}, ""},
		{"agent has no project role", store.Grant{Role: store.RoleAgent, Member: store.RoleMaintainer, Project: "a"}, ""},
		{"unknown role has none", store.Grant{Role: "root", Scope: all, Project: "a"}, ""},
		{"read without scope is viewer everywhere", store.Grant{Role: store.RoleRead, Project: "a"}, store.RoleViewer},
		{"write without scope is developer everywhere", store.Grant{Role: store.RoleWrite, Project: "a"}, store.RoleDeveloper},
		{"write scoped elsewhere has none", store.Grant{Role: store.RoleWrite, Scope: []string{"b"}, Project: "a"}, ""},
		{"write scoped here is developer", store.Grant{Role: store.RoleWrite, Scope: ab, Project: "a"}, store.RoleDeveloper},
		{"scope all grants the role", store.Grant{Role: store.RoleMaintainer, Scope: all, Project: "a"}, store.RoleMaintainer},
		{"named scope grants the role", store.Grant{Role: store.RoleDeveloper, Scope: ab, Project: "b"}, store.RoleDeveloper},
		{"named scope grants nothing elsewhere", store.Grant{Role: store.RoleDeveloper, Scope: ab, Project: "c"}, ""},
		{"named scope is not widened by membership", store.Grant{Role: store.RoleDeveloper, Scope: ab, Project: "c", Member: store.RoleMaintainer}, ""},
		{"named scope is not lowered by membership", store.Grant{Role: store.RoleMaintainer, Scope: ab, Project: "a", Member: store.RoleViewer}, store.RoleMaintainer},
		{"names match exactly", store.Grant{Role: store.RoleViewer, Scope: []string{"A"}, Project: "a"}, ""},
		{"no scope, not a member: none", store.Grant{Role: store.RoleMaintainer, Project: "a"}, ""},
		{"no scope, member below the token: the member's", store.Grant{Role: store.RoleMaintainer, Project: "a", Member: store.RoleDeveloper}, store.RoleDeveloper},
		{"no scope, member above the token: the token's", store.Grant{Role: store.RoleViewer, Project: "a", Member: store.RoleMaintainer}, store.RoleViewer},
		{"no scope, member equal", store.Grant{Role: store.RoleDeveloper, Project: "a", Member: store.RoleDeveloper}, store.RoleDeveloper},
		{"a membership is never admin", store.Grant{Role: store.RoleMaintainer, Project: "a", Member: store.RoleAdmin}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := store.EffectiveRole(tc.g); got != tc.want {
				t.Errorf("EffectiveRole(%+v) = %q, want %q", tc.g, got, tc.want)
			}
		})
	}
}

func TestTokenGlobal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tk   store.Token
		want bool
	}{
		{store.Token{Role: store.RoleAdmin}, true},
		{store.Token{Role: store.RoleRead}, true},
		{store.Token{Role: store.RoleWrite}, true},
		{store.Token{Role: store.RoleWrite, Projects: []string{"a"}}, false},
		{store.Token{Role: store.RoleViewer}, false},
		{store.Token{Role: store.RoleViewer, Projects: []string{store.ScopeAll}}, true},
		{store.Token{Role: store.RoleMaintainer, Projects: []string{"a", "b"}}, false},
		{store.Token{Role: store.RoleRegister}, false},
		{store.Token{Role: store.RoleAgent, Projects: []string{store.ScopeAll}}, false},
	}
	for _, tc := range tests {
		if got := tc.tk.Global(); got != tc.want {
			t.Errorf("Token{Role: %s, Projects: %q}.Global() = %v, want %v", tc.tk.Role, tc.tk.Projects, got, tc.want)
		}
	}
}
