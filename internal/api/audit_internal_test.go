package api

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
)

// TestAuditHelper: Server.audit, which handlers call for actions the store does not
// record itself (secret.set, secret.read_by_job), names the request's token and address,
// says anonymous without a token, and returns the store's refusal.
func TestAuditHelper(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(context.Background(), sqlitetest.Path(t), sqlite.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	s := New(Config{Store: st})
	t.Cleanup(s.Close)

	r := httptest.NewRequest("PUT", "/api/v1/projects/web/secrets/API_KEY", nil)
	r.RemoteAddr = "203.0.113.9:4242"
	tk := &store.Token{ID: store.NewID(), Name: "ops", Role: store.RoleAdmin}
	authed := r.WithContext(context.WithValue(r.Context(), tokenKey{}, tk))
	if err := s.audit(authed, auditEvent{Action: "secret.set", Project: "web", Target: "API_KEY",
		Details: map[string]any{"environment": "production"}}); err != nil {
		t.Fatalf("audit: %v", err)
	}
	if err := s.audit(r, auditEvent{Action: "secret.deleted", Project: "web", Target: "API_KEY"}); err != nil {
		t.Fatalf("audit without a token: %v", err)
	}
	if err := s.audit(r, auditEvent{Project: "web"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("audit without an action: err = %v, want ErrInvalid", err)
	}
	got, err := st.ListAudit(t.Context(), store.ListAuditParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("entries = %d, want 2", len(got))
	}
	anon, set := got[0], got[1]
	if set.Action != "secret.set" || set.Actor != "ops" || set.ActorID != tk.ID.String() || set.RemoteAddr != "203.0.113.9:4242" ||
		set.Project != "web" || set.Target != "API_KEY" || string(set.Details) != `{"environment":"production"}` {
		t.Errorf("secret.set entry = %+v", set)
	}
	if anon.Actor != store.ActorAnonymous || anon.ActorID != "" || anon.Action != "secret.deleted" {
		t.Errorf("entry without a token = %+v, want by anonymous", anon)
	}
}
