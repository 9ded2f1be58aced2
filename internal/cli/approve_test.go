package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnvironmentAndApproveCommands: an admin sets an environment needing two approvals;
// a developer's hand-made run of main is not verified and does not deploy; the admin's
// submitted deploy waits; gantry approve by the named approvers queues it, by anyone
// else is refused; gantry reject fails another; against a real server with auth on.
func TestEnvironmentAndApproveCommands(t *testing.T) {
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
	admin, alice, bob, mallory := token("admin", "ops"), token("write", "alice"), token("read", "bob"), token("write", "mallory")
	base, stop := startServer(t, "--db", db, "--auth", "on")
	defer stop()
	cli := func(secret string, args ...string) outcome {
		t.Helper()
		return runCLI(t, invocation{args: append(args, "--server", base, "--token", secret)})
	}
	must := func(r outcome, what string) outcome {
		t.Helper()
		if r.code != exitOK {
			t.Fatalf("%s: exit %d: %s%s", what, r.code, r.stdout, r.stderr)
		}
		return r
	}
	must(cli(admin, "project", "create", "shop", "--repo", "https://github.com/acme/shop.git", "--default-branch", "main"), "project create")

	set := []string{"environment", "set", "production", "--project", "shop", "--branch", "main", "--approvals", "2",
		"--approver", "alice", "--approver", "bob", "--timeout", "4h"}
	if r := cli(alice, set...); r.code == exitOK || !strings.Contains(r.stderr, "may not") {
		t.Fatalf("environment set with a write token: exit %d: %s", r.code, r.stderr)
	}
	if r := cli(admin, "environment", "set", "production"); r.code != exitUsage || !strings.Contains(r.stderr, "--project is required") {
		t.Errorf("environment set without --project: exit %d: %s", r.code, r.stderr)
	}
	r := must(cli(admin, set...), "environment set")
	if want := "environment production set for project shop: branches main may deploy; 2 of alice, bob approvals needed, within 4h0m0s"; !strings.Contains(r.stdout, want) {
		t.Errorf("environment set printed %q; want %q", r.stdout, want)
	}
	r = must(cli(bob, "environment", "list", "--project", "shop"), "environment list")
	if !strings.Contains(r.stdout, "production") || !strings.Contains(r.stdout, "2 of alice, bob") || !strings.Contains(r.stdout, "4h0m0s") {
		t.Errorf("environment list:\n%s", r.stdout)
	}

	file := filepath.Join(dir, "deploy.yml")
	if err := os.WriteFile(file, []byte("name: ship\njobs:\n  deploy:\n    environment: production\n    steps: [{run: ./deploy}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A developer's run naming main is not verified: its deploy fails, and runs get says
	// why the ref did not count.
	r = must(cli(alice, "submit", file, "--project", "shop", "--ref", "refs/heads/main", "--json"), "submit by alice")
	var mine struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &mine); err != nil {
		t.Fatalf("submit --json: %v\n%s", err, r.stdout)
	}
	r = must(cli(alice, "runs", "get", mine.ID), "runs get")
	if !strings.Contains(r.stdout, "refs/heads/main (unverified)") || !strings.Contains(r.stdout, "failed") {
		t.Errorf("runs get of alice's run:\n%s\nwant its ref marked unverified and its deploy failed", r.stdout)
	}
	// The admin's ref counts.
	submit := func() string {
		t.Helper()
		r := must(cli(admin, "submit", file, "--project", "shop", "--ref", "refs/heads/main", "--json"), "submit")
		var run struct {
			Jobs []struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"jobs"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &run); err != nil || len(run.Jobs) != 1 || run.Jobs[0].Status != "waiting_approval" {
			t.Fatalf("submit --json: %v\n%s", err, r.stdout)
		}
		return run.Jobs[0].ID
	}
	job := submit()
	r = must(cli(alice, "approve", job, "--comment", "release notes checked"), "approve by alice")
	if want := "job deploy: approval recorded; still waiting for approval (1 of 2: alice approved)"; strings.TrimSpace(r.stdout) != want {
		t.Errorf("approve by alice printed %q; want %q", r.stdout, want)
	}
	if r := cli(mallory, "approve", job); r.code == exitOK || !strings.Contains(r.stderr, "mallory may not approve") {
		t.Errorf("approve by mallory: exit %d: %s", r.code, r.stderr)
	}
	r = must(cli(bob, "approve", job), "approve by bob")
	if want := "job deploy: approved, now queued"; strings.TrimSpace(r.stdout) != want {
		t.Errorf("approve by bob printed %q; want %q", r.stdout, want)
	}
	if r := cli(alice, "approve", "not-a-job"); r.code != exitUsage {
		t.Errorf("approve of a malformed id: exit %d, want usage", r.code)
	}

	job = submit()
	r = must(cli(bob, "reject", job, "--comment", "freeze"), "reject")
	if want := "job deploy: failed (rejected by bob)"; strings.TrimSpace(r.stdout) != want {
		t.Errorf("reject printed %q; want %q", r.stdout, want)
	}
	// Self-review may be prevented: the run's author then cannot approve it.
	r = must(cli(admin, "environment", "set", "production", "--project", "shop", "--approvals", "1", "--approver", "alice",
		"--approver", "bob", "--prevent-self-review"), "environment set --prevent-self-review")
	if want := "1 of alice, bob approvals needed, within 24h0m0s, not by the run's author"; !strings.Contains(r.stdout, want) {
		t.Errorf("environment set --prevent-self-review printed %q; want %q", r.stdout, want)
	}
	if r := must(cli(bob, "environment", "list", "--project", "shop"), "environment list"); !strings.Contains(r.stdout, "(not the run's author)") {
		t.Errorf("environment list:\n%s\nwant it to say the author may not approve", r.stdout)
	}
	r = must(cli(alice, "submit", file, "--project", "shop", "--json"), "submit by alice")
	var own struct {
		Jobs []struct {
			ID string `json:"id"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &own); err != nil || len(own.Jobs) != 1 {
		t.Fatalf("submit --json: %v\n%s", err, r.stdout)
	}
	if r := cli(alice, "approve", own.Jobs[0].ID); r.code == exitOK || !strings.Contains(r.stderr, "prevents self-review") {
		t.Errorf("alice approving her own run: exit %d: %s", r.code, r.stderr)
	}
	must(cli(bob, "approve", own.Jobs[0].ID), "approve by bob")
	must(cli(admin, "environment", "delete", "production", "--project", "shop"), "environment delete")
	r = must(cli(admin, "environment", "list", "--project", "shop"), "environment list after delete")
	if !strings.Contains(r.stdout, "project shop has no environments") {
		t.Errorf("environment list after delete: %s", r.stdout)
	}
}
