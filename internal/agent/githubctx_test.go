package agent

import (
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// TestRunVarsAndPullRequestRefs: a run of a pull request reads its project's variables
// and the request's branches as GitHub gives them, in a job's and a step's if:, in text
// and in GITHUB_BASE_REF and GITHUB_HEAD_REF; a job in an environment reads that
// environment's variables over the project's; a push has both refs set and empty.
func TestRunVarsAndPullRequestRefs(t *testing.T) {
	t.Parallel()
	b, _ := actionsBundle(t, t.TempDir())
	ctx := t.Context()
	if err := b.st.CreateProject(ctx, &store.Project{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []store.Variable{
		{Name: "DEPLOY", Value: "yes"}, {Name: "GREETING", Value: "hello world"}, {Name: "REGION", Value: "eu"},
		{Environment: "production", Name: "REGION", Value: "eu-prod"},
	} {
		v.Project = "web"
		if _, err := b.st.PutVariable(ctx, &v); err != nil {
			t.Fatal(err)
		}
	}
	wf := `on: [push, pull_request]
jobs:
  check:
    runs-on: ubuntu-latest
    if: vars.DEPLOY == 'yes' && github.base_ref == 'main'
    steps:
      - run: |
          test "$GITHUB_BASE_REF" = main && test "$GITHUB_HEAD_REF" = feature/x
          test "${{ github.base_ref }}" = main && test "${{ github.head_ref }}" = feature/x
          test "${{ vars.GREETING }}" = "hello world" && test "${{ vars.greeting }}" = "hello world"
          test "${{ vars.MISSING }}" = ""
          echo "greeting ${{ vars.GREETING }}"
      - if: github.head_ref == 'feature/x' && vars.REGION == 'eu'
        run: echo step-if-ok
  deploy:
    runs-on: ubuntu-latest
    environment: production
    steps:
      - run: test "${{ vars.REGION }}" = eu-prod && test "${{ vars.GREETING }}" = "hello world"
      - if: vars.REGION == 'eu-prod'
        run: echo env-step-if-ok
  push-only:
    runs-on: ubuntu-latest
    if: github.base_ref == null
    steps:
      - run: test "${GITHUB_BASE_REF-unset}" = "" && test "${GITHUB_HEAD_REF-unset}" = ""
`
	p, err := pipeline.Compile([]byte(wf), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run, _, _, err := b.st.CreateRun(ctx, store.CreateRunParams{Project: "web", Plan: p, Trigger: store.Trigger{
		Event: "pull_request", PRNumber: 5, BaseRef: "main", HeadRef: "feature/x", Repository: "acme/app"}})
	if err != nil {
		t.Fatal(err)
	}
	r := b.waitRun(t, run.ID)
	for _, key := range []string{"check", "deploy"} {
		if job, _ := b.jobByKey(t, run.ID, key); job.Status != store.JobSuccess {
			t.Errorf("job %s %s:\n%s", key, job.Status, b.jobLog(t, run.ID, key))
		}
	}
	if job, _ := b.jobByKey(t, run.ID, "push-only"); job.Status != store.JobSkipped {
		t.Errorf("push-only of a pull request: %s, want skipped", job.Status)
	}
	if r.Status != store.RunSuccess {
		t.Errorf("run %s", r.Status)
	}
	if log := b.jobLog(t, run.ID, "check"); !strings.Contains(log, "greeting hello world") || !strings.Contains(log, "step-if-ok") {
		t.Errorf("check's log:\n%s", log)
	}
	if log := b.jobLog(t, run.ID, "deploy"); !strings.Contains(log, "env-step-if-ok") {
		t.Errorf("deploy's log:\n%s", log)
	}

	push, _, _, err := b.st.CreateRun(ctx, store.CreateRunParams{Project: "web", Plan: p, Trigger: store.Trigger{
		Event: "push", Ref: "refs/heads/main", Branch: "main", Repository: "acme/app"}})
	if err != nil {
		t.Fatal(err)
	}
	b.waitRun(t, push.ID)
	if job, _ := b.jobByKey(t, push.ID, "push-only"); job.Status != store.JobSuccess {
		t.Errorf("push-only of a push: %s:\n%s", job.Status, b.jobLog(t, push.ID, "push-only"))
	}
	if job, _ := b.jobByKey(t, push.ID, "check"); job.Status != store.JobSkipped {
		t.Errorf("check of a push: %s, want skipped (github.base_ref is empty)", job.Status)
	}
}

// TestRunNumber: a job's steps read their run's number in its project as
// GANTRY_RUN_NUMBER and GITHUB_RUN_NUMBER, and a workflow's github.run_number in a run,
// a step's name and env, and a step's if: read it too.
func TestRunNumber(t *testing.T) {
	t.Parallel()
	b, _ := actionsBundle(t, t.TempDir())
	ctx := t.Context()
	native, err := pipeline.Compile([]byte(`
jobs:
  a:
    steps:
      - run: test "$GANTRY_RUN_NUMBER" = "$WANT" && test "$GITHUB_RUN_NUMBER" = "$WANT"
`), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := pipeline.Compile([]byte(`on: push
jobs:
  check:
    runs-on: ubuntu-latest
    steps:
      - name: number ${{ github.run_number }}
        env: {N: "${{ github.run_number }}"}
        run: |
          test "${{ github.run_number }}" = 3 && test "$N" = 3
          test "$GITHUB_RUN_NUMBER" = 3 && test "$GANTRY_RUN_NUMBER" = 3
          echo "run number ${{ github.run_number }}"
      - if: github.run_number == 3
        run: echo step-if-read-three
      - if: github.run_number != 3
        run: echo step-if-wrong
`), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		project string
		plan    *pipeline.Plan
		want    string
	}{{"web", native, "1"}, {"web", native, "2"}, {"api", native, "1"}, {"web", wf, "3"}} {
		run, _, _, err := b.st.CreateRun(ctx, store.CreateRunParams{Project: c.project, Plan: c.plan,
			Env: map[string]string{"WANT": c.want}})
		if err != nil {
			t.Fatal(err)
		}
		key := "a"
		if c.plan == wf {
			key = "check"
		}
		if r := b.waitRun(t, run.ID); r.Status != store.RunSuccess {
			t.Errorf("run %d (%s #%d): %s\n%s", i, c.project, run.Number, r.Status, b.jobLog(t, run.ID, key))
		}
		if log := b.jobLog(t, run.ID, key); c.plan == wf && (!strings.Contains(log, "step number 3\nrun number 3\n") ||
			!strings.Contains(log, "\nstep-if-read-three\n") || !strings.Contains(log, "skipped, if: github.run_number != 3 was false")) {
			t.Errorf("check's log:\n%s", log)
		}
	}
}
