package agent

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	engine "github.com/moby/moby/client"

	"github.com/gantry-ci/gantry/internal/actions/actionstest"
	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/executor/docker"
	"github.com/gantry-ci/gantry/internal/executor/docker/dockertest"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// dockerWait bounds a run of the docker tests: a busy engine on fuse-overlayfs takes
// seconds to start a container, and the first run builds the action's image.
const dockerWait = 2 * time.Minute

// dockerWorker is a docker worker's executor as `gantry worker --executor docker` makes
// it: jobs with an image run in containers on the engine, the others on the host, and
// docker actions run on the engine.
type dockerWorker struct {
	executor.Shell
	engine *docker.Docker
}

func (w dockerWorker) Begin(ctx context.Context, j executor.Job) (executor.Session, error) {
	return w.engine.Begin(ctx, j)
}

func (w dockerWorker) RunAction(ctx context.Context, c docker.ActionContainer) (executor.Result, error) {
	return w.engine.RunAction(ctx, c)
}

// startDockerWorker starts a worker with the docker executor, carrying only the label
// docker (which a job asks for with runs-on: [self-hosted, docker]), so that the shell
// worker of actionsBundle never takes the docker tests' jobs.
func (b *bundle) startDockerWorker(t *testing.T, cfg docker.Config) {
	t.Helper()
	cfg.WorkerID = "docker-actions-test"
	d, err := docker.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	b.startWith(t, Config{Name: "docker", MaxJobs: 2, Executor: dockerWorker{engine: d}})
}

// dockerAction is a Dockerfile action FROM the test image: its pre-entrypoint says its
// first argument, saves state and writes pre-ran in the workspace; its entrypoint says its
// arguments and input x, checks the workspace and the files GitHub mounts, writes an
// output, a variable and a file of the workspace, and fails with exit code 7 when x is
// "fail".
func dockerAction(base string) map[string]string {
	return map[string]string{
		"action.yml": `name: dock
inputs:
  x: {required: true}
  greeting: {default: hello}
outputs:
  said: {description: what it said}
runs:
  using: docker
  image: Dockerfile
  pre-entrypoint: /pre.sh
  args: ['${{ inputs.greeting }}', 'second arg']
  env:
    FROM_ACTION: set-by-action
`,
		"Dockerfile": "FROM " + base + "\nCOPY entrypoint.sh pre.sh /\nENTRYPOINT [\"/entrypoint.sh\"]\n",
		"pre.sh": `#!/bin/sh
echo "pre says $1"
echo "phase=pre" >> "$GITHUB_STATE"
echo pre > /github/workspace/pre-ran
`,
		"entrypoint.sh": `#!/bin/sh
echo "args: $1 / $2 ($#), state $STATE_phase"
echo "x is $INPUT_X, env $FROM_ACTION, home $HOME, in $PWD"
test "$PWD" = /github/workspace || exit 11
echo "marker: $(cat /github/workspace/marker)"
test "$GITHUB_WORKSPACE" = /github/workspace || exit 12
test "$GITHUB_EVENT_PATH" = /github/workflow/event.json && grep -q acme/app "$GITHUB_EVENT_PATH" || exit 13
test "$RUNNER_TEMP" = /github/runner_temp && touch "$RUNNER_TEMP/t" || exit 14
test "$GITHUB_OUTPUT" = /github/file_commands/output || exit 15
touch "$HOME/h" || exit 16
echo "said=$1 $INPUT_X" >> "$GITHUB_OUTPUT"
echo "FROM_DOCKER=yes" >> "$GITHUB_ENV"
echo made > /github/workspace/made-by-action
if [ "$INPUT_X" = fail ]; then echo "failing as asked" >&2; exit 7; fi
`,
	}
}

