package kubernetes

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/executor"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// signalClock is a fake clock that says each wait asked of it, so a test advances it
// only once the executor waits.
type signalClock struct {
	*clock.Fake
	asked chan time.Duration
}

func (c *signalClock) After(d time.Duration) <-chan time.Time {
	ch := c.Fake.After(d)
	c.asked <- d
	return ch
}

// next is the next wait the executor asks for.
func (c *signalClock) next(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-c.asked:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("the executor asked for no wait within 10s")
		return 0
	}
}

// scriptedExecer runs a step's exec with a function of the test.
type scriptedExecer struct {
	mu    sync.Mutex
	calls []execCall
	fn    func(c execCall, ctl *bufio.Reader, stdout, stderr io.Writer) (int, error)
	// cut leaves out pod-exec's end frame, as a stream cut short does.
	cut bool
}

type execCall struct {
	Namespace, Pod, Container string
	Cmd                       []string
	Req                       ExecRequest
}

func (s *scriptedExecer) Exec(ctx context.Context, ns, pod, container string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	c := execCall{Namespace: ns, Pod: pod, Container: container, Cmd: cmd}
	var br *bufio.Reader
	// pod-exec reads its request from stdin; pod-tar has none.
	if stdin != nil {
		br = bufio.NewReader(stdin)
		line, err := br.ReadBytes('\n')
		if err != nil {
			return -1, fmt.Errorf("read the request: %w", err)
		}
		if err := json.Unmarshal(line, &c.Req); err != nil {
			return -1, err
		}
	}
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
	// What the step writes comes back as pod-exec sends it, with its end frame.
	var fw *frameWriter
	switch c.Req.Output {
	case OutputMerged:
		fw = &frameWriter{w: stdout}
		stdout, stderr = frameStream{fw, 1}, frameStream{fw, 1}
	case OutputFramed:
		fw = &frameWriter{w: stdout}
		stdout, stderr = frameStream{fw, 1}, frameStream{fw, 2}
	}
	code, err := s.fn(c, br, stdout, stderr)
	if fw != nil && err == nil && !s.cut {
		fw.end(code)
	}
	return code, err
}

type bundle struct {
	cs     *fake.Clientset
	clk    *signalClock
	exec   *scriptedExecer
	events *eventLog
}

type eventLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *eventLog) add(m string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, m)
}

func (l *eventLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...)
}

func setup(t *testing.T, mod func(*Config)) (*Executor, *bundle) {
	t.Helper()
	b := &bundle{
		cs:     fake.NewClientset(),
		clk:    &signalClock{Fake: clock.NewFake(t0), asked: make(chan time.Duration, 100)},
		exec:   &scriptedExecer{},
		events: &eventLog{},
	}
	cfg := Config{
		Client: b.cs, Execer: b.exec, Namespace: "ci", InitImage: "gantry:dev", Owner: "worker-a",
		Clock: b.clk, Logger: slog.New(slog.NewTextHandler(tWriter{t}, nil)),
	}
	if mod != nil {
		mod(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e, b
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func testJob(b *bundle) executor.Job {
	return executor.Job{ID: "01JOB", Attempt: 2, WorkerID: "w-1", Workspace: "/var/gantry/ws/01JOB", Image: "golang:1.26",
		Grace: 5 * time.Second, Events: b.events.add}
}

// scriptStatus makes every read of a pod answer the status the script gives for the
// fake clock's time: the executor may check as often as it likes, and sees what a real
// cluster would show at that moment.
func scriptStatus(b *bundle, script func(since time.Duration, pod *corev1.Pod)) {
	b.cs.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		g := a.(k8stesting.GetAction)
		obj, err := b.cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), g.GetNamespace(), g.GetName())
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod).DeepCopy()
		script(b.clk.Now().Sub(t0), pod)
		return true, pod, nil
	})
}

func setStatus(pod *corev1.Pod, phase corev1.PodPhase, conds []corev1.PodCondition, init, containers []corev1.ContainerStatus) {
	pod.Status = corev1.PodStatus{Phase: phase, Conditions: conds, InitContainerStatuses: init, ContainerStatuses: containers}
}

var insufficient = []corev1.PodCondition{cond(corev1.PodScheduled, corev1.ConditionFalse, "Unschedulable", "0/3 nodes are available: 3 Insufficient cpu.")}

func podCount(t *testing.T, b *bundle) int {
	t.Helper()
	list, err := b.cs.CoreV1().Pods("ci").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

type beginResult struct {
	s   executor.Session
	err error
}

func begin(e *Executor, j executor.Job) <-chan beginResult {
	ch := make(chan beginResult, 1)
	go func() {
		s, err := e.Begin(context.Background(), j)
		ch <- beginResult{s, err}
	}()
	return ch
}

func await(t *testing.T, ch <-chan beginResult) beginResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("Begin did not return within 10s:\n%s", buf[:runtime.Stack(buf, true)])
		return beginResult{}
	}
}

