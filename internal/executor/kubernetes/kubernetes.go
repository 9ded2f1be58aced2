package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/executor"
)

// Execer runs a command in a container of a pod, with stdin, and its stdout and stderr
// streamed as they come. The exit code is the command's; the error is for a command
// that could not be run or a stream that broke. It is the pod's exec subresource in
// production (RemoteExecer) and a script in tests.
type Execer interface {
	Exec(ctx context.Context, namespace, pod, container string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (exitCode int, err error)
}

// Config configures New.
type Config struct {
	Client    k8s.Interface
	Namespace string
	// Execer runs steps in pods.
	Execer Execer
	// InitImage is an image whose /gantry is this gantry binary (the worker's own
	// image); the init container runs `gantry pod-init` from it.
	InitImage string
	// Owner is the worker's name, the same across its restarts: every pod is labelled
	// with it, and Sweep removes the pods of an owner's earlier incarnation.
	Owner string
	// OwnerReferences are put on every pod: the worker's own pod, when it runs in the
	// cluster, so that Kubernetes removes the job pods of a deleted worker pod.
	OwnerReferences []metav1.OwnerReference
	// Placement maps a runs_on label to node selectors and tolerations for the pods of
	// jobs that ask for it; the "" entry applies to every pod.
	Placement map[string]Placement
	// ServiceAccount runs the job pods ("" is the namespace's default); its token is
	// not mounted.
	ServiceAccount   string
	ImagePullSecrets []string
	// Workspaces, when set, serves each job's workspace to its init container; nil
	// starts every job with an empty workspace.
	Workspaces *WorkspaceServer

	// CheckInterval is the wait before the second check of a starting pod (default
	// 30 s); each later wait is CheckStep (default 10 s) longer. A change the pod watch
	// reports is checked at once.
	CheckInterval time.Duration
	CheckStep     time.Duration
	// SchedulingSLO is how long a pod may wait to be placed on a node before Begin
	// fails with executor.ErrUnschedulable (default 3 minutes).
	SchedulingSLO time.Duration
	// StartTimeout bounds the whole start, images and init included (default 10
	// minutes).
	StartTimeout time.Duration

	Clock  clock.Clock
	Logger *slog.Logger
}

// Executor runs each job as a pod. It implements executor.JobExecutor.
type Executor struct {
	cfg Config
	log *slog.Logger
}

var (
	_ executor.JobExecutor = (*Executor)(nil)
	_ executor.Collector   = (*session)(nil)
)

// New checks cfg and fills its defaults.
func New(cfg Config) (*Executor, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("kubernetes executor: no client")
	case cfg.Execer == nil:
		return nil, errors.New("kubernetes executor: no exec")
	case cfg.Namespace == "":
		return nil, errors.New("kubernetes executor: no namespace")
	case cfg.InitImage == "":
		return nil, errors.New("kubernetes executor: no init image (an image holding this gantry binary as /gantry)")
	case cfg.Owner == "":
		return nil, errors.New("kubernetes executor: no owner (the worker's name)")
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = 30 * time.Second
	}
	if cfg.CheckStep < 0 {
		cfg.CheckStep = 0
	} else if cfg.CheckStep == 0 {
		cfg.CheckStep = 10 * time.Second
	}
	if cfg.SchedulingSLO <= 0 {
		cfg.SchedulingSLO = 3 * time.Minute
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 10 * time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Executor{cfg: cfg, log: log}, nil
}

// Run runs a step without a job. Every job of a kubernetes worker runs in a pod.
func (e *Executor) Run(ctx context.Context, s executor.Step) (executor.Result, error) {
	return executor.Result{}, errors.New("the kubernetes executor runs steps only in a job's pod: the job has no image")
}

// StartError is Begin's error for a pod that did not start: the verdict that ended the
// wait, wrapping its kind (executor.ErrImage, ErrUnschedulable, ErrEnvironment,
// ErrEnvironmentLost).
type StartError struct {
	Pod     string
	Verdict Verdict
	kind    error
	msg     string
}

func (e *StartError) Error() string { return e.msg }
func (e *StartError) Unwrap() error { return e.kind }

// Begin creates the job's pod and waits until it runs, reporting every change of
// verdict through j.Events. A pod that fails fast, is not scheduled within the SLO, or
// does not start within the start timeout is deleted and its reason returned.
func (e *Executor) Begin(ctx context.Context, j executor.Job) (executor.Session, error) {
	name := podName(j)
	fetch, release := "", func() {}
	if e.cfg.Workspaces != nil && j.Workspace != "" {
		fetch, release = e.cfg.Workspaces.Offer(j.Workspace)
	}
	pod, err := e.podSpec(j, name, fetch)
	if err != nil {
		release()
		return nil, fmt.Errorf("job %s: %w", j.ID, err)
	}
	s := &session{e: e, job: j, pod: name, release: release}
	// The pull secret goes first: the kubelet reads it when it pulls the job's image.
	if secret, err := pullSecret(pod, j.RegistryAuth); err != nil {
		release()
		return nil, fmt.Errorf("job %s: %w", j.ID, err)
	} else if secret != nil {
		if _, err := e.cfg.Client.CoreV1().Secrets(e.cfg.Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			release()
			return nil, fmt.Errorf("create image pull secret %s/%s for job %s: %w", e.cfg.Namespace, secret.Name, j.ID, err)
		}
		s.pullSecret = secret.Name
	}
	pods := e.cfg.Client.CoreV1().Pods(e.cfg.Namespace)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		release()
		err = fmt.Errorf("create pod %s/%s for job %s: %w", e.cfg.Namespace, name, j.ID, err)
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := s.deletePullSecret(dctx); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, err
	}
	j.Event(fmt.Sprintf("pod %s/%s created for image %s", e.cfg.Namespace, name, j.Image))
	if err := e.waitStarted(ctx, j, name); err != nil {
		// Not ctx: it may be what ended the wait.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		release()
		if derr := s.delete(dctx, 0); derr != nil {
			e.log.Warn("delete a pod that did not start", "pod", name, "err", derr)
		}
		return nil, err
	}
	return s, nil
}

