package storetest

import (
	"bytes"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
)

var secretTests = []test{
	{"PutGetListDelete", testSecretCRUD},
	{"ScopesAreSeparate", testSecretScopes},
	{"Rewrap", testSecretRewrap},
	{"ForksSetting", testSecretsForForks},
	{"GoWithTheirProject", testSecretsGoWithProject},
}

func (b *bundle) project(name string) {
	b.t.Helper()
	if err := b.s.CreateProject(b.ctx, &store.Project{Name: name}); err != nil {
		b.t.Fatalf("CreateProject(%s): %v", name, err)
	}
}

func sealedSecret(project, env, scope, name, fill string) *store.Secret {
	return &store.Secret{Project: project, Environment: env, Scope: scope, Name: name, KeyID: "k1",
		WrappedKey: []byte("wrapped-" + fill), Ciphertext: []byte("ciphertext-" + fill)}
}

func testSecretCRUD(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.project("web")
	s := sealedSecret("web", "", "", "DEPLOY_KEY", "1")
	created, err := b.s.PutSecret(b.ctx, s)
	if err != nil || !created {
		t.Fatalf("PutSecret = %v, %v; want created", created, err)
	}
	wantTime(t, "CreatedAt", s.CreatedAt, b.clk.Now())
	b.clk.Advance(time.Minute)
	again := sealedSecret("web", "", "", "DEPLOY_KEY", "2")
	if created, err := b.s.PutSecret(b.ctx, again); err != nil || created {
		t.Fatalf("second PutSecret = %v, %v; want replaced", created, err)
	}
	got, err := b.s.GetSecret(b.ctx, store.SecretKey{Project: "web", Name: "DEPLOY_KEY"})
	if err != nil {
		t.Fatalf("GetSecret: %v", err)
	}
	if got.Project != "web" || got.ProjectID != s.ProjectID || got.KeyID != "k1" ||
		!bytes.Equal(got.WrappedKey, []byte("wrapped-2")) || !bytes.Equal(got.Ciphertext, []byte("ciphertext-2")) {
		t.Errorf("GetSecret = %+v", got)
	}
	wantTime(t, "CreatedAt after replace", got.CreatedAt, s.CreatedAt)
	wantTime(t, "UpdatedAt after replace", got.UpdatedAt, b.clk.Now())

	if _, err := b.s.PutSecret(b.ctx, sealedSecret("web", "", "", "API_TOKEN", "3")); err != nil {
		t.Fatal(err)
	}
	list, err := b.s.ListSecrets(b.ctx, "web")
	if err != nil || len(list) != 2 || list[0].Name != "API_TOKEN" || list[1].Name != "DEPLOY_KEY" {
		t.Fatalf("ListSecrets = %+v, %v", list, err)
	}
	for _, l := range list {
		if l.WrappedKey != nil || l.Ciphertext != nil {
			t.Errorf("ListSecrets gave %s's sealed value", l.Name)
		}
	}
	_, err = b.s.ListSecrets(b.ctx, "nope")
	wantErr(t, "ListSecrets of an unknown project", err, store.ErrNotFound)
	_, err = b.s.PutSecret(b.ctx, sealedSecret("nope", "", "", "X", "1"))
	wantErr(t, "PutSecret in an unknown project", err, store.ErrNotFound)
	_, err = b.s.PutSecret(b.ctx, &store.Secret{Project: "web", Name: "X"})
	wantErr(t, "PutSecret without a sealed value", err, store.ErrInvalid)

	secretOK(t, "DeleteSecret", b.s.DeleteSecret(b.ctx, store.SecretKey{Project: "web", Name: "DEPLOY_KEY"}))
	wantErr(t, "DeleteSecret twice", b.s.DeleteSecret(b.ctx, store.SecretKey{Project: "web", Name: "DEPLOY_KEY"}), store.ErrNotFound)
	_, err = b.s.GetSecret(b.ctx, store.SecretKey{Project: "web", Name: "DEPLOY_KEY"})
	wantErr(t, "GetSecret of a deleted secret", err, store.ErrNotFound)
}