// TestBeginBackoff: the checks come at once, then after 30 s, 40 s, 50 s; every change
// of verdict is one event, in order; the pod is ready at 120 s.
func TestBeginBackoff(t *testing.T) {
	t.Parallel()
	e, b := setup(t, nil)
	scriptStatus(b, func(since time.Duration, pod *corev1.Pod) {
		switch {
		case since < 70*time.Second:
			setStatus(pod, corev1.PodPending, insufficient, nil, nil)
		case since < 120*time.Second:
			pod.Spec.NodeName = "node-2"
			setStatus(pod, corev1.PodPending, []corev1.PodCondition{scheduledCond}, []corev1.ContainerStatus{runningC(initContainer, false)}, nil)
		default:
			pod.Spec.NodeName = "node-2"
			setStatus(pod, corev1.PodRunning, []corev1.PodCondition{scheduledCond}, []corev1.ContainerStatus{initDone}, []corev1.ContainerStatus{runningC(jobContainer, true)})
		}
	})
	res := begin(e, testJob(b))
	var waits []time.Duration
	for range 3 {
		d := b.clk.next(t)
		waits = append(waits, d)
		b.clk.Advance(d)
	}
	r := await(t, res)
	if r.err != nil {
		t.Fatalf("Begin: %v", r.err)
	}
	if want := []time.Duration{30 * time.Second, 40 * time.Second, 50 * time.Second}; !slices.Equal(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
	ev := b.events.all()
	want := []string{"created for image golang:1.26", "pod pending: 0/3 nodes are available: 3 Insufficient cpu.",
		"pod initializing on node node-2: the workspace init container is running", "pod running on node node-2"}
	if len(ev) != len(want) {
		t.Fatalf("events %q, want %d like %q", ev, len(want), want)
	}
	for i := range want {
		if !strings.Contains(ev[i], want[i]) {
			t.Errorf("event %d %q, want it to contain %q", i, ev[i], want[i])
		}
	}
	if n := podCount(t, b); n != 1 {
		t.Errorf("%d pods after Begin, want 1", n)
	}
	if err := r.s.End(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := podCount(t, b); n != 0 {
		t.Errorf("%d pods after End, want 0", n)
	}
}

// TestBeginCustomBackoff: the schedule is configurable.
func TestBeginCustomBackoff(t *testing.T) {
	t.Parallel()
	e, b := setup(t, func(c *Config) { c.CheckInterval, c.CheckStep = 5*time.Second, 5*time.Second })
	scriptStatus(b, func(since time.Duration, pod *corev1.Pod) {
		if since < 30*time.Second {
			setStatus(pod, corev1.PodPending, nil, nil, nil)
			return
		}
		setStatus(pod, corev1.PodRunning, []corev1.PodCondition{scheduledCond}, nil, []corev1.ContainerStatus{runningC(jobContainer, true)})
	})
	res := begin(e, testJob(b))
	var waits []time.Duration
	for range 3 {
		d := b.clk.next(t)
		waits = append(waits, d)
		b.clk.Advance(d)
	}
	if r := await(t, res); r.err != nil {
		t.Fatal(r.err)
	}
	if want := []time.Duration{5 * time.Second, 10 * time.Second, 15 * time.Second}; !slices.Equal(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
}

// TestBeginSchedulingSLO: a pod never placed fails Begin at the SLO, checked exactly
// then, with ErrUnschedulable (a timeout to retry.on) and the scheduler's reason; the
// pod is deleted.
func TestBeginSchedulingSLO(t *testing.T) {
	t.Parallel()
	e, b := setup(t, nil)
	scriptStatus(b, func(_ time.Duration, pod *corev1.Pod) { setStatus(pod, corev1.PodPending, insufficient, nil, nil) })
	res := begin(e, testJob(b))
	var waits []time.Duration
	for range 4 {
		d := b.clk.next(t)
		waits = append(waits, d)
		b.clk.Advance(d)
	}
	r := await(t, res)
	// 0, 30, 70, 120 and then 180 s: the last wait is cut to the SLO.
	if want := []time.Duration{30 * time.Second, 40 * time.Second, 50 * time.Second, 60 * time.Second}; !slices.Equal(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
	if !errors.Is(r.err, executor.ErrUnschedulable) || executor.RetryKind(r.err) != executor.KindTimeout {
		t.Fatalf("Begin error %v, want ErrUnschedulable", r.err)
	}
	if !strings.Contains(r.err.Error(), "not scheduled within 3m0s: pod pending: 0/3 nodes are available: 3 Insufficient cpu.") {
		t.Errorf("error %q does not give the reason", r.err)
	}
	var se *StartError
	if !errors.As(r.err, &se) || se.Verdict.Reason != ReasonInsufficientResources {
		t.Errorf("StartError %+v", se)
	}
	ev := b.events.all()
	if last := ev[len(ev)-1]; !strings.Contains(last, "not scheduled within 3m0s") {
		t.Errorf("last event %q does not say the SLO ran out", last)
	}
	if n := podCount(t, b); n != 0 {
		t.Errorf("%d pods left after a failed Begin", n)
	}
}

// TestBeginSLOCutsTheWait: an SLO shorter than the first interval is checked at the SLO.
func TestBeginSLOCutsTheWait(t *testing.T) {
	t.Parallel()
	e, b := setup(t, func(c *Config) { c.SchedulingSLO = 20 * time.Second })
	scriptStatus(b, func(_ time.Duration, pod *corev1.Pod) { setStatus(pod, corev1.PodPending, nil, nil, nil) })
	res := begin(e, testJob(b))
	d := b.clk.next(t)
	if d != 20*time.Second {
		t.Errorf("wait %v, want the SLO's 20s", d)
	}
	b.clk.Advance(d)
	if r := await(t, res); !errors.Is(r.err, executor.ErrUnschedulable) {
		t.Fatalf("Begin error %v, want ErrUnschedulable", r.err)
	}
}

// TestBeginStartTimeout: a pod placed in time whose images never come fails at the
// start timeout, not at the scheduling SLO.
func TestBeginStartTimeout(t *testing.T) {
	t.Parallel()
	e, b := setup(t, func(c *Config) { c.StartTimeout = 4 * time.Minute })
	scriptStatus(b, func(_ time.Duration, pod *corev1.Pod) {
		pod.Spec.NodeName = "node-1"
		setStatus(pod, corev1.PodPending, []corev1.PodCondition{scheduledCond}, []corev1.ContainerStatus{initDone},
			[]corev1.ContainerStatus{waiting(jobContainer, "ContainerCreating", "")})
	})
	res := begin(e, testJob(b))
	var total time.Duration
	for total < 4*time.Minute {
		d := b.clk.next(t)
		total += d
		b.clk.Advance(d)
	}
	r := await(t, res)
	if total != 4*time.Minute {
		t.Errorf("failed after %v, want 4m", total)
	}
	if !errors.Is(r.err, executor.ErrEnvironment) || errors.Is(r.err, executor.ErrUnschedulable) {
		t.Fatalf("Begin error %v, want ErrEnvironment", r.err)
	}
	if !strings.Contains(r.err.Error(), "not started within 4m0s: pod scheduled on node node-1: pulling images and creating containers (job: ContainerCreating)") {
		t.Errorf("error %q", r.err)
	}
}

// TestBeginFailsFast: a verdict of failure ends the wait at the check that sees it,
// with its kind, and the pod is deleted.
func TestBeginFailsFast(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		status func(pod *corev1.Pod)
		kind   error
		retry  string
		msg    string
	}{
		{"image not found", func(pod *corev1.Pod) {
			setStatus(pod, corev1.PodPending, []corev1.PodCondition{scheduledCond}, []corev1.ContainerStatus{initDone},
				[]corev1.ContainerStatus{waiting(jobContainer, "ErrImagePull", "golang:1.26: not found")})
		}, executor.ErrImage, "failure", "image pull failed: golang:1.26 (ErrImagePull): golang:1.26: not found"},
		{"evicted", func(pod *corev1.Pod) {
			pod.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory"}
		}, executor.ErrEnvironmentLost, "lost", "pod failed: Evicted: low on memory"},
		{"oom", func(pod *corev1.Pod) {
			setStatus(pod, corev1.PodRunning, nil, nil, []corev1.ContainerStatus{terminated(jobContainer, 137, "OOMKilled")})
		}, executor.ErrEnvironment, "failure", "the job container ran out of memory (OOMKilled)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, b := setup(t, nil)
			scriptStatus(b, func(since time.Duration, pod *corev1.Pod) {
				if since < 30*time.Second {
					setStatus(pod, corev1.PodPending, nil, nil, nil)
					return
				}
				tt.status(pod)
			})
			res := begin(e, testJob(b))
			b.clk.Advance(b.clk.next(t))
			r := await(t, res)
			if !errors.Is(r.err, tt.kind) || executor.RetryKind(r.err) != tt.retry {
				t.Fatalf("Begin error %v (retry kind %s), want %v (%s)", r.err, executor.RetryKind(r.err), tt.kind, tt.retry)
			}
			if !strings.Contains(r.err.Error(), tt.msg) {
				t.Errorf("error %q does not contain %q", r.err, tt.msg)
			}
			if ev := b.events.all(); !strings.Contains(ev[len(ev)-1], tt.msg) {
				t.Errorf("last event %q does not contain %q", ev[len(ev)-1], tt.msg)
			}
			if n := podCount(t, b); n != 0 {
				t.Errorf("%d pods left after a failed Begin", n)
			}
		})
	}
}

// TestBeginPodGone: a pod deleted under a starting job is lost.
func TestBeginPodGone(t *testing.T) {
	t.Parallel()
	e, b := setup(t, nil)
	res := begin(e, testJob(b))
	b.clk.next(t)
	list, err := b.cs.CoreV1().Pods("ci").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("pods %v, %v", list, err)
	}
	if err := b.cs.CoreV1().Pods("ci").Delete(context.Background(), list.Items[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The watch reports the deletion: no clock advance is needed.
	r := await(t, res)
	if !errors.Is(r.err, executor.ErrEnvironmentLost) {
		t.Fatalf("Begin error %v, want ErrEnvironmentLost", r.err)
	}
}

// TestBeginWatchWakes: a change the watch reports is checked at once, without waiting
// for the interval.
func TestBeginWatchWakes(t *testing.T) {
	t.Parallel()
	e, b := setup(t, nil)
	res := begin(e, testJob(b))
	if d := b.clk.next(t); d != 30*time.Second {
		t.Fatalf("first wait %v", d)
	}
	pods := b.cs.CoreV1().Pods("ci")
	list, err := pods.List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("pods %v, %v", list, err)
	}
	pod := list.Items[0]
	pod.Spec.NodeName = "node-1"
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{runningC(jobContainer, true)}}
	if _, err := pods.Update(context.Background(), &pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := await(t, res)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if now := b.clk.Now(); !now.Equal(t0) {
		t.Errorf("the clock moved to %v", now)
	}
}

// TestBeginCancelled: the end of Begin's context ends the wait and deletes the pod.
func TestBeginCancelled(t *testing.T) {
	t.Parallel()
	e, b := setup(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	go func() {
		_, err := e.Begin(ctx, testJob(b))
		ch <- err
	}()
	b.clk.next(t)
	cancel()
	select {
	case err := <-ch:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Begin error %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Begin did not return after its context ended")
	}
	if n := podCount(t, b); n != 0 {
		t.Errorf("%d pods left after a cancelled Begin", n)
	}
}

// TestPodShape checks the pod Begin creates.
func TestPodShape(t *testing.T) {
	t.Parallel()
	ctrl := true
	e, b := setup(t, func(c *Config) {
		c.Placement = map[string]Placement{
			"": {NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
				Tolerations: []corev1.Toleration{{Key: "ci", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}},
			"gpu": {NodeSelector: map[string]string{"accelerator": "nvidia"},
				Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "present", Effect: corev1.TaintEffectNoSchedule}}},
			"arm": {NodeSelector: map[string]string{"kubernetes.io/arch": "arm64"}},
		}
		c.ServiceAccount = "gantry-job"
		c.ImagePullSecrets = []string{"registry"}
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "gantry-worker-0", UID: "uid-1", Controller: &ctrl}}
		c.Workspaces = NewWorkspaceServer("http://10.0.0.5:8081/")
	})
	j := testJob(b)
	j.Labels = []string{"linux", "gpu"}
	j.MilliCPU, j.Memory = 2000, 4<<30
	j.Pull = "always"
	j.User = "1000"
	j.Services = []executor.Service{{Name: "db", Image: "postgres:18", Env: []string{"POSTGRES_PASSWORD=x"}, Ports: []string{"5432"},
		Healthcheck: &executor.Healthcheck{Command: []string{"pg_isready"}, Interval: 2 * time.Second, Timeout: time.Second, Retries: 5}}}
	var created *corev1.Pod
	b.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		created = a.(k8stesting.CreateAction).GetObject().(*corev1.Pod).DeepCopy()
		return false, nil, nil
	})
	scriptStatus(b, func(_ time.Duration, pod *corev1.Pod) {
		setStatus(pod, corev1.PodRunning, nil, []corev1.ContainerStatus{initDone, runningC("svc-db", true)}, []corev1.ContainerStatus{runningC(jobContainer, true)})
	})
	r := await(t, begin(e, j))
	if r.err != nil {
		t.Fatal(r.err)
	}
	p := created
	if p.Namespace != "ci" || !strings.HasPrefix(p.Name, "gantry-01job-2-") {
		t.Errorf("pod %s/%s", p.Namespace, p.Name)
	}
	wantLabels := map[string]string{LabelWorker: "w-1", LabelJob: "01JOB", LabelAttempt: "2", LabelOwner: "worker-a", LabelManaged: "gantry"}
	for k, v := range wantLabels {
		if p.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, p.Labels[k], v)
		}
	}
	if p.Annotations[LabelJob] != "01JOB" || p.Annotations[LabelOwner] != "worker-a" {
		t.Errorf("annotations %v", p.Annotations)
	}
	if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Name != "gantry-worker-0" {
		t.Errorf("owner references %v", p.OwnerReferences)
	}
	if p.Spec.RestartPolicy != corev1.RestartPolicyNever || p.Spec.ServiceAccountName != "gantry-job" ||
		p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken {
		t.Errorf("restart policy %s, service account %q, automount %v", p.Spec.RestartPolicy, p.Spec.ServiceAccountName, p.Spec.AutomountServiceAccountToken)
	}
	if len(p.Spec.ImagePullSecrets) != 1 || p.Spec.ImagePullSecrets[0].Name != "registry" {
		t.Errorf("image pull secrets %v", p.Spec.ImagePullSecrets)
	}
	if *p.Spec.TerminationGracePeriodSeconds != 5 {
		t.Errorf("termination grace %d, want the job's 5", *p.Spec.TerminationGracePeriodSeconds)
	}
	// Placement: the worker's for every pod, and the gpu label's; not arm's.
	wantSel := map[string]string{"kubernetes.io/os": "linux", "accelerator": "nvidia"}
	if len(p.Spec.NodeSelector) != len(wantSel) {
		t.Errorf("node selector %v, want %v", p.Spec.NodeSelector, wantSel)
	}
	for k, v := range wantSel {
		if p.Spec.NodeSelector[k] != v {
			t.Errorf("node selector %v, want %v", p.Spec.NodeSelector, wantSel)
		}
	}
	if len(p.Spec.Tolerations) != 2 || p.Spec.Tolerations[0].Key != "ci" || p.Spec.Tolerations[1].Key != "nvidia.com/gpu" || p.Spec.Tolerations[1].Value != "present" {
		t.Errorf("tolerations %+v", p.Spec.Tolerations)
	}
	// Volumes: the workspace and the tools, both emptyDir.
	vols := map[string]bool{}
	for _, v := range p.Spec.Volumes {
		vols[v.Name] = v.EmptyDir != nil
	}
	if !vols[workspaceVol] || !vols[toolsVol] || len(vols) != 2 {
		t.Errorf("volumes %+v", p.Spec.Volumes)
	}
	// The init container: the worker's image running gantry pod-init; then the service.
	if len(p.Spec.InitContainers) != 2 {
		t.Fatalf("init containers %+v", p.Spec.InitContainers)
	}
	ic := p.Spec.InitContainers[0]
	wantArgs := []string{"pod-init", "--tools", ToolsPath, "--workspace", "/workspace", "--fetch"}
	if ic.Image != "gantry:dev" || !slices.Equal(ic.Command, []string{"/gantry"}) || len(ic.Args) != 7 || !slices.Equal(ic.Args[:6], wantArgs) ||
		!strings.HasPrefix(ic.Args[6], "http://10.0.0.5:8081/workspace/") {
		t.Errorf("init container %s %v %v", ic.Image, ic.Command, ic.Args)
	}
	if !mounted(ic, workspaceVol, "/workspace", false) || !mounted(ic, toolsVol, ToolsPath, false) {
		t.Errorf("init container mounts %+v", ic.VolumeMounts)
	}
	// The job's container.
	if len(p.Spec.Containers) != 1 {
		t.Fatalf("containers %+v", p.Spec.Containers)
	}
	jc := p.Spec.Containers[0]
	if jc.Name != jobContainer || jc.Image != "golang:1.26" || jc.ImagePullPolicy != corev1.PullAlways ||
		!slices.Equal(jc.Command, []string{ToolsBinary, "pod-hold"}) || jc.WorkingDir != "/workspace" {
		t.Errorf("job container %+v", jc)
	}
	if !mounted(jc, workspaceVol, "/workspace", false) || !mounted(jc, toolsVol, ToolsPath, true) {
		t.Errorf("job container mounts %+v", jc.VolumeMounts)
	}
	cpu, mem := resource.MustParse("2"), resource.MustParse("4Gi")
	for what, l := range map[string]corev1.ResourceList{"requests": jc.Resources.Requests, "limits": jc.Resources.Limits} {
		if !l.Cpu().Equal(cpu) || !l.Memory().Equal(mem) {
			t.Errorf("%s %v, want cpu 2, memory 4Gi", what, l)
		}
	}
	if sc := jc.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 1000 || sc.Privileged != nil {
		t.Errorf("security context %+v", sc)
	}
	// The service: a native sidecar (an init container that restarts), reachable by its
	// name.
	sc := p.Spec.InitContainers[1]
	if sc.Name != "svc-db" || sc.Image != "postgres:18" || len(sc.Env) != 1 || sc.Env[0].Name != "POSTGRES_PASSWORD" ||
		len(sc.Ports) != 1 || sc.Ports[0].ContainerPort != 5432 || sc.RestartPolicy == nil || *sc.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("service container %+v", sc)
	}
	if pr := sc.ReadinessProbe; pr == nil || !slices.Equal(pr.Exec.Command, []string{"pg_isready"}) || pr.PeriodSeconds != 2 || pr.FailureThreshold != 5 {
		t.Errorf("service readiness probe %+v", sc.ReadinessProbe)
	}
	if len(p.Spec.HostAliases) != 1 || p.Spec.HostAliases[0].IP != "127.0.0.1" || !slices.Equal(p.Spec.HostAliases[0].Hostnames, []string{"db"}) {
		t.Errorf("host aliases %+v", p.Spec.HostAliases)
	}
}

