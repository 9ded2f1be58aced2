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

// TestTokenCommandsOverServer: with --server, gantry token creates, lists and revokes
// over the coordinator's API: an admin any token, a maintainer those of its projects
// only; --server beside --db is a usage error.
func TestTokenCommandsOverServer(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "gantry.db")
	local := func(args ...string) string {
		t.Helper()
		r := runCLI(t, invocation{args: append([]string{"token", "create", "--db", db}, args...)})
		if r.code != exitOK {
			t.Fatalf("token create %q: exit %d: %s", args, r.code, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	admin := local("--role", "admin", "--name", "ops")
	lead := local("--role", "maintainer", "--project", "web", "--name", "web-lead")
	base, stop := startServer(t, "--db", db, "--auth", "on")
	defer stop()
	as := func(secret string, args ...string) outcome {
		t.Helper()
		return runCLI(t, invocation{args: append(args, "--server", base, "--token", secret)})
	}
	pipeline := writeFiles(t, map[string]string{"p.yml": "name: p\njobs:\n  a:\n    steps: [{run: \"true\"}]\n"})["p.yml"]
	for _, p := range []string{"web", "api"} {
		if r := as(admin, "submit", pipeline, "--project", p); r.code != exitOK {
			t.Fatalf("submit to %s: exit %d: %s", p, r.code, r.stderr)
		}
	}

	r := as(lead, "token", "create", "--role", "developer", "--project", "web", "--name", "web-ci", "--expires", "720h")
	ci := strings.TrimSpace(r.stdout)
	if r.code != exitOK || !strings.HasPrefix(ci, "gtk_") {
		t.Fatalf("a maintainer's token create: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	if r := as(ci, "runs", "--project", "web"); r.code != exitOK {
		t.Errorf("the new token cannot read web's runs: exit %d: %s", r.code, r.stderr)
	}
	if r := as(lead, "token", "create", "--role", "developer", "--project", "api", "--name", "x"); r.code != exitFailure ||
		!strings.Contains(r.stderr, "403") || !strings.Contains(r.stderr, "you do not maintain project api") {
		t.Errorf("a token of api by web's maintainer: exit %d, stderr %q", r.code, r.stderr)
	}

	r = as(lead, "token", "list", "--json")
	var list struct {
		Tokens []struct {
			ID, Name, Role string
			Projects       []string
		} `json:"tokens"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); r.code != exitOK || err != nil {
		t.Fatalf("token list --json: exit %d, %v: %s%s", r.code, err, r.stdout, r.stderr)
	}
	var names []string
	ciID := ""
	for _, tk := range list.Tokens {
		names = append(names, tk.Name)
		if tk.Name == "web-ci" {
			ciID = tk.ID
		}
	}
	if strings.Join(names, ",") != "web-lead,web-ci" || strings.Contains(r.stdout, ci) {
		t.Errorf("the maintainer lists %q (want web-lead and web-ci, no secret)", names)
	}
	if r := as(admin, "token", "list"); r.code != exitOK || !strings.Contains(r.stdout, "ops") || !strings.Contains(r.stdout, "projects=web") {
		t.Errorf("the admin's table: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := as(lead, "token", "revoke", ciID); r.code != exitOK || r.stdout != "revoked "+ciID+"\n" {
		t.Fatalf("token revoke: exit %d: %q %s", r.code, r.stdout, r.stderr)
	}
	if r := as(ci, "runs", "--project", "web"); r.code == exitOK {
		t.Error("the revoked token still reads runs")
	}
	if r := runCLI(t, invocation{args: []string{"token", "list", "--server", base, "--db", db}}); r.code != exitUsage ||
		!strings.Contains(r.stderr, "--server and --db both") {
		t.Errorf("--server with --db: exit %d, stderr %q", r.code, r.stderr)
	}
}
