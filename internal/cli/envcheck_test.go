package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateAndPlanWarnOfUndefinedEnvironments: with --project, gantry validate and
// gantry plan ask the coordinator which environments the project defines and warn of
// each job naming one it does not, without failing; an environment can be defined before
// the project has a run; without --project nothing is asked.
func TestValidateAndPlanWarnOfUndefinedEnvironments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base, _ := startUp(t, filepath.Join(dir, "data"))
	env := map[string]string{"GANTRY_SERVER": base}
	// The project has no run, nor any other existence, yet.
	if r := runCLI(t, invocation{args: []string{"environment", "set", "staging", "--project", "web"}, env: env}); r.code != exitOK {
		t.Fatalf("environment set before the project's first run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	file := filepath.Join(dir, "deploy.yml")
	def := "jobs:\n  stage: { environment: staging, steps: [ { run: x } ] }\n  ship: { environment: production, steps: [ { run: x } ] }\n"
	if err := os.WriteFile(file, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	const warning = "warning: job ship: environment production is not defined in project web: it has no rules"

	r := runCLI(t, invocation{args: []string{"validate", "--project", "web", file}, env: env})
	if r.code != exitOK || !strings.Contains(r.stdout, file+": ok (2 jobs)") || !strings.Contains(r.stdout, file+": "+warning) ||
		strings.Contains(r.stdout, "staging is not defined") {
		t.Errorf("validate --project web: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, invocation{args: []string{"validate", "--json", "--project", "web", file}, env: env})
	var report validateReport
	if err := json.Unmarshal([]byte(r.stdout), &report); err != nil || len(report.Files) != 1 || len(report.Files[0].Warnings) != 1 ||
		!strings.HasSuffix(warning, report.Files[0].Warnings[0]) {
		t.Errorf("validate --json --project web: exit %d, %v\n%s", r.code, err, r.stdout)
	}
	// A project the coordinator does not know defines nothing.
	r = runCLI(t, invocation{args: []string{"validate", "--project", "shop", file}, env: env})
	if r.code != exitOK || !strings.Contains(r.stdout, "environment staging is not defined in project shop") {
		t.Errorf("validate --project shop: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, invocation{args: []string{"plan", "--format", "json", "--project", "web", file}, env: env})
	if r.code != exitOK || !strings.Contains(r.stderr, file+": "+warning) || !json.Valid([]byte(r.stdout)) {
		t.Errorf("plan --project web: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Offline without --project, even with no coordinator to ask.
	r = runCLI(t, invocation{args: []string{"validate", file}, env: map[string]string{"GANTRY_SERVER": "http://127.0.0.1:1"}})
	if r.code != exitOK || strings.Contains(r.stdout, "warning") {
		t.Errorf("validate without --project: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