func mounted(c corev1.Container, vol, path string, ro bool) bool {
	for _, m := range c.VolumeMounts {
		if m.Name == vol && m.MountPath == path && m.ReadOnly == ro {
			return true
		}
	}
	return false
}

// TestBeginRefuses: a job the executor cannot run is an error before any pod exists.
func TestBeginRefuses(t *testing.T) {
	t.Parallel()
	e, b := setup(t, nil)
	for _, mod := range []func(*executor.Job){
		func(j *executor.Job) { j.Image = "" },
		func(j *executor.Job) { j.Pull = "sometimes" },
		func(j *executor.Job) { j.Services = []executor.Service{{Name: "Not_A_Name", Image: "x"}} },
		func(j *executor.Job) {
			j.Services = []executor.Service{{Name: "db", Image: "x", Ports: []string{"99999"}}}
		},
	} {
		j := testJob(b)
		mod(&j)
		if _, err := e.Begin(context.Background(), j); err == nil {
			t.Errorf("Begin(%+v) succeeded", j)
		}
	}
	if n := podCount(t, b); n != 0 {
		t.Errorf("%d pods created", n)
	}
}

// TestHostServicesPorts: a job written for the worker's host (in the worker's default
// image here) reaches its services on the pod's localhost, at their own ports: a
// HOST:CONTAINER that names the same port is that port, one that names another is
// refused, saying what to write.
func TestHostServicesPorts(t *testing.T) {
	t.Parallel()
	e, b := setup(t, nil)
	for _, tt := range []struct {
		port, want string // want: the container port, or what the error says
		ok         bool
	}{
		{"5432", "5432", true},
		{"5432:5432", "5432", true},
		{"6379:6379/tcp", "6379", true},
		{"15432:5432", "write 5432 (and reach it at localhost:5432)", false},
	} {
		j := testJob(b)
		j.HostServices = true
		j.Services = []executor.Service{{Name: "db", Image: "postgres:18", Ports: []string{tt.port}}}
		pod, err := e.podSpec(j, "pod", "")
		switch {
		case tt.ok && err != nil:
			t.Errorf("port %s: %v", tt.port, err)
		case tt.ok && (len(pod.Spec.InitContainers) != 2 || len(pod.Spec.InitContainers[1].Ports) != 1 ||
			strconv.Itoa(int(pod.Spec.InitContainers[1].Ports[0].ContainerPort)) != tt.want):
			t.Errorf("port %s: service container %+v, want port %s", tt.port, pod.Spec.InitContainers, tt.want)
		case !tt.ok && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("port %s: %v; want an error saying %q", tt.port, err, tt.want)
		}
	}
}

