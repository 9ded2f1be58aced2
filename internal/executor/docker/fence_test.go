package docker_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/executor/docker"
	"github.com/gantry-ci/gantry/internal/executor/docker/dockertest"
	"github.com/gantry-ci/gantry/internal/executor/executortest"
)

// Environment that turns the test binary into a worker holding one job's container, so
// that a test can SIGKILL or SIGSTOP a real process that holds a container's lease.
const (
	fenceChildEnv     = "GANTRY_DOCKER_FENCE_CHILD"
	fenceWorkerEnv    = "GANTRY_DOCKER_FENCE_WORKER"    // the worker id
	fenceWorkspaceEnv = "GANTRY_DOCKER_FENCE_WORKSPACE" // the job's workspace
	fenceImageEnv     = "GANTRY_DOCKER_FENCE_IMAGE"
	fenceLeaseEnv     = "GANTRY_DOCKER_FENCE_LEASE" // a duration: the deadline set after Begin; "" sets none
)

// heartbeatStep writes a byte to the workspace's heartbeat file every 100 ms, from a
// child of the step, while the step sleeps.
const heartbeatStep = `while :; do echo . >> heartbeat; sleep 0.1; done &
sleep 600`

func TestMain(m *testing.M) {
	if os.Getenv(fenceChildEnv) == "1" {
		os.Exit(fenceChild())
	}
	if os.Getenv(servicesChildEnv) == "1" {
		os.Exit(servicesChild())
	}
	os.Exit(m.Run())
}

// fenceChild begins a job, sets its deadline when asked, and runs heartbeatStep in it,
// saying on stdout what happened.
func fenceChild() int {
	ctx := context.Background()
	d, err := docker.New(ctx, docker.Config{WorkerID: os.Getenv(fenceWorkerEnv)})
	if err != nil {
		fmt.Println("docker.New:", err)
		return 1
	}
	ws := os.Getenv(fenceWorkspaceEnv)
	s, err := d.Begin(ctx, executor.Job{ID: "fence-" + filepath.Base(ws), Attempt: 1, WorkerID: os.Getenv(fenceWorkerEnv),
		Workspace: ws, Image: os.Getenv(fenceImageEnv), Grace: time.Second})
	if err != nil {
		fmt.Println("Begin:", err)
		return 1
	}
	if l := os.Getenv(fenceLeaseEnv); l != "" {
		lease, err := time.ParseDuration(l)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		deadline := time.Now().Add(lease)
		s.(executor.Fenced).SetDeadline(deadline)
		fmt.Printf("deadline %d\n", deadline.UnixNano())
	}
	fmt.Println("running")
	res, err := s.Run(ctx, executor.Step{Script: heartbeatStep, Dir: ws})
	fmt.Printf("step ended: exit %d, lost %t, err %v\n", res.ExitCode, errors.Is(err, executor.ErrEnvironmentLost), err)
	return 0
}

// fenceWorker is a child process holding a job's container.
type fenceWorker struct {
	cmd      *exec.Cmd
	out      *executortest.SyncBuffer
	exited   chan struct{}
	ws       string
	deadline time.Time // zero without a lease
}

