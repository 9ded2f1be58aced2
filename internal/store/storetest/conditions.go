package storetest

import (
	"errors"
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
)

// outcome is a job's status and the reason recorded for it.
type outcome struct {
	status store.JobStatus
	reason string
}

// testDAGRootConditions checks that a job which needs nothing has its if: decided when
// the run is created, against every name a condition can read, and that a job skipped so
// ends like any skipped job: its reason recorded, its dependents decided, the run counted.
func testDAGRootConditions(t *testing.T, h Harness) {
	const (
		queued  = store.JobQueued
		success = store.JobSuccess
		failed  = store.JobFailed
		skipped = store.JobSkipped
	)
	// gated has one root job with the condition and one without.
	gated := func(cond string) string {
		return "name: gated\njobs:\n  free:\n    steps: [ { run: \"true\" } ]\n" +
			"  gated:\n    if: '" + cond + "'\n    steps: [ { run: \"true\" } ]\n"
	}
	const propagate = `
name: propagate
jobs:
  build:
    steps: [ { run: "true" } ]
  gated:
    if: "false"
    steps: [ { run: "true" } ]
  after:
    needs: [gated]
    steps: [ { run: "true" } ]
  later:
    needs: [after, build]
    steps: [ { run: "true" } ]
  cleanup:
    needs: [gated]
    if: always() && needs.gated.result == "skipped"
    steps: [ { run: "true" } ]
  alarm:
    needs: [gated]
    if: failure()
    steps: [ { run: "true" } ]
`
	const matrix = `
name: matrix
jobs:
  test:
    matrix: { os: [linux, windows] }
    if: matrix.os == "linux"
    steps: [ { run: "true" } ]
  report:
    needs: [test]
    steps: [ { run: "true" } ]
`
	// jobEnv sets in the file the env its if: reads; the run's env (--env) overrides it.
	const jobEnv = `
name: job-env
jobs:
  deploy:
    env: { DEPLOY: "no" }
    if: env.DEPLOY == "yes"
    steps: [ { run: "true" } ]
`
	// needsEnv checks that a job with needs sees the run's env too, when its needs end.
	const needsEnv = `
name: needs-env
jobs:
  build:
    steps: [ { run: "true" } ]
  deploy:
    needs: [build]
    if: env.DEPLOY == "yes"
    steps: [ { run: "true" } ]
`
	const nothingRuns = `
name: nothing-runs
jobs:
  a:
    if: branch == "main"
    steps: [ { run: "true" } ]
  b:
    needs: [a]
    steps: [ { run: "true" } ]
  c:
    matrix: { n: [1, 2] }
    if: "false"
    steps: [ { run: "true" } ]
`
	const failing = `
name: failing
jobs:
  gated:
    if: "false"
    steps: [ { run: "true" } ]
  broken:
    steps: [ { run: "false" } ]
`
	// onTags runs release only for a tag; inputs reads typed dispatch inputs, at creation
	// (deploy) and, from the stored job, when its need ends (notify).
	const onTags = `
name: on-tags
jobs:
  build:
    steps: [ { run: "true" } ]
  release:
    if: startsWith(ref, 'refs/tags/') && endsWith(tag, '.0')
    steps: [ { run: "true" } ]
`
	const inputs = `
name: inputs
on:
  dispatch:
    inputs:
      deploy: { type: boolean }
      replicas: { type: number }
      region: { type: choice, options: [eu, us] }
jobs:
  deploy:
    if: inputs.deploy == true && contains(['eu'], inputs.region)
    steps: [ { run: "true" } ]
  notify:
    needs: [deploy]
    if: always() && inputs.deploy && inputs.replicas > 2
    steps: [ { run: "true" } ]
`
	const forks = `
name: forks
jobs:
  secretive:
    if: event != "pull_request" || !pr.fork
    steps: [ { run: "true" } ]
`
	tagPush := store.CreateRunParams{Trigger: store.Trigger{Ref: "refs/tags/v1.0", Tag: "v1.0", Event: "tag", SHA: "abc"}}
	branchPush := store.CreateRunParams{Trigger: store.Trigger{Ref: "refs/heads/main", Branch: "main", Event: "push", SHA: "abc"}}
	dispatched := func(in store.InputValues) store.CreateRunParams {
		return store.CreateRunParams{Trigger: store.Trigger{Event: "dispatch", Ref: "refs/heads/main", Branch: "main", Inputs: &in}}
	}
	const releaseCond = `if: startsWith(ref, 'refs/tags/') && endsWith(tag, '.0') was false`
	main := store.CreateRunParams{Trigger: store.Trigger{Branch: "main"}}
	dev := store.CreateRunParams{Trigger: store.Trigger{Branch: "dev"}}
	tests := []struct {
		name     string
		yaml     string
		params   store.CreateRunParams
		outcomes map[string]store.JobStatus
		// atCreate is what CreateRun answers for the jobs it names; final is where every
		// job ends.
		atCreate map[string]outcome
		final    map[string]outcome
		run      store.RunStatus
	}{
		{"literal false", gated("false"), store.CreateRunParams{}, nil,
			map[string]outcome{"gated": {skipped, "if: false was false"}, "free": {queued, ""}},
			map[string]outcome{"gated": {skipped, "if: false was false"}, "free": {success, ""}}, store.RunSuccess},
		{"branch holds", gated(`branch == "main"`), main, nil,
			map[string]outcome{"gated": {queued, ""}},
			map[string]outcome{"gated": {success, ""}, "free": {success, ""}}, store.RunSuccess},
		{"branch does not hold", gated(`branch == "main"`), dev, nil,
			map[string]outcome{"gated": {skipped, `if: branch == "main" was false`}},
			map[string]outcome{"gated": {skipped, `if: branch == "main" was false`}, "free": {success, ""}}, store.RunSuccess},
		{"event holds", gated(`event == "push"`), store.CreateRunParams{Trigger: store.Trigger{Event: "push"}}, nil,
			map[string]outcome{"gated": {queued, ""}},
			map[string]outcome{"gated": {success, ""}, "free": {success, ""}}, store.RunSuccess},
		{"event does not hold", gated(`event == "push"`), store.CreateRunParams{Trigger: store.Trigger{Event: "api"}}, nil,
			map[string]outcome{"gated": {skipped, `if: event == "push" was false`}},
			map[string]outcome{"gated": {skipped, `if: event == "push" was false`}, "free": {success, ""}}, store.RunSuccess},
		{"sha holds", gated(`sha startsWith "abc"`), store.CreateRunParams{Trigger: store.Trigger{SHA: "abc123"}}, nil,
			map[string]outcome{"gated": {queued, ""}},
			map[string]outcome{"gated": {success, ""}, "free": {success, ""}}, store.RunSuccess},
		{"sha does not hold", gated(`sha startsWith "abc"`), store.CreateRunParams{Trigger: store.Trigger{SHA: "def456"}}, nil,
			map[string]outcome{"gated": {skipped, `if: sha startsWith "abc" was false`}},
			map[string]outcome{"gated": {skipped, `if: sha startsWith "abc" was false`}, "free": {success, ""}}, store.RunSuccess},
		{"run env holds", gated(`env.DEPLOY == "yes"`), store.CreateRunParams{Env: map[string]string{"DEPLOY": "yes"}}, nil,
			map[string]outcome{"gated": {queued, ""}},
			map[string]outcome{"gated": {success, ""}, "free": {success, ""}}, store.RunSuccess},
		{"run env unset", gated(`env.DEPLOY == "yes"`), store.CreateRunParams{}, nil,
			map[string]outcome{"gated": {skipped, `if: env.DEPLOY == "yes" was false`}},
			map[string]outcome{"gated": {skipped, `if: env.DEPLOY == "yes" was false`}, "free": {success, ""}}, store.RunSuccess},
		{"run env over job env", jobEnv, store.CreateRunParams{Env: map[string]string{"DEPLOY": "yes"}}, nil,
			map[string]outcome{"deploy": {queued, ""}},
			map[string]outcome{"deploy": {success, ""}}, store.RunSuccess},
		{"job env without run env", jobEnv, store.CreateRunParams{}, nil,
			map[string]outcome{"deploy": {skipped, `if: env.DEPLOY == "yes" was false`}},
			map[string]outcome{"deploy": {skipped, `if: env.DEPLOY == "yes" was false`}}, store.RunSuccess},
		{"run env after needs", needsEnv, store.CreateRunParams{Env: map[string]string{"DEPLOY": "yes"}}, nil,
			map[string]outcome{"build": {queued, ""}, "deploy": {store.JobPending, ""}},
			map[string]outcome{"build": {success, ""}, "deploy": {success, ""}}, store.RunSuccess},
		{"run env after needs unset", needsEnv, store.CreateRunParams{Env: map[string]string{"DEPLOY": "no"}}, nil,
			map[string]outcome{"build": {queued, ""}, "deploy": {store.JobPending, ""}},
			map[string]outcome{"build": {success, ""}, "deploy": {skipped, `if: env.DEPLOY == "yes" was false`}}, store.RunSuccess},
		{"matrix value", matrix, store.CreateRunParams{}, nil,
			map[string]outcome{"test (os=linux)": {queued, ""}, "test (os=windows)": {skipped, `if: matrix.os == "linux" was false`}},
			// A matrix job of which some instances succeeded and the rest were skipped
			// counts as a success.
			map[string]outcome{"test (os=linux)": {success, ""}, "test (os=windows)": {skipped, `if: matrix.os == "linux" was false`},
				"report": {success, ""}}, store.RunSuccess},
		{"skip propagates", propagate, store.CreateRunParams{}, nil,
			map[string]outcome{"gated": {skipped, "if: false was false"}, "after": {skipped, "a job it needs (gated) was skipped"},
				"cleanup": {queued, ""}, "alarm": {skipped, "if: failure() was false"}, "build": {queued, ""}},
			map[string]outcome{"build": {success, ""}, "gated": {skipped, "if: false was false"},
				"after": {skipped, "a job it needs (gated) was skipped"}, "later": {skipped, "a job it needs (after) was skipped"},
				"cleanup": {success, ""}, "alarm": {skipped, "if: failure() was false"}}, store.RunSuccess},
		{"nothing runs", nothingRuns, dev, nil,
			map[string]outcome{"a": {skipped, `if: branch == "main" was false`}, "b": {skipped, "a job it needs (a) was skipped"},
				"c (n=1)": {skipped, "if: false was false"}, "c (n=2)": {skipped, "if: false was false"}},
			map[string]outcome{"a": {skipped, `if: branch == "main" was false`}, "b": {skipped, "a job it needs (a) was skipped"},
				"c (n=1)": {skipped, "if: false was false"}, "c (n=2)": {skipped, "if: false was false"}}, store.RunSuccess},
		{"tag job skipped on a branch push", onTags, branchPush, nil,
			map[string]outcome{"build": {queued, ""}, "release": {skipped, releaseCond}},
			map[string]outcome{"build": {success, ""}, "release": {skipped, releaseCond}}, store.RunSuccess},
		{"tag job runs on a tag", onTags, tagPush, nil,
			map[string]outcome{"build": {queued, ""}, "release": {queued, ""}},
			map[string]outcome{"build": {success, ""}, "release": {success, ""}}, store.RunSuccess},
		{"inputs hold", inputs, dispatched(store.InputValues{"deploy": "true", "replicas": "3", "region": "eu"}), nil,
			map[string]outcome{"deploy": {queued, ""}, "notify": {store.JobPending, ""}},
			map[string]outcome{"deploy": {success, ""}, "notify": {success, ""}}, store.RunSuccess},
		{"inputs do not hold", inputs, dispatched(store.InputValues{"deploy": "false", "replicas": "3", "region": "eu"}), nil,
			map[string]outcome{"deploy": {skipped, `if: inputs.deploy == true && contains(['eu'], inputs.region) was false`}},
			map[string]outcome{"deploy": {skipped, `if: inputs.deploy == true && contains(['eu'], inputs.region) was false`},
				"notify": {skipped, "if: always() && inputs.deploy && inputs.replicas > 2 was false"}}, store.RunSuccess},
		{"number input read after needs", inputs, dispatched(store.InputValues{"deploy": "true", "replicas": "2", "region": "EU"}), nil,
			map[string]outcome{"deploy": {queued, ""}},
			map[string]outcome{"deploy": {success, ""}, "notify": {skipped, "if: always() && inputs.deploy && inputs.replicas > 2 was false"}}, store.RunSuccess},
		{"fork pull request", forks, store.CreateRunParams{Trigger: store.Trigger{Event: "pull_request", PRNumber: 4, Fork: true}}, nil,
			map[string]outcome{"secretive": {skipped, `if: event != "pull_request" || !pr.fork was false`}},
			map[string]outcome{"secretive": {skipped, `if: event != "pull_request" || !pr.fork was false`}}, store.RunSuccess},
		{"own pull request", forks, store.CreateRunParams{Trigger: store.Trigger{Event: "pull_request", PRNumber: 4}}, nil,
			map[string]outcome{"secretive": {queued, ""}},
			map[string]outcome{"secretive": {success, ""}}, store.RunSuccess},
		{"a skip does not hide a failure", failing, store.CreateRunParams{}, map[string]store.JobStatus{"broken": failed},
			map[string]outcome{"gated": {skipped, "if: false was false"}, "broken": {queued, ""}},
			map[string]outcome{"gated": {skipped, "if: false was false"}, "broken": {failed, ""}}, store.RunFailed},
	}
	// The rows share a database: each runs its pipeline to the end before the next.
	_, shared := setup(t, h)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := shared.with(t)
			run, jobs := b.createRun(tc.yaml, tc.params)
			answered := map[string]*store.Job{}
			for _, j := range jobs {
				answered[j.Key] = j
			}
			checkOutcomes(t, "CreateRun's answer", answered, tc.atCreate, false)
			// What was decided at creation is what the store keeps, not only what it said.
			stored := b.jobsByKey(run.ID)
			for key, want := range tc.atCreate {
				if want.status == skipped {
					checkOutcomes(t, "stored at creation", stored, map[string]outcome{key: want}, false)
					wantTime(t, "FinishedAt of "+key, stored[key].FinishedAt, b.clk.Now())
				}
			}
			if allSkipped(tc.final) {
				// Nothing is left to run: the run ended with its creation.
				if run.Status != store.RunSuccess || run.JobsFinished != run.JobsTotal {
					t.Errorf("CreateRun answered run %s with %d of %d finished, want success with all", run.Status, run.JobsFinished, run.JobsTotal)
				}
				b.wantRunDone(run.ID, store.RunSuccess)
				b.expectNoClaim(store.ClaimParams{Max: 8})
				return
			}
			got := b.drive(run.ID, tc.outcomes)
			checkOutcomes(t, "at the end", got, tc.final, true)
			b.wantRunDone(run.ID, tc.run)
		})
	}
}