// readySession begins a job whose pod is running at once.
func readySession(t *testing.T, e *Executor, b *bundle) executor.Session {
	t.Helper()
	scriptStatus(b, func(_ time.Duration, pod *corev1.Pod) {
		setStatus(pod, corev1.PodRunning, nil, nil, []corev1.ContainerStatus{runningC(jobContainer, true)})
	})
	r := await(t, begin(e, testJob(b)))
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.s
}

// TestRunStep: a step runs in the job container under pod-exec, with its directory and
// GANTRY_WORKSPACE mapped into the pod, the host's PATH left to the image, output
// streamed and the exit code returned.
func TestRunStep(t *testing.T) {
	t.Parallel()
	e, b := setup(t, nil)
	b.exec.fn = func(c execCall, _ *bufio.Reader, stdout, stderr io.Writer) (int, error) {
		fmt.Fprint(stdout, "out\n")
		fmt.Fprint(stderr, "err\n")
		return 3, nil
	}
	s := readySession(t, e, b)
	var out, errb strings.Builder
	res, err := s.Run(context.Background(), executor.Step{Shell: "bash", Script: "make test", Dir: "/var/gantry/ws/01JOB/sub",
		Env: []string{"GANTRY_WORKSPACE=/var/gantry/ws/01JOB", "FOO=bar"}, Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || res.Cancelled || res.TimedOut {
		t.Errorf("result %+v", res)
	}
	if out.String() != "out\n" || errb.String() != "err\n" {
		t.Errorf("stdout %q stderr %q", out.String(), errb.String())
	}
	c := b.exec.calls[0]
	if c.Namespace != "ci" || !strings.HasPrefix(c.Pod, "gantry-01job-2-") || c.Container != jobContainer || !slices.Equal(c.Cmd, []string{ToolsBinary, "pod-exec"}) {
		t.Errorf("exec %+v", c)
	}
	if c.Req.Shell != "bash" || c.Req.Script != "make test" || c.Req.Dir != "/workspace/sub" ||
		!slices.Equal(c.Req.Env, []string{"GANTRY_WORKSPACE=/workspace", "FOO=bar"}) {
		t.Errorf("request %+v", c.Req)
	}
	if _, err := s.Run(context.Background(), executor.Step{Script: "true", Dir: "/elsewhere"}); err == nil {
		t.Error("a step outside the workspace ran")
	}
	if _, err := s.Run(context.Background(), executor.Step{Shell: "zsh", Script: "true"}); err == nil {
		t.Error("a step with an unknown shell ran")
	}
}

// TestRunCancel: a cancel sends term; a step that stops on it is cancelled by SIGTERM.
func TestRunCancel(t *testing.T) {
	t.Parallel()
	e, b := setup(t, nil)
	started := make(chan struct{})
	b.exec.fn = func(_ execCall, ctl *bufio.Reader, _, _ io.Writer) (int, error) {
		close(started)
		line, err := ctl.ReadString('\n')
		if err != nil || line != "term\n" {
			return 1, fmt.Errorf("control %q, %v", line, err)
		}
		return 128 + 15, nil
	}
	s := readySession(t, e, b)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	res, err := s.Run(ctx, executor.Step{Script: "sleep 100"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Cancelled || res.ExitCode != -1 || res.Signal != "terminated" {
		t.Errorf("result %+v", res)
	}
}

// TestRunTimeoutGrace: a step past its timeout gets term, and kill after the grace.
func TestRunTimeoutGrace(t *testing.T) {
	t.Parallel()
	e, b := setup(t, nil)
	words := make(chan string, 2)
	b.exec.fn = func(_ execCall, ctl *bufio.Reader, _, _ io.Writer) (int, error) {
		for {
			line, err := ctl.ReadString('\n')
			if err != nil {
				return 1, err
			}
			words <- strings.TrimSpace(line)
			if line == "kill\n" {
				return 128 + 9, nil
			}
		}
	}
	s := readySession(t, e, b)
	done := make(chan executor.Result, 1)
	go func() {
		res, err := s.Run(context.Background(), executor.Step{Script: "trap '' TERM; sleep 100", Timeout: time.Minute, Grace: 7 * time.Second})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	if d := b.clk.next(t); d != time.Minute {
		t.Fatalf("timeout wait %v", d)
	}
	b.clk.Advance(time.Minute)
	if w := <-words; w != "term" {
		t.Fatalf("first word %q", w)
	}
	if d := b.clk.next(t); d != 7*time.Second {
		t.Fatalf("grace wait %v", d)
	}
	select {
	case w := <-words:
		t.Fatalf("%q before the grace ran out", w)
	default:
	}
	b.clk.Advance(7 * time.Second)
	if w := <-words; w != "kill" {
		t.Fatalf("second word %q", w)
	}
	res := <-done
	if !res.TimedOut || res.Cancelled || res.ExitCode != -1 || res.Signal != "killed" {
		t.Errorf("result %+v", res)
	}
}

// TestRunKillNow: ErrKillNow skips the grace.
func TestRunKillNow(t *testing.T) {
	t.Parallel()
	e, b := setup(t, nil)
	started := make(chan struct{})
	b.exec.fn = func(_ execCall, ctl *bufio.Reader, _, _ io.Writer) (int, error) {
		close(started)
		line, _ := ctl.ReadString('\n')
		if line != "kill\n" {
			return 1, fmt.Errorf("control %q", line)
		}
		return 128 + 9, nil
	}
	s := readySession(t, e, b)
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() { <-started; cancel(executor.ErrKillNow) }()
	res, err := s.Run(ctx, executor.Step{Script: "sleep 100"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Cancelled || res.Signal != "killed" {
		t.Errorf("result %+v", res)
	}
}

// TestRunPodLost: an exec that breaks because the pod is gone is ErrEnvironmentLost.
func TestRunPodLost(t *testing.T) {
	t.Parallel()
	e, b := setup(t, nil)
	s := readySession(t, e, b)
	pod := b.exec
	pod.fn = func(c execCall, _ *bufio.Reader, _, _ io.Writer) (int, error) {
		if err := b.cs.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "ci", c.Pod); err != nil {
			return -1, err
		}
		return -1, errors.New("stream reset")
	}
	_, err := s.Run(context.Background(), executor.Step{Script: "true"})
	if !errors.Is(err, executor.ErrEnvironmentLost) || executor.RetryKind(err) != "lost" {
		t.Fatalf("Run error %v, want ErrEnvironmentLost", err)
	}
}

// TestRunPodKilled: a pod deleted or evicted under a step kills it, and the exec ends
// with the kill's exit code, not an error: that is ErrEnvironmentLost too. A step that
// exits non-zero in a pod that is still there (even one whose service crash-loops) is
// the step's own failure.
func TestRunPodKilled(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		pod  func(b *bundle, pod string) // what happens to the pod while the step runs
		lost bool
	}{
		{"deleted", func(b *bundle, pod string) {
			if err := b.cs.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "ci", pod); err != nil {
				panic(err)
			}
		}, true},
		{"being deleted", func(b *bundle, pod string) {
			p, err := b.cs.CoreV1().Pods("ci").Get(context.Background(), pod, metav1.GetOptions{})
			if err != nil {
				panic(err)
			}
			p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			if err := b.cs.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), p, "ci"); err != nil {
				panic(err)
			}
		}, true},
		{"still there", func(*bundle, string) {}, false},
		{"service crash-looping", func(b *bundle, pod string) {
			p, err := b.cs.CoreV1().Pods("ci").Get(context.Background(), pod, metav1.GetOptions{})
			if err != nil {
				panic(err)
			}
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "svc-db", RestartPolicy: new(corev1.ContainerRestartPolicyAlways)})
			setStatus(p, corev1.PodRunning, nil, []corev1.ContainerStatus{initDone, waiting("svc-db", "CrashLoopBackOff", "back-off")}, []corev1.ContainerStatus{runningC(jobContainer, true)})
			if err := b.cs.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), p, "ci"); err != nil {
				panic(err)
			}
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, b := setup(t, nil)
			s := readySession(t, e, b)
			b.exec.fn = func(c execCall, _ *bufio.Reader, _, _ io.Writer) (int, error) {
				tt.pod(b, c.Pod)
				return 137, nil
			}
			res, err := s.Run(context.Background(), executor.Step{Script: "sleep 100"})
			switch {
			case tt.lost && (!errors.Is(err, executor.ErrEnvironmentLost) || !strings.Contains(err.Error(), "exited with code 137")):
				t.Fatalf("Run = %+v, %v; want ErrEnvironmentLost naming the exit code", res, err)
			case !tt.lost && (err != nil || res.ExitCode != 137):
				t.Fatalf("Run = %+v, %v; want exit code 137 and no error", res, err)
			}
		})
	}
}

