package docker_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/executor/docker"
	"github.com/gantry-ci/gantry/internal/executor/docker/dockertest"
	"github.com/gantry-ci/gantry/internal/executor/executortest"
)

// hostJob is a job whose steps run on the worker's host: no image.
func hostJob(b *bundle, t *testing.T, svcs ...executor.Service) executor.Job {
	return executor.Job{ID: "job-" + executortest.Token(t)[4:], Attempt: 1, WorkerID: b.workerID, Workspace: t.TempDir(),
		Grace: 2 * time.Second, Services: svcs}
}

// freePort is a port of 127.0.0.1 that nothing listened on a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port
}

// webService serves "$GREETING" on its ports 8080 and 9000 with busybox httpd, the
// second only after a delay, so that a health check on it has to wait.
func webService(b *bundle, ports ...string) executor.Service {
	return executor.Service{
		Name:  "web",
		Image: b.image,
		Env:   []string{"GREETING=hello from web"},
		Command: []string{"sh", "-c", `mkdir -p /www && echo "$GREETING" > /www/index.html && httpd -p 8080 -h /www && ` +
			`sleep 0.5 && exec httpd -f -p 9000 -h /www`},
		Ports:       ports,
		Healthcheck: &executor.Healthcheck{Command: []string{"wget", "-q", "-O", "/dev/null", "http://localhost:9000/"}, Interval: 100 * time.Millisecond},
	}
}

func get(url string) (string, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

// TestHostServices: the services of a job on the worker's host run on a network of the
// job's own, where they reach each other by name, their ports published on 127.0.0.1
// only: HOST:CONTAINER at HOST, a bare port at a free one, told by Running. The steps
// (this test, on the host) reach them there once their health checks have passed, and
// End removes them, and their network, before it returns.
func TestHostServices(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	fixed := freePort(t)
	probe := executor.Service{Name: "probe", Image: b.image, Command: []string{"sleep", "600"},
		// Run in the probe's container: the web service by its name.
		Healthcheck: &executor.Healthcheck{Command: []string{"wget", "-q", "-O", "/dev/null", "http://web:9000/"}, Interval: 100 * time.Millisecond}}
	j := hostJob(b, t, webService(b, strconv.Itoa(fixed)+":8080", "9000"), probe)
	svcs, err := d.BeginServices(t.Context(), j)
	if err != nil {
		t.Fatalf("BeginServices: %v", err)
	}
	ended := false
	t.Cleanup(func() {
		if !ended {
			_ = svcs.End(context.Background())
		}
	})
	running := svcs.Running()
	if len(running) != 2 || running[0].Name != "web" || running[1].Name != "probe" {
		t.Fatalf("Running() = %+v, want web and probe", running)
	}
	web := running[0]
	if web.Host != "127.0.0.1" || web.ID == "" || web.Network == "" || running[1].Network != web.Network {
		t.Errorf("web = %+v, want it at 127.0.0.1 with its container's and network's ids, on the probe's network", web)
	}
	if web.Ports["8080"] != strconv.Itoa(fixed) {
		t.Errorf("port 8080 published at %q, want %d", web.Ports["8080"], fixed)
	}
	free := web.Ports["9000"]
	if n, err := strconv.Atoi(free); err != nil || n < 1 || n > 65535 || n == fixed {
		t.Fatalf("port 9000 published at %q, want a port of its own", free)
	}
	// Health checked: port 9000 serves at once.
	for _, port := range []string{strconv.Itoa(fixed), free} {
		if got, err := get("http://127.0.0.1:" + port + "/"); err != nil || got != "hello from web" {
			t.Errorf("GET 127.0.0.1:%s: %q, %v; want the service's page", port, got, err)
		}
	}

	// Published on the loopback alone.
	r, err := b.cli.ContainerInspect(t.Context(), web.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bindings := 0
	for port, bs := range r.Container.NetworkSettings.Ports {
		for _, bnd := range bs {
			bindings++
			if bnd.HostIP.String() != "127.0.0.1" {
				t.Errorf("port %s published on %s, want 127.0.0.1 only", port, bnd.HostIP)
			}
		}
	}
	if bindings != 2 {
		t.Errorf("%d bindings of the service's ports, want 2: %v", bindings, r.Container.NetworkSettings.Ports)
	}
	if ip := nonLoopbackIP(t); ip != "" {
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, free), 2*time.Second); err == nil {
			c.Close()
			t.Errorf("the service's port %s answers on %s, not only on 127.0.0.1", free, ip)
		}
	}

	if err := svcs.End(t.Context()); err != nil {
		t.Fatalf("End: %v", err)
	}
	ended = true
	for _, s := range running {
		if _, err := b.cli.ContainerInspect(t.Context(), s.ID, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
			t.Errorf("service %s is still there after End: %v", s.Name, err)
		}
	}
	if _, err := b.cli.NetworkInspect(t.Context(), web.Network, client.NetworkInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("the services' network is still there after End: %v", err)
	}
	if _, err := get("http://127.0.0.1:" + strconv.Itoa(fixed) + "/"); err == nil {
		t.Errorf("port %d still answers after End", fixed)
	}
}

