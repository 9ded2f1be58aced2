package cli

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/gantry-ci/gantry/internal/executor/docker/dockertest"
	"github.com/gantry-ci/gantry/internal/testdb"
)

// webImage is a service image whose command serves "$GREETING" ("hello" unless set)
// over HTTP on its port 8080 at once and on 9000 half a second later, so that a health
// check on 9000 has to wait.
func webImage(t *testing.T) string {
	t.Helper()
	return dockertest.Build(t, dockertest.Spec{Name: "gantry-test/web:1", Cmd: []string{"sh", "-c",
		`mkdir -p /www && echo "${GREETING:-hello}" > /www/index.html && httpd -p 8080 -h /www && sleep 0.5 && exec httpd -f -p 9000 -h /www`}})
}

// freeLoopbackPort is a port of 127.0.0.1 that nothing listened on a moment ago.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// dockerWorker starts a server and a `gantry worker --executor docker` on work, both
// processes of their own, and returns the server's base URL and the worker's arguments.
func dockerWorker(t *testing.T, work string) (string, []string, *serverProcess) {
	t.Helper()
	server := startServerProcess(t, "sqlite://"+testdb.SQLitePath(t))
	args := []string{"worker", "--server", server.base, "--executor", "docker", "--work-dir", work, "--name", "host-services", "--max-jobs", "2"}
	return server.base, args, startChild(t, args)
}

// readID reads the id a step wrote to path, once it is there.
func readID(t *testing.T, path string) string {
	t.Helper()
	var id string
	waitFor(t, "the step to write "+filepath.Base(path), 60*time.Second, func() bool {
		b, err := os.ReadFile(path)
		id = strings.TrimSpace(string(b))
		return err == nil && id != ""
	})
	return id
}

// gone says whether container id is no longer on the engine.
func gone(t *testing.T, cli *client.Client, id string) bool {
	t.Helper()
	_, err := cli.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
	if err != nil && !cerrdefs.IsNotFound(err) {
		t.Fatalf("inspect %s: %v", id, err)
	}
	return err != nil
}

// TestDockerWorkerHostServices: a workflow job on the runner itself, with a service, runs
// on a docker worker: its steps, on the worker's host, reach the service on 127.0.0.1 at
// the HOST of a HOST:CONTAINER port and at the free port a bare one was published at,
// read from job.services, once the health check has passed; the service and its network
// are gone when the job has ended, whether it succeeded or failed.
func TestDockerWorkerHostServices(t *testing.T) {
	t.Parallel()
	img := webImage(t)
	cli := dockertest.Client(t)
	dir := t.TempDir()
	base, _, worker := dockerWorker(t, t.TempDir())
	// Stopped, not killed, when the test ends: its workspaces' mount goes with it.
	defer worker.stop(t, 30*time.Second)
	fixed := strconv.Itoa(freeLoopbackPort(t))
	service := `
    services:
      web:
        image: ` + img + `
        env: {GREETING: hello from web}
        ports: ['` + fixed + `:8080', '9000']
        options: --health-cmd "wget -q -O /dev/null http://localhost:9000/" --health-interval 1s --health-retries 30
`
	run := submitRun(t, base, `on: push
jobs:
  ok:
    runs-on: ubuntu-latest`+service+`    steps:
      - run: echo "${{ job.services.web.id }}" > `+dir+`/ok.id
      - run: |
          test "${{ job.services.web.ports['8080'] }}" = `+fixed+`
          busybox wget -q -O - http://127.0.0.1:`+fixed+`/ | grep -x 'hello from web'
          busybox wget -q -O - "http://127.0.0.1:${{ job.services.web.ports['9000'] }}/" | grep -x 'hello from web'
          test "$GANTRY_SERVICE_WEB_PORT_9000" = "${{ job.services.web.ports[9000] }}"
  fails:
    runs-on: ubuntu-latest
    services:
      web:
        image: `+img+`
        ports: ['9000']
    steps:
      - run: echo "${{ job.services.web.id }}" > `+dir+`/fails.id
      - run: exit 3
`)
	r := waitRunWithin(t, base, run.ID, 2*time.Minute, func(r runDetails) bool { return r.Status == "failed" || r.Status == "success" })
	for _, j := range r.Jobs {
		want := map[string]string{"ok": "success", "fails": "failed"}[j.Key]
		if j.Status != want {
			t.Errorf("job %s %s, want %s; log:\n%s", j.Key, j.Status, want, call(t, http.MethodGet, base+"/api/v1/jobs/"+j.ID+"/logs", "").body)
		}
	}
	// Removed before the job was reported.
	for _, name := range []string{"ok", "fails"} {
		id := readID(t, filepath.Join(dir, name+".id"))
		if !gone(t, cli, id) {
			t.Errorf("job %s's service %s is still there after the run ended", name, id)
		}
	}
	for _, j := range r.Jobs {
		if n := jobObjects(t, cli, j.ID, 0); n != 0 {
			t.Errorf("%d containers and networks of job %s are left after the run ended", n, j.Key)
		}
	}
}

