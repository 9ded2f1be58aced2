package cli

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/gantry-ci/gantry/internal/executor/docker"
	"github.com/gantry-ci/gantry/internal/executor/docker/dockertest"
)

// TestRunSIGKILLReclaimed: a `gantry run` killed with SIGKILL in the middle of a container
// job takes the job's step and its warm containers down with it (its docker worker held
// their stdin, which the engine then closes), and the next `gantry run`, on a data
// directory of its own, removes what the dead one left on the engine.
func TestRunSIGKILLReclaimed(t *testing.T) {
	t.Parallel()
	img := dockertest.Image(t, dockertest.Busybox)
	cli := dockertest.Client(t)
	data, dir := t.TempDir(), t.TempDir()
	killed := filepath.Join(dir, "killed.yml")
	if err := os.WriteFile(killed, []byte(`name: killed
jobs:
  long:
    image: `+img+`
    container: {pull: never}
    steps:
      - run: |
          while :; do echo . >> heartbeat; sleep 0.1; done &
          sleep 600
`), 0o644); err != nil {
		t.Fatal(err)
	}
	run := startChild(t, []string{"run", "--no-checkout", "--data", data, killed})
	pid := strconv.Itoa(run.cmd.Process.Pid)

	// The step beats in its workspace, on this machine's disk.
	heartbeat := func() int64 {
		m, _ := filepath.Glob(filepath.Join(data, "work", "gantry-containers-*", "gantry-job-*", "heartbeat"))
		if len(m) == 0 {
			return 0
		}
		st, err := os.Stat(m[0])
		if err != nil {
			return 0
		}
		return st.Size()
	}
	waitFor(t, "the job's step to beat", 90*time.Second, func() bool { return heartbeat() >= 3 })
	// The worker keeps two warm containers of the job's kind besides the job's own.
	waitFor(t, "the job's container and two warm ones", 90*time.Second, func() bool {
		running, _ := ownedContainers(t, cli, pid)
		return running >= 3
	})
	run.kill(t)
	killedAt := time.Now()
	waitFor(t, "the dead run's containers to stop", 20*time.Second, func() bool {
		running, _ := ownedContainers(t, cli, pid)
		return running == 0
	})
	t.Logf("the killed run's containers stopped within %s of the SIGKILL", time.Since(killedAt).Round(time.Millisecond))
	beats := heartbeat()
	time.Sleep(500 * time.Millisecond) // the step beat every 100 ms
	if n := heartbeat(); n != beats {
		t.Errorf("the step still beats after its containers stopped: %d bytes, then %d", beats, n)
	}
	if _, all := ownedContainers(t, cli, pid); all == 0 {
		t.Log("the dead run's containers were swept before the next run started (another test's docker worker)")
	}

	next := filepath.Join(dir, "next.yml")
	if err := os.WriteFile(next, []byte("name: next\njobs:\n  a:\n    image: "+img+"\n    container: {pull: never}\n    steps: [{run: 'true'}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := runCLI(t, invocation{args: []string{"run", "--no-checkout", next}}); got.code != exitOK {
		t.Fatalf("the next gantry run: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	if _, all := ownedContainers(t, cli, pid); all != 0 {
		t.Errorf("%d containers of the killed gantry run are left after the next one", all)
	}
	if n := ownedObjects(t, cli, pid); n != 0 {
		t.Errorf("%d networks and volumes of the killed gantry run are left after the next one", n)
	}
}

// processPID is the pid a docker.LabelProcess value names.
func processPID(label string) string {
	f := strings.Split(label, "/")
	if len(f) != 6 {
		return ""
	}
	return f[4]
}

// ownedContainers counts the containers that process pid made, running and all.
func ownedContainers(t *testing.T, cli *client.Client, pid string) (running, all int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", docker.LabelProcess)})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	for _, c := range cs.Items {
		if processPID(c.Labels[docker.LabelProcess]) != pid {
			continue
		}
		all++
		if c.State == "running" {
			running++
		}
	}
	return running, all
}

// ownedObjects counts the networks and volumes that process pid made.
func ownedObjects(t *testing.T, cli *client.Client, pid string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	f := client.Filters{}.Add("label", docker.LabelProcess)
	n := 0
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		t.Fatalf("list networks: %v", err)
	}
	for _, x := range ns.Items {
		if processPID(x.Labels[docker.LabelProcess]) == pid {
			n++
		}
	}
	vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		t.Fatalf("list volumes: %v", err)
	}
	for _, v := range vs.Items {
		if processPID(v.Labels[docker.LabelProcess]) == pid {
			n++
		}
	}
	return n
}