// checkOutcomes compares jobs by key with want; with all, every job must be in want.
func checkOutcomes(t *testing.T, when string, jobs map[string]*store.Job, want map[string]outcome, all bool) {
	t.Helper()
	if all && len(jobs) != len(want) {
		t.Errorf("%s: run has %d jobs, the row expects %d", when, len(jobs), len(want))
	}
	for key, w := range want {
		j := jobs[key]
		if j == nil {
			t.Errorf("%s: no job %q", when, key)
			continue
		}
		if j.Status != w.status || j.Reason != w.reason {
			t.Errorf("%s: job %q is %s (reason %q), want %s (reason %q)", when, key, j.Status, j.Reason, w.status, w.reason)
		}
	}
}

func allSkipped(jobs map[string]outcome) bool {
	for _, o := range jobs {
		if o.status != store.JobSkipped {
			return false
		}
	}
	return true
}

// testDAGRootConditionReplayAndRetry checks that an idempotent replay of a run whose root
// job was skipped answers with the stored run, and that retrying the skipped job runs it
// and clears its reason.
func testDAGRootConditionReplayAndRetry(t *testing.T, h Harness) {
	_, b := setup(t, h)
	const yaml = `
name: replay
jobs:
  gated:
    if: branch == "main"
    steps: [ { run: "true" } ]
`
	p := store.CreateRunParams{Trigger: store.Trigger{Branch: "dev"}, IdempotencyKey: "once"}
	run, _ := b.createRun(yaml, p)
	p.Plan, p.Definition = compile(t, yaml), []byte(yaml)
	again, jobs, created, err := b.s.CreateRun(b.ctx, p)
	if err != nil {
		t.Fatalf("CreateRun again: %v", err)
	}
	if created || again.ID != run.ID || again.Status != store.RunSuccess {
		t.Fatalf("replay: created %v, run %s %s; want the first run, success", created, again.ID, again.Status)
	}
	if len(jobs) != 1 || jobs[0].Status != store.JobSkipped || jobs[0].Reason != `if: branch == "main" was false` {
		t.Fatalf("replay answered jobs %+v, want gated skipped with its reason", jobs)
	}

	if err := b.s.RetryJob(b.ctx, jobs[0].ID); err != nil {
		t.Fatalf("RetryJob: %v", err)
	}
	j := b.wantJobStatus(jobs[0].ID, store.JobQueued)
	if j.Reason != "" {
		t.Errorf("retried job keeps reason %q, want none", j.Reason)
	}
	b.complete(b.claimOne(), store.JobSuccess)
	b.wantRunDone(run.ID, store.RunSuccess)
}

