package cli

import (
	"net/http"
	"strings"
	"testing"
)

// workflowCommandsPipeline has a step print GitHub's workflow commands.
const workflowCommandsPipeline = `name: commands
jobs:
  lint:
    steps:
      - run: |
          echo '::group::Build it'
          echo 'in the fold'
          echo '::endgroup::'
          echo '::error file=a.go,line=3,col=4,title=Vet::unused%0Ax'
          echo '::warning::careful'
          echo '::debug::hidden unless debugging'
          echo '::stop-commands::tok9'
          echo '::error::not one'
          echo '::tok9::'
          echo '::notice title=a%2Cb::back'
          echo '::set-output name=x::1'
`

// TestWorkflowCommandsEndToEnd: a real worker runs a step that prints workflow commands;
// the run's annotations are then what the API lists and runs get shows, and gantry logs
// prints the fold's title and each message after its level.
func TestWorkflowCommandsEndToEnd(t *testing.T) {
	t.Parallel()
	base := startCluster(t)
	run := submitRun(t, base, workflowCommandsPipeline)
	run = waitRun(t, base, run.ID, statusIs("success"))

	var as []annotationView
	getJSON(t, http.DefaultClient, base+"/api/v1/runs/"+run.ID+"/annotations", &as)
	if len(as) != 3 {
		t.Fatalf("annotations %+v, want 3", as)
	}
	e, w, n := as[0], as[1], as[2]
	if e.Job != "lint" || e.Level != "error" || e.Message != "unused\nx" || e.File != "a.go" || e.Line != 3 || e.Col != 4 || e.Title != "Vet" {
		t.Errorf("error annotation %+v", e)
	}
	if w.Level != "warning" || w.Message != "careful" || w.File != "" {
		t.Errorf("warning annotation %+v", w)
	}
	if n.Level != "notice" || n.Message != "back" || n.Title != "a,b" {
		t.Errorf("notice annotation %+v", n)
	}
	var job []annotationView
	getJSON(t, http.DefaultClient, base+"/api/v1/jobs/"+run.Jobs[0].ID+"/annotations", &job)
	if len(job) != 3 || job[0].Seq != e.Seq {
		t.Errorf("job annotations %+v", job)
	}

	tree := runCLI(t, invocation{args: []string{"runs", "get", run.ID, "--server", base}})
	if tree.code != exitOK || !strings.Contains(tree.stdout, "annotations\n  lint  error  a.go:3:4  Vet: unused\n") ||
		!strings.Contains(tree.stdout, "  lint  warning  careful\n") || !strings.Contains(tree.stdout, "  lint  notice  a,b: back\n") {
		t.Errorf("runs get: exit %d\n%s%s", tree.code, tree.stdout, tree.stderr)
	}

	logs := runCLI(t, invocation{args: []string{"logs", run.Jobs[0].ID, "--server", base}})
	want := "▸ Build it\nin the fold\nerror: unused\nx\nwarning: careful\n::error::not one\nnotice: back\n::set-output name=x::1\n"
	if logs.code != exitOK || !strings.Contains(logs.stdout, want) || strings.Contains(logs.stdout, "hidden") ||
		strings.Contains(logs.stdout, "tok9") || strings.Contains(logs.stdout, "endgroup") {
		t.Errorf("logs: exit %d\n%s%s\nwant it to hold\n%s", logs.code, logs.stdout, logs.stderr, want)
	}
}
