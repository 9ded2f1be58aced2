package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestProjectMembers: against a real server with auth on, a maintainer adds a developer
// to a project with gantry project member; the developer's token, which names no
// project, reaches that project and not another; removing the member takes the project
// away at the next request; token list shows each token's scope.
func TestProjectMembers(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "gantry.db")
	token := func(args ...string) string {
		t.Helper()
		r := runCLI(t, invocation{args: append([]string{"token", "create", "--db", db}, args...)})
		if r.code != exitOK {
			t.Fatalf("token create %q: exit %d: %s", args, r.code, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	admin := token("--role", "admin", "--name", "ops")
	maint := token("--role", "maintainer", "--project", "web", "--name", "web-lead", "--expires", "720h")
	dev := token("--role", "developer", "--name", "dana-laptop", "--user", "dana")
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

	if r := as(dev, "runs"); r.code != exitOK || strings.Contains(r.stdout, "web") || strings.Contains(r.stdout, "api") {
		t.Errorf("runs as a developer of no project: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := as(maint, "project", "member", "add", "api", "dana", "--role", "developer"); r.code == exitOK {
		t.Errorf("a maintainer of web added a member to api: %s", r.stdout)
	}
	if r := as(maint, "project", "member", "add", "web", "dana", "--role", "developer"); r.code != exitOK ||
		r.stdout != "dana is a developer of project web\n" {
		t.Fatalf("member add: exit %d: %q %s", r.code, r.stdout, r.stderr)
	}
	if r := as(dev, "project", "member", "list", "web"); r.code != exitOK || !strings.Contains(r.stdout, "dana") ||
		!strings.Contains(r.stdout, "developer") {
		t.Errorf("member list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := as(dev, "runs", "--json")
	if r.code != exitOK {
		t.Fatalf("runs as dana: exit %d: %s", r.code, r.stderr)
	}
	var runs struct {
		Runs []struct {
			ID      string `json:"id"`
			Project string `json:"project"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil {
		t.Fatalf("runs --json: %v\n%s", err, r.stdout)
	}
	if len(runs.Runs) != 1 || runs.Runs[0].Project != "web" {
		t.Fatalf("runs as a developer of web = %+v, want web's one", runs.Runs)
	}
	if r := as(dev, "cancel", runs.Runs[0].ID); r.code != exitOK {
		t.Errorf("cancel as a developer of web: exit %d: %s", r.code, r.stderr)
	}
	if r := as(dev, "project", "member", "add", "web", "eve", "--role", "viewer"); r.code == exitOK || !strings.Contains(r.stderr, "maintainer") {
		t.Errorf("a developer added a member: exit %d: %s", r.code, r.stderr)
	}
	if r := as(maint, "project", "member", "remove", "web", "dana"); r.code != exitOK || r.stdout != "dana removed from project web\n" {
		t.Fatalf("member remove: exit %d: %q %s", r.code, r.stdout, r.stderr)
	}
	if r := as(dev, "runs", "get", runs.Runs[0].ID); r.code == exitOK || !strings.Contains(r.stderr, "not found") {
		t.Errorf("after removal dana still reads web's run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := as(maint, "project", "member", "add", "web", "dana", "--role", "owner"); r.code != exitUsage {
		t.Errorf("member add --role owner: exit %d, want usage", r.code)
	}

	list := runCLI(t, invocation{args: []string{"token", "list", "--db", db}})
	for _, want := range []string{"server", "projects=web", "member:dana"} {
		if !strings.Contains(list.stdout, want) {
			t.Errorf("token list does not show scope %q:\n%s", want, list.stdout)
		}
	}
	for _, bad := range [][]string{
		{"--role", "admin", "--name", "x", "--project", "web"},
		{"--role", "developer", "--name", "x", "--project", "all", "--project", "web"},
		{"--role", "register", "--name", "x", "--project", "web"},
		{"--role", "owner", "--name", "x"},
	} {
		if r := runCLI(t, invocation{args: append([]string{"token", "create", "--db", db}, bad...)}); r.code != exitUsage {
			t.Errorf("token create %q: exit %d, want usage: %s", bad, r.code, r.stderr)
		}
	}
}