// TestDockerActions runs a Dockerfile action of a repository, built on the worker's
// engine, and a docker://image step, on a docker worker, in a job on the host and in a
// job in a container on a network of its own: the action's pre-entrypoint runs at the
// job's start, before the first step; the workspace, inputs, args and env reach
// the containers, their outputs and $GITHUB_ENV reach later steps, their output is in
// the log, and no container is left.
func TestDockerActions(t *testing.T) {
	t.Parallel()
	cli := dockertest.Client(t)
	base := dockertest.Image(t, dockertest.Busybox)
	dir := t.TempDir()
	actionstest.Repo(t, dir, "acme", "dock", dockerAction(base), "v1")
	b, r := actionsBundle(t, dir)
	b.startDockerWorker(t, docker.Config{NetworkPerJob: true})

	steps := `
      - run: test "$(cat pre-ran)" = pre
      - run: echo from-the-workspace > marker; hostname -i > job-ip 2>/dev/null || true
      - id: d
        uses: acme/dock@v1
        with: {x: world}
      - run: |
          test "${{ steps.d.outputs.said }}" = "hello world"
          test "$FROM_DOCKER" = yes
          test "$(cat made-by-action)" = made
      - id: img
        uses: docker://` + base + `
        with:
          entrypoint: sh
          args: -c "echo image says $INPUT_X; echo \"out=from the image\" >> $GITHUB_OUTPUT; hostname -i > /github/workspace/action-ip"
          x: 'y z'
      - run: test "${{ steps.img.outputs.out }}" = "from the image"
`
	for _, c := range []struct{ name, container string }{
		{"host", ""},
		{"container", "    container: " + base + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, run := b.submitActions(t, r, "on: push\njobs:\n  t:\n    runs-on: [self-hosted, docker]\n"+c.container+"    steps:"+steps+
				"      - run: cat job-ip action-ip\n")
			id := uuidOf(t, run)
			b.waitRunWithin(t, id, dockerWait)
			b.wantSuccess(t, id)
			log := b.jobLog(t, id, "t")
			for _, want := range []string{
				"pre says hello",
				"args: hello / second arg (2), state pre",
				"x is world, env set-by-action, home /github/home, in /github/workspace",
				"marker: from-the-workspace",
				"image says y z",
			} {
				if !strings.Contains(log, want) {
					t.Errorf("log lacks %q:\n%s", want, log)
				}
			}
			job, _ := b.jobByKey(t, id, "t")
			if c.container != "" {
				// The action's container is on the job's network, not the default bridge.
				ips := strings.Fields(log[strings.LastIndex(log, "step cat job-ip action-ip"):])
				var subnets []string
				for _, f := range ips {
					if p := strings.Split(f, "."); len(p) == 4 {
						subnets = append(subnets, p[0]+"."+p[1]+"."+p[2])
					}
				}
				if len(subnets) != 2 || subnets[0] != subnets[1] {
					t.Errorf("the job's container and the action's are on different networks (%v):\n%s", subnets, log)
				}
			}
			wantNoActionContainers(t, cli, job.ID.String())
		})
	}
}

