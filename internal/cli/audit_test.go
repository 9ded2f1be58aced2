package cli

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAuditCommand: tokens made and revoked with gantry token --db and a project made,
// updated and deleted over the API show in gantry audit, filtered and paged, as a table
// and as JSON, against a real server with auth on; a non-admin token is refused.
func TestAuditCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite://" + filepath.Join(dir, "gantry.db")
	token := func(role, name string) string {
		t.Helper()
		r := runCLI(t, invocation{args: []string{"token", "create", "--db", db, "--role", role, "--name", name}})
		if r.code != exitOK {
			t.Fatalf("token create %s: exit %d: %s", name, r.code, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	admin, writer := token("admin", "ops"), token("write", "ci")
	base, stop := startServer(t, "--db", db, "--auth", "on")
	defer stop()
	cli := func(secret string, args ...string) outcome {
		t.Helper()
		return runCLI(t, invocation{args: append(args, "--server", base, "--token", secret)})
	}
	for _, args := range [][]string{
		{"project", "create", "web", "--repo", "https://github.com/acme/web.git", "--default-branch", "main"},
		{"project", "update", "web", "--pipeline", "ci/gantry.yml"},
		{"project", "delete", "web"},
	} {
		if r := cli(admin, args...); r.code != exitOK {
			t.Fatalf("%q: exit %d: %s", args, r.code, r.stderr)
		}
	}
	list := func(args ...string) []auditView {
		t.Helper()
		r := cli(admin, append([]string{"audit", "--json"}, args...)...)
		var page struct {
			Entries []auditView `json:"entries"`
		}
		if r.code != exitOK {
			t.Fatalf("audit %q: exit %d: %s", args, r.code, r.stderr)
		}
		if err := json.Unmarshal([]byte(r.stdout), &page); err != nil {
			t.Fatalf("audit %q --json: %v\n%s", args, err, r.stdout)
		}
		return page.Entries
	}
	actions := func(es []auditView) []string {
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = e.Action
		}
		return out
	}
	all := list()
	want := []string{"project.deleted", "project.updated", "project.created", "token.created", "token.created"}
	if !slices.Equal(actions(all), want) {
		t.Fatalf("audit = %q, want %q", actions(all), want)
	}
	for _, e := range all[:3] {
		if e.Actor != "ops" || e.ActorID == "" || e.Project != "web" || !strings.HasPrefix(e.RemoteAddr, "127.0.0.1:") {
			t.Errorf("%s: %+v, want by ops from 127.0.0.1 on web", e.Action, e)
		}
	}
	// The tokens were made on the store directly: by local, with no address.
	for _, e := range all[3:] {
		var d map[string]any
		_ = json.Unmarshal(e.Details, &d)
		if e.Actor != "local" || e.RemoteAddr != "" || d["via"] != "gantry token create" || d["os_user"] == "" {
			t.Errorf("%s: %+v, want by local via gantry token create", e.Action, e)
		}
	}
	for _, s := range []string{admin, writer} {
		if strings.Contains(string(all[3].Details)+string(all[4].Details), s) {
			t.Error("a token's secret is in the audit log")
		}
	}

	// Only admins read the log.
	if r := cli(writer, "audit"); r.code != exitFailure || !strings.Contains(r.stderr, "403") {
		t.Errorf("audit with a write token: exit %d, stderr %s", r.code, r.stderr)
	}

	// Revoking (on the store) records the token's id as the target.
	ciID := all[3].Target
	if r := runCLI(t, invocation{args: []string{"token", "revoke", "--db", db, ciID}}); r.code != exitOK {
		t.Fatalf("token revoke: exit %d: %s", r.code, r.stderr)
	}
	if got := list("--action", "token.revoked"); len(got) != 1 || got[0].Target != ciID || got[0].Actor != "local" {
		t.Errorf("audit --action token.revoked = %+v, want the revocation of %s by local", got, ciID)
	}
	if got := actions(list("--action", "project", "--actor", "ops")); !slices.Equal(got, want[:3]) {
		t.Errorf("audit --action project --actor ops = %q, want %q", got, want[:3])
	}
	if got := list("--project", "api"); len(got) != 0 {
		t.Errorf("audit --project api = %+v, want none", got)
	}
	if got := list("--since", "1h"); len(got) != 6 {
		t.Errorf("audit --since 1h = %d entries, want 6", len(got))
	}
	if got := list("--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)); len(got) != 0 {
		t.Errorf("audit --since an hour ahead = %d entries, want none", len(got))
	}

	// The table, a page at a time: the next page's command is on stderr.
	r := cli(admin, "audit", "--action", "project", "--limit", "2")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "TIME ") || !strings.Contains(r.stdout, "project.deleted") ||
		!strings.Contains(r.stdout, "project.updated") || strings.Contains(r.stdout, "project.created") ||
		!strings.Contains(r.stdout, `{"changed":["pipeline_path"]}`) {
		t.Fatalf("audit table: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	m := regexp.MustCompile(`^more: gantry audit --action project --limit 2 --before (\S+)\n$`).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("audit table: stderr %q, want the next page's command", r.stderr)
	}
	r = cli(admin, "audit", "--action", "project", "--limit", "2", "--before", m[1])
	if r.code != exitOK || !strings.Contains(r.stdout, "project.created") || strings.Contains(r.stdout, "project.deleted") || r.stderr != "" {
		t.Errorf("second page: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := cli(admin, "audit", "--actor", "nobody"); r.code != exitOK || r.stdout != "no audit entries\n" {
		t.Errorf("audit of nobody: exit %d %q %s", r.code, r.stdout, r.stderr)
	}

	// Bad flags are usage errors; a bad filter is the server's 400.
	for _, args := range [][]string{
		{"audit", "--limit", "0"},
		{"audit", "--since", "yesterday"},
		{"audit", "--since", "-1h"},
		{"audit", "--before", "nope"},
		{"audit", "extra"},
	} {
		if r := cli(admin, args...); r.code != exitUsage {
			t.Errorf("%q: exit %d, want %d; stderr %s", args, r.code, exitUsage, r.stderr)
		}
	}
	if r := cli(admin, "audit", "--action", "Token!"); r.code != exitFailure || !strings.Contains(r.stderr, "action filter") {
		t.Errorf("audit --action Token!: exit %d, stderr %s", r.code, r.stderr)
	}
}

func TestAuditCell(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"": "-", "ops": "ops", "a\tb": `"a\tb"`, "x\x1b[31m": `"x\x1b[31m"`} {
		if got := cell(in); got != want {
			t.Errorf("cell(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"web": "web", "2026-01-02T15:04:05Z": "2026-01-02T15:04:05Z", "my app": `'my app'`, "it's": `'it'\''s'`} {
		if got := shellWord(in); got != want {
			t.Errorf("shellWord(%q) = %q, want %q", in, got, want)
		}
	}
}
