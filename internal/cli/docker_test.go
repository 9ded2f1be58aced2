package cli

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/gantry-ci/gantry/internal/executor/docker"
	"github.com/gantry-ci/gantry/internal/executor/docker/dockertest"
	"github.com/gantry-ci/gantry/internal/testdb"
)

// exampleImages builds the images examples/containers.yml runs in.
func exampleImages(t *testing.T) {
	t.Helper()
	for _, name := range []string{"gantry-test/go:1.25", "gantry-test/go:1.26", dockertest.Busybox} {
		dockertest.Image(t, name)
	}
}

// TestRunContainers: gantry run starts a docker worker for a pipeline with images and
// runs the container example: each job sees its image's filesystem, not the host's, and
// the workspace at /workspace, and reaches its service by name.
func TestRunContainers(t *testing.T) {
	t.Parallel()
	exampleImages(t)
	got := runCLI(t, invocation{args: []string{"run", "--workers", "2", "--no-checkout", filepath.Join(examplesDir, "containers.yml")}})
	if got.code != exitOK {
		t.Fatalf("gantry run containers.yml: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	for _, want := range []string{
		"test (go=1.25) | gantry-test/go:1.25", "test (go=1.26) | gantry-test/go:1.26",
		"web says ok", "all images passed", "container: image gantry-test/go:1.26, services web (gantry-test/busybox:1)",
	} {
		if !strings.Contains(got.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, got.stdout)
		}
	}
	// The host has no /etc/gantry-image: the step's grep would have failed on it.
	if _, err := os.Stat("/etc/gantry-image"); err == nil {
		t.Fatal("the host has /etc/gantry-image, so the test cannot tell an image's filesystem from it")
	}
}