// testCreateRunRunValues checks that the job a run keeps has the run's own values put in
// for ${{ ref }}, ${{ inputs.x }} and kin, from the trigger it was created with, and that
// a value which would read as a reference (a secret's) creates no run.
func testCreateRunRunValues(t *testing.T, h Harness) {
	_, b := setup(t, h)
	const yaml = `
name: run-values
on:
  dispatch:
    inputs:
      target: { type: string }
env: { TARGET: "${{ inputs.target }}", KEY: "${{ secrets.DEPLOY_KEY }}" }
jobs:
  deploy:
    steps:
      - { name: "deploy ${{ tag }}", run: "./deploy ${{ ref }} ${{ inputs.target }} ${{ pr.number }}" }
`
	in := store.InputValues{"target": "eu"}
	_, jobs := b.createRun(yaml, store.CreateRunParams{Trigger: store.Trigger{Ref: "refs/tags/v3", Tag: "v3", Event: "dispatch", Inputs: &in}})
	for _, j := range []*store.Job{jobs[0], b.getJob(jobs[0].ID)} {
		s := j.Spec
		if s == nil || len(s.Steps) != 1 {
			t.Fatalf("Spec = %+v", s)
		}
		if s.Steps[0].Run != "./deploy refs/tags/v3 eu " || s.Steps[0].Name != "deploy v3" || s.Env["TARGET"] != "eu" {
			t.Errorf("run %q name %q env TARGET %q, want the trigger's values put in", s.Steps[0].Run, s.Steps[0].Name, s.Env["TARGET"])
		}
		if s.Env["KEY"] != "${{ secrets.DEPLOY_KEY }}" {
			t.Errorf("env KEY = %q, want the secret left for the worker", s.Env["KEY"])
		}
	}
	bad := store.InputValues{"target": "${{ secrets.DEPLOY_KEY }}"}
	p := store.CreateRunParams{Plan: compile(t, yaml), Definition: []byte(yaml), Trigger: store.Trigger{Event: "dispatch", Inputs: &bad}}
	if _, _, _, err := b.s.CreateRun(b.ctx, p); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("CreateRun with an input holding ${{ secrets.DEPLOY_KEY }}: %v, want ErrInvalid", err)
	}
}