// startFenceWorker starts a child worker for b's worker id and waits until its step
// beats. The child is killed, and its container removed, when the test ends.
func startFenceWorker(t *testing.T, d *docker.Docker, b *bundle, lease string) *fenceWorker {
	t.Helper()
	w := &fenceWorker{out: &executortest.SyncBuffer{}, exited: make(chan struct{}), ws: t.TempDir()}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fenceChildEnv+"=1", fenceWorkerEnv+"="+b.workerID, fenceWorkspaceEnv+"="+w.ws,
		fenceImageEnv+"="+b.image, fenceLeaseEnv+"="+lease)
	cmd.Stdout, cmd.Stderr = w.out, w.out
	w.cmd = cmd
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		close(w.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-w.exited
		// The child's objects, of another incarnation of the worker id.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := d.Sweep(ctx, b.workerID); err != nil {
			t.Errorf("sweep the child's container: %v", err)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for beats(w.ws) < 3 {
		select {
		case <-w.exited:
			t.Fatalf("the child exited before its step beat:\n%s", w.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child's step did not beat within a minute:\n%s", w.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if lease != "" {
		sc := bufio.NewScanner(strings.NewReader(w.out.String()))
		for sc.Scan() {
			if ns, ok := strings.CutPrefix(sc.Text(), "deadline "); ok {
				n, _ := strconv.ParseInt(ns, 10, 64)
				w.deadline = time.Unix(0, n)
			}
		}
		if w.deadline.IsZero() {
			t.Fatalf("the child did not say its deadline:\n%s", w.out.String())
		}
	}
	return w
}

// beats is the size of the heartbeat file in ws.
func beats(ws string) int64 {
	st, err := os.Stat(filepath.Join(ws, "heartbeat"))
	if err != nil {
		return 0
	}
	return st.Size()
}

// stepDeath is when a job's step was seen to die.
type stepDeath struct {
	lastBeat time.Time // when the heartbeat file was last seen to grow
	stopped  time.Time // when the job's container was first seen not running
	exitCode int       // its process 1's
}

// waitStepDeath polls the heartbeat in ws and the state of worker's job container until
// the container is not running, then checks that the heartbeat has stopped.
func waitStepDeath(t *testing.T, cli *client.Client, workerID, ws string, within time.Duration) stepDeath {
	t.Helper()
	f := client.Filters{}.Add("label", docker.LabelWorker+"="+workerID).Add("label", docker.LabelRole+"=job")
	var (
		death stepDeath
		size  = beats(ws)
	)
	death.lastBeat = time.Now()
	deadline := time.Now().Add(within)
	for death.stopped.IsZero() {
		if time.Now().After(deadline) {
			t.Fatalf("the step still beats (%d bytes) %s later", beats(ws), within)
		}
		time.Sleep(10 * time.Millisecond)
		if n := beats(ws); n != size {
			size, death.lastBeat = n, time.Now()
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(cs.Items) != 1 {
			t.Fatalf("%d job containers of worker %s, want 1", len(cs.Items), workerID)
		}
		if c := cs.Items[0]; c.State != "running" {
			death.stopped = time.Now()
			r, err := cli.ContainerInspect(t.Context(), c.ID, client.ContainerInspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			death.exitCode = r.Container.State.ExitCode
		}
	}
	// Dead, not merely slow: nothing beats for a while (the step beats every 100 ms).
	time.Sleep(500 * time.Millisecond)
	if n := beats(ws); n != size {
		t.Errorf("the heartbeat grew from %d to %d bytes after the job's container stopped", size, n)
	}
	return death
}

// TestFenceWorkerKilled: a worker killed with SIGKILL while its container job's step
// runs takes the step with it: the engine closes the container's stdin, which process 1
// holds, and process 1 kills every process in the container and exits. Nothing needs a
// new worker on the same host.
func TestFenceWorkerKilled(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	w := startFenceWorker(t, d, b, "")
	killed := time.Now()
	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	death := waitStepDeath(t, b.cli, b.workerID, w.ws, 10*time.Second)
	t.Logf("fence latency after SIGKILL of the worker: container stopped within %s, last heartbeat %s after the kill",
		death.stopped.Sub(killed).Round(time.Millisecond), death.lastBeat.Sub(killed).Round(time.Millisecond))
	if death.exitCode != docker.ExitWorkerGone {
		t.Errorf("process 1 exited with %d, want %d (its worker gone)", death.exitCode, docker.ExitWorkerGone)
	}
}

// TestFenceWorkerFrozen: a worker frozen (SIGSTOP: alive, its connection to the engine
// open, doing nothing) while its container job's step runs stops feeding the container,
// which kills the step at the deadline the worker set, as the worker's own fence would
// have. The worker, thawed, finds the step lost, not failed.
func TestFenceWorkerFrozen(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	w := startFenceWorker(t, d, b, "6s")
	frozen := time.Now()
	if err := w.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if left := time.Until(w.deadline); left < time.Second {
		t.Fatalf("the worker was frozen only %s before its deadline: the machine is too slow for this test", left)
	}
	death := waitStepDeath(t, b.cli, b.workerID, w.ws, time.Until(w.deadline)+10*time.Second)
	t.Logf("fence latency of a frozen worker: frozen %s before its deadline; container stopped within %s of the deadline, last heartbeat %s after it",
		w.deadline.Sub(frozen).Round(time.Millisecond), death.stopped.Sub(w.deadline).Round(time.Millisecond),
		death.lastBeat.Sub(w.deadline).Round(time.Millisecond))
	if death.lastBeat.Before(w.deadline.Add(-200 * time.Millisecond)) {
		t.Errorf("the step stopped beating %s before the deadline", w.deadline.Sub(death.lastBeat))
	}
	if late := death.stopped.Sub(w.deadline); late > 3*time.Second {
		t.Errorf("the container stopped %s after the deadline", late)
	}
	if death.exitCode != docker.ExitLeaseOut {
		t.Errorf("process 1 exited with %d, want %d (its lease ran out)", death.exitCode, docker.ExitLeaseOut)
	}
	// Thawed, the worker learns that its step was lost with its container.
	if err := w.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the thawed child did not end:\n%s", w.out.String())
	}
	if !strings.Contains(w.out.String(), "lost true") {
		t.Errorf("the thawed worker's step did not end lost:\n%s", w.out.String())
	}
}

// TestFenceDeadline: a container whose worker keeps moving its deadline runs its steps
// past any one deadline, also after steps that killed process 1's reader (every step's
// end does); one whose deadline passes kills its step, which ends as the job's
// environment lost, not as a failure of the step.
func TestFenceDeadline(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	s := begin(t, d, job(b, t))
	f := s.(executor.Fenced)
	// Every step that ends kills process 1's reader, which process 1 has started again by
	// the time the next step runs: two processes run process 1's script (three for a
	// moment while process 1 forks its sleep).
	const count = `for i in 1 2 3 4 5; do n=$(ps -o args | grep -c "^sh -c trap 'exit 0'"); [ $n = 2 ] && break; sleep 0.05; done; echo $n`
	for range 3 {
		if res, _ := run(t, s, executor.Step{Script: "true"}); res.ExitCode != 0 {
			t.Fatalf("exit %d", res.ExitCode)
		}
		if _, out := run(t, s, executor.Step{Script: count}); out != "2" {
			t.Errorf("%s processes run process 1's script after a step ended, want 2 (process 1 and its reader)", out)
		}
	}
	const lease = 1500 * time.Millisecond
	f.SetDeadline(time.Now().Add(lease))
	renewing := make(chan struct{})
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		for {
			select {
			case <-renewing:
				return
			case <-time.After(200 * time.Millisecond):
				f.SetDeadline(time.Now().Add(lease))
			}
		}
	}()
	if res, out := run(t, s, executor.Step{Script: "sleep 3; echo slept"}); res.ExitCode != 0 || out != "slept" {
		t.Fatalf("a step renewed past its first deadline: exit %d, %q", res.ExitCode, out)
	}
	close(renewing)
	<-renewed
	deadline := time.Now().Add(lease)
	f.SetDeadline(deadline)
	_, err := s.Run(t.Context(), executor.Step{Script: "sleep 600"})
	t.Logf("the step ended %s after its deadline: %v", time.Since(deadline).Round(time.Millisecond), err)
	if !errors.Is(err, executor.ErrEnvironmentLost) || !strings.Contains(err.Error(), "stopped renewing its lease") {
		t.Errorf("a step past its container's deadline: %v; want the job's environment lost", err)
	}
	if time.Now().Before(deadline) {
		t.Errorf("the step ended before its deadline")
	}
	// A step after that finds its environment lost too.
	if _, err := s.Run(t.Context(), executor.Step{Script: "true"}); !errors.Is(err, executor.ErrEnvironmentLost) {
		t.Errorf("a step in a container that fenced itself: %v; want the job's environment lost", err)
	}
}

// TestSweepDeadProcesses: objects made by a process of this machine that is dead are
// removed by any Docker value, whatever their worker id; those of a live process stay.
func TestSweepDeadProcesses(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	dead := exec.Command("sleep", "60")
	if err := dead.Start(); err != nil {
		t.Fatal(err)
	}
	deadProc := docker.ProcessOf(dead.Process.Pid)
	_ = dead.Process.Kill()
	_ = dead.Wait()
	liveProc := docker.ProcessOf(os.Getpid())
	if deadProc == "" || liveProc == "" {
		t.Fatalf("processes %q and %q: /proc does not tell", deadProc, liveProc)
	}
	labels := func(process string) map[string]string {
		return map[string]string{docker.LabelWorker: b.workerID, docker.LabelProcess: process, docker.LabelJob: "j"}
	}
	ctx := t.Context()
	mk := func(process string) string {
		c, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Config: &container.Config{Image: b.image, Cmd: []string{"true"}, Labels: labels(process)},
		})
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	gone, kept := mk(deadProc), mk(liveProc)
	if _, err := b.cli.NetworkCreate(ctx, "gantry-test-process-"+executortest.Token(t)[4:], client.NetworkCreateOptions{Labels: labels(deadProc)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = b.cli.ContainerRemove(context.Background(), kept, client.ContainerRemoveOptions{Force: true})
	})
	if _, err := d.SweepDeadProcesses(ctx); err != nil {
		t.Fatalf("SweepDeadProcesses: %v", err)
	}
	left := strings.Join(dockertest.Leftovers(t, b.cli, b.workerID), " ")
	if strings.Contains(left, "network") || len(dockertest.Leftovers(t, b.cli, b.workerID)) != 1 {
		t.Errorf("left after the sweep: %s; want the live process's container only", left)
	}
	if _, err := b.cli.ContainerInspect(ctx, gone, client.ContainerInspectOptions{}); err == nil {
		t.Errorf("the dead process's container is still there")
	}
}