// waitStarted checks the pod until Verify says it is ready or failed: at once, then
// after CheckInterval, then after each wait CheckStep longer than the one before, and
// whenever the pod watch reports a change; with deadlines at the SchedulingSLO (while
// the pod is not placed) and the StartTimeout.
func (e *Executor) waitStarted(ctx context.Context, j executor.Job, name string) error {
	pods := e.cfg.Client.CoreV1().Pods(e.cfg.Namespace)
	changed, stopWatch := e.watchPod(ctx, name)
	defer stopWatch()
	start := e.cfg.Clock.Now()
	wait := e.cfg.CheckInterval
	var last *Verdict
	for {
		var v Verdict
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			v = Verify(nil)
		case err != nil:
			if ctx.Err() != nil {
				return fmt.Errorf("wait for pod %s: %w", name, context.Cause(ctx))
			}
			// The API server may be briefly unreachable; the deadlines still hold.
			e.log.Warn("read a starting pod", "pod", name, "err", err)
			if last != nil {
				v = *last
			} else {
				v = Verdict{Stage: Waiting, Reason: ReasonUnknown, Message: "pod status cannot be read: " + err.Error()}
			}
		default:
			v = Verify(pod)
		}
		if last == nil || !v.same(*last) {
			e.log.Info("job pod", "pod", name, "job", j.ID, "stage", v.Stage.String(), "reason", v.Reason, "message", v.Message)
			j.Event(v.Message)
			last = &v
		}
		switch v.Stage {
		case Ready:
			return nil
		case Failed:
			return &StartError{Pod: name, Verdict: v, kind: v.Err, msg: fmt.Sprintf("pod %s did not start: %s", name, v.Message)}
		}
		elapsed := e.cfg.Clock.Now().Sub(start)
		if !v.Scheduled && elapsed >= e.cfg.SchedulingSLO {
			msg := fmt.Sprintf("pod %s not scheduled within %s: %s", name, e.cfg.SchedulingSLO, v.Message)
			j.Event(msg)
			return &StartError{Pod: name, Verdict: v, kind: executor.ErrUnschedulable, msg: msg}
		}
		if elapsed >= e.cfg.StartTimeout {
			msg := fmt.Sprintf("pod %s not started within %s: %s", name, e.cfg.StartTimeout, v.Message)
			j.Event(msg)
			return &StartError{Pod: name, Verdict: v, kind: executor.ErrEnvironment, msg: msg}
		}
		deadline := e.cfg.StartTimeout
		if !v.Scheduled {
			deadline = min(deadline, e.cfg.SchedulingSLO)
		}
		timer := e.cfg.Clock.After(min(wait, deadline-elapsed))
	waiting:
		for {
			select {
			case <-ctx.Done():
				return fmt.Errorf("wait for pod %s: %w", name, context.Cause(ctx))
			case <-changed:
				break waiting
			case <-timer:
				wait += e.cfg.CheckStep
				break waiting
			}
		}
	}
}

