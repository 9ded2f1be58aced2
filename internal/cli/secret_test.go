package cli

import (
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/secret"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
)

func writeKeyFile(t *testing.T, path string) []byte {
	t.Helper()
	k := make([]byte, secret.KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(k)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSecretCommands: set (from stdin and from a file, never an argument), list, forks,
// delete against a real server, then rotate-key on its store, after which only the new
// key opens the secret.
func TestSecretCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	oldKeyFile, newKeyFile := filepath.Join(dir, "old.key"), filepath.Join(dir, "new.key")
	writeKeyFile(t, oldKeyFile)
	newKey := writeKeyFile(t, newKeyFile)
	dbPath := filepath.Join(dir, "gantry.db")
	db := "sqlite://" + dbPath
	base, stop := startServer(t, "--db", db, "--secrets-key-file", oldKeyFile)
	srv := []string{"--server", base}
	const value = "cli-secret-value-5150"

	set := runCLI(t, invocation{args: append([]string{"secret", "set", "DEPLOY_KEY", "--project", "web"}, srv...), stdin: value + "\n"})
	if set.code != exitOK || !strings.Contains(set.stdout, "secret DEPLOY_KEY set for project web") {
		t.Fatalf("secret set: %+v", set)
	}
	certFile := filepath.Join(dir, "cert.pem")
	if err := os.WriteFile(certFile, []byte("line-one\nline-two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	set = runCLI(t, invocation{args: append([]string{"secret", "set", "CERT", "--project", "web", "--environment", "production",
		"--from-file", certFile}, srv...)})
	if set.code != exitOK {
		t.Fatalf("secret set --from-file: %+v", set)
	}
	for name, args := range map[string][]string{
		"a value as argument": {"secret", "set", "DEPLOY_KEY", "hunter2", "--project", "web"},
		"lower case":          {"secret", "set", "deploy_key", "--project", "web"},
		"no project":          {"secret", "set", "DEPLOY_KEY"},
		"empty stdin":         {"secret", "set", "EMPTY", "--project", "web"},
	} {
		if out := runCLI(t, invocation{args: append(args, srv...)}); out.code != exitUsage {
			t.Errorf("%s: exit %d, want %d: %s", name, out.code, exitUsage, out.stderr)
		}
	}

	list := runCLI(t, invocation{args: append([]string{"secret", "list", "--project", "web"}, srv...)})
	if list.code != exitOK || !strings.Contains(list.stdout, "DEPLOY_KEY") || !strings.Contains(list.stdout, "CERT") ||
		!strings.Contains(list.stdout, "production") || strings.Contains(list.stdout, value) || strings.Contains(list.stdout, "line-one") {
		t.Fatalf("secret list: %+v", list)
	}
	forks := runCLI(t, invocation{args: append([]string{"secret", "forks", "--project", "web", "on"}, srv...)})
	if forks.code != exitOK || !strings.Contains(forks.stdout, "forks: on") {
		t.Fatalf("secret forks on: %+v", forks)
	}
	del := runCLI(t, invocation{args: append([]string{"secret", "delete", "CERT", "--project", "web", "--environment", "production"}, srv...)})
	if del.code != exitOK {
		t.Fatalf("secret delete: %+v", del)
	}
	// A connected project's webhook secret is sealed under the same key.
	const hookSecret = "cli-webhook-secret-8080"
	hookFile := filepath.Join(dir, "hook.secret")
	if err := os.WriteFile(hookFile, []byte(hookSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	proj := runCLI(t, invocation{args: append([]string{"project", "create", "hooked", "--repo", "https://git.example.com/o/hooked.git",
		"--provider", "github", "--default-branch", "main", "--webhook-secret-file", hookFile}, srv...)})
	if proj.code != exitOK {
		t.Fatalf("project create: %+v", proj)
	}
	// So is an outbound webhook subscription's signing secret.
	const subSecret = "cli-outbound-secret-9090"
	subFile := filepath.Join(dir, "sub.secret")
	if err := os.WriteFile(subFile, []byte(subSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sub := runCLI(t, invocation{args: append([]string{"project", "webhook", "add", "hooked", "--url", "https://audit.example.com/in",
		"--secret-file", subFile}, srv...)})
	if sub.code != exitOK || !strings.Contains(sub.stdout, subSecret) {
		t.Fatalf("project webhook add: %+v", sub)
	}
	if code := stop(); code != exitOK {
		t.Fatalf("server exit %d", code)
	}

	rot := runCLI(t, invocation{args: []string{"secret", "rotate-key", "--db", db, "--secrets-key-file", oldKeyFile, "--new-key-file", newKeyFile}})
	if rot.code != exitOK || !strings.Contains(rot.stdout, "rewrapped 1 secrets under key "+secret.KeyID(newKey)) ||
		!strings.Contains(rot.stdout, "rewrapped 2 webhook secrets under key "+secret.KeyID(newKey)) {
		t.Fatalf("rotate-key: %+v", rot)
	}
	again := runCLI(t, invocation{args: []string{"secret", "rotate-key", "--db", db, "--secrets-key-file", oldKeyFile, "--new-key-file", newKeyFile}})
	if again.code != exitOK || !strings.Contains(again.stdout, "rewrapped 0 secrets") {
		t.Fatalf("rotate-key again: %+v", again)
	}
	st, err := sqlite.Open(t.Context(), dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sc, err := st.GetSecret(t.Context(), store.SecretKey{Project: "web", Name: "DEPLOY_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	kr, _ := secret.NewKeyring(newKey)
	got, err := kr.Open(secret.Sealed{KeyID: sc.KeyID, WrappedKey: sc.WrappedKey, Ciphertext: sc.Ciphertext}, secret.Scope{Project: "web", Name: "DEPLOY_KEY"})
	if err != nil || string(got) != value {
		t.Fatalf("after rotation the new key opens %q, %v", got, err)
	}
	hooked, err := st.GetProjectByName(t.Context(), "hooked")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := secret.ProjectWebhookSecret(kr, hooked); err != nil || string(got) != hookSecret || hooked.WebhookSecret != "" {
		t.Fatalf("after rotation the new key opens the webhook secret as %q, %v (plain column %q)", got, err, hooked.WebhookSecret)
	}
	subs, err := st.ListWebhooks(t.Context(), hooked.ID)
	if err != nil || len(subs) != 1 {
		t.Fatalf("ListWebhooks = %v, %v", subs, err)
	}
	if got, err := secret.WebhookSubscriptionSecret(kr, subs[0]); err != nil || string(got) != subSecret || subs[0].Secret != "" ||
		subs[0].SecretSealed.KeyID != secret.KeyID(newKey) {
		t.Fatalf("after rotation the new key opens the subscription's secret as %q, %v (plain column %q, key %s)",
			got, err, subs[0].Secret, subs[0].SecretSealed.KeyID)
	}
	raw, err := os.ReadFile(dbPath)
	if err != nil || strings.Contains(string(raw), value) || strings.Contains(string(raw), hookSecret) || strings.Contains(string(raw), subSecret) {
		t.Fatalf("the database holds a value (%v)", err)
	}
}

func TestParseSecretEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{"TOKEN": "from-env"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	got, err := parseSecretEnv([]string{"TOKEN", "OTHER=x=y"}, lookup)
	if err != nil || got["TOKEN"] != "from-env" || got["OTHER"] != "x=y" {
		t.Fatalf("parseSecretEnv = %v, %v", got, err)
	}
	for _, bad := range []string{"MISSING", "=v"} {
		if _, err := parseSecretEnv([]string{bad}, lookup); err == nil {
			t.Errorf("parseSecretEnv(%q) accepted", bad)
		}
	}
}

// TestUpMakesASecretsKey: gantry up and gantry run make a 0600 key in their data dir on
// first use and keep using it; gantry server without a key leaves secrets off.
func TestUpMakesASecretsKey(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	sc := (&upConfig{Data: data}).server()
	log := newLogger(&strings.Builder{}, "info", "")
	kr, err := sc.secretsKeyring(log)
	if err != nil || kr == nil {
		t.Fatalf("secretsKeyring = %v, %v", kr, err)
	}
	fi, err := os.Stat(filepath.Join(data, "secrets.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", fi, err)
	}
	again, err := sc.secretsKeyring(log)
	if err != nil || again.PrimaryID() != kr.PrimaryID() {
		t.Fatalf("second start uses another key: %v", err)
	}
	off, err := (&serverConfig{}).secretsKeyring(log)
	if err != nil || off != nil {
		t.Fatalf("server without a key: %v, %v", off, err)
	}
}
