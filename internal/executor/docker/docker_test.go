package docker_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/executor/docker"
	"github.com/gantry-ci/gantry/internal/executor/docker/dockertest"
	"github.com/gantry-ci/gantry/internal/executor/executortest"
)

// bundle is what a test of a Docker executor works with.
type bundle struct {
	cli      *client.Client
	workerID string
	image    string
}

// setup makes a Docker executor with a worker id of the test's own, and checks when the
// test ends that it left nothing on the engine.
func setup(t *testing.T) (*docker.Docker, *bundle) {
	t.Helper()
	cli := dockertest.Client(t)
	b := &bundle{cli: cli, workerID: "test-" + executortest.Token(t)[4:], image: dockertest.Image(t, dockertest.Busybox)}
	dockertest.NoLeftovers(t, cli, b.workerID)
	d, err := docker.New(t.Context(), docker.Config{WorkerID: b.workerID, DefaultImage: b.image})
	if err != nil {
		t.Fatalf("docker.New: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, b
}

func TestConformance(t *testing.T) {
	t.Parallel()
	executortest.Run(t, func(t *testing.T) executor.Executor {
		d, _ := setup(t)
		return d
	})
}

func job(b *bundle, t *testing.T) executor.Job {
	return executor.Job{ID: "job-" + executortest.Token(t)[4:], Attempt: 1, WorkerID: b.workerID, Workspace: t.TempDir(), Image: b.image, Grace: 2 * time.Second}
}

func begin(t *testing.T, d *docker.Docker, j executor.Job) executor.Session {
	t.Helper()
	s, err := d.Begin(t.Context(), j)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	t.Cleanup(func() {
		if err := s.End(context.Background()); err != nil {
			t.Errorf("End: %v", err)
		}
		docker.WaitRemovals(d)
	})
	return s
}

func run(t *testing.T, s executor.Session, st executor.Step) (executor.Result, string) {
	t.Helper()
	var out executortest.SyncBuffer
	st.Stdout, st.Stderr = &out, &out
	res, err := s.Run(t.Context(), st)
	if err != nil {
		t.Fatalf("Run %q: %v", st.Script, err)
	}
	return res, strings.TrimSpace(out.String())
}

// TestJobSeesImage: the steps see the image's filesystem, not the host's, and the
// workspace at /workspace, with Step.Dir mapped into it.
func TestJobSeesImage(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	j := job(b, t)
	if err := os.MkdirAll(filepath.Join(j.Workspace, "sub", "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(j.Workspace, "sub", "from-host"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := begin(t, d, j)

	res, out := run(t, s, executor.Step{Script: "cat /etc/gantry-image; ls /usr/local/go 2>&1 || echo no-go", Dir: j.Workspace})
	if res.ExitCode != 0 || out != dockertest.Busybox+"\nls: /usr/local/go: No such file or directory\nno-go" {
		t.Errorf("exit %d, output %q; want the image's /etc/gantry-image and no host /usr/local/go", res.ExitCode, out)
	}
	res, out = run(t, s, executor.Step{Script: "pwd; cat ../from-host; echo made > made-here", Dir: filepath.Join(j.Workspace, "sub", "dir")})
	if res.ExitCode != 0 || out != "/workspace/sub/dir\nhello" {
		t.Errorf("exit %d, output %q; want /workspace/sub/dir and the host's file", res.ExitCode, out)
	}
	if b, err := os.ReadFile(filepath.Join(j.Workspace, "sub", "dir", "made-here")); err != nil || string(b) != "made\n" {
		t.Errorf("file written by the step, seen on the worker: %q, %v", b, err)
	}
	if _, err := s.Run(t.Context(), executor.Step{Script: "true", Dir: "/etc"}); err == nil {
		t.Error("a step directory outside the workspace was accepted")
	}
	// Files a step wrote in one step are there for the next: one container per job.
	run(t, s, executor.Step{Script: "echo x > /tmp/state"})
	if res, out := run(t, s, executor.Step{Script: "cat /tmp/state"}); res.ExitCode != 0 || out != "x" {
		t.Errorf("second step: exit %d, output %q, want x", res.ExitCode, out)
	}
}

// TestStreaming: output reaches the writer while the step still runs, stdout and
// stderr apart.
func TestStreaming(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	j := job(b, t)
	s := begin(t, d, j)
	var stdout, stderr executortest.SyncBuffer
	done := make(chan executor.Result, 1)
	go func() {
		res, err := s.Run(t.Context(), executor.Step{Script: "echo first; echo oops >&2; while [ ! -e /workspace/go-on ]; do sleep 0.02; done; echo second",
			Stdout: &stdout, Stderr: &stderr})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	deadline := time.Now().Add(20 * time.Second)
	for stdout.String() != "first\n" || stderr.String() != "oops\n" {
		if time.Now().After(deadline) {
			t.Fatalf("while the step runs: stdout %q, stderr %q; want the first lines streamed", stdout.String(), stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(j.Workspace, "go-on"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res.ExitCode != 0 || stdout.String() != "first\nsecond\n" || stderr.String() != "oops\n" {
			t.Errorf("result %+v, stdout %q, stderr %q", res, stdout.String(), stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the step did not end")
	}
}

// TestUserAndLimits: the steps run as the job's user, in a container with its CPU and
// memory limits, unprivileged (no-new-privileges, docker.JobCapabilities only), and
// labelled.
func TestUserAndLimits(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	j := job(b, t)
	j.User = "gantry"
	j.MilliCPU = 1500
	j.Memory = 64 << 20
	s := begin(t, d, j)
	if res, out := run(t, s, executor.Step{Script: "id -u"}); res.ExitCode != 0 || out != "1000" {
		t.Errorf("exit %d, output %q; want uid 1000", res.ExitCode, out)
	}
	// The limits as the kernel enforces them, seen from inside: cgroup v1 files, or
	// v2's cpu.max and memory.max.
	res, out := run(t, s, executor.Step{Script: `
if [ -e /sys/fs/cgroup/cpu.max ]; then
	read q p < /sys/fs/cgroup/cpu.max; m=$(cat /sys/fs/cgroup/memory.max)
else
	q=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us); p=$(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)
	m=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes)
fi
echo "cpu $((q * 1000 / p)) memory $m"`})
	if res.ExitCode != 0 || out != "cpu 1500 memory 67108864" {
		t.Errorf("limits inside the container: exit %d, %q; want 1500 millicpu and 64MiB", res.ExitCode, out)
	}
	cs, err := b.cli.ContainerList(t.Context(), client.ContainerListOptions{Filters: client.Filters{}.Add("label", docker.LabelJob+"="+j.ID)})
	if err != nil || len(cs.Items) != 1 {
		t.Fatalf("containers of the job: %d, %v; want 1", len(cs.Items), err)
	}
	c, err := b.cli.ContainerInspect(t.Context(), cs.Items[0].ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := c.Container.HostConfig
	if hc.NanoCPUs != 1_500_000_000 || hc.Memory != 64<<20 || hc.Privileged {
		t.Errorf("NanoCpus %d, Memory %d, Privileged %v; want 1.5e9, 64MiB, false", hc.NanoCPUs, hc.Memory, hc.Privileged)
	}
	l := c.Container.Config.Labels
	if l[docker.LabelWorker] != b.workerID || l[docker.LabelJob] != j.ID || l[docker.LabelAttempt] != "1" {
		t.Errorf("labels %v", l)
	}
	// Process 1 runs as root, the steps as the job's user (id -u above): with
	// no-new-privileges, the executor's own execs as root get capabilities only so.
	if c.Container.Config.User != "0" {
		t.Errorf("process 1's user %q, want 0", c.Container.Config.User)
	}
	if !slices.Contains(hc.SecurityOpt, "no-new-privileges:true") || !slices.Equal(hc.CapDrop, []string{"ALL"}) ||
		!slices.Equal(hc.CapAdd, docker.JobCapabilities) {
		t.Errorf("SecurityOpt %q, CapDrop %q, CapAdd %q; want no-new-privileges, ALL dropped, %q added",
			hc.SecurityOpt, hc.CapDrop, hc.CapAdd, docker.JobCapabilities)
	}
}

// TestService: a service is reachable by its name from the job's steps, with its env
// and command, once its healthcheck passes; a failing one fails Begin with a clear
// message.
func TestService(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	j := job(b, t)
	j.Services = []executor.Service{{
		Name:  "web",
		Image: b.image,
		Env:   []string{"GREETING=hello from web"},
		// The index page is written after a delay, so the healthcheck has to wait.
		Command:     []string{"sh", "-c", `mkdir -p /www && sleep 0.5 && echo "$GREETING" > /www/index.html && exec httpd -f -p 8080 -h /www`},
		Ports:       []string{"8080"},
		Healthcheck: &executor.Healthcheck{Command: []string{"wget", "-q", "-O", "/dev/null", "http://localhost:8080/"}, Interval: 100 * time.Millisecond},
	}}
	s := begin(t, d, j)
	res, out := run(t, s, executor.Step{Script: "wget -q -O - http://web:8080/"})
	if res.ExitCode != 0 || out != "hello from web" {
		t.Errorf("exit %d, output %q; want the service's page", res.ExitCode, out)
	}
	// What GitHub's job.services and job.container tell.
	running := s.(executor.ServiceLister).Running()
	id, network := s.(executor.ContainerLister).JobContainer()
	if len(running) != 1 || running[0].Name != "web" || running[0].Host != "web" || running[0].Ports["8080"] != "8080" ||
		running[0].ID == "" || running[0].Network != network || id == "" || network == "" {
		t.Errorf("services %+v, job container %q on network %q; want web reached by name at 8080, on the job's network", running, id, network)
	}
}

func TestServiceUnhealthy(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	for _, tt := range []struct {
		name string
		svc  executor.Service
		want string
	}{
		{"healthcheck fails", executor.Service{Name: "db", Image: b.image, Command: []string{"sleep", "60"},
			Healthcheck: &executor.Healthcheck{Command: []string{"sh", "-c", "echo not yet; exit 3"}, Interval: 50 * time.Millisecond, Retries: 3}},
			`service db is not healthy: healthcheck "sh -c echo not yet; exit 3" failed 3 times, last exit 3: not yet`},
		// A healthcheck that never passes: one that could would race the service's exit
		// (and win it on a busy machine).
		{"service exits", executor.Service{Name: "db", Image: b.image, Command: []string{"sh", "-c", "echo bad config; exit 2"},
			Healthcheck: &executor.Healthcheck{Command: []string{"false"}, Interval: 50 * time.Millisecond, Retries: 100}},
			"exited with code 2 before it was healthy; its last output: bad config"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := job(b, t)
			j.Services = []executor.Service{tt.svc}
			s, err := d.Begin(t.Context(), j)
			if err == nil {
				_ = s.End(context.Background())
				t.Fatal("Begin succeeded with an unhealthy service")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Begin: %v\nwant it to say %q", err, tt.want)
			}
		})
	}
}

// TestPullNever: a missing image and pull: never fail Begin with the image's name, and
// nothing is created; a present image runs offline.
func TestPullNever(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	j := job(b, t)
	j.Image = "gantry-test/absent:" + executortest.Token(t)[4:]
	j.Pull = docker.PullNever
	_, err := d.Begin(t.Context(), j)
	if err == nil || !strings.Contains(err.Error(), "image "+j.Image+" not found on the worker and pull: never") {
		t.Fatalf("Begin: %v; want the missing image named", err)
	}
	j.Image = b.image
	s := begin(t, d, j)
	if res, _ := run(t, s, executor.Step{Script: "true"}); res.ExitCode != 0 {
		t.Errorf("exit %d with a present image and pull: never", res.ExitCode)
	}
	j.Pull = "sometimes"
	if _, err := d.Begin(t.Context(), j); err == nil || !strings.Contains(err.Error(), `unknown pull policy "sometimes"`) {
		t.Errorf("Begin with a bad pull policy: %v", err)
	}
}

// TestPullSharedOnce: concurrent jobs that need the same missing image make one pull,
// and each gets its error. The registry is a listener that accepts and never answers,
// so the pull lasts until the test ends it.
func TestPullSharedOnce(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	hangUp := sync.OnceFunc(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	defer hangUp()

	ref := ln.Addr().String() + "/gantry-test/hang:" + executortest.Token(t)[4:]
	const jobs = 4
	errs := make(chan error, jobs)
	for range jobs {
		go func() {
			j := job(b, t)
			j.Image = ref
			s, err := d.Begin(t.Context(), j)
			if err == nil {
				_ = s.End(context.Background())
			}
			errs <- err
		}()
	}
	deadline := time.Now().Add(20 * time.Second)
	for docker.PullWaiters(d) < jobs {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs wait on the pull", docker.PullWaiters(d), jobs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	hangUp()
	for range jobs {
		select {
		case err := <-errs:
			if err == nil || !strings.Contains(err.Error(), "pull image "+ref) {
				t.Errorf("Begin: %v; want the pull's failure", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("Begin did not return after the registry hung up")
		}
	}
	if n := docker.PullsMade(d); n != 1 {
		t.Errorf("%d pulls for %d concurrent jobs of one image, want 1", n, jobs)
	}
}

func TestRegistryAuth(t *testing.T) {
	t.Parallel()
	auth := map[string]executor.RegistryCredential{
		"registry.example.com:5000": {Username: "ci", Password: "s3cret"},
		"index.docker.io":           {Username: "hub", Password: "tok"},
	}
	for _, tt := range []struct {
		ref, named, user, server string
	}{
		{"registry.example.com:5000/team/go:1.26", "registry.example.com:5000/team/go:1.26", "ci", "registry.example.com:5000"},
		{"busybox", "docker.io/library/busybox:latest", "hub", "docker.io"},
		{"ghcr.io/x/y@sha256:" + strings.Repeat("a", 64), "ghcr.io/x/y@sha256:" + strings.Repeat("a", 64), "", ""},
	} {
		named, encoded, user, err := docker.RegistryAuth(tt.ref, auth)
		if err != nil || named != tt.named || user != tt.user {
			t.Errorf("%s: %q %q %v; want %q %q", tt.ref, named, user, err, tt.named, tt.user)
			continue
		}
		if tt.user == "" {
			if encoded != "" {
				t.Errorf("%s: credentials %q for a registry that has none", tt.ref, encoded)
			}
			continue
		}
		raw, err := base64.URLEncoding.DecodeString(encoded)
		var got struct{ Username, Password, ServerAddress string }
		if err != nil || json.Unmarshal(raw, &got) != nil || got.Username != tt.user || got.Password != auth[map[string]string{"ci": "registry.example.com:5000", "hub": "index.docker.io"}[tt.user]].Password || got.ServerAddress != tt.server {
			t.Errorf("%s: encoded credentials %q (%v)", tt.ref, raw, err)
		}
	}
	if _, _, _, err := docker.RegistryAuth("Not A Ref", nil); err == nil {
		t.Error("a malformed image reference was accepted")
	}
}

// TestStepEnvAndExit: a step sees Step.Env over the image's environment (PATH from the
// image unless the step sets it), and its exit code.
func TestStepEnvAndExit(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	s := begin(t, d, job(b, t))
	res, out := run(t, s, executor.Step{Script: `echo "$FOO|$PATH"; exit 5`, Env: []string{"FOO=bar baz"}})
	if res.ExitCode != 5 || out != "bar baz|/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" {
		t.Errorf("exit %d, output %q", res.ExitCode, out)
	}
	res, out = run(t, s, executor.Step{Shell: "bash", Script: "false | true\necho not here", Env: []string{"PATH=/bin"}})
	if res.ExitCode != 1 || out != "" {
		t.Errorf("bash pipefail: exit %d, output %q; want 1", res.ExitCode, out)
	}
	if _, err := s.Run(t.Context(), executor.Step{Shell: "fish", Script: "true"}); !errors.Is(err, executor.ErrUnknownShell) {
		t.Errorf("unknown shell: %v", err)
	}
}

// TestStopWithinGrace: a step that ignores SIGTERM, cancelled or past its timeout, is
// killed after its grace; End then removes at once a service that ignores SIGTERM,
// the job's container and the network.
func TestStopWithinGrace(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	for _, end := range []string{"cancelled", "timed out"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			j := job(b, t)
			j.Services = []executor.Service{{Name: "svc", Image: b.image, Command: []string{"sh", "-c", "trap '' TERM; while :; do sleep 1; done"}}}
			j.Grace = time.Second
			s, err := d.Begin(t.Context(), j)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			st := executor.Step{Script: "trap '' TERM; touch /workspace/ready; while :; do sleep 0.05; done", Grace: 500 * time.Millisecond}
			if end == "timed out" {
				st.Timeout = 2 * time.Second
			}
			done := make(chan executor.Result, 1)
			go func() {
				res, err := s.Run(ctx, st)
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			waitFile(t, filepath.Join(j.Workspace, "ready"))
			if end == "cancelled" {
				cancel()
			}
			select {
			case res := <-done:
				if res.Signal != "killed" || res.ExitCode != -1 || (end == "cancelled") != res.Cancelled || (end == "timed out") != res.TimedOut {
					t.Errorf("result %+v, want %s and killed", res, end)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the step did not end")
			}
			endBegan := time.Now()
			if err := s.End(context.Background()); err != nil {
				t.Fatalf("End: %v", err)
			}
			docker.WaitRemovals(d)
			// The grace is 1s; the rest is the engine's own work, on a busy machine.
			if took := time.Since(endBegan); took > 10*time.Second {
				t.Errorf("removing the job took %s with a grace of 1s", took)
			}
			f := client.Filters{}.Add("label", docker.LabelJob+"="+j.ID)
			cs, err := b.cli.ContainerList(t.Context(), client.ContainerListOptions{All: true, Filters: f})
			if err != nil || len(cs.Items) > 0 {
				t.Errorf("containers of the job after End: %d, %v", len(cs.Items), err)
			}
			ns, err := b.cli.NetworkList(t.Context(), client.NetworkListOptions{Filters: f})
			if err != nil || len(ns.Items) > 0 {
				t.Errorf("networks of the job after End: %d, %v", len(ns.Items), err)
			}
		})
	}
}

// TestKillNow: ErrKillNow stops the step at once, without its grace, and End too.
func TestKillNow(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	j := job(b, t)
	j.Grace = time.Minute
	s, err := d.Begin(t.Context(), j)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	done := make(chan executor.Result, 1)
	go func() {
		res, err := s.Run(ctx, executor.Step{Script: "trap '' TERM; touch /workspace/ready; sleep 300", Grace: time.Minute})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	waitFile(t, filepath.Join(j.Workspace, "ready"))
	cancel(executor.ErrKillNow)
	select {
	case res := <-done:
		if !res.Cancelled || res.Signal != "killed" {
			t.Errorf("result %+v, want Cancelled and killed", res)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a step cancelled with ErrKillNow still ran 20s later (its grace is a minute)")
	}
	if err := s.End(ctx); err != nil {
		t.Fatalf("End: %v", err)
	}
}

// TestSweep: a second Docker value with the same worker id removes what a killed
// predecessor left (its containers, services, volumes and network), and spares its own.
func TestSweep(t *testing.T) {
	t.Parallel()
	dead, b := setup(t)
	img := dockertest.Build(t, dockertest.Spec{Name: "gantry-test/busybox-volume:1", Volumes: []string{"/data"}})
	j := job(b, t)
	j.Image = img
	j.Services = []executor.Service{{Name: "svc", Image: img, Command: []string{"sleep", "300"}}}
	// The predecessor's session is never ended: its worker was killed.
	if _, err := dead.Begin(t.Context(), j); err != nil {
		t.Fatal(err)
	}
	left := dockertest.Leftovers(t, b.cli, b.workerID)
	var kinds []string
	for _, l := range left {
		kinds = append(kinds, strings.Fields(l)[0])
	}
	if got := strings.Join(kinds, " "); got != "container container network volume volume" {
		t.Fatalf("the dead worker's objects: %v; want two containers, a network and two volumes, all labelled", left)
	}

	// Its successor, with a job of its own running.
	next, err := docker.New(t.Context(), docker.Config{WorkerID: b.workerID, DefaultImage: b.image})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = next.Close() }) // after mine has ended
	mine := begin(t, next, job(b, t))
	n, err := next.Sweep(t.Context(), b.workerID)
	if err != nil || n != len(left) {
		t.Errorf("Sweep: removed %d, %v; want %d", n, err, len(left))
	}
	if res, _ := run(t, mine, executor.Step{Script: "true"}); res.ExitCode != 0 {
		t.Errorf("the successor's own job after the sweep: exit %d", res.ExitCode)
	}
	if n, err := next.Sweep(t.Context(), b.workerID); err != nil || n != 0 {
		t.Errorf("second Sweep: removed %d, %v; want nothing", n, err)
	}
}

// TestSweepEvery: the periodic sweeper sweeps at once when it starts.
func TestSweepEvery(t *testing.T) {
	t.Parallel()
	dead, b := setup(t)
	if _, err := dead.Begin(t.Context(), job(b, t)); err != nil {
		t.Fatal(err)
	}
	next, err := docker.New(t.Context(), docker.Config{WorkerID: b.workerID})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		next.SweepEvery(ctx, b.workerID, time.Hour)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for len(dockertest.Leftovers(t, b.cli, b.workerID)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("left after the sweeper started: %v", dockertest.Leftovers(t, b.cli, b.workerID))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-stopped
}

// TestSweepUnknown: objects of workers the caller does not know are removed; those of
// known workers stay.
func TestSweepUnknown(t *testing.T) {
	t.Parallel()
	gone, b := setup(t)
	alive, b2 := setup(t)
	if _, err := gone.Begin(t.Context(), job(b, t)); err != nil {
		t.Fatal(err)
	}
	s := begin(t, alive, job(b2, t))
	sweeper, err := docker.New(t.Context(), docker.Config{WorkerID: "sweeper"})
	if err != nil {
		t.Fatal(err)
	}
	defer sweeper.Close()
	// Only the two workers of this test are candidates: the engine is shared with
	// other tests, whose workers must be left alone.
	known := func(id string) bool { return id != b.workerID }
	if _, err := sweeper.SweepUnknown(t.Context(), known); err != nil {
		t.Fatalf("SweepUnknown: %v", err)
	}
	if left := dockertest.Leftovers(t, b.cli, b.workerID); len(left) > 0 {
		t.Errorf("objects of the unknown worker left: %v", left)
	}
	if res, _ := run(t, s, executor.Step{Script: "true"}); res.ExitCode != 0 {
		t.Errorf("the known worker's job after the sweep: exit %d", res.ExitCode)
	}
}

// TestBeginFailsClean: a job whose container cannot be created leaves nothing behind.
func TestBeginFailsClean(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	j := job(b, t)
	j.User = "no-such-user"
	j.Services = []executor.Service{{Name: "svc", Image: b.image, Command: []string{"sleep", "300"}}}
	if s, err := d.Begin(t.Context(), j); err == nil {
		// The engine refuses an unknown user at start.
		_ = s.End(context.Background())
		t.Fatal("Begin succeeded with a user the image does not have")
	}
	if left := dockertest.Leftovers(t, b.cli, b.workerID); len(left) > 0 {
		t.Errorf("after a failed Begin: %v", left)
	}
}

// TestImageWithoutShell: an image the steps cannot run in fails Begin with a message
// that says why, and leaves nothing behind.
func TestImageWithoutShell(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	j := job(b, t)
	j.Image = dockertest.Build(t, dockertest.Spec{Name: "gantry-test/busybox-nosh:1", Omit: []string{"bin/sh"}})
	s, err := d.Begin(t.Context(), j)
	if err == nil {
		_ = s.End(context.Background())
		t.Fatal("Begin succeeded in an image without sh")
	}
	if !strings.Contains(err.Error(), "start the job's container of "+j.Image) || !strings.Contains(err.Error(), `"sh"`) {
		t.Errorf("Begin: %v", err)
	}
}

func waitFile(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(name); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNetworkOnlyWhenNeeded: a job without services runs on the engine's default bridge,
// with no network of its own to create and remove; one with services, or every job with
// NetworkPerJob, gets its own. Either way nothing is left once the job has ended.
func TestNetworkOnlyWhenNeeded(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	perJob, err := docker.New(t.Context(), docker.Config{WorkerID: b.workerID, NetworkPerJob: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = perJob.Close() })
	for _, c := range []struct {
		name     string
		d        *docker.Docker
		services bool
		own      bool
	}{{"plain", d, false, false}, {"services", d, true, true}, {"per job", perJob, false, true}} {
		t.Run(c.name, func(t *testing.T) {
			j := job(b, t)
			if c.services {
				j.Services = []executor.Service{{Name: "svc", Image: b.image, Command: []string{"sleep", "300"}}}
			}
			s, err := c.d.Begin(t.Context(), j)
			if err != nil {
				t.Fatal(err)
			}
			f := client.Filters{}.Add("label", docker.LabelJob+"="+j.ID)
			ns, err := b.cli.NetworkList(t.Context(), client.NetworkListOptions{Filters: f})
			if err != nil {
				t.Fatal(err)
			}
			cs, err := b.cli.ContainerList(t.Context(), client.ContainerListOptions{Filters: f.Add("label", docker.LabelRole+"=job")})
			if err != nil || len(cs.Items) != 1 {
				t.Fatalf("job containers: %d, %v", len(cs.Items), err)
			}
			mode := cs.Items[0].HostConfig.NetworkMode
			if own := len(ns.Items) == 1 && mode == ns.Items[0].Name; own != c.own || !c.own && (len(ns.Items) != 0 || mode != "bridge") {
				t.Errorf("networks of the job %d, container's network %q; want a network of its own: %v", len(ns.Items), mode, c.own)
			}
			if res, out := run(t, s, executor.Step{Script: "echo ok"}); res.ExitCode != 0 || out != "ok" {
				t.Errorf("step: exit %d, %q", res.ExitCode, out)
			}
			if err := s.End(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
	docker.WaitRemovals(d)
	docker.WaitRemovals(perJob)
	if left := dockertest.Leftovers(t, b.cli, b.workerID); len(left) > 0 {
		t.Errorf("after the jobs ended: %v", left)
	}
}

// TestEndLeavesRemovalToSweep: End returns before the job's objects are removed, and a
// sweep of the same incarnation removes those of an ended job (as when the removal
// failed), while it spares a running job's.
func TestEndLeavesRemovalToSweep(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	running := begin(t, d, job(b, t))
	j := job(b, t)
	docker.HoldRemovals(d, true)
	t.Cleanup(func() { docker.HoldRemovals(d, false) }) // runs before running's End waits
	s, err := d.Begin(t.Context(), j)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.End(context.Background()); err != nil {
		t.Fatal(err)
	}
	f := client.Filters{}.Add("label", docker.LabelJob+"="+j.ID)
	if cs, err := b.cli.ContainerList(t.Context(), client.ContainerListOptions{All: true, Filters: f}); err != nil || len(cs.Items) != 1 {
		t.Fatalf("the ended job's containers while its removal is held: %d, %v; want 1", len(cs.Items), err)
	}
	if n, err := d.Sweep(t.Context(), b.workerID); err != nil || n != 1 {
		t.Errorf("Sweep removed %d, %v; want the ended job's container", n, err)
	}
	if cs, err := b.cli.ContainerList(t.Context(), client.ContainerListOptions{All: true, Filters: f}); err != nil || len(cs.Items) != 0 {
		t.Errorf("the ended job's containers after the sweep: %d, %v", len(cs.Items), err)
	}
	docker.HoldRemovals(d, false)
	docker.WaitRemovals(d)
	if res, out := run(t, running, executor.Step{Script: "echo still"}); res.ExitCode != 0 || out != "still" {
		t.Errorf("the running job after the sweep: exit %d, %q", res.ExitCode, out)
	}
}

// TestUserHome: a step user can write the workspace and its HOME: the image's home for a
// user it knows, though root owns it in the image, and /tmp/home for a uid it does not
// know (whose HOME would be "/"); a HOME the job sets is kept.
func TestUserHome(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	for _, c := range []struct{ user, home string }{{"gantry", "/home/gantry"}, {"1000:1000", "/home/gantry"}, {"2000:2000", "/tmp/home"}} {
		t.Run(c.user, func(t *testing.T) {
			t.Parallel()
			j := job(b, t)
			j.User = c.user
			// As the agent does for a user it cannot give the workspace to.
			if err := os.Chmod(j.Workspace, 0o777); err != nil {
				t.Fatal(err)
			}
			s := begin(t, d, j)
			res, out := run(t, s, executor.Step{Script: `mkdir -p "$HOME/.cache/go-build" && echo x > "$HOME/.cache/go-build/f" && echo y > /workspace/f && echo "$HOME $(id -u)"`})
			want := c.home + " " + strings.Split(c.user, ":")[0]
			if c.user == "gantry" {
				want = c.home + " 1000"
			}
			if res.ExitCode != 0 || out != want {
				t.Errorf("exit %d, %q; want %q", res.ExitCode, out, want)
			}
			res, out = run(t, s, executor.Step{Script: `echo "$HOME"`, Env: []string{"HOME=/workspace"}})
			if res.ExitCode != 0 || out != "/workspace" {
				t.Errorf("HOME set by the job: exit %d, %q", res.ExitCode, out)
			}
		})
	}
}

// TestPrivileged: a privileged job on an executor that does not allow them fails Begin
// before anything is created, naming the flag that allows them. On one that does, its
// container is privileged; an engine that cannot start one (one running without every
// capability, as here in a container) fails Begin with its reason and the job's key
// named, and leaves nothing behind.
func TestPrivileged(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	j := job(b, t)
	j.Privileged = true
	if s, err := d.Begin(t.Context(), j); !errors.Is(err, docker.ErrPrivilegedNotAllowed) || !strings.Contains(err.Error(), "--docker-allow-privileged") {
		if err == nil {
			_ = s.End(context.Background())
		}
		t.Fatalf("Begin of a privileged job without AllowPrivileged: %v; want ErrPrivilegedNotAllowed naming --docker-allow-privileged", err)
	}
	if left := dockertest.Leftovers(t, b.cli, b.workerID); len(left) > 0 {
		t.Errorf("after a refused Begin: %v", left)
	}

	d, err := docker.New(t.Context(), docker.Config{WorkerID: b.workerID, DefaultImage: b.image, AllowPrivileged: true})
	if err != nil {
		t.Fatalf("docker.New: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	s, err := d.Begin(t.Context(), j)
	if err != nil {
		if !strings.Contains(err.Error(), "privileged: true") || !strings.Contains(err.Error(), "start the job's container") {
			t.Errorf("Begin: %v", err)
		}
		t.Logf("this engine refuses privileged containers: %v", err)
		if left := dockertest.Leftovers(t, b.cli, b.workerID); len(left) > 0 {
			t.Errorf("after a failed Begin: %v", left)
		}
		return
	}
	defer s.End(context.Background())
	res, out := run(t, s, executor.Step{Script: "grep CapEff /proc/self/status"})
	if res.ExitCode != 0 || strings.Contains(out, "00000000a80425fb") {
		t.Errorf("a privileged step's capabilities: exit %d, %q; want more than the default set", res.ExitCode, out)
	}
}

// TestExitCodeOfQuickSteps: a step that exits at once has its own exit code, never the
// 0 the engine's client reports for an exec it has not started yet. Every step's first
// inspect meets that window (NotStartedFirst), which a step of the real engine meets
// only now and then.
func TestExitCodeOfQuickSteps(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	docker.NotStartedFirst(d)
	s := begin(t, d, job(b, t))
	for i := 0; i <= 5; i++ {
		res, err := s.Run(t.Context(), executor.Step{Script: "exit " + strconv.Itoa(i)})
		if err != nil || res.ExitCode != i {
			t.Errorf("step exit %d: %+v, %v", i, res, err)
		}
	}
}

// TestExecNeverStarted: an exec whose output ended while the engine still says it never
// started is an error, not a step that exited 0.
func TestExecNeverStarted(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	docker.NeverStarted(d)
	s := begin(t, d, job(b, t))
	res, err := s.Run(t.Context(), executor.Step{Script: "exit 0"})
	if err == nil || !strings.Contains(err.Error(), "without the engine starting it") {
		t.Errorf("a step the engine never started: %+v, %v; want an error saying so", res, err)
	}
}

// TestImagePath: a session tells the PATH of its image's config, which the agent puts
// the directories of $GANTRY_PATH before, and which is the PATH of a step that sets none.
func TestImagePath(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	const path = "/opt/tool/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	withPath := dockertest.Build(t, dockertest.Spec{Name: "gantry-test/path:1", Path: path})
	for _, tc := range []struct {
		image, want string
	}{
		{withPath, path},
		{b.image, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	} {
		j := job(b, t)
		j.Image = tc.image
		s := begin(t, d, j)
		p, ok := s.(interface{ ImagePath() string })
		if !ok {
			t.Fatalf("the session of %s has no ImagePath", tc.image)
		}
		if got := p.ImagePath(); got != tc.want {
			t.Errorf("ImagePath of %s = %q, want %q", tc.image, got, tc.want)
		}
		// What the steps get when they do not set PATH is the same.
		if res, out := run(t, s, executor.Step{Script: `echo "$PATH"`}); res.ExitCode != 0 || out != tc.want {
			t.Errorf("a step's PATH in %s: exit %d, %q; want %q", tc.image, res.ExitCode, out, tc.want)
		}
	}
}