// watchPod signals on the returned channel when the pod changes or goes, so a check
// need not wait for the next interval. Without a watch (refused, or broken) the checks still
// come on their schedule.
func (e *Executor) watchPod(ctx context.Context, name string) (<-chan struct{}, func()) {
	changed := make(chan struct{}, 1)
	wctx, cancel := context.WithCancel(ctx)
	w, err := e.cfg.Client.CoreV1().Pods(e.cfg.Namespace).Watch(wctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	if err != nil {
		e.log.Debug("watch a starting pod; checking on the schedule only", "pod", name, "err", err)
		return changed, cancel
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for ev := range w.ResultChan() {
			// Added is the watch replaying the pod Begin made, not news.
			if ev.Type != watch.Modified && ev.Type != watch.Deleted && ev.Type != watch.Error {
				continue
			}
			if p, ok := ev.Object.(*corev1.Pod); ok && p.Name != name {
				continue
			}
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	})
	return changed, func() {
		cancel()
		w.Stop()
		wg.Wait()
	}
}

// Sweep deletes the pods an earlier incarnation of this worker (the same Owner) left,
// and the image pull secrets they name: a new worker process has none of its own yet,
// so it is called as the worker starts, before its first job. It returns how many pods
// it deleted. (The secrets are found through their pods, so that the worker needs no
// right to list secrets, which would let it read every secret of its namespace.)
func (e *Executor) Sweep(ctx context.Context) (int, error) {
	pods := e.cfg.Client.CoreV1().Pods(e.cfg.Namespace)
	sel := labels.SelectorFromSet(labels.Set{LabelManaged: managedBy, LabelOwner: labelValue(e.cfg.Owner)}).String()
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return 0, fmt.Errorf("list the pods of worker %s: %w", e.cfg.Owner, err)
	}
	n := 0
	var errs []error
	for _, p := range list.Items {
		// The label is cut to 63 characters: the annotation has the whole name.
		if owner, ok := p.Annotations[LabelOwner]; ok && owner != e.cfg.Owner {
			continue
		}
		err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
		switch {
		case err == nil:
			n++
			e.log.Info("deleted a pod an earlier worker left", "pod", p.Name, "job", p.Annotations[LabelJob])
		case apierrors.IsNotFound(err):
		default:
			errs = append(errs, fmt.Errorf("delete pod %s: %w", p.Name, err))
		}
		if secret := p.Annotations[AnnotationPullSecret]; secret != "" {
			if err := e.deleteSecret(ctx, secret); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return n, errors.Join(errs...)
}

// session is one job's pod.
type session struct {
	e          *Executor
	job        executor.Job
	pod        string
	pullSecret string // the job's image pull secret, "" when it has no registry credentials
	release    func() // ends the offer of the workspace
}

// Run runs the step in the job's container under `gantry pod-exec`, which reads the
// step from stdin and takes "term" and "kill" lines after it: a cancel or timeout sends
// term, then kill after the grace. The step's Binds (the directory of its
// $GANTRY_OUTPUT, $GANTRY_ENV and $GANTRY_PATH, in the workspace) are copied back to the
// worker after a step that was not cancelled, and emptied in the pod, so that the worker
// reads what the step wrote there as it does for any executor.
func (s *session) Run(ctx context.Context, st executor.Step) (executor.Result, error) {
	dir, err := s.containerDir(st.Dir)
	if err != nil {
		return executor.Result{}, err
	}
	binds, err := s.containerBinds(st.Binds)
	if err != nil {
		return executor.Result{}, err
	}
	// Both modes are framed: the end frame is how a step that ran to its end is told
	// from a stream cut short.
	req := ExecRequest{Shell: st.Shell, Script: st.Script, Env: s.containerEnv(st.Env), Dir: dir, Output: OutputFramed}
	stdout, stderr := orDiscard(st.Stdout), orDiscard(st.Stderr)
	if sameWriter(stdout, stderr) {
		req.Output = OutputMerged
	}
	// The step's stderr frames and pod-exec's own stderr (the exec's stderr stream)
	// arrive on two goroutines: one writer at a time.
	stderr = &lockedWriter{w: stderr}
	if req.Output == OutputMerged {
		stdout = stderr
	}
	if err := req.check(); err != nil {
		return executor.Result{}, err
	}
	grace := st.Grace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	clk := s.e.cfg.Clock
	ctl := newControl(req)
	// The exec outlives ctx by the grace: a cancel is passed on as term, then kill.
	execCtx, cancelExec := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelExec()
	type done struct {
		code int
		err  error
	}
	finished := make(chan done, 1)
	go func() {
		out := stdout
		var unframed chan error
		if req.Output == OutputFramed || req.Output == OutputMerged {
			pr, pw := io.Pipe()
			out, unframed = pw, make(chan error, 1)
			go func() {
				err := Unframe(pr, stdout, stderr)
				pr.CloseWithError(errors.New("the step's output could not be read"))
				unframed <- err
			}()
		}
		code, err := s.e.cfg.Execer.Exec(execCtx, s.e.cfg.Namespace, s.pod, jobContainer,
			[]string{ToolsBinary, "pod-exec"}, ctl, out, stderr)
		if unframed != nil {
			out.(*io.PipeWriter).Close()
			uerr := <-unframed
			switch {
			case errors.Is(uerr, errNoEnd):
				// pod-exec did not say the step ended: an exec that reports success
				// (a stream the kubelet's death cut) did not run the step to its end.
				// One that failed before the step started (125, 127) has its code.
				if err == nil && code == 0 {
					err = uerr
				}
			case uerr != nil && err == nil:
				err = uerr
			}
		}
		finished <- done{code, err}
	}()
	var timeout <-chan time.Time
	if st.Timeout > 0 {
		timeout = clk.After(st.Timeout)
	}
	var res executor.Result
	var killAt <-chan time.Time
	var hardStop <-chan time.Time
	for {
		select {
		case d := <-finished:
			ctl.close()
			if d.err != nil {
				if v, gone := s.lost(); gone {
					return res, fmt.Errorf("step in pod %s: %s: %w", s.pod, v.Message, executor.ErrEnvironmentLost)
				}
				if res.Cancelled || res.TimedOut {
					res.ExitCode, res.Signal = -1, "killed"
					return res, nil
				}
				return res, fmt.Errorf("run step in pod %s: %w", s.pod, d.err)
			}
			if d.code != 0 && !res.Cancelled && !res.TimedOut {
				// A pod deleted or evicted under a step kills it, and its exec ends
				// with the kill's exit code (137) rather than an error: a step
				// that failed is only the step's failure if its pod is still there.
				if v, gone := s.lost(); gone && errors.Is(v.Err, executor.ErrEnvironmentLost) {
					return res, fmt.Errorf("step in pod %s exited with code %d: %s: %w", s.pod, d.code, v.Message, executor.ErrEnvironmentLost)
				}
			}
			res.ExitCode = d.code
			if (res.Cancelled || res.TimedOut) && d.code > 128 {
				res.ExitCode = -1
				res.Signal = signalName(d.code - 128)
			}
			if res.Cancelled || ctx.Err() != nil {
				return res, nil
			}
			for _, b := range binds {
				if err := s.takeFiles(ctx, b.pod, b.worker); err != nil {
					return res, fmt.Errorf("the step ran (exit code %d), but %w", res.ExitCode, err)
				}
			}
			return res, nil
		case <-ctx.Done():
			if res.Cancelled || res.TimedOut {
				continue
			}
			res.Cancelled = true
			if errors.Is(context.Cause(ctx), executor.ErrKillNow) {
				ctl.send("kill")
				hardStop = clk.After(10 * time.Second)
				continue
			}
			ctl.send("term")
			killAt = clk.After(grace)
		case <-timeout:
			if res.Cancelled {
				continue
			}
			res.TimedOut = true
			ctl.send("term")
			killAt = clk.After(grace)
		case <-killAt:
			killAt = nil
			ctl.send("kill")
			hardStop = clk.After(10 * time.Second)
		case <-hardStop:
			// pod-exec did not answer kill: the stream is stuck. Give up on it; End
			// removes the pod with whatever still runs in it.
			cancelExec()
			hardStop = nil
		}
	}
}

// lost reports whether the pod is gone or failing, for an exec that broke.
func (s *session) lost() (Verdict, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pod, err := s.e.cfg.Client.CoreV1().Pods(s.e.cfg.Namespace).Get(ctx, s.pod, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Verify(nil), true
	}
	if err != nil {
		return Verdict{}, false
	}
	v := Verify(pod)
	return v, v.Stage == Failed
}

// containerDir maps a step's directory on the worker (the workspace or inside it) to
// the same place in the pod.
func (s *session) containerDir(dir string) (string, error) {
	if dir == "" || s.job.Workspace == "" {
		return executor.WorkspacePath, nil
	}
	rel, err := filepath.Rel(s.job.Workspace, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("step directory %s is outside the job's workspace %s", dir, s.job.Workspace)
	}
	return filepath.ToSlash(filepath.Join(executor.WorkspacePath, rel)), nil
}

// bind is a directory of a step's Binds, on the worker and in the pod.
type bind struct{ worker, pod string }

// containerBinds maps a step's Binds, which must lie in the job's workspace (the only
// part of the worker's disk the pod has a copy of), to where the pod has them.
func (s *session) containerBinds(dirs []string) ([]bind, error) {
	if s.job.Workspace == "" {
		return nil, nil
	}
	out := make([]bind, 0, len(dirs))
	for _, d := range dirs {
		rel, err := filepath.Rel(s.job.Workspace, d)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, fmt.Errorf("step file directory %s is not inside the job's workspace %s, which is all a pod has of the worker's disk", d, s.job.Workspace)
		}
		out = append(out, bind{worker: d, pod: path.Join(executor.WorkspacePath, filepath.ToSlash(rel))})
	}
	return out, nil
}

// takeFiles copies the files in the pod's directory dir back into the worker's, emptying
// them in the pod (`gantry pod-files`): one exec.
func (s *session) takeFiles(ctx context.Context, dir, worker string) error {
	pr, pw := io.Pipe()
	var stderr limitedBuffer
	finished := make(chan error, 1)
	go func() {
		code, err := s.e.cfg.Execer.Exec(ctx, s.e.cfg.Namespace, s.pod, jobContainer,
			[]string{ToolsBinary, "pod-files", "--dir", dir}, nil, pw, &stderr)
		if err == nil && code != 0 {
			err = fmt.Errorf("gantry pod-files exited %d: %s", code, strings.TrimSpace(stderr.String()))
		}
		pw.CloseWithError(err)
		finished <- err
	}()
	err := TakeFiles(pr, worker)
	if err == nil {
		_, _ = io.Copy(io.Discard, pr)
	}
	pr.CloseWithError(errors.New("the worker stopped reading the step files"))
	if xerr := <-finished; xerr != nil {
		if v, gone := s.lost(); gone {
			return fmt.Errorf("its step files could not be copied back from pod %s: %s: %w", s.pod, v.Message, executor.ErrEnvironmentLost)
		}
		err = xerr
	}
	if err != nil {
		return fmt.Errorf("its step files could not be copied back from pod %s: %w", s.pod, err)
	}
	return nil
}

// containerEnv maps values that name the workspace on the worker
// (GANTRY_WORKSPACE) to where the pod has it.
func (s *session) containerEnv(env []string) []string {
	if s.job.Workspace == "" {
		return env
	}
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if v == s.job.Workspace || strings.HasPrefix(v, s.job.Workspace+"/") {
			kv = k + "=" + executor.WorkspacePath + strings.TrimPrefix(v, s.job.Workspace)
		}
		out = append(out, kv)
	}
	return out
}

