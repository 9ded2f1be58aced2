package docker_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/executor/docker"
	"github.com/gantry-ci/gantry/internal/executor/docker/dockertest"
	"github.com/gantry-ci/gantry/internal/executor/executortest"
)

// setupPool makes a Docker executor that keeps size warm containers a kind of job.
func setupPool(t *testing.T, size int) (*docker.Docker, *bundle) {
	t.Helper()
	cli := dockertest.Client(t)
	b := &bundle{cli: cli, workerID: "test-" + executortest.Token(t)[4:], image: dockertest.Image(t, dockertest.Busybox)}
	dockertest.NoLeftovers(t, cli, b.workerID)
	d, err := docker.New(t.Context(), docker.Config{WorkerID: b.workerID, DefaultImage: b.image, WarmPool: size,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatalf("docker.New: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, b
}

// jobSteps runs every step as a job of its own through Begin, its Dir the job's
// workspace, so that the conformance suite runs in the containers the warm pool gives.
type jobSteps struct {
	d *docker.Docker
	b *bundle
}

func (x jobSteps) Run(ctx context.Context, st executor.Step) (executor.Result, error) {
	s, err := x.d.Begin(ctx, executor.Job{ID: "job-" + strings.ReplaceAll(filepath.Base(st.Dir), "_", "-"), Attempt: 1,
		WorkerID: x.b.workerID, Workspace: st.Dir, Image: x.b.image, Grace: st.Grace})
	if err != nil {
		return executor.Result{}, err
	}
	res, err := s.Run(ctx, st)
	if endErr := s.End(context.WithoutCancel(ctx)); endErr != nil && err == nil {
		err = endErr
	}
	return res, err
}

// TestConformanceJobs: the conformance suite passes with every step a job of its own,
// with the warm pool and without.
func TestConformanceJobs(t *testing.T) {
	t.Parallel()
	for _, size := range []int{0, 2} {
		t.Run("pool "+strconv.Itoa(size), func(t *testing.T) {
			t.Parallel()
			var warmed atomic.Int64 // tests whose steps ran in a warm container
			if size > 0 {
				t.Cleanup(func() {
					// TreeKilled's steps run in subtests, each with temp dirs of its own,
					// where this pool is not made: the other 7 run warm.
					if n := warmed.Load(); n < 7 {
						t.Errorf("%d of the suite's tests ran their steps in warm containers, want 7", n)
					}
				})
			}
			executortest.Run(t, func(t *testing.T) executor.Executor {
				d, b := setupPool(t, size)
				if size > 0 {
					// The suite's workspaces are temp dirs of the test, beside this
					// one: a job here fills the pool for them.
					x := jobSteps{d, b}
					if res, err := x.Run(t.Context(), executor.Step{Script: "true", Dir: t.TempDir()}); err != nil || res.ExitCode != 0 {
						t.Fatalf("the job that fills the pool: %+v, %v", res, err)
					}
					waitReady(t, d, int64(size))
					t.Cleanup(func() {
						if _, taken, _, _ := docker.PoolCounts(d); taken > 0 {
							warmed.Add(1)
						}
					})
				}
				return jobSteps{d, b}
			})
		})
	}
}

// waitReady waits until d's pool holds n warm containers made and not taken.
func waitReady(t *testing.T, d *docker.Docker, n int64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, _, _, ready := docker.PoolCounts(d)
		if ready >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the warm pool holds %d containers, want %d", ready, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// poolDirs lists the warm containers' workspaces in dir.
func poolDirs(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "gantry-pool-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// jobIn makes a job whose workspace is a new directory in parent.
func jobIn(t *testing.T, b *bundle, parent, name string) executor.Job {
	t.Helper()
	ws := filepath.Join(parent, name)
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	return executor.Job{ID: "job-" + executortest.Token(t)[4:] + "-" + name, Attempt: 1, WorkerID: b.workerID,
		Workspace: ws, Image: b.image, Grace: 2 * time.Second}
}

// TestWarmPool: a job after the first of its kind gets a container made ahead of it,
// sees its own workspace (what the worker put there before, at /workspace; what its
// steps write, on the worker at the same path), its env and directory per step, and
// its container goes with it. A job of another kind starts cold. Close removes the
// containers left in the pool and their workspaces.
func TestWarmPool(t *testing.T) {
	t.Parallel()
	d, b := setupPool(t, 1)
	parent := t.TempDir()

	first := begin(t, d, jobIn(t, b, parent, "first"))
	if res, out := run(t, first, executor.Step{Script: "echo cold"}); res.ExitCode != 0 || out != "cold" {
		t.Fatalf("first job: exit %d, %q", res.ExitCode, out)
	}
	waitReady(t, d, 1)
	if _, taken, _, _ := docker.PoolCounts(d); taken != 0 {
		t.Errorf("the first job of its kind took %d warm containers, want none", taken)
	}

	j := jobIn(t, b, parent, "second")
	if err := os.MkdirAll(filepath.Join(j.Workspace, "sub", "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(j.Workspace, "sub", "from-host"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(j.Workspace, ".hidden"), []byte("h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := begin(t, d, j)
	if _, taken, _, _ := docker.PoolCounts(d); taken != 1 {
		t.Fatalf("warm containers taken: %d, want the second job's", taken)
	}
	res, out := run(t, s, executor.Step{Script: `pwd; cat ../from-host /workspace/.hidden; echo "$FOO"; echo made > made-here`,
		Dir: filepath.Join(j.Workspace, "sub", "dir"), Env: []string{"FOO=per step"}})
	if res.ExitCode != 0 || out != "/workspace/sub/dir\nhello\nh\nper step" {
		t.Errorf("a warm job's step: exit %d, %q", res.ExitCode, out)
	}
	if got, err := os.ReadFile(filepath.Join(j.Workspace, "sub", "dir", "made-here")); err != nil || string(got) != "made\n" {
		t.Errorf("the step's file on the worker: %q, %v", got, err)
	}
	if st, err := os.Stat(j.Workspace); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the workspace after a warm start: %v, %v; want its mode kept (0700)", st, err)
	}
	// The step's env does not stay for the next: it goes per exec.
	if res, out := run(t, s, executor.Step{Script: `echo "[$FOO]"; pwd`}); res.ExitCode != 0 || out != "[]\n/workspace" {
		t.Errorf("the next step: exit %d, %q", res.ExitCode, out)
	}

	f := client.Filters{}.Add("label", docker.LabelWorker+"="+b.workerID).Add("label", docker.LabelRole+"=pool")
	cs, err := b.cli.ContainerList(t.Context(), client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	var used string
	for _, c := range cs.Items {
		if c.Labels[docker.LabelPoolDir] != "" && !strings.HasPrefix(c.Labels[docker.LabelPoolDir], filepath.Join(parent, "gantry-pool-")) {
			t.Errorf("warm container %s has its workspace at %s, want it in %s", c.ID, c.Labels[docker.LabelPoolDir], parent)
		}
		if _, err := os.Stat(c.Labels[docker.LabelPoolDir]); os.IsNotExist(err) {
			used = c.ID // taken: its workspace is the job's now
		}
	}
	if used == "" || len(cs.Items) != 2 {
		t.Fatalf("warm containers %d (taken %q); want the second job's and its replacement", len(cs.Items), used)
	}
	if err := s.End(context.Background()); err != nil {
		t.Fatal(err)
	}
	docker.WaitRemovals(d)
	if _, err := b.cli.ContainerInspect(t.Context(), used, client.ContainerInspectOptions{}); err == nil {
		t.Error("the warm container outlived its job")
	}
	if _, err := os.Stat(filepath.Join(j.Workspace, "sub", "from-host")); err != nil {
		t.Errorf("the job's workspace after its end: %v; the worker removes it, not the executor", err)
	}

	// Another kind: a user the pool was not made for.
	other := jobIn(t, b, parent, "other")
	other.User = "gantry"
	if err := os.Chmod(other.Workspace, 0o777); err != nil {
		t.Fatal(err)
	}
	o := begin(t, d, other)
	if _, taken, _, _ := docker.PoolCounts(d); taken != 1 {
		t.Errorf("warm containers taken: %d; a job of another kind took one", taken)
	}
	if res, out := run(t, o, executor.Step{Script: "id -u"}); res.ExitCode != 0 || out != "1000" {
		t.Errorf("the other kind's job: exit %d, %q", res.ExitCode, out)
	}
	waitReady(t, d, 2)
	if err := o.End(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := first.End(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if left := dockertest.Leftovers(t, b.cli, b.workerID); len(left) > 0 {
		t.Errorf("after Close: %v", left)
	}
	if dirs := poolDirs(t, parent); len(dirs) > 0 {
		t.Errorf("warm workspaces after Close: %v", dirs)
	}
}

// TestWarmPoolNotFor: a job with services, a privileged one, and one on an executor
// that gives each job a network of its own start cold, as does Run.
func TestWarmPoolNotFor(t *testing.T) {
	t.Parallel()
	d, b := setupPool(t, 1)
	parent := t.TempDir()
	s := begin(t, d, jobIn(t, b, parent, "first"))
	_ = s
	waitReady(t, d, 1)
	j := jobIn(t, b, parent, "services")
	j.Services = []executor.Service{{Name: "svc", Image: b.image, Command: []string{"sleep", "300"}}}
	begin(t, d, j)
	if _, err := d.Run(t.Context(), executor.Step{Script: "true", Dir: filepath.Join(parent, "services")}); err != nil {
		t.Fatal(err)
	}
	if _, taken, _, _ := docker.PoolCounts(d); taken != 0 {
		t.Errorf("warm containers taken: %d, want none", taken)
	}

	perJob, err := docker.New(t.Context(), docker.Config{WorkerID: b.workerID, WarmPool: 1, NetworkPerJob: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = perJob.Close() })
	begin(t, perJob, jobIn(t, b, parent, "net1"))
	begin(t, perJob, jobIn(t, b, parent, "net2"))
	if made, taken, _, _ := docker.PoolCounts(perJob); made != 0 || taken != 0 {
		t.Errorf("with a network per job the pool made %d and gave %d, want none", made, taken)
	}
}

// TestWarmPoolImageChanged: a warm container of an image whose name now stands for
// another is not given to a job, which gets the new image.
func TestWarmPoolImageChanged(t *testing.T) {
	t.Parallel()
	d, b := setupPool(t, 1)
	other := dockertest.Build(t, dockertest.Spec{Name: "gantry-test/path:1", Path: "/opt/tool/bin:/usr/sbin:/usr/bin:/sbin:/bin"})
	ref := "gantry-test/warm-retag:" + executortest.Token(t)[4:]
	tag := func(src string) {
		t.Helper()
		if _, err := b.cli.ImageTag(t.Context(), client.ImageTagOptions{Source: src, Target: ref}); err != nil {
			t.Fatal(err)
		}
	}
	tag(b.image)
	t.Cleanup(func() { _, _ = b.cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{}) })
	parent := t.TempDir()
	first := jobIn(t, b, parent, "first")
	first.Image = ref
	begin(t, d, first)
	waitReady(t, d, 1)
	tag(other)
	j := jobIn(t, b, parent, "second")
	j.Image = ref
	s := begin(t, d, j)
	if res, out := run(t, s, executor.Step{Script: "cat /etc/gantry-image"}); res.ExitCode != 0 || out != "gantry-test/path:1" {
		t.Errorf("the job after the image changed: exit %d, %q; want the new image's", res.ExitCode, out)
	}
	if _, taken, discarded, _ := docker.PoolCounts(d); taken != 0 || discarded != 1 {
		t.Errorf("warm containers taken %d, removed unused %d; want 0 and the old image's", taken, discarded)
	}
}

// TestWarmPoolSweep: the warm containers of a worker that died, and their workspaces,
// are removed by its successor's sweep.
func TestWarmPoolSweep(t *testing.T) {
	t.Parallel()
	dead, b := setupPool(t, 2)
	parent := t.TempDir()
	s, err := dead.Begin(t.Context(), jobIn(t, b, parent, "first"))
	if err != nil {
		t.Fatal(err)
	}
	_ = s // never ended: the worker was killed
	waitReady(t, dead, 2)
	if dirs := poolDirs(t, parent); len(dirs) != 2 {
		t.Fatalf("warm workspaces: %v, want 2", dirs)
	}
	next, err := docker.New(t.Context(), docker.Config{WorkerID: b.workerID})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = next.Close() })
	if n, err := next.Sweep(t.Context(), b.workerID); err != nil || n != 3 {
		t.Errorf("Sweep: removed %d, %v; want the job's container and 2 warm ones", n, err)
	}
	if dirs := poolDirs(t, parent); len(dirs) > 0 {
		t.Errorf("warm workspaces after the sweep: %v", dirs)
	}
}
