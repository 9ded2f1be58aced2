package docker_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/executor/docker"
	"github.com/gantry-ci/gantry/internal/executor/docker/dockertest"
	"github.com/gantry-ci/gantry/internal/executor/executortest"
)

// countingEngine passes the engine's API through a socket of its own and counts the
// calls made through it, by method and path with the ids left out.
type countingEngine struct {
	mu    sync.Mutex
	calls map[string]int
}

var (
	apiVersion = regexp.MustCompile(`^/v[0-9.]+/`)
	objectID   = regexp.MustCompile(`^/(containers|exec|networks|volumes)/([^/]+)`)
	imageName  = regexp.MustCompile(`^/images/.+/json$`)
)

// callName is a call's method and path, its object's id or name as {id}.
func callName(r *http.Request) string {
	p := apiVersion.ReplaceAllString(r.URL.Path, "/")
	if m := objectID.FindStringSubmatch(p); m != nil && m[2] != "create" && m[2] != "json" {
		p = "/" + m[1] + "/{id}" + p[len(m[0]):]
	}
	if imageName.MatchString(p) {
		p = "/images/{name}/json"
	}
	return r.Method + " " + p
}

// startCountingEngine serves the engine at host (unix:// or tcp://) on a socket in a
// temp dir and returns that socket's host.
func startCountingEngine(t *testing.T, host string) (string, *countingEngine) {
	t.Helper()
	u, err := url.Parse(host)
	if err != nil {
		t.Fatal(err)
	}
	network, addr := u.Scheme, u.Host
	if network == "unix" {
		addr = u.Path
	}
	c := &countingEngine{calls: map[string]int{}}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", "docker"
		},
		// Attaches and execs upgrade their connection, which the proxy then copies
		// both ways.
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}},
	}
	sock := filepath.Join(t.TempDir(), "engine.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.calls[callName(r)]++
		c.mu.Unlock()
		proxy.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "unix://" + sock, c
}

// take returns the calls counted so far and starts counting anew.
func (c *countingEngine) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	got := c.calls
	c.calls = map[string]int{}
	return got
}

func describeCalls(calls map[string]int) string {
	var lines []string
	for k, n := range calls {
		lines = append(lines, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestWarmJobEngineCalls: a job that takes a warm container costs the engine the calls
// that make it and its replacement and run its step, and no inspect of a container: an
// inspect of its image, a container made, attached to and started for the next job, an
// exec created, started and inspected once its output ended (a few times at most, on a
// busy machine), and its container removed.
func TestWarmJobEngineCalls(t *testing.T) {
	t.Parallel()
	cli := dockertest.Client(t)
	b := &bundle{cli: cli, workerID: "test-" + executortest.Token(t)[4:], image: dockertest.Image(t, dockertest.Busybox)}
	dockertest.NoLeftovers(t, cli, b.workerID)
	host, engine := startCountingEngine(t, cli.DaemonHost())
	d, err := docker.New(t.Context(), docker.Config{Host: host, WorkerID: b.workerID, WarmPool: 1,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatalf("docker.New: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	parent := t.TempDir()
	job := func(name string) {
		s, err := d.Begin(t.Context(), jobIn(t, b, parent, name))
		if err != nil {
			t.Fatalf("Begin %s: %v", name, err)
		}
		if res, err := s.Run(t.Context(), executor.Step{Script: "true"}); err != nil || res.ExitCode != 0 {
			t.Fatalf("job %s: %+v, %v", name, res, err)
		}
		if err := s.End(context.Background()); err != nil {
			t.Fatalf("End %s: %v", name, err)
		}
		docker.WaitRemovals(d)
		waitReady(t, d, 1)
	}
	job("cold") // fills the pool
	engine.take()
	job("warm")
	if _, taken, _, _ := docker.PoolCounts(d); taken != 1 {
		t.Fatalf("warm containers taken: %d, want 1", taken)
	}
	got := engine.take()
	// Any other call is one too many: an inspect of the container above all, which the
	// warm path does without.
	want := map[string]int{
		"GET /images/{name}/json":      1,
		"POST /containers/create":      1,
		"POST /containers/{id}/attach": 1,
		"POST /containers/{id}/start":  1,
		"POST /containers/{id}/exec":   1,
		"POST /exec/{id}/start":        1,
		"GET /exec/{id}/json":          1,
		"DELETE /containers/{id}":      1,
	}
	total := 0
	for call, n := range got {
		total += n
		w, known := want[call]
		switch {
		case call == "GET /exec/{id}/json":
			// On a busy machine the engine records the exit some milliseconds after
			// the output ends, and the step may outlive the first poll: a few, not
			// one a millisecond.
			if n < 1 || n > 5 {
				t.Errorf("%s: %d calls, want 1 to 5", call, n)
			}
		case !known:
			t.Errorf("%s: %d calls the warm job did not need", call, n)
		case n != w:
			t.Errorf("%s: %d calls, want %d", call, n, w)
		}
	}
	for call, w := range want {
		if w > 0 && got[call] == 0 {
			t.Errorf("%s: none, want %d", call, w)
		}
	}
	if t.Failed() {
		t.Logf("a warm job's %d engine calls:\n%s", total, describeCalls(got))
	}
}