// TestExampleImagesScript: what make example-images builds from this machine alone
// (scripts/example-images.sh) runs examples/containers.yml: here under names of its own,
// so as not to replace the images other tests build.
func TestExampleImagesScript(t *testing.T) {
	t.Parallel()
	dockertest.Client(t)
	const prefix = "gantry-example-check/"
	names := []string{prefix + "go:1.25", prefix + "go:1.26", prefix + "busybox:1"}
	out, err := exec.Command("bash", append([]string{filepath.Join("..", "..", "scripts", "example-images.sh")}, names...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/example-images.sh: %v\n%s", err, out)
	}
	example, err := os.ReadFile(filepath.Join(examplesDir, "containers.yml"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "containers.yml")
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(string(example), "gantry-test/", prefix)), 0o644); err != nil {
		t.Fatal(err)
	}
	got := runCLI(t, invocation{args: []string{"run", "--workers", "2", "--no-checkout", file}})
	if got.code != exitOK || !strings.Contains(got.stdout, "test (go=1.26) | "+prefix+"go:1.26") || !strings.Contains(got.stdout, "web says ok") {
		t.Fatalf("gantry run containers.yml in the script's images: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
}

// TestRunContainersWithoutDocker: with the docker worker off, a job with an image cannot
// run, and gantry run says so rather than waiting for ever.
func TestRunContainersWithoutDocker(t *testing.T) {
	t.Parallel()
	got := runCLI(t, invocation{args: []string{"run", "--docker", "off", "--no-checkout", filepath.Join(examplesDir, "containers.yml")}})
	if got.code != exitFailure || !strings.Contains(got.stderr, "needs a worker with the docker executor") ||
		strings.Contains(got.stderr, "--labels docker") {
		t.Errorf("exit %d, stderr:\n%s", got.code, got.stderr)
	}
}

// TestUpDockerWorker: with a Docker Engine, gantry up's local workers also run the jobs
// with an image, so --workers 1 runs one job at a time, plain or in a container, and
// says so in its banner.
func TestUpDockerWorker(t *testing.T) {
	t.Parallel()
	dockertest.Image(t, dockertest.Busybox)
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- Run(ctx, []string{"up", "--addr", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "data"), "--workers", "1", "--docker", "on", "--lease-ttl", "2s"},
			strings.NewReader(""), &stdout, &stderr)
	}()
	defer func() { cancel(); <-exit }()
	waitFor(t, "the banner", 30*time.Second, func() bool { return upBanner.MatchString(stdout.String()) })
	base := upBanner.FindStringSubmatch(stdout.String())[1]
	if banner := stdout.String(); !strings.Contains(banner, "1 local worker, one job at a time each; jobs with an image run in containers (Docker Engine at ") {
		t.Errorf("banner:\n%s", banner)
	}
	var workers struct {
		Workers []struct {
			Name   string
			Labels []string
		}
	}
	waitFor(t, "the worker to register", 30*time.Second, func() bool {
		getJSON(t, http.DefaultClient, base+"/api/v1/workers", &workers)
		return len(workers.Workers) >= 1
	})
	if len(workers.Workers) != 1 || !strings.HasSuffix(workers.Workers[0].Name, "/local-1") || !slices.Contains(workers.Workers[0].Labels, "docker") {
		t.Errorf("workers = %+v, want local-1 alone, with the docker label", workers.Workers)
	}
	run := submitRun(t, base, "name: c\njobs:\n"+
		"  image:\n    image: "+dockertest.Busybox+"\n    container: {pull: never}\n    steps: [{run: 'grep -q busybox /etc/gantry-image && sleep 1'}]\n"+
		"  plain-1: {steps: [{run: 'sleep 1'}]}\n  plain-2: {steps: [{run: 'sleep 1'}]}\n").ID
	r := waitRun(t, base, run, func(r runDetails) bool { return r.Status == "success" || r.Status == "failed" })
	if r.Status != "success" {
		t.Fatalf("the run ended %s", r.Status)
	}
	// One at a time: no two jobs' runs overlap.
	jobs := r.Jobs
	slices.SortFunc(jobs, func(a, b jobView) int { return a.StartedAt.Compare(b.StartedAt) })
	for i := 1; i < len(jobs); i++ {
		if jobs[i].StartedAt.Before(jobs[i-1].FinishedAt) {
			t.Errorf("job %s started at %s, before job %s finished at %s: two jobs ran at once with --workers 1",
				jobs[i].Key, jobs[i].StartedAt, jobs[i-1].Key, jobs[i-1].FinishedAt)
		}
	}
}

// TestDockerWorkerSweepsAfterSIGKILL: a `gantry worker --executor docker` process killed
// with SIGKILL in the middle of a job leaves its containers (stopped: their process 1
// saw its stdin, which the worker held, close) and network on the engine; the next
// docker worker on the same work dir removes them before it claims a job. (So may any
// docker worker of this machine, which sweeps what dead processes left: one of another
// test running at the same time may be first.)
func TestDockerWorkerSweepsAfterSIGKILL(t *testing.T) {
	t.Parallel()
	img := dockertest.Image(t, dockertest.Busybox)
	cli := dockertest.Client(t)
	work := t.TempDir()
	server := startServerProcess(t, "sqlite://"+testdb.SQLitePath(t))
	args := []string{"worker", "--server", server.base, "--executor", "docker", "--work-dir", work, "--name", "sweep", "--max-jobs", "1"}
	worker := startChild(t, args)
	run := submitRun(t, server.base, `name: killed
jobs:
  long:
    image: `+img+`
    container: {pull: never}
    services:
      svc: {image: `+img+`, command: "sleep 300"}
    steps: [{run: 'echo started > started && sleep 300'}]
`)
	jobID := run.Jobs[0].ID
	// The job runs once its step has written to the workspace, on the worker's disk.
	waitFor(t, "the job's step to start", 60*time.Second, func() bool {
		m, _ := filepath.Glob(filepath.Join(work, "gantry-containers-*", "gantry-job-*", "started"))
		return len(m) > 0
	})
	if n := jobObjects(t, cli, jobID, 0); n < 3 {
		t.Fatalf("the running job has %d containers and networks labelled with it, want its container, service and network", n)
	}
	worker.kill(t)
	t.Logf("after SIGKILL %d of the job's objects are left", jobObjects(t, cli, jobID, 0))
	next := startChild(t, args) // its log is shown if the test fails
	waitFor(t, "the next worker to sweep the dead one's containers", 60*time.Second, func() bool {
		return jobObjects(t, cli, jobID, 0) == 0
	})
	// The dead worker's workspaces directory, a nosuid,nodev mount of its own, was taken
	// down by the sweep (its job's workspace stays in it, disarmed); the next worker's
	// mount goes when it stops.
	next.stop(t, 30*time.Second)
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], work+"/") {
			t.Errorf("a mount left in the work dir after the sweep and a clean stop: %s", f[4])
		}
	}
}

