package api_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/secret"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
)

// TestWebhookSecretsSealed: with a secrets key a project's webhook secret is stored
// sealed (no byte of it in the database's files) and deliveries verify against it; a
// plain-text secret from before sealing keeps verifying, and is sealed by the first
// delivery a coordinator with a key verifies, or when one starts (SealWebhookSecrets); a
// key rotation rewraps them, after which the new key alone verifies; a sealed secret a
// coordinator cannot open refuses the hook saying so.
func TestWebhookSecretsSealed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "gantry.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	mirrors := t.TempDir()
	serve := func(keys *secret.Keyring) *bundle {
		srv := httptest.NewServer(api.New(api.Config{Store: st, Logger: testLogger(t), Clock: clock.Real{}, MirrorsDir: mirrors, Secrets: keys}).Handler())
		t.Cleanup(srv.Close)
		return &bundle{store: st, url: srv.URL}
	}
	rawA, rawB := make([]byte, secret.KeySize), make([]byte, secret.KeySize)
	for _, k := range [][]byte{rawA, rawB} {
		if _, err := rand.Read(k); err != nil {
			t.Fatal(err)
		}
	}
	keyA, err := secret.NewKeyring(rawA)
	if err != nil {
		t.Fatal(err)
	}
	withA, withNone := serve(keyA), serve(nil)
	ping, _ := json.Marshal(map[string]any{"zen": "Design for failure.", "hook_id": 1,
		"repository": map[string]any{"full_name": "octo-org/app"}, "sender": map[string]any{"login": "mona"}})
	verifies := func(b *bundle, project, secretValue string) {
		t.Helper()
		wantHook(t, b.sendGitHub(t, project, "ping", "", secretValue, ping), http.StatusOK, false)
	}
	read := func(name string) *store.Project {
		t.Helper()
		p, err := st.GetProjectByName(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	p := withA.createProject(t, map[string]any{"name": "app", "repo_url": "https://git.example.com/app.git", "provider": "github", "default_branch": "main"})
	if p.WebhookSecret == "" {
		t.Fatal("the create answer shows no webhook secret")
	}
	if got := read("app"); got.WebhookSecret != "" || got.WebhookSecretSealed.IsZero() ||
		bytes.Contains(got.WebhookSecretSealed.Ciphertext, []byte(p.WebhookSecret)) {
		t.Errorf("stored project holds %q, %+v; want only a sealed secret", got.WebhookSecret, got.WebhookSecretSealed)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "gantry.db*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(p.WebhookSecret)) {
			t.Errorf("%s holds the webhook secret in plain text", filepath.Base(f))
		}
	}
	verifies(withA, "app", p.WebhookSecret)
	expectError(t, withA.sendGitHub(t, "app", "ping", "", "not-the-secret", ping), http.StatusUnauthorized, "unauthorized")
	// A coordinator without the key cannot verify it: the forge gets the answer of any
	// delivery that does not prove itself (the log says why), not one that tells a
	// stranger the project exists.
	r := withNone.sendGitHub(t, "app", "ping", "", p.WebhookSecret, ping)
	expectError(t, r, http.StatusUnauthorized, "unauthorized")
	if nope := withNone.sendGitHub(t, "nope", "ping", "", p.WebhookSecret, ping); !bytes.Equal(r.body, nope.body) {
		t.Errorf("answer without a key: %s; want the one a missing project gets: %s", r.body, nope.body)
	}

	// A rotated secret is sealed too and the old one stops verifying.
	rot := withA.do(t, http.MethodPatch, "/api/v1/projects/app", "application/json", `{"rotate_webhook_secret": true}`, nil)
	var rotated projectView
	rot.decode(t, &rotated)
	if rotated.WebhookSecret == "" || rotated.WebhookSecret == p.WebhookSecret || read("app").WebhookSecret != "" {
		t.Fatalf("rotate: %s", rot.body)
	}
	verifies(withA, "app", rotated.WebhookSecret)
	expectError(t, withA.sendGitHub(t, "app", "ping", "", p.WebhookSecret, ping), http.StatusUnauthorized, "unauthorized")
	// An update that leaves the secret alone keeps it.
	if r := withA.do(t, http.MethodPatch, "/api/v1/projects/app", "application/json", `{"pipeline_path": "ci.yml"}`, nil); r.status != http.StatusOK ||
		strings.Contains(string(r.body), `"webhook_secret":`) {
		t.Fatalf("update: %d %s", r.status, r.body)
	}
	verifies(withA, "app", rotated.WebhookSecret)

	// Rows from before sealing hold plain text: they verify everywhere, and are sealed by
	// a delivery a coordinator with a key verifies, or by SealWebhookSecrets.
	for _, name := range []string{"legacy", "legacy2"} {
		if err := st.CreateProject(ctx, &store.Project{Name: name, RepoURL: "https://git.example.com/" + name + ".git", Provider: "github",
			WebhookSecret: name + "-plain-secret"}); err != nil {
			t.Fatal(err)
		}
	}
	verifies(withNone, "legacy", "legacy-plain-secret")
	if read("legacy").WebhookSecret == "" {
		t.Error("a coordinator without a key sealed a secret")
	}
	verifies(withA, "legacy", "legacy-plain-secret")
	if got := read("legacy"); got.WebhookSecret != "" || got.WebhookSecretSealed.KeyID != keyA.PrimaryID() {
		t.Errorf("after a verified delivery the legacy secret is %q, %+v; want sealed", got.WebhookSecret, got.WebhookSecretSealed)
	}
	verifies(withA, "legacy", "legacy-plain-secret")
	sealed, rewrapped, failed, err := keyA.SealWebhookSecrets(ctx, st)
	if err != nil || sealed != 1 || rewrapped != 0 || failed != 0 {
		t.Errorf("SealWebhookSecrets = %d sealed, %d rewrapped, %d failed, %v; want legacy2 sealed", sealed, rewrapped, failed, err)
	}
	if read("legacy2").WebhookSecret != "" {
		t.Error("legacy2 is still plain text")
	}
	verifies(withA, "legacy2", "legacy2-plain-secret")

	// Rotation: the new key first, the old one to open; then the new key alone verifies.
	keyB, err := secret.NewKeyring(rawB)
	if err != nil {
		t.Fatal(err)
	}
	both, err := secret.NewKeyring(rawB, rawA)
	if err != nil {
		t.Fatal(err)
	}
	if sealed, rewrapped, failed, err := both.SealWebhookSecrets(ctx, st); err != nil || sealed != 0 || rewrapped != 3 || failed != 0 {
		t.Errorf("rotation = %d sealed, %d rewrapped, %d failed, %v; want 3 rewrapped", sealed, rewrapped, failed, err)
	}
	withB := serve(keyB)
	verifies(withB, "app", rotated.WebhookSecret)
	verifies(withB, "legacy", "legacy-plain-secret")
	verifies(withB, "legacy2", "legacy2-plain-secret")
	expectError(t, withA.sendGitHub(t, "app", "ping", "", rotated.WebhookSecret, ping), http.StatusUnauthorized, "unauthorized")
	if sealed, rewrapped, failed, err := keyA.SealWebhookSecrets(ctx, st); err != nil || sealed+rewrapped != 0 || failed != 3 {
		t.Errorf("the old key alone = %d sealed, %d rewrapped, %d failed, %v; want 3 it cannot open", sealed, rewrapped, failed, err)
	}
}