// Collect copies the pod's workspace back over the job's workspace on the worker, so
// that the agent saves caches and uploads artifacts from what the steps made: `gantry
// pod-tar` in the job's container streams it as tar through the exec subresource, and
// ReplaceDir takes it in only when all of it came, refusing entries that would land
// outside the workspace.
func (s *session) Collect(ctx context.Context) error {
	if s.job.Workspace == "" {
		return nil
	}
	pr, pw := io.Pipe()
	var stderr limitedBuffer
	type done struct {
		code int
		err  error
	}
	finished := make(chan done, 1)
	go func() {
		code, err := s.e.cfg.Execer.Exec(ctx, s.e.cfg.Namespace, s.pod, jobContainer,
			[]string{ToolsBinary, "pod-tar", "--workspace", executor.WorkspacePath}, nil, pw, &stderr)
		switch {
		case err != nil:
			pw.CloseWithError(err)
		case code != 0:
			pw.CloseWithError(fmt.Errorf("gantry pod-tar exited %d: %s", code, strings.TrimSpace(stderr.String())))
		default:
			pw.Close()
		}
		finished <- done{code, err}
	}()
	err := ReplaceDir(pr, s.job.Workspace)
	if err == nil {
		// What follows the tar's end (padding) is read, so the exec ends as it wrote.
		_, _ = io.Copy(io.Discard, pr)
	}
	// An extraction that failed stops the stream, so the exec ends too.
	pr.CloseWithError(errors.New("the worker stopped reading the workspace"))
	d := <-finished
	switch {
	case d.err != nil:
		if v, gone := s.lost(); gone {
			return fmt.Errorf("copy the workspace back from pod %s: %s: %w", s.pod, v.Message, executor.ErrEnvironmentLost)
		}
		return fmt.Errorf("copy the workspace back from pod %s: %w", s.pod, d.err)
	case d.code != 0:
		return fmt.Errorf("copy the workspace back from pod %s: gantry pod-tar exited %d: %s", s.pod, d.code, strings.TrimSpace(stderr.String()))
	case err != nil:
		return fmt.Errorf("copy the workspace back from pod %s: %w", s.pod, err)
	}
	return nil
}