func testSecretScopes(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.project("web")
	b.project("api")
	for _, s := range []*store.Secret{
		sealedSecret("web", "", "", "TOKEN", "web"),
		sealedSecret("web", "production", "", "TOKEN", "web-prod"),
		sealedSecret("web", "", "run-1", "TOKEN", "web-run"),
		sealedSecret("api", "", "", "TOKEN", "api"),
	} {
		if _, err := b.s.PutSecret(b.ctx, s); err != nil {
			t.Fatalf("PutSecret(%+v): %v", s, err)
		}
	}
	for k, want := range map[store.SecretKey]string{
		{Project: "web", Name: "TOKEN"}:                            "web",
		{Project: "web", Environment: "production", Name: "TOKEN"}: "web-prod",
		{Project: "web", Scope: "run-1", Name: "TOKEN"}:            "web-run",
		{Project: "api", Name: "TOKEN"}:                            "api",
	} {
		got, err := b.s.GetSecret(b.ctx, k)
		if err != nil || string(got.Ciphertext) != "ciphertext-"+want {
			t.Errorf("GetSecret(%+v) = %v, %v; want %s's", k, got, err, want)
		}
	}
	_, err := b.s.GetSecret(b.ctx, store.SecretKey{Project: "api", Environment: "production", Name: "TOKEN"})
	wantErr(t, "GetSecret of another environment", err, store.ErrNotFound)
	list, err := b.s.ListSecrets(b.ctx, "web")
	if err != nil || len(list) != 2 || list[0].Environment != "" || list[1].Environment != "production" {
		t.Fatalf("ListSecrets(web) = %+v, %v; want the two named secrets, not the run's", list, err)
	}
}

func testSecretRewrap(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.project("web")
	if _, err := b.s.PutSecret(b.ctx, sealedSecret("web", "", "", "A", "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.PutSecret(b.ctx, sealedSecret("web", "", "", "B", "b")); err != nil {
		t.Fatal(err)
	}
	todo, err := b.s.SealedSecrets(b.ctx, "k2")
	if err != nil || len(todo) != 2 || string(todo[0].Ciphertext) != "ciphertext-a" {
		t.Fatalf("SealedSecrets = %+v, %v", todo, err)
	}
	ka := store.SecretKey{Project: "web", Name: "A"}
	secretOK(t, "RewrapSecret", b.s.RewrapSecret(b.ctx, ka, "k1", []byte("wrapped-a"), "k2", []byte("wrapped-a2")))
	wantErr(t, "RewrapSecret of a changed secret", b.s.RewrapSecret(b.ctx, ka, "k1", []byte("wrapped-a"), "k2", []byte("x")), store.ErrConflict)
	got, err := b.s.GetSecret(b.ctx, ka)
	if err != nil || got.KeyID != "k2" || string(got.WrappedKey) != "wrapped-a2" || string(got.Ciphertext) != "ciphertext-a" {
		t.Fatalf("after RewrapSecret: %+v, %v", got, err)
	}
	todo, err = b.s.SealedSecrets(b.ctx, "k2")
	if err != nil || len(todo) != 1 || todo[0].Name != "B" {
		t.Fatalf("SealedSecrets after one rewrap = %+v, %v", todo, err)
	}
}

func testSecretsForForks(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.project("web")
	if allow, err := b.s.SecretsForForks(b.ctx, "web"); err != nil || allow {
		t.Fatalf("SecretsForForks of a new project = %v, %v; want false", allow, err)
	}
	secretOK(t, "SetSecretsForForks", b.s.SetSecretsForForks(b.ctx, "web", true))
	if allow, err := b.s.SecretsForForks(b.ctx, "web"); err != nil || !allow {
		t.Fatalf("SecretsForForks after opting in = %v, %v", allow, err)
	}
	wantErr(t, "SetSecretsForForks of an unknown project", b.s.SetSecretsForForks(b.ctx, "nope", true), store.ErrNotFound)
	_, err := b.s.SecretsForForks(b.ctx, "nope")
	wantErr(t, "SecretsForForks of an unknown project", err, store.ErrNotFound)
}

func secretOK(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func testSecretsGoWithProject(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.project("web")
	if _, err := b.s.PutSecret(b.ctx, sealedSecret("web", "", "", "TOKEN", "old")); err != nil {
		t.Fatal(err)
	}
	secretOK(t, "DeleteProject", b.s.DeleteProject(b.ctx, "web"))
	b.project("web")
	_, err := b.s.GetSecret(b.ctx, store.SecretKey{Project: "web", Name: "TOKEN"})
	wantErr(t, "GetSecret in a project made again under a deleted one's name", err, store.ErrNotFound)
	if todo, err := b.s.SealedSecrets(b.ctx, "none"); err != nil || len(todo) != 0 {
		t.Errorf("SealedSecrets after the project was deleted = %d, %v; want none left", len(todo), err)
	}
}
