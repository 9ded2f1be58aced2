package kubernetes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-ci/gantry/internal/executor/docker/dockertest"
	"github.com/gantry-ci/gantry/internal/executor/executortest"
	"github.com/gantry-ci/gantry/internal/executor/kubernetes/k8stest"
)

// These tests run Gantry as a user does: a `gantry server` and a `gantry worker
// --executor kubernetes --kubeconfig ...` outside the cluster (processes of the static
// binary), pipelines submitted with `gantry submit`, and the job pods on the real
// cluster, reached at the pod bridge's gateway for their workspaces.

// bridgeIP is the host's address on the cluster's pod bridge (scripts/k8s.sh), where
// pods reach a worker outside the cluster.
const bridgeIP = "10.244.0.1"

// gproc is a gantry process, leader of its own process group.
type gproc struct {
	name   string
	cmd    *exec.Cmd
	out    *executortest.SyncBuffer
	exited chan struct{}
}

func startGantry(t *testing.T, name string, args ...string) *gproc {
	t.Helper()
	bin, err := k8stest.GantryBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "GANTRY_TOKEN=", "GANTRY_SERVER=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &gproc{name: name, cmd: cmd, out: &executortest.SyncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill(t)
		if t.Failed() {
			t.Logf("%s's output:\n%s", name, p.out.Tail(60))
		}
	})
	return p
}

// kill SIGKILLs the process group and waits for the leader.
func (p *gproc) kill(t *testing.T) {
	select {
	case <-p.exited:
		return
	default:
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill %s: %v", p.name, err)
	}
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		t.Errorf("%s did not exit after SIGKILL", p.name)
	}
}

