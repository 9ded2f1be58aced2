package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokenCommands: create a scoped register token, list it (never its secret), revoke
// it; bad input is a usage error.
func TestTokenCommands(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "gantry.db")
	created := runCLI(t, invocation{args: []string{"token", "create", "--db", db, "--role", "register", "--name", "web fleet",
		"--labels", "linux, amd64", "--projects", "web,api", "--expires-in", "720h"}})
	secret := strings.TrimSpace(created.stdout)
	if created.code != exitOK || !strings.HasPrefix(secret, "gtk_") {
		t.Fatalf("token create: exit %d, stdout %q, stderr %s", created.code, created.stdout, created.stderr)
	}

	table := runCLI(t, invocation{args: []string{"token", "list", "--db", db}})
	if table.code != exitOK || strings.Contains(table.stdout, secret) ||
		!strings.Contains(table.stdout, "web fleet") || !strings.Contains(table.stdout, "labels=linux,amd64 projects=web,api") {
		t.Fatalf("token list: exit %d\n%s%s", table.code, table.stdout, table.stderr)
	}
	raw := runCLI(t, invocation{args: []string{"token", "list", "--db", db, "--json"}})
	var list struct {
		Tokens []struct {
			ID        string   `json:"id"`
			Role      string   `json:"role"`
			ExpiresAt string   `json:"expires_at"`
			RevokedAt string   `json:"revoked_at"`
			Projects  []string `json:"projects"`
		} `json:"tokens"`
	}
	if err := json.Unmarshal([]byte(raw.stdout), &list); err != nil || len(list.Tokens) != 1 {
		t.Fatalf("token list --json: %v\n%s", err, raw.stdout)
	}
	tk := list.Tokens[0]
	if tk.Role != "register" || tk.ExpiresAt == "" || tk.RevokedAt != "" || strings.Join(tk.Projects, ",") != "web,api" || strings.Contains(raw.stdout, secret) {
		t.Errorf("listed token = %+v", tk)
	}

	if r := runCLI(t, invocation{args: []string{"token", "revoke", "--db", db, tk.ID}}); r.code != exitOK || r.stdout != "revoked "+tk.ID+"\n" {
		t.Fatalf("token revoke: exit %d, %s%s", r.code, r.stdout, r.stderr)
	}
	raw = runCLI(t, invocation{args: []string{"token", "list", "--db", db, "--json"}})
	if !strings.Contains(raw.stdout, `"revoked_at"`) {
		t.Errorf("after revoke the list shows no revoked_at: %s", raw.stdout)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"token", "create", "--db", db, "--role", "admin", "--name", "x", "--labels", "linux"}, exitUsage, "--labels and --projects scope register tokens only"},
		{[]string{"token", "create", "--db", db, "--role", "register", "--name", "x", "--expires-in", "-1h"}, exitUsage, "--expires-in -1h0m0s"},
		{[]string{"token", "create", "--db", db, "--role", "agent", "--name", "x"}, exitUsage, `--role "agent"`},
		{[]string{"token", "revoke", "--db", db, "nope"}, exitUsage, `token id "nope" is not a UUID`},
		{[]string{"token", "revoke", "--db", db, "0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b"}, exitFailure, "no token 0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b"},
	} {
		r := runCLI(t, invocation{args: tc.args})
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
}
