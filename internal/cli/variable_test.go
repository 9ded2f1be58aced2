package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVariableCommands: set (from an argument, stdin and a file), get, list and rm
// against a real server; names are folded to upper case; mistakes are usage errors that
// reach no server, or the server's refusal.
func TestVariableCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base, _ := startServer(t, "--db", "sqlite://"+filepath.Join(dir, "gantry.db"))
	srv := []string{"--server", base}
	run := func(stdin string, args ...string) outcome {
		t.Helper()
		return runCLI(t, invocation{args: append(args, srv...), stdin: stdin})
	}

	if out := run("", "var", "set", "deploy", "yes", "--project", "web"); out.code != exitOK ||
		out.stdout != "variable DEPLOY set for project web (every environment)\n" {
		t.Fatalf("var set from an argument: %+v", out)
	}
	if out := run("hello from stdin\n", "var", "set", "GREETING", "--project", "web"); out.code != exitOK {
		t.Fatalf("var set from stdin: %+v", out)
	}
	file := filepath.Join(dir, "matrix.json")
	if err := os.WriteFile(file, []byte("[\"a\",\n \"b\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := run("", "var", "set", "MATRIX", "--project", "web", "--environment", "production", "--from-file", file); out.code != exitOK ||
		!strings.Contains(out.stdout, "(environment production)") {
		t.Fatalf("var set --from-file: %+v", out)
	}
	if out := run("", "var", "set", "EMPTY", "", "--project", "web"); out.code != exitOK {
		t.Fatalf("var set of an empty value: %+v", out)
	}

	if out := run("", "var", "get", "greeting", "--project", "web"); out.code != exitOK || out.stdout != "hello from stdin\n" {
		t.Errorf("var get: %+v", out)
	}
	if out := run("", "var", "get", "MATRIX", "--project", "web", "--environment", "production"); out.stdout != "[\"a\",\n \"b\"]\n" {
		t.Errorf("var get --environment: %+v", out)
	}
	if out := run("", "var", "get", "MATRIX", "--project", "web"); out.code != exitFailure || !strings.Contains(out.stderr, "not found") {
		t.Errorf("var get of a variable only an environment has: %+v", out)
	}
	list := run("", "var", "list", "--project", "web")
	for _, want := range []string{"NAME", "DEPLOY", "yes", "GREETING", "hello from stdin", "MATRIX", "production", `["a",…`} {
		if !strings.Contains(list.stdout, want) {
			t.Errorf("var list lacks %q:\n%s", want, list.stdout)
		}
	}
	var ans struct {
		Variables []variableView `json:"variables"`
	}
	if out := run("", "var", "list", "--project", "web", "--json"); out.code != exitOK || json.Unmarshal([]byte(out.stdout), &ans) != nil || len(ans.Variables) != 4 {
		t.Errorf("var list --json: %+v", out)
	}

	for name, tc := range map[string]struct {
		args []string
		code int
		msg  string
	}{
		"a name starting with a digit": {[]string{"var", "set", "1X", "v", "--project", "web"}, exitUsage, "not starting with a digit"},
		"GitHub's prefix":              {[]string{"var", "set", "github_sha", "v", "--project", "web"}, exitUsage, "GITHUB_"},
		"no project":                   {[]string{"var", "set", "X", "v"}, exitUsage, "--project is required"},
		"a value twice":                {[]string{"var", "set", "X", "v", "--project", "web", "--from-file", file}, exitUsage, "not both"},
		"a missing file":               {[]string{"var", "set", "X", "--project", "web", "--from-file", filepath.Join(dir, "nope")}, exitFailure, "no such file"},
		"a bad environment":            {[]string{"var", "set", "X", "v", "--project", "web", "--environment", "a b"}, exitFailure, "environment"},
		"list without a project":       {[]string{"var", "list"}, exitUsage, "--project is required"},
		"rm of a missing variable":     {[]string{"var", "rm", "NOPE", "--project", "web"}, exitFailure, "not found"},
	} {
		if out := run("", tc.args...); out.code != tc.code || !strings.Contains(out.stderr, tc.msg) {
			t.Errorf("%s: exit %d (want %d), stderr %q (want it to say %q)", name, out.code, tc.code, out.stderr, tc.msg)
		}
	}

	if out := run("", "var", "rm", "deploy", "--project", "web"); out.code != exitOK || out.stdout != "variable DEPLOY deleted from project web\n" {
		t.Errorf("var rm: %+v", out)
	}
	if out := run("", "var", "delete", "MATRIX", "--project", "web", "--environment", "production"); out.code != exitOK {
		t.Errorf("var delete --environment: %+v", out)
	}
	if out := run("", "var", "list", "--project", "web"); strings.Contains(out.stdout, "DEPLOY") || strings.Contains(out.stdout, "MATRIX") {
		t.Errorf("var list after rm:\n%s", out.stdout)
	}
}

// TestProjectVariablesReachAWorkflow runs a workflow through gantry up: its if: and its
// steps read the project's variables (an environment's over the project's), its
// GITHUB_TOKEN is the secret the project names, and a retry of the run reads the values
// the run started with, whatever the project set since.
func TestProjectVariablesReachAWorkflow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base, _ := startUp(t, filepath.Join(dir, "data"))
	srv := []string{"--server", base}
	run := func(stdin string, args ...string) outcome {
		t.Helper()
		out := runCLI(t, invocation{args: append(args, srv...), stdin: stdin})
		if out.code != exitOK {
			t.Fatalf("gantry %s: exit %d\n%s%s", strings.Join(args, " "), out.code, out.stdout, out.stderr)
		}
		return out
	}
	run("", "var", "set", "DEPLOY", "yes", "--project", "shop")
	run("hello-from-vars\n", "var", "set", "greeting", "--project", "shop")
	run("", "var", "set", "REGION", "eu", "--project", "shop")
	run("", "var", "set", "REGION", "eu-prod", "--project", "shop", "--environment", "production")
	run("cli-mapped-token-77", "secret", "set", "CI_BOT_TOKEN", "--project", "shop")
	if out := run("", "project", "set", "shop", "--github-token-secret", "CI_BOT_TOKEN"); !strings.Contains(out.stdout, "GITHUB_TOKEN reads secret:  CI_BOT_TOKEN") {
		t.Errorf("project set --github-token-secret printed:\n%s", out.stdout)
	}

	marker := filepath.Join(dir, "failed-once")
	wf := filepath.Join(dir, "vars.yml")
	if err := os.WriteFile(wf, []byte(`name: vars
on: push
jobs:
  deploy:
    runs-on: ubuntu-latest
    if: vars.DEPLOY == 'yes'
    steps:
      - run: echo ${{ vars.GREETING }}
      - run: test "${{ github.token }}" = cli-mapped-token-77 && test "$TOKEN" = cli-mapped-token-77 && echo token-is-mapped
        env:
          TOKEN: ${{ secrets.GITHUB_TOKEN }}
  never:
    runs-on: ubuntu-latest
    if: vars.DEPLOY != 'yes'
    steps:
      - run: echo never-printed
  production:
    runs-on: ubuntu-latest
    environment: production
    steps:
      - run: echo "region ${{ vars.REGION }}"
  flaky:
    runs-on: ubuntu-latest
    steps:
      - run: |
          echo "attempt sees ${{ vars.GREETING }}"
          test -e `+marker+` || { touch `+marker+`; exit 1; }
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var sub runDetails
	if err := json.Unmarshal([]byte(run("", "submit", "--project", "shop", "--json", wf).stdout), &sub); err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, base, sub.ID, func(r runDetails) bool { return r.JobsFinished == r.JobsTotal && r.JobsTotal > 0 })
	jobs := map[string]jobView{}
	for _, j := range r.Jobs {
		jobs[j.Key] = j
	}
	logOf := func(key string) string {
		t.Helper()
		return run("", "logs", jobs[key].ID).stdout
	}
	if jobs["never"].Status != "skipped" || !strings.Contains(jobs["never"].Reason, "vars.DEPLOY != 'yes'") {
		t.Errorf("never: %s (%s), want skipped by its if:", jobs["never"].Status, jobs["never"].Reason)
	}
	if log := logOf("deploy"); jobs["deploy"].Status != "success" || !strings.Contains(log, "hello-from-vars") ||
		!strings.Contains(log, "token-is-mapped") || strings.Contains(log, "cli-mapped-token-77") {
		t.Errorf("deploy %s:\n%s", jobs["deploy"].Status, log)
	}
	if log := logOf("production"); !strings.Contains(log, "region eu-prod") {
		t.Errorf("production:\n%s", log)
	}
	if jobs["flaky"].Status != "failed" || r.Status != "failed" {
		t.Fatalf("flaky %s, run %s; want both failed on the first attempt", jobs["flaky"].Status, r.Status)
	}

	// The project's value changes; the run's retry reads the one the run started with.
	run("", "var", "set", "GREETING", "changed-since", "--project", "shop")
	run("", "retry", sub.ID)
	r = waitRun(t, base, sub.ID, func(r runDetails) bool {
		return r.Status == "success" || r.Status == "failed" && r.JobsFinished == r.JobsTotal
	})
	if r.Status != "success" {
		t.Fatalf("after the retry the run is %s", r.Status)
	}
	if log := logOf("flaky"); !strings.Contains(log, "attempt sees hello-from-vars") || strings.Contains(log, "changed-since") {
		t.Errorf("flaky's retry:\n%s", log)
	}
}
