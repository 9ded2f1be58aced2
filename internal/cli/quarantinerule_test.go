package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestQuarantineRuleCommand: gantry tests quarantine-rule shows that a project has no
// rule, sets one with the defaults filled in, shows it, and removes it; a rule out of
// bounds or flags that do not go together are usage errors, and removing a rule that is
// not there fails.
func TestQuarantineRuleCommand(t *testing.T) {
	t.Parallel()
	base, stop := startServer(t, "--db", "sqlite://"+filepath.Join(t.TempDir(), "gantry.db"))
	defer stop()
	server := []string{"--server", base}
	rule := func(args ...string) outcome {
		t.Helper()
		return runCLI(t, invocation{args: append(append([]string{"tests", "quarantine-rule"}, args...), server...)})
	}
	pipeline := writeFiles(t, map[string]string{"p.yml": "name: p\njobs:\n  a:\n    steps: [{run: \"true\"}]\n"})["p.yml"]
	if r := runCLI(t, invocation{args: append([]string{"submit", pipeline, "--project", "web"}, server...)}); r.code != exitOK {
		t.Fatalf("submit: exit %d: %s", r.code, r.stderr)
	}

	if r := rule("--project", "web"); r.code != exitOK || r.stdout != "project web has no quarantine rule\n" {
		t.Errorf("show without a rule: exit %d: %q %s", r.code, r.stdout, r.stderr)
	}
	r := rule("--project", "web", "--flaky", "3", "--within", "7d")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "project web quarantines for 14d a test flaky on 3 commits within 7d, owned by rule\nset at ") {
		t.Fatalf("set: exit %d: %q %s", r.code, r.stdout, r.stderr)
	}
	if got := rule("--project", "web"); got.code != exitOK || got.stdout != r.stdout {
		t.Errorf("show: exit %d: %q, want %q", got.code, got.stdout, r.stdout)
	}
	r = rule("--project", "web", "--flaky", "1", "--within", "36h", "--for", "2d", "--owner", "qa-team", "--json")
	var v struct {
		FlakyCommits int    `json:"flaky_commits"`
		Within       string `json:"within"`
		For          string `json:"for"`
		Owner        string `json:"owner"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); r.code != exitOK || err != nil || v.FlakyCommits != 1 || v.Within != "36h" || v.For != "2d" || v.Owner != "qa-team" {
		t.Errorf("set with --json: exit %d, %v: %s %s", r.code, err, r.stdout, r.stderr)
	}

	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--flaky", "3", "--within", "7d"}, "--project is required"},
		{[]string{"--project", "web", "--flaky", "3"}, "--flaky and --within are required"},
		{[]string{"--project", "web", "--within", "7d"}, "--flaky and --within are required"},
		{[]string{"--project", "web", "--for", "7d"}, "--flaky and --within are required"},
		{[]string{"--project", "web", "--flaky", "0", "--within", "7d"}, "flaky on 0 commits: want 1 to 100"},
		{[]string{"--project", "web", "--flaky", "101", "--within", "7d"}, "want 1 to 100"},
		{[]string{"--project", "web", "--flaky", "3", "--within", "91d"}, "a window of 91d: want 1h to 90d"},
		{[]string{"--project", "web", "--flaky", "3", "--within", "7d", "--for", "30m"}, "a quarantine of 30m: want 1h to 90d"},
		{[]string{"--project", "web", "--flaky", "3", "--within", "a week"}, `--within "a week" is not a duration`},
		{[]string{"--project", "web", "--off", "--flaky", "3"}, "--off removes the rule"},
	} {
		if r := rule(tc.args...); r.code != exitUsage || !strings.Contains(r.stderr, tc.says) {
			t.Errorf("%q: exit %d: %s; want %d saying %q", tc.args, r.code, r.stderr, exitUsage, tc.says)
		}
	}
	if got := rule("--project", "web"); !strings.Contains(got.stdout, "flaky on 1 commit within 36h, owned by qa-team") {
		t.Errorf("refused rules changed the one set: %q", got.stdout)
	}

	if r := rule("--project", "web", "--off"); r.code != exitOK || !strings.HasPrefix(r.stdout, "project web has no quarantine rule now") {
		t.Errorf("--off: exit %d: %q %s", r.code, r.stdout, r.stderr)
	}
	if r := rule("--project", "web"); r.stdout != "project web has no quarantine rule\n" {
		t.Errorf("show after --off: %q", r.stdout)
	}
	if r := rule("--project", "web", "--off"); r.code != exitFailure || !strings.Contains(r.stderr, "has no quarantine rule") {
		t.Errorf("--off again: exit %d: %s", r.code, r.stderr)
	}
}
