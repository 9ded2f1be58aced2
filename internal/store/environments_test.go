package store_test

import (
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
)

// TestEnvironmentGate: the one policy for a job entering an environment, refs and their
// verification included.
func TestEnvironmentGate(t *testing.T) {
	t.Parallel()
	rules := &store.Environment{Name: "production", Branches: []string{"main"}, Tags: []string{"v*"}}
	approvals := &store.Environment{Name: "production", RequiredApprovals: 1, Approvers: []string{"alice"}}
	const notVerified = " is not verified (it came from no signed webhook, no read of the repository and no admin) and may not deploy to production"
	tests := []struct {
		name string
		env  *store.Environment
		tr   store.Trigger
		want store.Gate
	}{
		{"undefined", nil, store.Trigger{Branch: "dev"}, store.Gate{}},
		{"main from a webhook", rules, store.Trigger{Branch: "main", Verified: store.RefFromWebhook}, store.Gate{}},
		{"main from the repository", rules, store.Trigger{Branch: "main", Verified: store.RefFromRepository}, store.Gate{}},
		{"a tag from the admin", rules, store.Trigger{Tag: "v1", Verified: store.RefFromAdmin}, store.Gate{}},
		{"main by hand", rules, store.Trigger{Branch: "main"}, store.Gate{Fail: "branch main" + notVerified}},
		{"a tag by hand", rules, store.Trigger{Tag: "v1"}, store.Gate{Fail: "tag v1" + notVerified}},
		{"an unknown source", rules, store.Trigger{Branch: "main", Verified: "trust-me"}, store.Gate{Fail: "branch main" + notVerified}},
		{"another branch by hand", rules, store.Trigger{Branch: "dev"}, store.Gate{Fail: "branch dev may not deploy to production"}},
		{"another branch verified", rules, store.Trigger{Branch: "dev", Verified: store.RefFromWebhook}, store.Gate{Fail: "branch dev may not deploy to production"}},
		{"no rules, by hand", approvals, store.Trigger{Branch: "main"}, store.Gate{Wait: true}},
	}
	for _, tt := range tests {
		if got := tt.env.Gate(tt.tr); got != tt.want {
			t.Errorf("%s: Gate = %+v; want %+v", tt.name, got, tt.want)
		}
	}
}

// TestSelfReview: who the author of a run is, and when an environment refuses their
// approval.
func TestSelfReview(t *testing.T) {
	t.Parallel()
	prevent := &store.Environment{Name: "production", PreventSelfReview: true}
	allow := &store.Environment{Name: "production"}
	submitted := store.Trigger{Branch: "main", User: "alice", Actor: "alice-laptop"}
	pushed := store.Trigger{Branch: "main", Actor: "mona", Verified: store.RefFromWebhook}
	tests := []struct {
		name     string
		env      *store.Environment
		d        store.Decision
		approver string
		tr       store.Trigger
		want     bool
	}{
		{"the submitter approves", prevent, store.Approved, "alice", submitted, true},
		{"the submitter's token name is not a user", prevent, store.Approved, "alice-laptop", submitted, false},
		{"another approves", prevent, store.Approved, "bob", submitted, false},
		{"the submitter rejects", prevent, store.Rejected, "alice", submitted, false},
		{"allowed by default", allow, store.Approved, "alice", submitted, false},
		{"no environment", nil, store.Approved, "alice", submitted, false},
		{"the pusher approves", prevent, store.Approved, "mona", pushed, true},
		{"an actor not from a forge", prevent, store.Approved, "mona", store.Trigger{Actor: "mona"}, false},
		{"no author known", prevent, store.Approved, "", store.Trigger{}, false},
	}
	for _, tt := range tests {
		if got := tt.env.SelfReview(tt.d, tt.approver, tt.tr); got != tt.want {
			t.Errorf("%s: SelfReview = %v; want %v (author %q)", tt.name, got, tt.want, tt.tr.Author())
		}
	}
}

// TestNoRules: a job naming an environment its project does not define is told so, by
// name and project; one naming a defined environment, or none, is told nothing.
func TestNoRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, env string
		defined   *store.Environment
		want      string
	}{
		{"undefined", "production", nil, "environment production is not defined in project web: it has no rules"},
		{"defined without rules", "production", &store.Environment{Name: "production"}, ""},
		{"no environment named", "", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := store.NoRules("web", tt.env, tt.defined); got != tt.want {
				t.Errorf("NoRules(web, %q) = %q, want %q", tt.env, got, tt.want)
			}
		})
	}
}