// TestRunStreamCut: an exec that ends as if the step exited 0 but without pod-exec's
// end frame (what a killed kubelet does to the stream) is an error, not a success; one
// that reports a failure before the step ran (pod-exec's 125) keeps its code.
func TestRunStreamCut(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		code    int
		wantErr bool
	}{{0, true}, {125, false}} {
		e, b := setup(t, nil)
		s := readySession(t, e, b)
		b.exec.cut = true
		b.exec.fn = func(_ execCall, _ *bufio.Reader, stdout, _ io.Writer) (int, error) {
			_, _ = io.WriteString(stdout, "started\n")
			return tt.code, nil
		}
		var out bytes.Buffer
		res, err := s.Run(context.Background(), executor.Step{Script: "sleep 100", Stdout: &out})
		switch {
		case tt.wantErr && (err == nil || !strings.Contains(err.Error(), "exec stream was cut")):
			t.Errorf("exit %d without the end frame: Run = %+v, %v; want the cut named", tt.code, res, err)
		case !tt.wantErr && (err != nil || res.ExitCode != tt.code):
			t.Errorf("exit %d without the end frame: Run = %+v, %v; want exit code %d", tt.code, res, err, tt.code)
		}
		if out.String() != "started\n" {
			t.Errorf("output %q", out.String())
		}
	}
}

