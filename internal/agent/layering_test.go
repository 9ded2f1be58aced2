package agent

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestWorkerLinksNoCoordinator: the worker links none of the coordinator's packages (the
// store's records included: it speaks to the coordinator over HTTP), and the pipeline
// package none of the trigger's (patterns are internal/glob, which both use).
// An import added across these lines fails here, not in review.
func TestWorkerLinksNoCoordinator(t *testing.T) {
	t.Parallel()
	deps := func(pkg string) []string {
		out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	const mod = "github.com/gantry-ci/gantry/internal/"
	worker := deps(mod + "agent")
	if !slices.Contains(worker, mod+"metrics/workermetrics") {
		t.Fatalf("go list -deps of the agent lists no workermetrics: %v", worker)
	}
	for _, coordinator := range []string{"store", "metrics", "tracing/tracestore", "logs/logchunks", "api", "scheduler",
		"notify", "store/sqlstore", "store/sqlite", "store/postgres", "trigger"} {
		if slices.Contains(worker, mod+coordinator) {
			t.Errorf("the worker (internal/agent) links the coordinator's internal/%s", coordinator)
		}
	}
	if slices.Contains(deps(mod+"pipeline"), mod+"trigger") {
		t.Error("internal/pipeline links internal/trigger, which imports it")
	}
}
