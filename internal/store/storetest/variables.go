package storetest

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

var variableTests = []test{
	{"PutGetListDelete", testVariableCRUD},
	{"Limits", testVariableLimits},
	{"GoWithTheirProject", testVariablesGoWithProject},
	{"KeptWithRun", testVariablesKeptWithRun},
	{"DecideRootJob", testVariablesDecideRootJob},
}

func (b *bundle) putVariable(project, env, name, value string) {
	b.t.Helper()
	if _, err := b.s.PutVariable(b.ctx, &store.Variable{Project: project, Environment: env, Name: name, Value: value}); err != nil {
		b.t.Fatalf("PutVariable(%s/%s %s): %v", project, env, name, err)
	}
}

func testVariableCRUD(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.project("web")
	v := &store.Variable{Project: "web", Name: "REGION", Value: "eu-west-1"}
	created, err := b.s.PutVariable(b.ctx, v)
	if err != nil || !created {
		t.Fatalf("PutVariable = %v, %v; want created", created, err)
	}
	wantTime(t, "CreatedAt", v.CreatedAt, b.clk.Now())
	b.clk.Advance(time.Minute)
	if created, err := b.s.PutVariable(b.ctx, &store.Variable{Project: "web", Name: "REGION", Value: "us-east-2"}); err != nil || created {
		t.Fatalf("second PutVariable = %v, %v; want replaced", created, err)
	}
	got, err := b.s.GetVariable(b.ctx, store.VariableKey{Project: "web", Name: "REGION"})
	if err != nil || got.Value != "us-east-2" || got.Project != "web" || got.ProjectID != v.ProjectID || got.Environment != "" {
		t.Fatalf("GetVariable = %+v, %v", got, err)
	}
	wantTime(t, "CreatedAt after replace", got.CreatedAt, v.CreatedAt)
	wantTime(t, "UpdatedAt after replace", got.UpdatedAt, b.clk.Now())

	// An environment's variable of the same name is another variable; an empty value
	// and one of the largest size are values.
	b.putVariable("web", "production", "REGION", "eu-central-1")
	b.putVariable("web", "", "EMPTY", "")
	b.putVariable("web", "", "BIG", strings.Repeat("v", store.MaxVariableBytes))
	if got, err := b.s.GetVariable(b.ctx, store.VariableKey{Project: "web", Environment: "production", Name: "REGION"}); err != nil || got.Value != "eu-central-1" {
		t.Errorf("GetVariable(production) = %+v, %v", got, err)
	}
	list, err := b.s.ListVariables(b.ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range list {
		names = append(names, l.Environment+"/"+l.Name+"="+clipped(l.Value))
	}
	if want := "/BIG=vvvv…, /EMPTY=, /REGION=us-east-2, production/REGION=eu-central-1"; strings.Join(names, ", ") != want {
		t.Errorf("ListVariables = %s; want %s", strings.Join(names, ", "), want)
	}

	_, err = b.s.ListVariables(b.ctx, "nope")
	wantErr(t, "ListVariables of an unknown project", err, store.ErrNotFound)
	_, err = b.s.PutVariable(b.ctx, &store.Variable{Project: "nope", Name: "X", Value: "1"})
	wantErr(t, "PutVariable in an unknown project", err, store.ErrNotFound)
	_, err = b.s.PutVariable(b.ctx, &store.Variable{Project: "web", Value: "1"})
	wantErr(t, "PutVariable without a name", err, store.ErrInvalid)
	_, err = b.s.PutVariable(b.ctx, &store.Variable{Project: "web", Name: "HUGE", Value: strings.Repeat("v", store.MaxVariableBytes+1)})
	wantErr(t, "PutVariable of a value too large", err, store.ErrInvalid)
	_, err = b.s.GetVariable(b.ctx, store.VariableKey{Project: "web", Environment: "staging", Name: "REGION"})
	wantErr(t, "GetVariable of an environment that has none", err, store.ErrNotFound)

	secretOK(t, "DeleteVariable", b.s.DeleteVariable(b.ctx, store.VariableKey{Project: "web", Name: "REGION"}))
	wantErr(t, "DeleteVariable twice", b.s.DeleteVariable(b.ctx, store.VariableKey{Project: "web", Name: "REGION"}), store.ErrNotFound)
	wantErr(t, "DeleteVariable of an unknown project", b.s.DeleteVariable(b.ctx, store.VariableKey{Project: "nope", Name: "REGION"}), store.ErrNotFound)
	_, err = b.s.GetVariable(b.ctx, store.VariableKey{Project: "web", Name: "REGION"})
	wantErr(t, "GetVariable of a deleted variable", err, store.ErrNotFound)
	if got, err := b.s.GetVariable(b.ctx, store.VariableKey{Project: "web", Environment: "production", Name: "REGION"}); err != nil || got.Value != "eu-central-1" {
		t.Errorf("deleting the project-wide REGION took production's: %+v, %v", got, err)
	}
}

func clipped(s string) string {
	if len(s) > 20 {
		return s[:4] + "…"
	}
	return s
}

// testVariableLimits: a put past a limit changes nothing and says ErrConflict; a put
// within them, replacing a variable at the limit of their number, is fine.
func testVariableLimits(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.project("web")
	for i := range store.MaxEnvironmentVariables {
		b.putVariable("web", "production", fmt.Sprintf("V%03d", i), "x")
	}
	_, err := b.s.PutVariable(b.ctx, &store.Variable{Project: "web", Environment: "production", Name: "ONE_MORE", Value: "x"})
	wantErr(t, "PutVariable past the number an environment may have", err, store.ErrConflict)
	b.putVariable("web", "production", "V000", "replaced")
	b.putVariable("web", "staging", "ONE_MORE", "x")

	// Bytes: names and values of every scope count together.
	big := strings.Repeat("b", store.MaxVariableBytes)
	n := (store.MaxVariablesTotal - 2000) / store.MaxVariableBytes
	for i := range n {
		b.putVariable("web", "", fmt.Sprintf("BIG%d", i), big)
	}
	_, err = b.s.PutVariable(b.ctx, &store.Variable{Project: "web", Name: "TOO_MUCH", Value: big})
	wantErr(t, "PutVariable past the bytes a project may have", err, store.ErrConflict)
	_, err = b.s.GetVariable(b.ctx, store.VariableKey{Project: "web", Name: "TOO_MUCH"})
	wantErr(t, "GetVariable of the refused variable", err, store.ErrNotFound)
	_, err = b.s.PutVariable(b.ctx, &store.Variable{Project: "web", Environment: "production", Name: "V001", Value: big})
	wantErr(t, "replacing a variable past the bytes a project may have", err, store.ErrConflict)
	if got, err := b.s.GetVariable(b.ctx, store.VariableKey{Project: "web", Environment: "production", Name: "V001"}); err != nil || got.Value != "x" {
		t.Errorf("a refused replace changed the variable: %+v, %v", got, err)
	}
	// A smaller value in place of a large one is fine.
	b.putVariable("web", "", "BIG0", "small")
}

func testVariablesGoWithProject(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.project("web")
	b.putVariable("web", "", "REGION", "eu")
	b.putVariable("web", "production", "REGION", "eu-prod")
	secretOK(t, "DeleteProject", b.s.DeleteProject(b.ctx, "web"))
	b.project("web")
	if list, err := b.s.ListVariables(b.ctx, "web"); err != nil || len(list) != 0 {
		t.Errorf("ListVariables of a project made again under a deleted one's name = %+v, %v; want none", list, err)
	}
}

// testVariablesKeptWithRun: a run keeps the project's variables as they were when it was
// created, those it was given over them, and those of the environments its jobs name.
func testVariablesKeptWithRun(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.project("web")
	b.putVariable("web", "", "REGION", "eu")
	b.putVariable("web", "", "GREETING", "hello")
	b.putVariable("web", "production", "REGION", "eu-prod")
	b.putVariable("web", "production", "GREETING", "hello from production")
	b.putVariable("web", "production", "TIER", "gold")
	b.putVariable("web", "staging", "REGION", "eu-staging")

	given := store.Variables{"greeting": "given"}
	run, _ := b.createRun(deployYAML, store.CreateRunParams{Project: "web", Trigger: store.Trigger{Event: "push", Vars: &given}})
	b.putVariable("web", "", "REGION", "changed later")
	tr := b.getRun(run.ID).Trigger
	if tr.Vars == nil || !reflect.DeepEqual(*tr.Vars, store.Variables{"REGION": "eu", "greeting": "given"}) {
		t.Errorf("run's Vars = %v; want the project's as they were, with the given one over GREETING", tr.Vars)
	}
	if tr.EnvironmentVars == nil || !reflect.DeepEqual(*tr.EnvironmentVars,
		store.EnvironmentVariables{"production": {"REGION": "eu-prod", "TIER": "gold"}}) {
		t.Errorf("run's EnvironmentVars = %v; want production's only, without the given name", tr.EnvironmentVars)
	}
	if got, want := tr.JobVars("production"), (store.Variables{"REGION": "eu-prod", "TIER": "gold", "greeting": "given"}); !reflect.DeepEqual(got, want) {
		t.Errorf("JobVars(production) = %v; want %v", got, want)
	}
	if got, want := tr.JobVars(""), (store.Variables{"REGION": "eu", "greeting": "given"}); !reflect.DeepEqual(got, want) {
		t.Errorf(`JobVars("") = %v; want %v`, got, want)
	}

	// A project without variables, a run given none: the run has none.
	plain, _ := b.create("name: p\njobs:\n  a: {steps: [{run: \"true\"}]}\n")
	if tr := b.getRun(plain.ID).Trigger; tr.Vars != nil || tr.EnvironmentVars != nil {
		t.Errorf("a run of a project without variables has %v, %v", tr.Vars, tr.EnvironmentVars)
	}
}

// testVariablesDecideRootJob: a job that needs nothing has its if: decided when the run
// is created, over the project's variables.
func testVariablesDecideRootJob(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.project("web")
	b.putVariable("web", "", "DEPLOY", "yes")
	yaml := "name: v\njobs:\n  deploy: {if: \"" + pipeline.GitHubCondition("vars.DEPLOY == 'yes'") + "\", steps: [{run: \"true\"}]}\n" +
		"  skip: {if: \"" + pipeline.GitHubCondition("vars.deploy != 'yes'") + "\", steps: [{run: \"true\"}]}\n"
	_, jobs := b.createRun(yaml, store.CreateRunParams{Project: "web"})
	got := map[string]store.JobStatus{}
	for _, j := range jobs {
		got[j.Name] = j.Status
	}
	if got["deploy"] != store.JobQueued || got["skip"] != store.JobSkipped {
		t.Errorf("jobs = %v; want deploy queued and skip skipped", got)
	}
}