// nonLoopbackIP is an IPv4 address of this machine that is not a loopback one, "" when
// it has none.
func nonLoopbackIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return ""
}

// TestHostServicesFail: services that cannot start fail BeginServices with a message
// that says why, and leave nothing on the engine (setup checks); a cancel while a
// health check waits ends the wait.
func TestHostServicesFail(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Not deferred: the parallel subtests run once this function has returned.
	t.Cleanup(func() { _ = taken.Close() })
	takenPort := strconv.Itoa(taken.Addr().(*net.TCPAddr).Port)
	never := &executor.Healthcheck{Command: []string{"false"}, Interval: 50 * time.Millisecond, Retries: 3}
	for _, tt := range []struct {
		name   string
		mod    func(*executor.Job)
		want   string
		cancel bool
	}{
		{"host port taken", func(j *executor.Job) {
			j.Services = []executor.Service{{Name: "web", Image: b.image, Command: []string{"sleep", "60"}, Ports: []string{takenPort + ":80"}}}
		}, takenPort, false},
		{"unhealthy", func(j *executor.Job) {
			j.Services = []executor.Service{{Name: "db", Image: b.image, Command: []string{"sleep", "60"}, Ports: []string{"5432"}, Healthcheck: never}}
		}, `service db is not healthy: healthcheck "false" failed 3 times`, false},
		{"bad port", func(j *executor.Job) {
			j.Services = []executor.Service{{Name: "db", Image: b.image, Ports: []string{"70000:5432"}}}
		}, `service db: port "70000:5432": host port "70000"`, false},
		{"job with an image", func(j *executor.Job) {
			j.Image = b.image
			j.Services = []executor.Service{{Name: "db", Image: b.image}}
		}, "runs in image", false},
		{"cancelled", func(j *executor.Job) {
			j.Services = []executor.Service{{Name: "db", Image: b.image, Command: []string{"sleep", "60"}, Ports: []string{"5432"},
				Healthcheck: &executor.Healthcheck{Command: []string{"false"}, Interval: 50 * time.Millisecond, Retries: 10000}}}
		}, "context canceled", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := hostJob(b, t)
			tt.mod(&j)
			ctx := t.Context()
			if tt.cancel {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				// Cancelled once its service runs: the wait for its health is under way.
				go func() {
					defer cancel()
					f := client.Filters{}.Add("label", docker.LabelJob+"="+j.ID).Add("label", docker.LabelRole+"=service")
					for ctx.Err() == nil {
						cs, err := b.cli.ContainerList(ctx, client.ContainerListOptions{Filters: f})
						if err == nil && len(cs.Items) > 0 {
							return
						}
						time.Sleep(20 * time.Millisecond)
					}
				}()
			}
			svcs, err := d.BeginServices(ctx, j)
			if err == nil {
				_ = svcs.End(context.Background())
				t.Fatal("BeginServices succeeded")
			}
			t.Logf("BeginServices: %v", err)
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("BeginServices: %v\nwant it to say %q", err, tt.want)
			}
			if left := dockertest.Leftovers(t, b.cli, b.workerID); len(left) > 0 {
				// Other subtests' services may be running; none of this job's may be.
				for _, l := range left {
					if strings.Contains(l, strings.ReplaceAll(j.ID, "-", "_")) {
						t.Errorf("left after a failed start: %s", l)
					}
				}
			}
		})
	}
}