// jobObjects counts the containers and networks labelled with a job, with its attempt
// attempt unless that is 0.
func jobObjects(t *testing.T, cli *client.Client, jobID string, attempt int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	f := client.Filters{}.Add("label", docker.LabelJob+"="+jobID)
	if attempt != 0 {
		f = f.Add("label", docker.LabelAttempt+"="+strconv.Itoa(attempt))
	}
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		t.Fatalf("list networks: %v", err)
	}
	return len(cs.Items) + len(ns.Items)
}

// TestRunContainerUser: steps run as container.user, by uid or by a name only the image
// knows, and can write the workspace the worker checked out as its own user, and their
// HOME: the image's (which root owns in the test image), or /tmp/home for a uid the
// image does not know.
func TestRunContainerUser(t *testing.T) {
	t.Parallel()
	img := dockertest.Image(t, dockertest.Busybox)
	got := runPipeline(t, `name: users
jobs:
  uid:
    image: `+img+`
    container: {pull: never, user: "1000:1000"}
    steps: [{run: 'test "$(id -u):$(id -g)" = 1000:1000 && echo by-uid > out && cat out'}]
  name:
    image: `+img+`
    container: {pull: never, user: gantry}
    steps: [{run: 'test "$(id -un)" = gantry && mkdir -p sub && echo by-name > sub/out && cat sub/out'}]
  home:
    image: `+img+`
    container: {pull: never, user: "1000:1000"}
    steps: [{run: 'mkdir -p ~/.cache/go-build && echo x > ~/.cache/go-build/f && echo "home-$HOME"'}]
  stranger:
    image: `+img+`
    container: {pull: never, user: "2000:2000"}
    steps: [{run: 'mkdir -p ~/.cache && echo x > ~/.cache/f && echo y > f && echo "stranger-$HOME"'}]
`)
	if got.code != exitOK || !strings.Contains(got.stdout, "by-uid") || !strings.Contains(got.stdout, "by-name") ||
		!strings.Contains(got.stdout, "home-/home/gantry") || !strings.Contains(got.stdout, "stranger-/tmp/home") {
		t.Errorf("gantry run: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
}

// TestRunPrivileged: a job with container.options.privileged waits for a docker worker
// that allows them, which gantry run's is not by default: the run says so and names the
// flag, and the step never runs. With GANTRY_DOCKER_ALLOW_PRIVILEGED
// (--docker-allow-privileged) it runs
// privileged, or, on an engine that cannot start a privileged container (one without
// every capability itself, as in a container), fails before its first step with the
// engine's reason and the key that asked for it in its log.
func TestRunPrivileged(t *testing.T) {
	t.Parallel()
	img := dockertest.Image(t, dockertest.Busybox)
	def := `name: privileged
jobs:
  root:
    image: ` + img + `
    container: {pull: never, options: {privileged: true}}
    steps: [{run: 'grep CapEff /proc/self/status; echo ran'}]
`
	got := runPipeline(t, def)
	out := got.stdout + got.stderr
	if got.code != exitFailure || !strings.Contains(out, "job root cannot run here: needs a docker worker that allows privileged containers") ||
		!strings.Contains(out, "gantry run --docker-allow-privileged") || strings.Contains(got.stdout, "ran\n") {
		t.Errorf("gantry run without --docker-allow-privileged: exit %d\n%s", got.code, out)
	}

	got = runPipelineWith(t, def, map[string]string{"GANTRY_DOCKER_ALLOW_PRIVILEGED": "true"})
	if got.code == exitOK {
		// The engine gave it more than the default capabilities (0xa80425fb).
		if !strings.Contains(got.stdout, "ran") || strings.Contains(got.stdout, "00000000a80425fb") {
			t.Errorf("a privileged job that ran:\n%s", got.stdout)
		}
		return
	}
	out = got.stdout + got.stderr
	if got.code != exitFailure || !strings.Contains(out, "the job's container could not start") ||
		!strings.Contains(out, "did not start it privileged (container: {options: {privileged: true}})") || strings.Contains(got.stdout, "ran\n") {
		t.Errorf("gantry run with GANTRY_DOCKER_ALLOW_PRIVILEGED: exit %d\n%s", got.code, out)
	}
}

// TestRunImagePath: a step that adds a directory to $GANTRY_PATH in a job with an image
// keeps the image's PATH after it: a tool in a directory only the image's PATH names is
// still found by the later steps, and so is the added one's, before it.
func TestRunImagePath(t *testing.T) {
	t.Parallel()
	img := dockertest.Build(t, dockertest.Spec{Name: "gantry-test/path:1", Path: "/opt/tool/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		Files: map[string]string{"opt/tool/bin/imagetool": "#!/bin/sh\necho image-tool\n"}})
	got := runPipeline(t, `name: path
jobs:
  tools:
    image: `+img+`
    container: {pull: never}
    steps:
      - run: |
          mkdir -p added && printf '#!/bin/sh\necho added-tool\n' > added/addedtool && chmod +x added/addedtool
          echo "$PWD/added" >> "$GANTRY_PATH"
      - run: 'echo "path=$PATH"; imagetool; addedtool'
`)
	if got.code != exitOK || !strings.Contains(got.stdout, "image-tool") || !strings.Contains(got.stdout, "added-tool") ||
		!strings.Contains(got.stdout, "path=/workspace/added:/opt/tool/bin:/usr/local/sbin:") {
		t.Errorf("gantry run: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
}

// runPipeline runs `gantry run --no-checkout` of a pipeline file holding def.
func runPipeline(t *testing.T, def string) outcome {
	t.Helper()
	return runPipelineWith(t, def, nil)
}

// runPipelineWith is runPipeline with env the command's environment.
func runPipelineWith(t *testing.T, def string, env map[string]string) outcome {
	t.Helper()
	file := filepath.Join(t.TempDir(), "pipeline.yml")
	if err := os.WriteFile(file, []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	return runCLI(t, invocation{args: []string{"run", "--no-checkout", file}, env: env})
}

// TestRunContainerHomeCache: a cache path under ~ in a container job is the steps' home
// in the container: what one job saves from its user's home, the next restores into
// its own user's, owned by that user.
func TestRunContainerHomeCache(t *testing.T) {
	t.Parallel()
	img := dockertest.Image(t, dockertest.Busybox)
	got := runPipeline(t, `name: home-cache
jobs:
  save:
    image: `+img+`
    container: {pull: never, user: gantry}
    cache: [{key: tool-v1, paths: [~/.cache/tool]}]
    steps: [{run: 'test ! -e ~/.cache/tool && mkdir -p ~/.cache/tool/sub && echo saved-by-$(id -u) > ~/.cache/tool/sub/state'}]
  load:
    needs: [save]
    image: `+img+`
    container: {pull: never}
    cache: [{key: tool-v1, paths: [~/.cache/tool]}]
    steps: [{run: 'echo "home=$HOME state=$(cat ~/.cache/tool/sub/state) owner=$(stat -c %u ~/.cache/tool/sub/state)"'}]
`)
	if got.code != exitOK || !strings.Contains(got.stdout, "home=/root state=saved-by-1000 owner=0") {
		t.Errorf("gantry run: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
}