// limitedBuffer keeps the first 4 KiB written to it: enough of a command's stderr to
// say why it failed.
type limitedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := 4096 - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// End deletes the pod: with the job's grace, or none when ctx's cause is ErrKillNow.
func (s *session) End(ctx context.Context) error {
	grace := int64(max(s.job.Grace.Seconds(), 1))
	if errors.Is(context.Cause(ctx), executor.ErrKillNow) {
		grace = 0
	}
	if ctx.Err() != nil {
		// The caller's context is spent; the pod must still go.
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		ctx = c
	}
	s.release()
	return s.delete(ctx, grace)
}

// delete deletes the pod and its image pull secret.
func (s *session) delete(ctx context.Context, grace int64) error {
	var errs []error
	err := s.e.cfg.Client.CoreV1().Pods(s.e.cfg.Namespace).Delete(ctx, s.pod, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete pod %s/%s: %w", s.e.cfg.Namespace, s.pod, err))
	}
	return errors.Join(append(errs, s.deletePullSecret(ctx))...)
}

func (s *session) deletePullSecret(ctx context.Context) error {
	if s.pullSecret == "" {
		return nil
	}
	return s.e.deleteSecret(ctx, s.pullSecret)
}

// deleteSecret deletes a secret of the namespace; one already gone is not an error.
func (e *Executor) deleteSecret(ctx context.Context, name string) error {
	err := e.cfg.Client.CoreV1().Secrets(e.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete image pull secret %s/%s: %w", e.cfg.Namespace, name, err)
	}
	return nil
}

// lockedWriter serialises the writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// sameWriter reports whether a and b are one writer (a step whose stdout and stderr go to
// one place).
func sameWriter(a, b io.Writer) bool {
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