// TestBeginRefusesHostServices: a job written for the worker's host, with services it
// reaches on localhost, cannot run in a default image, where localhost is the job's
// container: Begin says so, and makes nothing.
func TestBeginRefusesHostServices(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	j := job(b, t)
	j.HostServices = true
	j.Services = []executor.Service{{Name: "db", Image: b.image, Ports: []string{"5432:5432"}}}
	s, err := d.Begin(t.Context(), j)
	if err == nil {
		_ = s.End(context.Background())
		t.Fatal("Begin succeeded")
	}
	if !strings.Contains(err.Error(), "run it on a docker worker without --default-image") {
		t.Errorf("Begin: %v", err)
	}
}

// Environment that turns the test binary into a worker holding a host job's services.
const (
	servicesChildEnv  = "GANTRY_DOCKER_SERVICES_CHILD"
	servicesWorkerEnv = "GANTRY_DOCKER_SERVICES_WORKER"
	servicesImageEnv  = "GANTRY_DOCKER_SERVICES_IMAGE"
)

// servicesChild starts a host job's service and waits to be killed, saying on stdout
// where the service is.
func servicesChild() int {
	ctx := context.Background()
	worker := os.Getenv(servicesWorkerEnv)
	d, err := docker.New(ctx, docker.Config{WorkerID: worker})
	if err != nil {
		fmt.Println("docker.New:", err)
		return 1
	}
	svcs, err := d.BeginServices(ctx, executor.Job{ID: "killed-" + worker, Attempt: 1, WorkerID: worker,
		Services: []executor.Service{{Name: "db", Image: os.Getenv(servicesImageEnv), Command: []string{"sleep", "600"}, Ports: []string{"5432"}}}})
	if err != nil {
		fmt.Println("BeginServices:", err)
		return 1
	}
	fmt.Println("running", svcs.Running()[0].ID)
	select {}
}

// TestHostServicesWorkerKilled: the services of a host job whose worker was killed with
// SIGKILL hold no lease and keep running, published; what the next worker on the
// machine sweeps (the objects of dead processes) removes them and their network.
func TestHostServicesWorkerKilled(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	out := &executortest.SyncBuffer{}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), servicesChildEnv+"=1", servicesWorkerEnv+"="+b.workerID, servicesImageEnv+"="+b.image)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	id := ""
	deadline := time.Now().Add(60 * time.Second)
	for id == "" {
		select {
		case <-exited:
			t.Fatalf("the child exited before its service ran:\n%s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child's service did not run within a minute:\n%s", out.String())
		}
		sc := bufio.NewScanner(strings.NewReader(out.String()))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "running "); ok {
				id = v
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	if r, err := b.cli.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{}); err != nil || !r.Container.State.Running {
		// Another test's sweep of dead processes may have been first; then there is
		// nothing left for this one to prove.
		t.Logf("the killed worker's service after the kill: %v (swept by another test's worker?)", err)
	}
	if _, err := d.SweepDeadProcesses(t.Context()); err != nil {
		t.Fatalf("SweepDeadProcesses: %v", err)
	}
	if _, err := b.cli.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("the killed worker's service is still there after the sweep: %v", err)
	}
	if left := dockertest.Leftovers(t, b.cli, b.workerID); len(left) > 0 {
		t.Errorf("left after the sweep: %s", strings.Join(left, " "))
	}
}