// TestDockerWorkerHostServicesCancelled: cancelling a run whose job on the host is in a
// step removes the job's service and network; a docker worker killed with SIGKILL while
// such a job runs leaves them (nothing of theirs holds the worker's lease), and the next
// docker worker on its work dir removes them before it claims a job.
func TestDockerWorkerHostServicesCancelled(t *testing.T) {
	t.Parallel()
	img := webImage(t)
	cli := dockertest.Client(t)
	dir, work := t.TempDir(), t.TempDir()
	base, args, worker := dockerWorker(t, work)
	job := func(name string) string {
		return `on: push
jobs:
  ` + name + `:
    runs-on: ubuntu-latest
    services:
      web: {image: ` + img + `, ports: ['8080']}
    steps:
      - run: echo "${{ job.services.web.id }}" > ` + dir + `/` + name + `.id && sleep 300
`
	}

	cancelled := submitRun(t, base, job("cancelled"))
	id := readID(t, filepath.Join(dir, "cancelled.id"))
	if gone(t, cli, id) {
		t.Fatal("the service is not there while the step runs")
	}
	c, err := (&clientConfig{Server: base}).client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.call(t.Context(), http.MethodPost, "/api/v1/runs/"+cancelled.ID+"/cancel", nil, nil); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	r := waitRunWithin(t, base, cancelled.ID, time.Minute, func(r runDetails) bool { return r.Status == "cancelled" })
	waitFor(t, "the cancelled job's service and network to go", 30*time.Second, func() bool { return jobObjects(t, cli, r.Jobs[0].ID, 0) == 0 })

	killed := submitRun(t, base, job("killed"))
	id = readID(t, filepath.Join(dir, "killed.id"))
	worker.kill(t)
	// Any docker worker of this machine may sweep a dead process's objects (another
	// test's): then this one has nothing left to prove about the next worker.
	t.Logf("after SIGKILL of the worker the service is there: %t", !gone(t, cli, id))
	next := startChild(t, args)
	// Its sweep takes the dead worker's workspaces' mount down too; its own goes when it
	// stops.
	defer next.stop(t, 30*time.Second)
	// The job's next attempt may start meanwhile, on the next worker: its objects are
	// not the killed one's.
	waitFor(t, "the next worker to remove the killed one's service and network", 60*time.Second, func() bool {
		return jobObjects(t, cli, killed.Jobs[0].ID, 1) == 0
	})
	if !gone(t, cli, id) {
		t.Errorf("the killed worker's service %s is still there", id)
	}
	// A next attempt of the job, if the lease's loss gave it one, must not keep the
	// next worker draining.
	if _, err := c.call(t.Context(), http.MethodPost, "/api/v1/runs/"+killed.ID+"/cancel", nil, nil); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	waitRunWithin(t, base, killed.ID, time.Minute, func(r runDetails) bool { return runTerminal(r.Status) })
}

// TestRunHostServices: gantry run starts a docker worker for a job without an image that
// has services (Gantry's own language), whose steps reach them on 127.0.0.1 at the ports
// GANTRY_SERVICE_<NAME>_PORT_<PORT> name.
func TestRunHostServices(t *testing.T) {
	t.Parallel()
	img := webImage(t)
	got := runPipeline(t, `name: host-services
jobs:
  test:
    services:
      web:
        image: `+img+`
        ports: [8080]
        healthcheck: {command: "wget -q -O /dev/null http://localhost:9000/", interval: 200ms}
    steps:
      - run: busybox wget -q -O - "http://$GANTRY_SERVICE_WEB_HOST:$GANTRY_SERVICE_WEB_PORT_8080/" | sed 's/^/web says /'
`)
	if got.code != exitOK || !strings.Contains(got.stdout, "web says hello") || !strings.Contains(got.stdout, "service web: port 8080 at 127.0.0.1:") {
		t.Errorf("gantry run: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
}