// TestEndGrace: End deletes the pod with the job's grace, or none for ErrKillNow, and
// also when the caller's context is already spent.
func TestEndGrace(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		ctx   func() context.Context
		grace int64
	}{
		{"grace", context.Background, 5},
		{"kill now", func() context.Context {
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(executor.ErrKillNow)
			return ctx
		}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, b := setup(t, nil)
			var got *int64
			b.cs.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
				got = a.(k8stesting.DeleteAction).GetDeleteOptions().GracePeriodSeconds
				return false, nil, nil
			})
			s := readySession(t, e, b)
			if err := s.End(tt.ctx()); err != nil {
				t.Fatal(err)
			}
			if got == nil || *got != tt.grace {
				t.Errorf("grace %v, want %d", got, tt.grace)
			}
			if n := podCount(t, b); n != 0 {
				t.Errorf("%d pods after End", n)
			}
			// A second End (the pod already gone) is not an error.
			if err := s.End(context.Background()); err != nil {
				t.Errorf("End after End: %v", err)
			}
		})
	}
}

// TestSweep: a restarted worker deletes the pods its predecessor (same owner) left,
// and no one else's.
func TestSweep(t *testing.T) {
	t.Parallel()
	e, b := setup(t, nil)
	mk := func(name string, labels, ann map[string]string) {
		t.Helper()
		_, err := b.cs.CoreV1().Pods("ci").Create(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ci", Labels: labels, Annotations: ann}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	ours := map[string]string{LabelManaged: "gantry", LabelOwner: "worker-a", LabelWorker: "w-old", LabelJob: "j1"}
	mk("gantry-j1-1-aaa", ours, map[string]string{LabelOwner: "worker-a"})
	mk("gantry-j2-1-bbb", ours, nil)
	mk("gantry-j3-1-ccc", map[string]string{LabelManaged: "gantry", LabelOwner: "worker-b"}, nil)
	mk("unrelated", map[string]string{LabelOwner: "worker-a"}, nil)
	// Same label (cut to 63 characters), another owner by the annotation.
	mk("gantry-j4-1-ddd", ours, map[string]string{LabelOwner: "worker-a-with-a-longer-name"})
	n, err := e.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("swept %d, want 2", n)
	}
	list, err := b.cs.CoreV1().Pods("ci").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, p := range list.Items {
		left = append(left, p.Name)
	}
	slices.Sort(left)
	if want := []string{"gantry-j3-1-ccc", "gantry-j4-1-ddd", "unrelated"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
	// A List the API refuses is an error, not an empty sweep.
	b.cs.PrependReactor("list", "pods", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "", errors.New("no"))
	})
	if _, err := e.Sweep(context.Background()); err == nil {
		t.Error("Sweep with list forbidden succeeded")
	}
}

func TestNewChecks(t *testing.T) {
	t.Parallel()
	good := Config{Client: fake.NewClientset(), Execer: &scriptedExecer{}, Namespace: "ci", InitImage: "gantry:dev", Owner: "w"}
	if _, err := New(good); err != nil {
		t.Fatal(err)
	}
	for _, mod := range []func(*Config){
		func(c *Config) { c.Client = nil }, func(c *Config) { c.Execer = nil }, func(c *Config) { c.Namespace = "" },
		func(c *Config) { c.InitImage = "" }, func(c *Config) { c.Owner = "" },
	} {
		c := good
		mod(&c)
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) succeeded", c)
		}
	}
}

func TestPodName(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"01JOB", strings.Repeat("A_b.", 30), "---"} {
		n := podName(executor.Job{ID: id, Attempt: 12})
		if len(n) > 63 || strings.ToLower(n) != n || strings.Contains(n, "_") || strings.Contains(n, ".") {
			t.Errorf("podName(%q) = %q", id, n)
		}
	}
	if labelValue(strings.Repeat("x", 100)) != strings.Repeat("x", 63) || labelValue("a b/c") != "a-b-c" {
		t.Error("labelValue")
	}
}
