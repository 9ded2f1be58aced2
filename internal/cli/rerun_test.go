package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRerunCommands: gantry runs rerun re-runs a finished run (all jobs, or --failed only
// when some failed), gantry jobs rerun re-runs a job that succeeded, and the job keeps
// both attempts; against gantry up with workers.
func TestRerunCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base, _ := startUp(t, filepath.Join(dir, "data"))
	file := filepath.Join(dir, "chain.yml")
	if err := os.WriteFile(file, []byte("name: chain\njobs:\n  a: {steps: [{run: \"true\"}]}\n  b: {needs: [a], steps: [{run: \"true\"}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := submitFile(t, base, file)
	done := func(r runDetails) bool { return runTerminal(r.Status) }
	run := waitRun(t, base, id, done)
	cli := func(args ...string) outcome {
		t.Helper()
		return runCLI(t, invocation{args: append(args, "--server", base)})
	}
	if r := cli("runs", "rerun", id, "--failed"); r.code != exitFailure || !strings.Contains(r.stderr, "no failed, cancelled or skipped job") {
		t.Errorf("runs rerun --failed of a run that passed: exit %d: %s", r.code, r.stderr)
	}
	if r := cli("runs", "rerun", "nope"); r.code != exitUsage {
		t.Errorf("runs rerun nope: exit %d, want usage", r.code)
	}
	// The run by its number, as gantry runs shows it.
	r := cli("runs", "rerun", fmt.Sprintf("%s#%d", run.Project, run.Number))
	if r.code != exitOK || !strings.Contains(r.stdout, "2 jobs run again") {
		t.Fatalf("runs rerun: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	run = waitRun(t, base, id, done)
	if run.Status != "success" {
		t.Fatalf("run after rerun: %s", run.Status)
	}
	a := run.Jobs[0].ID
	r = cli("jobs", "rerun", a)
	if r.code != exitOK || !strings.Contains(r.stdout, "job a ("+a+"): attempt 3") {
		t.Fatalf("jobs rerun: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	waitRun(t, base, id, func(r runDetails) bool { return done(r) && r.Jobs[1].Attempt == 3 })
	var j struct {
		Attempts []struct {
			Attempt int    `json:"attempt"`
			Status  string `json:"status"`
			Cause   string `json:"cause"`
		} `json:"attempts"`
	}
	r = cli("jobs", "rerun", a, "--json")
	if r.code != exitOK {
		t.Fatalf("jobs rerun --json: exit %d: %s", r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		t.Fatal(err)
	}
	if len(j.Attempts) != 4 || j.Attempts[0].Status != "success" || j.Attempts[0].Cause != "run" || j.Attempts[2].Cause != "rerun" {
		t.Errorf("attempts after three re-runs: %+v", j.Attempts)
	}
}

// TestApprovalsCommand: gantry approvals lists a deploy waiting for approval, and
// nothing once it is approved.
func TestApprovalsCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base, stop := startServer(t, "--db", "sqlite://"+filepath.Join(dir, "gantry.db"))
	defer stop()
	cli := func(args ...string) outcome {
		t.Helper()
		r := runCLI(t, invocation{args: append(args, "--server", base)})
		if r.code != exitOK {
			t.Fatalf("gantry %s: exit %d: %s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		return r
	}
	cli("environment", "set", "production", "--project", "shop", "--approvals", "1", "--approver", "alice")
	file := filepath.Join(dir, "deploy.yml")
	if err := os.WriteFile(file, []byte("name: ship\njobs:\n  deploy:\n    environment: production\n    steps: [{run: ./deploy}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli("submit", file, "--project", "shop", "--json")
	var run struct {
		Jobs []struct {
			ID string `json:"id"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &run); err != nil {
		t.Fatal(err)
	}
	r = cli("approvals")
	if !strings.Contains(r.stdout, run.Jobs[0].ID) || !strings.Contains(r.stdout, "production") || !strings.Contains(r.stdout, "0 of 1") {
		t.Fatalf("gantry approvals:\n%s", r.stdout)
	}
	cli("approve", run.Jobs[0].ID)
	if r := cli("approvals"); !strings.Contains(r.stdout, "nothing is waiting for your approval") {
		t.Errorf("gantry approvals after the approval:\n%s", r.stdout)
	}
}