// TestDockerActionFailures: a docker action that exits 7 fails its step and the job
// with that code, and a later if: failure() step runs; a docker:// step that fails does
// too. A job with either asks for a worker with the docker executor.
func TestDockerActionFailures(t *testing.T) {
	t.Parallel()
	cli := dockertest.Client(t)
	base := dockertest.Image(t, dockertest.Busybox)
	dir := t.TempDir()
	actionstest.Repo(t, dir, "acme", "dock", dockerAction(base), "v1")
	b, r := actionsBundle(t, dir)
	b.startDockerWorker(t, docker.Config{})

	for _, c := range []struct {
		name, step string
		code       int
		log        string
	}{
		{"action", "uses: acme/dock@v1\n        with: {x: fail}", 7, "failing as asked"},
		{"image", "uses: docker://" + base + "\n        with: {args: sh -c 'echo image fails; exit 5'}", 5, "image fails"},
		// The step's timeout stops the container: the step fails, the job is not
		// cancelled.
		{"timeout", "uses: docker://" + base + "\n        timeout-minutes: 0.05\n        with: {entrypoint: sh, args: -c 'trap \"echo stopped; exit 143\" TERM; sleep 300 & wait'}", -1, "timed out after 3s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, run := b.submitActions(t, r, "on: push\njobs:\n  t:\n    runs-on: [self-hosted, docker]\n    steps:\n      - "+c.step+
				"\n      - run: echo skipped\n      - if: failure()\n        run: echo cleanup after failure\n")
			id := uuidOf(t, run)
			if got := b.waitRunWithin(t, id, dockerWait); got.Status != store.RunFailed {
				t.Fatalf("run %s, want failed", got.Status)
			}
			job, steps := b.jobByKey(t, id, "t")
			if job.ExitCode == nil || *job.ExitCode != c.code {
				t.Errorf("job exit code %v, want %d", job.ExitCode, c.code)
			}
			if steps[0].Status != store.StepFailed || steps[1].Status != store.StepSkipped || steps[2].Status != store.StepSuccess {
				t.Errorf("steps %s %s %s, want failed skipped success", steps[0].Status, steps[1].Status, steps[2].Status)
			}
			log := b.jobLog(t, id, "t")
			if !strings.Contains(log, c.log) || !strings.Contains(log, "cleanup after failure") {
				t.Errorf("log:\n%s", log)
			}
			wantNoActionContainers(t, cli, job.ID.String())
		})
	}

	t.Run("asks for the docker executor", func(t *testing.T) {
		t.Parallel()
		// A job with a docker:// step or a docker action waits for a worker with the
		// docker executor: a shell worker never takes it and fails.
		for _, uses := range []string{"docker://" + base, "acme/dock@v1"} {
			p, _ := b.submitActions(t, r, "on: push\njobs:\n  t:\n    runs-on: [self-hosted]\n    steps:\n      - uses: "+uses+"\n        with: {x: y}\n")
			if got := p.Jobs[0].RunsOn; !slices.Contains(got, pipeline.DockerLabel) {
				t.Errorf("uses: %s: the job asks for %v, want the %s label among them", uses, got, pipeline.DockerLabel)
			}
		}
	})
}

// wantNoActionContainers fails the test when a container of job is left on the engine.
func wantNoActionContainers(t *testing.T, cli *engine.Client, job string) {
	t.Helper()
	cs, err := cli.ContainerList(t.Context(), engine.ContainerListOptions{All: true,
		Filters: engine.Filters{}.Add("label", docker.LabelJob+"="+job).Add("label", docker.LabelRole+"=action")})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, c := range cs.Items {
		left = append(left, slices.Concat(c.Names, []string{string(c.State)})...)
	}
	if len(left) > 0 {
		t.Errorf("action containers left: %v", left)
	}
}

// TestDockerStepCancel: cancelling a run stops a docker:// step's container (SIGTERM,
// which it traps and says so) and removes it.
func TestDockerStepCancel(t *testing.T) {
	t.Parallel()
	cli := dockertest.Client(t)
	base := dockertest.Image(t, dockertest.Busybox)
	b, r := actionsBundle(t, t.TempDir())
	b.startDockerWorker(t, docker.Config{})
	_, run := b.submitActions(t, r, "on: push\njobs:\n  t:\n    runs-on: [self-hosted, docker]\n    steps:\n      - uses: docker://"+base+
		"\n        with: {entrypoint: sh, args: -c 'trap \"echo got TERM; exit 143\" TERM; echo started; sleep 300 & wait'}\n")
	id := uuidOf(t, run)
	deadline := time.Now().Add(dockerWait)
	for !strings.Contains(b.jobLog(t, id, "t"), "started") {
		if time.Now().After(deadline) {
			t.Fatalf("the step never started:\n%s", b.jobLog(t, id, "t"))
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-t.Context().Done():
			return
		}
	}
	if err := b.st.CancelRun(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if got := b.waitRunWithin(t, id, dockerWait); got.Status != store.RunCancelled {
		t.Fatalf("run %s, want cancelled", got.Status)
	}
	if log := b.jobLog(t, id, "t"); !strings.Contains(log, "got TERM") {
		t.Errorf("the container was not sent SIGTERM:\n%s", log)
	}
	job, _ := b.jobByKey(t, id, "t")
	wantNoActionContainers(t, cli, job.ID.String())
}
