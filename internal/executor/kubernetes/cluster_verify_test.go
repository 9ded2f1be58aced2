package kubernetes_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/executor/kubernetes"
	"github.com/gantry-ci/gantry/internal/executor/kubernetes/k8stest"
)

// This file forces each branch of the executor's start decision tree (Verify, Begin's
// wait, a session's lost rule) on the real cluster: every failure is one the cluster
// really gives, and each test checks the error's kind, that its message carries the
// cluster's own reason, and (newEnv) that nothing is left in the namespace.

// events collects a job's Events.
type events struct {
	mu   sync.Mutex
	msgs []string
}

func (ev *events) add(msg string) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.msgs = append(ev.msgs, msg)
}

func (ev *events) String() string {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return strings.Join(ev.msgs, "\n")
}

// beginFails begins j, which must fail, and returns how long Begin took and its error.
func beginFails(t *testing.T, en *env, j executor.Job) (time.Duration, error) {
	t.Helper()
	ev := &events{}
	j.Events = ev.add
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := en.e.Begin(ctx, j)
	took := time.Since(start)
	if err == nil {
		_ = s.End(context.Background())
		t.Fatalf("Begin succeeded after %s; events:\n%s", took, ev)
	}
	t.Logf("Begin failed after %s: %v\nevents:\n%s", took.Round(time.Millisecond), err, ev)
	return took, err
}

func wantKind(t *testing.T, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Errorf("error %q is not %q", err, kind)
	}
}

func wantIn(t *testing.T, err error, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not name %q", err, p)
		}
	}
}

// TestClusterVerifyImagePull: an image the kubelet cannot pull fails Begin as soon as
// the kubelet says so, long before the start timeout, with its reason.
func TestClusterVerifyImagePull(t *testing.T) {
	t.Parallel()
	en := newEnv(t, func(c *kubernetes.Config) { c.StartTimeout = 4 * time.Minute })
	j := en.job(t, "pull")
	j.Image = "local.test/absent:1"
	j.Pull = "if-not-present"
	took, err := beginFails(t, en, j)
	wantKind(t, err, executor.ErrImage)
	wantIn(t, err, "local.test/absent:1")
	if !strings.Contains(err.Error(), "ErrImagePull") && !strings.Contains(err.Error(), "ImagePullBackOff") {
		t.Errorf("error %q names neither ErrImagePull nor ImagePullBackOff", err)
	}
	if took > time.Minute {
		t.Errorf("Begin took %s to see an image that cannot be pulled", took)
	}
}

// TestClusterVerifyServiceCrashLoop: a service (a native sidecar) that keeps exiting
// goes CrashLoopBackOff, and Begin fails on it at once, naming the service.
func TestClusterVerifyServiceCrashLoop(t *testing.T) {
	t.Parallel()
	en := newEnv(t, func(c *kubernetes.Config) { c.StartTimeout = 4 * time.Minute })
	j := en.job(t, "crash")
	j.Services = []executor.Service{{Name: "db", Image: en.image, Command: []string{"sh", "-c", "echo boom >&2; exit 3"}}}
	took, err := beginFails(t, en, j)
	wantKind(t, err, executor.ErrEnvironment)
	wantIn(t, err, "service db", "CrashLoopBackOff", "code 3")
	if took > 2*time.Minute {
		t.Errorf("Begin took %s to see a service in a crash loop", took)
	}
}