func (p *gproc) waitFor(t *testing.T, re *regexp.Regexp, within time.Duration) string {
	t.Helper()
	deadline := time.After(within)
	for {
		if m := re.FindStringSubmatch(p.out.String()); m != nil {
			return m[len(m)-1]
		}
		select {
		case <-p.exited:
			t.Fatalf("%s exited (%v) before logging %q:\n%s", p.name, p.cmd.ProcessState, re, p.out.Tail(40))
		case <-deadline:
			t.Fatalf("%s did not log %q within %s:\n%s", p.name, re, within, p.out.Tail(40))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func freePort(t *testing.T, host string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("find a free port on %s: %v", host, err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// stack is a coordinator and a kubernetes worker outside the cluster.
type stack struct {
	c      *k8stest.Cluster
	ns     string
	dir    string
	server string // http://127.0.0.1:PORT
	image  string // the jobs' image
	pod    string // the init image
	worker *gproc
	wargs  []string
}

var (
	listeningRe  = regexp.MustCompile(`"msg":"gantry server listening","addr":"([^"]+)"`)
	registeredRe = regexp.MustCompile(`"msg":"worker registered","worker":"([^"]+)"`)
)

func newStack(t *testing.T) *stack {
	t.Helper()
	c := k8stest.Get(t)
	s := &stack{c: c, ns: c.Namespace(t), dir: t.TempDir()}
	s.image = c.Image(t, dockertest.Spec{Name: dockertest.Busybox})
	s.pod = c.GantryImage(t)
	addr := freePort(t, "127.0.0.1")
	srv := startGantry(t, "server", "server", "--addr", addr, "--db", "sqlite://"+filepath.Join(s.dir, "gantry.db"),
		"--auth", "off", "--lease-ttl", "6s", "--heartbeat-every", "2s", "--reap-every", "1s", "--log-format", "json")
	srv.waitFor(t, listeningRe, 30*time.Second)
	s.server = "http://" + addr
	ws := freePort(t, bridgeIP)
	s.wargs = []string{"worker", "--server", s.server, "--executor", "kubernetes", "--kubeconfig", c.Kubeconfig,
		"--namespace", s.ns, "--pod-image", s.pod, "--pod-workspace-addr", ws, "--pod-workspace-url", "http://" + ws,
		"--labels", "kubernetes", "--name", "k8s-" + filepath.Base(s.dir), "--work-dir", filepath.Join(s.dir, "work"),
		"--max-jobs", "4", "--pod-check-interval", "1s", "--pod-check-step", "1s", "--log-format", "json"}
	s.startWorker(t)
	t.Cleanup(func() { c.NoLeftovers(t, s.ns, 60*time.Second) })
	return s
}

func (s *stack) startWorker(t *testing.T) {
	t.Helper()
	s.worker = startGantry(t, "worker", s.wargs...)
	s.worker.waitFor(t, registeredRe, 60*time.Second)
}

// gantry runs a client command against the stack's server and returns its stdout.
func (s *stack) gantry(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin, err := k8stest.GantryBinary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "GANTRY_SERVER="+s.server, "GANTRY_TOKEN=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("gantry %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// submit submits a pipeline and returns the run's id.
func (s *stack) submit(t *testing.T, pipeline string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "pipeline.yml")
	if err := os.WriteFile(f, []byte(pipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := s.gantry(t, "submit", "--json", f)
	if err != nil {
		t.Fatal(err)
	}
	var run struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &run); err != nil || run.ID == "" {
		t.Fatalf("submit answered %q: %v", out, err)
	}
	return run.ID
}

type runView struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Jobs   []struct {
		ID      string `json:"id"`
		Name    string `json:"name"`
		Status  string `json:"status"`
		Attempt int    `json:"attempt"`
		Failure string `json:"failure_kind"`
		Error   string `json:"error"`
	} `json:"jobs"`
}

func (s *stack) run(t *testing.T, id string) runView {
	t.Helper()
	resp, err := http.Get(s.server + "/api/v1/runs/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v runView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("GET run %s: %v", id, err)
	}
	return v
}

// waitRun waits until the run has one of the statuses.
func (s *stack) waitRun(t *testing.T, id string, within time.Duration, statuses ...string) runView {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		v := s.run(t, id)
		for _, st := range statuses {
			if v.Status == st {
				return v
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s after %s, want %v: %+v", id, v.Status, within, statuses, v)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (s *stack) waitJob(t *testing.T, id, job string, within time.Duration, status string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		v := s.run(t, id)
		for _, j := range v.Jobs {
			if j.Name == job && j.Status == status {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s of run %s is not %s after %s: %+v", job, id, status, within, v)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (s *stack) logs(t *testing.T, id, job string) string {
	t.Helper()
	out, err := s.gantry(t, "logs", id, job)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestClusterWorkerPipeline: a two-job pipeline runs in pods through a worker outside
// the cluster: the checkout-less workspace goes in (an artifact of the first job is
// in the second's workspace), step files ($GANTRY_OUTPUT, $GANTRY_ENV, $GANTRY_PATH)
// work between steps and jobs, a cache saved by one run is restored in the next, a
// failing step fails its job with its exit code, and no pod is left.
func TestClusterWorkerPipeline(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pipeline := fmt.Sprintf(`name: k8s-e2e
defaults:
  runs_on: [kubernetes]
  image: %[1]s
jobs:
  build:
    outputs:
      version: ${{ steps.v.outputs.version }}
    cache:
      - key: deps-v1
        paths: [.deps]
    artifacts: { paths: [out/*] }
    steps:
      - id: v
        run: |
          echo "version=1.2.3" >> "$GANTRY_OUTPUT"
          echo "CHANNEL=stable" >> "$GANTRY_ENV"
          mkdir -p tools && printf '#!/bin/sh\necho tool-ran\n' > tools/mytool && chmod +x tools/mytool
          echo "$PWD/tools" >> "$GANTRY_PATH"
      - run: |
          echo "channel=$CHANNEL"
          mytool
          if [ -f .deps/lib ]; then echo "cache: hit $(cat .deps/lib)"; else echo "cache: miss"; mkdir -p .deps; echo "$RUN_MARK" > .deps/lib; fi
          mkdir -p out && echo "built $(hostname)" > out/app.txt
        env:
          RUN_MARK: first
  test:
    needs: [build]
    env:
      VERSION: ${{ needs.build.outputs.version }}
    steps:
      - run: |
          echo "version=$VERSION"
          cat out/app.txt
  fail:
    steps:
      - run: echo failing; exit 7
`, s.image)
	id := s.submit(t, pipeline)
	v := s.waitRun(t, id, 4*time.Minute, "failed", "success", "cancelled")
	statuses := map[string]string{}
	for _, j := range v.Jobs {
		statuses[j.Name] = j.Status
	}
	if statuses["build"] != "success" || statuses["test"] != "success" || statuses["fail"] != "failed" {
		t.Fatalf("jobs %v, want build and test success, fail failed: %+v", statuses, v)
	}
	build := s.logs(t, id, "build")
	for _, want := range []string{"channel=stable", "tool-ran", "cache: miss"} {
		if !strings.Contains(build, want) {
			t.Errorf("build's log lacks %q:\n%s", want, build)
		}
	}
	test := s.logs(t, id, "test")
	if !strings.Contains(test, "version=1.2.3") || !regexp.MustCompile(`built gantry-`).MatchString(test) {
		t.Errorf("test's log lacks the output and the artifact built in build's pod:\n%s", test)
	}
	if fail := s.logs(t, id, "fail"); !strings.Contains(fail, "failing") || !strings.Contains(fail, "7") {
		t.Errorf("fail's log:\n%s", fail)
	}

	// The cache the first run saved is restored in the pod of the second.
	id2 := s.submit(t, strings.Replace(pipeline, "RUN_MARK: first", "RUN_MARK: second", 1))
	s.waitRun(t, id2, 4*time.Minute, "failed", "success", "cancelled")
	if build := s.logs(t, id2, "build"); !strings.Contains(build, "cache: hit first") {
		t.Errorf("second run's build did not restore the first's cache:\n%s", build)
	}
}

// TestClusterWorkerCancelAndTimeout: a cancel reaches the step in its pod (its TERM
// handler runs) and a job past its timeout is stopped; both pods go.
func TestClusterWorkerCancelAndTimeout(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	id := s.submit(t, fmt.Sprintf(`name: k8s-cancel
defaults:
  runs_on: [kubernetes]
  image: %[1]s
  cancel_grace: 20s
jobs:
  long:
    steps:
      - run: |
          trap 'echo got TERM, cleaning up; exit 0' TERM
          echo started
          while :; do sleep 0.2; done
  slow:
    timeout: 8s
    steps:
      - run: echo slow started; sleep 600
`, s.image))
	s.waitJob(t, id, "long", 3*time.Minute, "running")
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(s.logs(t, id, "long"), "started") {
		if time.Now().After(deadline) {
			t.Fatal("the long step did not start")
		}
		time.Sleep(500 * time.Millisecond)
	}
	if _, err := s.gantry(t, "cancel", id); err != nil {
		t.Fatal(err)
	}
	v := s.waitRun(t, id, 3*time.Minute, "cancelled", "failed")
	if log := s.logs(t, id, "long"); !strings.Contains(log, "got TERM, cleaning up") {
		t.Errorf("the cancel did not reach the step's TERM handler in its pod:\n%s", log)
	}
	for _, j := range v.Jobs {
		if j.Name == "slow" && j.Status != "failed" && j.Status != "cancelled" {
			t.Errorf("slow: %+v, want it stopped", j)
		}
	}
}

// ledger is an HTTP server on the pod bridge that the steps of a job beat to from their
// pods (GET /beat/POD every half second): which pods ran a step, and when.
type ledger struct {
	addr  string
	mu    sync.Mutex
	beats map[string][2]time.Time // pod -> first and last beat
}

func newLedger(t *testing.T) *ledger {
	t.Helper()
	ln, err := net.Listen("tcp", bridgeIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	l := &ledger{addr: ln.Addr().String(), beats: map[string][2]time.Time{}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pod, ok := strings.CutPrefix(r.URL.Path, "/beat/")
		if !ok || pod == "" {
			http.NotFound(w, r)
			return
		}
		now := time.Now()
		l.mu.Lock()
		b, seen := l.beats[pod]
		if !seen {
			b[0] = now
		}
		b[1] = now
		l.beats[pod] = b
		l.mu.Unlock()
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l
}

// script is a step that beats for n seconds, then says it is done.
func (l *ledger) script(n int) string {
	return fmt.Sprintf(`echo "attempt started in $(hostname)"
i=0; while [ $i -lt %d ]; do wget -q -O /dev/null "http://%s/beat/$(hostname)" || true; sleep 0.5; i=$((i+1)); done
echo "attempt done"`, 2*n, l.addr)
}

// beat reports whether the pod has beat to the ledger.
func (l *ledger) beat(pod string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.beats[pod]
	return ok
}

// pods returns the pods that beat, and fails the test when two of them beat over
// overlapping spans of time: the job ran twice at once.
func (l *ledger) check(t *testing.T) []string {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var pods []string
	for p := range l.beats {
		pods = append(pods, p)
	}
	sort.Slice(pods, func(i, j int) bool { return l.beats[pods[i]][0].Before(l.beats[pods[j]][0]) })
	for i := 1; i < len(pods); i++ {
		prev, cur := l.beats[pods[i-1]], l.beats[pods[i]]
		if !cur[0].After(prev[1]) {
			t.Errorf("the job ran twice at once: pod %s beat from %s to %s, pod %s from %s",
				pods[i-1], prev[0].Format(time.StampMilli), prev[1].Format(time.StampMilli), pods[i], cur[0].Format(time.StampMilli))
		}
	}
	return pods
}

// submitBeating submits a one-job pipeline (retried on lost) whose step beats to the
// ledger for the given seconds, and waits until a pod has begun the step and its first
// beat has reached the ledger: the pod is known to run the step before a test cuts it
// off. It returns the run's id and the pod's name.
func (s *stack) submitBeating(t *testing.T, l *ledger, name string, seconds int) (id, pod string) {
	t.Helper()
	id = s.submit(t, fmt.Sprintf(`name: %[1]s
jobs:
  work:
    runs_on: [kubernetes]
    image: %[2]s
    retry: { max_attempts: 3, on: [lost] }
    steps:
      - run: |
%[3]s
`, name, s.image, indent(l.script(seconds), 10)))
	started := regexp.MustCompile(`attempt started in (gantry-[a-z0-9-]+)`)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if m := started.FindAllStringSubmatch(s.logs(t, id, "work"), -1); len(m) > 0 {
			pod = m[len(m)-1][1]
			if l.beat(pod) {
				return id, pod
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pod began the step of %s and beat to the ledger (pod %q)", name, pod)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// TestClusterWorkerKilled: a worker SIGKILLed while its job's pod runs a step leaves
// the pod behind; the worker restarted under the same name deletes it before it claims
// anything, and the job, requeued when its lease expires (the lost rule), runs again
// to success. The pods' beats to a ledger show that two pods never ran the step at
// once.
func TestClusterWorkerKilled(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	l := newLedger(t)
	id, pod := s.submitBeating(t, l, "k8s-kill", 10)
	ctx := t.Context()
	s.worker.kill(t)
	// The orphaned pod is still there: nothing but the worker would remove it.
	if _, err := s.c.Client.CoreV1().Pods(s.ns).Get(ctx, pod, metav1.GetOptions{}); err != nil {
		t.Fatalf("the killed worker's pod %s: %v", pod, err)
	}
	s.startWorker(t)
	s.worker.waitFor(t, regexp.MustCompile(`"msg":"kubernetes executor ready","swept_pods":(1)`), 30*time.Second)
	v := s.waitRun(t, id, 4*time.Minute, "success", "failed", "cancelled")
	if v.Status != "success" {
		t.Fatalf("run after the worker's kill: %+v\nlog:\n%s", v, s.logs(t, id, "work"))
	}
	if pods := l.check(t); len(pods) != 2 || pods[0] != pod {
		t.Errorf("pods that ran the step: %v, want the killed worker's %s, then one more", pods, pod)
	}
}

// TestClusterWorkerPodDeleted: a job pod deleted while its step runs (as an eviction
// or a node drain does) fails the attempt as lost, and the job's retry on lost runs it
// again in a new pod, never at the same time as the first.
func TestClusterWorkerPodDeleted(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	l := newLedger(t)
	id, pod := s.submitBeating(t, l, "k8s-deleted", 6)
	if err := s.c.Client.CoreV1().Pods(s.ns).Delete(t.Context(), pod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	v := s.waitRun(t, id, 4*time.Minute, "success", "failed", "cancelled")
	if v.Status != "success" || len(v.Jobs) != 1 || v.Jobs[0].Attempt != 2 {
		t.Fatalf("run after its pod was deleted: %+v, want success on attempt 2\nlog:\n%s", v, s.logs(t, id, "work"))
	}
	if pods := l.check(t); len(pods) != 2 || pods[0] != pod {
		t.Errorf("pods that ran the step: %v, want the deleted %s, then one more", pods, pod)
	}
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}