// TestWebhookSubscriptionSecretsSealed: with a secrets key an outbound webhook
// subscription's secret is stored sealed (no byte of it in the database's files) while the
// create answer still shows it once; without a key it is stored as given, and such a
// plain-text one is sealed when a coordinator with a key starts (SealWebhookSecrets); a
// key rotation rewraps them, after which the new key alone opens them.
func TestWebhookSubscriptionSecretsSealed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "gantry.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	serve := func(keys *secret.Keyring) *bundle {
		srv := httptest.NewServer(api.New(api.Config{Store: st, Logger: testLogger(t), Clock: clock.Real{}, MirrorsDir: t.TempDir(), Secrets: keys}).Handler())
		t.Cleanup(srv.Close)
		return &bundle{store: st, url: srv.URL}
	}
	rawA, rawB := make([]byte, secret.KeySize), make([]byte, secret.KeySize)
	for _, k := range [][]byte{rawA, rawB} {
		if _, err := rand.Read(k); err != nil {
			t.Fatal(err)
		}
	}
	keyA, err := secret.NewKeyring(rawA)
	if err != nil {
		t.Fatal(err)
	}
	withA, withNone := serve(keyA), serve(nil)
	proj := withA.createProject(t, map[string]any{"name": "app", "repo_url": "https://git.example.com/app.git", "provider": "github", "default_branch": "main"})
	add := func(b *bundle, body string) (id, secretValue string) {
		t.Helper()
		r := b.do(t, http.MethodPost, "/api/v1/projects/app/webhooks", "application/json", body, nil)
		if r.status != http.StatusCreated {
			t.Fatalf("add webhook: %d %s", r.status, r.body)
		}
		var h struct{ ID, Secret string }
		r.decode(t, &h)
		if h.Secret == "" {
			t.Fatalf("the add answer shows no secret: %s", r.body)
		}
		return h.ID, h.Secret
	}
	sealedID, made := add(withA, `{"url": "https://hooks.example.com/made"}`)
	givenID, given := add(withA, `{"url": "https://hooks.example.com/given", "secret": "given-outbound-secret-1234"}`)
	legacyID, legacy := add(withNone, `{"url": "https://hooks.example.com/legacy", "secret": "legacy-outbound-secret-5678"}`)
	if given != "given-outbound-secret-1234" {
		t.Errorf("the add answer shows %q, want the secret given", given)
	}
	byID := func() map[string]*store.Webhook {
		t.Helper()
		p, err := st.GetProjectByName(ctx, "app")
		if err != nil {
			t.Fatal(err)
		}
		hooks, err := st.ListWebhooks(ctx, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*store.Webhook{}
		for _, h := range hooks {
			out[h.ID.String()] = h
		}
		return out
	}
	// opens says keys open each subscription's secret to what was shown at its creation.
	want := map[string]string{sealedID: made, givenID: given, legacyID: legacy}
	opens := func(keys *secret.Keyring) {
		t.Helper()
		for id, h := range byID() {
			got, err := secret.WebhookSubscriptionSecret(keys, h)
			if err != nil || string(got) != want[id] || h.Secret != "" {
				t.Errorf("subscription %s opens as %q, %v (plain column %q); want %q", h.URL, got, err, h.Secret, want[id])
			}
		}
	}
	hooks := byID()
	for _, id := range []string{sealedID, givenID} {
		if h := hooks[id]; h.Secret != "" || h.SecretSealed.KeyID != keyA.PrimaryID() {
			t.Errorf("subscription %s stored with %q, %+v; want only a sealed secret", h.URL, h.Secret, h.SecretSealed)
		}
	}
	if h := hooks[legacyID]; h.Secret != legacy || !h.SecretSealed.IsZero() {
		t.Errorf("a coordinator without a key stored %q, %+v; want the plain text", h.Secret, h.SecretSealed)
	}

	// The first coordinator with a key seals the plain one.
	sealed, rewrapped, failed, err := keyA.SealWebhookSecrets(ctx, st)
	if err != nil || sealed != 1 || rewrapped != 0 || failed != 0 {
		t.Errorf("SealWebhookSecrets = %d sealed, %d rewrapped, %d failed, %v; want the legacy subscription sealed", sealed, rewrapped, failed, err)
	}
	opens(keyA)
	files, _ := filepath.Glob(filepath.Join(dir, "gantry.db*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{made, given, proj.WebhookSecret} {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds a webhook secret in plain text", filepath.Base(f))
			}
		}
	}

	// Rotation: the project's secret and the three subscriptions' are rewrapped.
	keyB, err := secret.NewKeyring(rawB)
	if err != nil {
		t.Fatal(err)
	}
	both, err := secret.NewKeyring(rawB, rawA)
	if err != nil {
		t.Fatal(err)
	}
	if sealed, rewrapped, failed, err := both.SealWebhookSecrets(ctx, st); err != nil || sealed != 0 || rewrapped != 4 || failed != 0 {
		t.Errorf("rotation = %d sealed, %d rewrapped, %d failed, %v; want 4 rewrapped", sealed, rewrapped, failed, err)
	}
	opens(keyB)
	if sealed, rewrapped, failed, err := keyA.SealWebhookSecrets(ctx, st); err != nil || sealed+rewrapped != 0 || failed != 4 {
		t.Errorf("the old key alone = %d sealed, %d rewrapped, %d failed, %v; want 4 it cannot open", sealed, rewrapped, failed, err)
	}
}