// TestClusterVerifyService: a service with a health check is up and healthy when the
// first step runs, reached at localhost and by its name.
func TestClusterVerifyService(t *testing.T) {
	t.Parallel()
	en := newEnv(t)
	j := en.job(t, "svc")
	// The server starts 3 s late: a step run before the health check passes finds
	// nothing listening.
	j.Services = []executor.Service{{Name: "web", Image: en.image, Ports: []string{"8080"},
		Command: []string{"sh", "-c", "mkdir -p /tmp/www && echo hello-from-web > /tmp/www/index.html && sleep 3 && exec httpd -f -p 8080 -h /tmp/www"},
		Healthcheck: &executor.Healthcheck{Command: []string{"wget", "-q", "-O", "/dev/null", "http://127.0.0.1:8080/"},
			Interval: time.Second, Timeout: time.Second, Retries: 3}}}
	ev := &events{}
	j.Events = ev.add
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := en.e.Begin(ctx, j)
	if err != nil {
		t.Fatalf("Begin: %v\nevents:\n%s", err, ev)
	}
	defer func() {
		if err := s.End(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	t.Logf("events:\n%s", ev)
	var out, errb bytes.Buffer
	res, err := s.Run(ctx, executor.Step{Script: "wget -q -O- http://localhost:8080/ && wget -q -O- http://web:8080/", Stdout: &out, Stderr: &errb})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("step: %+v %v: %s %s", res, err, out.String(), errb.String())
	}
	if got := out.String(); got != "hello-from-web\nhello-from-web\n" {
		t.Errorf("step read %q from the service", got)
	}
}

// TestClusterVerifyUnschedulable: a pod no node can take fails Begin with
// ErrUnschedulable once the scheduling SLO has passed, naming the scheduler's reason.
func TestClusterVerifyUnschedulable(t *testing.T) {
	t.Parallel()
	const slo = 15 * time.Second
	for _, tt := range []struct {
		name   string
		tweak  func(*kubernetes.Config)
		job    func(*executor.Job)
		reason string
	}{
		{"cpu", nil, func(j *executor.Job) { j.MilliCPU = 64000 }, "Insufficient cpu"},
		{"node selector", func(c *kubernetes.Config) {
			c.Placement = map[string]kubernetes.Placement{"": {NodeSelector: map[string]string{"gantry.test/nowhere": "true"}}}
		}, nil, "didn't match Pod's node affinity/selector"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			en := newEnv(t, func(c *kubernetes.Config) {
				c.SchedulingSLO = slo
				if tt.tweak != nil {
					tt.tweak(c)
				}
			})
			j := en.job(t, "unsched")
			if tt.job != nil {
				tt.job(&j)
			}
			took, err := beginFails(t, en, j)
			wantKind(t, err, executor.ErrUnschedulable)
			wantIn(t, err, "not scheduled within 15s", tt.reason)
			if took < slo {
				t.Errorf("Begin gave up after %s, before the scheduling SLO of %s", took, slo)
			}
			if took > slo+time.Minute {
				t.Errorf("Begin took %s, long past the scheduling SLO of %s", took, slo)
			}
		})
	}
}

// signal is a writer that closes seen once it has been written want.
type signal struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func newSignal(want string) *signal { return &signal{want: want, seen: make(chan struct{})} }

func (s *signal) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	had := strings.Contains(s.buf.String(), s.want)
	s.buf.Write(p)
	if !had && strings.Contains(s.buf.String(), s.want) {
		close(s.seen)
	}
	return len(p), nil
}

func (s *signal) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

type runResult struct {
	res executor.Result
	err error
}

// startLong begins j and starts a step that prints "started" then sleeps; it returns
// the session, the name of the job's pod and the channel the step's end comes on, once
// the step is running.
func startLong(t *testing.T, en *env, j executor.Job) (executor.Session, string, <-chan runResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := en.e.Begin(ctx, j)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	t.Cleanup(func() {
		if err := s.End(context.Background()); err != nil {
			t.Errorf("End: %v", err)
		}
	})
	pods, err := en.c.Client.CoreV1().Pods(en.ns).List(ctx, metav1.ListOptions{LabelSelector: kubernetes.LabelManaged + "=gantry"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the job's pod: %v %v", pods, err)
	}
	out := newSignal("started")
	done := make(chan runResult, 1)
	go func() {
		res, err := s.Run(context.Background(), executor.Step{Script: "echo started; sleep 120; echo finished", Stdout: out, Stderr: out})
		done <- runResult{res, err}
	}()
	select {
	case <-out.seen:
	case r := <-done:
		t.Fatalf("the step ended before it started: %+v %v: %s", r.res, r.err, out)
	case <-time.After(time.Minute):
		t.Fatalf("the step has not started after a minute: %q", out)
	}
	return s, pods.Items[0].Name, done
}

// awaitRun waits for a step's end, failing the test when it has not come within bound.
func awaitRun(t *testing.T, done <-chan runResult, bound time.Duration) (runResult, time.Duration) {
	t.Helper()
	start := time.Now()
	select {
	case r := <-done:
		return r, time.Since(start)
	case <-time.After(bound):
		t.Fatalf("the step has not ended %s after its pod went", bound)
	}
	panic("unreachable")
}

// TestClusterVerifyLost: a step whose pod is deleted or evicted under it ends with an
// error wrapping ErrEnvironmentLost (the agent's lost rule), not with its exit code.
func TestClusterVerifyLost(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		remove func(ctx context.Context, en *env, pod string) error
	}{
		{"deleted", func(ctx context.Context, en *env, pod string) error {
			return en.c.Client.CoreV1().Pods(en.ns).Delete(ctx, pod, metav1.DeleteOptions{})
		}},
		{"evicted", func(ctx context.Context, en *env, pod string) error {
			return en.c.Client.PolicyV1().Evictions(en.ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: en.ns}})
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			en := newEnv(t)
			_, pod, done := startLong(t, en, en.job(t, "lost"))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := tt.remove(ctx, en, pod); err != nil {
				t.Fatal(err)
			}
			r, took := awaitRun(t, done, 2*time.Minute)
			t.Logf("Run returned %s after the pod was %s: %+v %v", took.Round(time.Millisecond), tt.name, r.res, r.err)
			if r.err == nil {
				t.Fatalf("Run returned %+v and no error for a step whose pod was %s", r.res, tt.name)
			}
			wantKind(t, r.err, executor.ErrEnvironmentLost)
			wantIn(t, r.err, pod)
		})
	}
}

