package pipeline

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestExamples compiles every pipeline in examples/ and checks the shape its comments
// promise. A new example must add its expectations here.
func TestExamples(t *testing.T) {
	t.Parallel()
	want := map[string][][]string{
		"hello.yml":   {{"greet"}},
		"hello.json":  {{"a"}, {"b"}},
		"diamond.yml": {{"lint", "unit"}, {"build"}, {"package"}},
		"matrix.yml": {{"test (go=1.25, shard=1)", "test (go=1.25, shard=2)", "test (go=1.26, shard=1)",
			"test (go=1.26, shard=2)", "test (go=1.26, shard=3)", "test (go=1.27rc1, shard=1)"}, {"summary"}},
		"release.yml":      {{"build"}, {"flaky-check", "deploy"}, {"notify-failure"}},
		"stages.yml":       {{"compile", "vet", "docs"}, {"unit"}, {"publish"}},
		"templates.yml":    {{"api", "worker", "cli"}},
		"conditions.yml":   {{"test", "lint"}, {"deploy", "report"}, {"rollback"}},
		"on-push.yml":      {{"test"}, {"build"}},
		"caches.yml":       {{"test (shard=1)", "test (shard=2)", "tools"}, {"build"}},
		"containers.yml":   {{"test (go=1.25)", "test (go=1.26)"}, {"summary"}},
		"test-reports.yml": {{"unit", "e2e"}},
		"outputs.yml": {{"version"}, {"test (go=1.25, os=linux)", "test (go=1.26, os=linux)", "test (go=1.26, os=linux-race, race=-race)"},
			{"publish"}},
	}
	files, err := filepath.Glob("../../examples/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	for _, file := range files {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Compile(src, Options{})
			if err != nil {
				t.Fatalf("example does not compile:\n%v", err)
			}
			waves, ok := want[name]
			if !ok {
				t.Fatalf("no expectations for %s: add them to this test", name)
			}
			if !reflect.DeepEqual(p.Waves, waves) {
				t.Errorf("waves = %q\nwant    %q", p.Waves, waves)
			}
		})
	}
}

// TestExamplesDetails checks what the example comments say beyond the DAG's shape.
func TestExamplesDetails(t *testing.T) {
	t.Parallel()
	load := func(name string) *Plan {
		src, err := os.ReadFile(filepath.Join("../../examples", name))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Compile(src, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	release := load("release.yml")
	deploy := release.Job("deploy")
	if deploy.Priority != PriorityCritical || deploy.Concurrency.Group != "production" || deploy.Concurrency.CancelInProgress ||
		!deploy.Steps[0].Once || deploy.Steps[1].Once || deploy.If.Source != `success() && branch == "main"` {
		t.Errorf("release deploy = %+v", deploy)
	}
	flaky := release.Job("flaky-check")
	if flaky.Retry.MaxAttempts != 2 || !reflect.DeepEqual(flaky.Retry.On, []FailureKind{FailureExit}) || !flaky.ContinueOnError {
		t.Errorf("release flaky-check = %+v", flaky)
	}
	build := release.Job("build")
	if build.Resources.MemoryBytes != 512<<20 || build.Resources.MilliCPU != 1000 || build.Artifacts.Paths[0] != "dist/version" {
		t.Errorf("release build = %+v", build)
	}
	if got := load("matrix.yml").Job("test (go=1.26, shard=2)").Steps[0].Run; got != "echo \"go 1.26 shard 2\"" {
		t.Errorf("matrix substitution = %q", got)
	}
	tpl := load("templates.yml")
	if w := tpl.Job("worker"); w.Timeout != Duration(30*60e9) || w.Env["GOFLAGS"] != "-mod=readonly" || w.Retry.MaxAttempts != 2 {
		t.Errorf("templates worker = %+v", w)
	}
	if c := tpl.Job("cli"); !strings.Contains(c.Steps[0].Run, "the cli job keeps the template's env") || c.RunsOn[0] != "linux" {
		t.Errorf("templates cli = %+v", c)
	}
	if release.On != nil {
		t.Errorf("release has no on:, but its plan has triggers %+v", release.On)
	}
	on := load("on-push.yml").On
	if on == nil || on.Push == nil || !reflect.DeepEqual(on.Push.Branches, []string{"main", "release/**", "!release/**-wip"}) ||
		!reflect.DeepEqual(on.Push.PathsIgnore, []string{"docs/**", "**.md"}) ||
		on.PullRequest == nil || !reflect.DeepEqual(on.PullRequest.Branches, []string{"main"}) ||
		len(on.Schedule) != 1 || on.Schedule[0].Missed != MissedRunOnce || on.Schedule[0].Timezone != "Europe/Berlin" ||
		on.Dispatch == nil || len(on.Dispatch.Inputs) != 2 || *on.Dispatch.Inputs[0].Default != "staging" || *on.Dispatch.Inputs[1].Default != "true" ||
		on.WorkflowRun == nil || !reflect.DeepEqual(on.WorkflowRun.Workflows, []string{"nightly-e2e"}) || !reflect.DeepEqual(on.WorkflowRun.Types, []string{"completed"}) {
		t.Errorf("on-push triggers = %+v", on)
	}
}