// TestClusterVerifySlowInit: an init container that takes its time (the workspace
// server answers 8 s late) is a slow start, not a failure: Begin reports the
// Initializing stage and succeeds, and the workspace is in the pod.
func TestClusterVerifySlowInit(t *testing.T) {
	t.Parallel()
	const delay = 8 * time.Second
	l, err := net.Listen("tcp", "10.244.0.1:0")
	if err != nil {
		t.Fatalf("listen where the pods reach the host: %v", err)
	}
	var ws *kubernetes.WorkspaceServer
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		ws.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	ws = kubernetes.NewWorkspaceServer("http://" + l.Addr().String())
	en := newEnv(t, func(c *kubernetes.Config) {
		c.Workspaces = ws
		c.CheckInterval, c.CheckStep = time.Second, time.Second
	})
	j := en.job(t, "slow")
	if err := os.WriteFile(filepath.Join(j.Workspace, "hello.txt"), []byte("from the worker\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	j.Events = ev.add
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	s, err := en.e.Begin(ctx, j)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Begin: %v\nevents:\n%s", err, ev)
	}
	defer func() {
		if err := s.End(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	t.Logf("Begin took %s; events:\n%s", took.Round(time.Millisecond), ev)
	if took < delay {
		t.Errorf("Begin returned after %s, before the init container could have had the workspace (%s)", took, delay)
	}
	if !strings.Contains(ev.String(), "pod initializing") || !strings.Contains(ev.String(), "the workspace init container is running") {
		t.Errorf("the events do not show the pod initializing:\n%s", ev)
	}
	var out, errb bytes.Buffer
	res, err := s.Run(ctx, executor.Step{Script: "cat hello.txt", Stdout: &out, Stderr: &errb})
	if err != nil || res.ExitCode != 0 || out.String() != "from the worker\n" {
		t.Errorf("cat the workspace's file: %+v %v: %q %q", res, err, out.String(), errb.String())
	}
}

// TestClusterVerifyKubeletKilled: the kubelet dies while a step runs. The step's exec
// stream goes through the kubelet, so Run returns an error at once rather than hang;
// the kubelet is started again (scripts/k8s.sh up) and the node is Ready again before
// the test ends. Not parallel: with the kubelet down no other pod of this package can
// start or exec.
func TestClusterVerifyKubeletKilled(t *testing.T) {
	en := newEnv(t)
	c := en.c
	pidFile := filepath.Join(filepath.Dir(c.Kubeconfig), "pids", "kubelet")
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "scripts", "k8s.sh")); err != nil {
		t.Fatalf("no scripts/k8s.sh to restart the kubelet with: %v", err)
	}
	// No cluster test of another process runs while the kubelet is down; the lock is
	// given back once it runs again (restart, below or at cleanup).
	release := c.KubeletDown(t)

	_, pod, done := startLong(t, en, en.job(t, "kubelet"))
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("kubelet pid file %s: %v", pidFile, err)
	}
	restarted := false
	restart := func() {
		if restarted {
			return
		}
		restarted = true
		since := time.Now().Truncate(time.Second)
		// Tried again when it fails: a node left without its kubelet would fail every
		// cluster test after this one.
		for try := 1; try <= 3; try++ {
			cmd := exec.Command("bash", "scripts/k8s.sh", "up")
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			if err == nil {
				break
			}
			t.Errorf("scripts/k8s.sh up (try %d): %v\n%s", try, err, out)
			time.Sleep(2 * time.Second)
		}
		waitNodeReady(t, c, since, 3*time.Minute)
		release()
	}
	// Registered before the kill: whatever fails below, the kubelet runs again.
	t.Cleanup(restart)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the kubelet (pid %d): %v", pid, err)
	}
	r, took := awaitRun(t, done, 90*time.Second)
	t.Logf("Run returned %s after the kubelet was killed: %+v %v", took.Round(time.Millisecond), r.res, r.err)
	restart()
	if r.err == nil {
		t.Fatalf("Run returned %+v and no error, though the step's exec went through the dead kubelet", r.res)
	}
	wantIn(t, r.err, pod)
	if took > time.Minute {
		t.Errorf("Run took %s to see its exec stream break", took)
	}
}

// waitNodeReady waits for the node to report itself Ready after since (a node status
// reported before the kubelet died stays Ready for a while).
func waitNodeReady(t *testing.T, c *k8stest.Cluster, since time.Time, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		n, err := c.Client.CoreV1().Nodes().Get(ctx, c.Node, metav1.GetOptions{})
		cancel()
		if err == nil {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue && !cond.LastHeartbeatTime.Time.Before(since) {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("node %s not Ready %s after the kubelet was started again: %v", c.Node, within, err)
			return
		}
		time.Sleep(time.Second)
	}
}
