package docker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/gantry-ci/gantry/internal/executor"
)

// notRunningHint is what an error says when the job's container is gone.
const notRunningHint = "an image for steps needs sh and sleep"

// outputDrain bounds how long Run waits for a step's output once its processes are
// gone.
const outputDrain = 2 * time.Second

// apiTimeout bounds the engine calls made after a step or job was cancelled, which
// run on a context of their own.
const apiTimeout = 30 * time.Second

// session is one job's network, services, volumes and container.
type session struct {
	d         *Docker
	job       executor.Job
	network   string   // the network's name; "" until created
	networkID string   // and its id
	home      string   // the HOME the steps get when the image's is not usable; "" for the image's
	path      string   // the PATH of the image's config; "" when it sets none
	container string   // the job container's id; "" until created
	services  []string // service container ids
	volumes   []string // volume names
	// role labels the job's container: "job", or "pool" for a warm container, which
	// keeps that label (and its pool job's) when a job takes it.
	role string
	// poolDir is a warm container's workspace directory while the pool holds it.
	poolDir string
	// imageID is the image the container was made of.
	imageID string
	// user is who the steps run as: the job's user, or the image's ("" for root). The
	// container's process 1 runs as root, whatever the steps' user: with
	// no-new-privileges, an exec as root gets capabilities only in a container whose
	// process 1 has them, and the executor's own execs as root (stopping another user's
	// steps, giving the user its home) need them.
	user string
	// owner names the objects' job and attempt as their labels have it (endedKey).
	owner string
	// userHome is the HOME the image gives the job's user; "" until known. userOwner
	// is that user's uid:gid, when the job has a user.
	userHome, userOwner string
	// lease is the attach to the container's stdin through which the worker holds its
	// lease on it (lease.go); nil until the container is created.
	lease *leaseHolder

	mu    sync.Mutex
	ended bool
}

// Begin creates the job's network when it has services (or Config.NetworkPerJob asks
// for one), starts its services (and waits for their healthchecks), and starts the
// job's container with the workspace mounted at executor.WorkspacePath. On an error,
// whatever it created is removed again.
func (d *Docker) Begin(ctx context.Context, j executor.Job) (executor.Session, error) {
	return d.begin(ctx, j, d.cfg.NetworkPerJob, true)
}

// begin is Begin; a job without services does without a network of its own
// (ownNetwork false), on the engine's default bridge: creating a network, and starting
// a container on a user-defined one (whose embedded DNS needs setting up), is most of
// what a container job costs on a busy engine. A job the warm pool can serve (warm)
// takes a container from it when one is there or being made.
func (d *Docker) begin(ctx context.Context, j executor.Job, ownNetwork, warm bool) (*session, error) {
	if j.WorkerID == "" {
		j.WorkerID = d.cfg.WorkerID
	}
	switch {
	case j.Image == "":
		return nil, fmt.Errorf("docker: job %s has no image", j.ID)
	case j.Workspace == "":
		return nil, fmt.Errorf("docker: job %s has no workspace", j.ID)
	case !filepath.IsAbs(j.Workspace):
		return nil, fmt.Errorf("docker: job %s: workspace %q is not an absolute path", j.ID, j.Workspace)
	case j.ID == "" || j.WorkerID == "":
		return nil, errors.New("docker: a job needs an ID and a WorkerID to label its objects")
	}
	if err := checkServices(j); err != nil {
		return nil, err
	}
	if j.HostServices && len(j.Services) > 0 {
		// Its steps reach the services on localhost, which in a container is the
		// container's own.
		return nil, fmt.Errorf("docker: job %s runs on the worker's host, its steps reaching its services on localhost, "+
			"and this worker runs such jobs in its default image (--default-image), where localhost is the job's container: "+
			"run it on a docker worker without --default-image, or give the job an image and reach its services by their names", j.ID)
	}

	if j.Privileged && !d.cfg.AllowPrivileged {
		return nil, fmt.Errorf("docker: job %s asks for a privileged container (container: {options: {privileged: true}}): %w; "+
			"its operator allows them by starting it with --docker-allow-privileged (GANTRY_DOCKER_ALLOW_PRIVILEGED)",
			j.ID, ErrPrivilegedNotAllowed)
	}

	if key, ok := d.pool.keyOf(j, ownNetwork); ok && warm {
		s, err := d.beginWarm(ctx, j, key)
		if s != nil || err != nil {
			return s, err
		}
	}
	s := &session{d: d, job: j}
	if err := s.begin(ctx, ownNetwork || len(j.Services) > 0, nil); err != nil {
		s.ended = true
		// Nothing of the job ran yet, and nothing is owed a grace; the caller learns
		// of the failure once what was made is gone.
		if endErr := s.remove(context.WithoutCancel(ctx)); endErr != nil {
			err = errors.Join(err, fmt.Errorf("clean up after the failed start: %w", endErr))
		}
		return nil, err
	}
	return s, nil
}

// beginWarm gives job j a container of the warm pool, or nil when it has none for it.
func (d *Docker) beginWarm(ctx context.Context, j executor.Job, key poolKey) (*session, error) {
	img, err := d.ensureImage(ctx, j.Image, j.Pull, j.RegistryAuth)
	if err != nil {
		return nil, err
	}
	w := d.pool.take(ctx, key, img)
	if w == nil {
		return nil, nil
	}
	if w.sess.lease.gone() {
		// It ended on its own: it outlived its time while this worker was frozen.
		d.pool.discard(w)
		return nil, nil
	}
	if err := adopt(w, j.Workspace); err != nil {
		d.log.Warn("docker: give a warm container the job's workspace; the job starts cold", "job", j.ID, "err", err)
		// Only once empty: the job's files are in it if they could not be moved back.
		d.pool.discardWith(w, os.Remove)
		return nil, nil
	}
	s := w.sess
	s.job, s.poolDir = j, ""
	return s, nil
}

// begin creates and starts the job's objects. known, when not nil, is the job's image as
// its caller just inspected it (the warm pool's, from the job that asked for a
// container), which is not inspected again.
func (s *session) begin(ctx context.Context, ownNetwork bool, known *image.InspectResponse) error {
	d, j := s.d, s.job
	s.owner = endedKey(j.ID, j.Attempt)
	role := cmp.Or(s.role, "job")
	// Images first: a missing image fails the job before anything is created.
	imgs := map[string]image.InspectResponse{}
	if known != nil {
		imgs[j.Image] = *known
	}
	if err := d.ensureImages(ctx, imgs, append([]string{j.Image}, serviceImages(j.Services)...), j.Pull, j.RegistryAuth); err != nil {
		return err
	}
	s.imageID = imgs[j.Image].ID
	s.user = j.User
	if cfg := imgs[j.Image].Config; cfg != nil {
		if s.user == "" {
			s.user = cfg.User
		}
		for _, kv := range cfg.Env {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				s.path = v
			}
		}
	}

	base := objectName("gantry", j.ID, fmt.Sprint(j.Attempt), randomHex(3))
	netMode := container.NetworkMode("bridge")
	if ownNetwork {
		if err := s.createNetwork(ctx, base); err != nil {
			return err
		}
		netMode = container.NetworkMode(base)
	}

	for _, svc := range j.Services {
		if err := s.startService(ctx, base, svc, imgs[svc.Image], false); err != nil {
			return err
		}
	}

	mounts := []mount.Mount{{Type: mount.TypeBind, Source: j.Workspace, Target: executor.WorkspacePath}}
	vm, err := s.imageVolumes(ctx, base+"-"+role, imgs[j.Image])
	if err != nil {
		return err
	}
	mounts = append(mounts, vm...)
	labels := d.labels(j, role)
	if s.poolDir != "" {
		labels[LabelPoolDir] = s.poolDir
	}
	cfg := &container.Config{
		Image:      j.Image,
		User:       "0",
		Entrypoint: processOne[:1],
		Cmd:        processOne[1:],
		WorkingDir: executor.WorkspacePath,
		Labels:     labels,
		// Process 1 holds the worker's lease on the container through its stdin, which
		// the engine closes when the worker's attach ends.
		OpenStdin: true,
		StdinOnce: true,
	}
	host := &container.HostConfig{
		Mounts:      mounts,
		NetworkMode: netMode,
		Privileged:  j.Privileged,
		Resources: container.Resources{
			NanoCPUs: j.MilliCPU * 1e6,
			Memory:   j.Memory,
		},
	}
	harden(host, j.Privileged)
	c, err := d.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:       base + "-" + role,
		Config:     cfg,
		HostConfig: host,
	})
	if err != nil {
		return fmt.Errorf("create the job's container of %s: %w", j.Image, err)
	}
	s.container = c.ID
	// Attached before it starts: a worker that dies from here on takes the container
	// with it.
	if s.lease, err = d.attachLease(ctx, c.ID); err != nil {
		return err
	}
	if _, err := d.cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		if j.Privileged {
			// An engine that runs without every capability itself (in a container,
			// rootless) cannot give them to a container: its error names capabilities,
			// not the job's key that asked for them.
			return fmt.Errorf("start the job's container of %s: the engine did not start it privileged (container: {options: {privileged: true}}): %w", j.Image, err)
		}
		return fmt.Errorf("start the job's container of %s: %w", j.Image, err)
	}
	s.lease.start()
	// Process 1 is the image's sh; an image without one cannot run steps, and says so
	// best now, not as a failed exec at the first step. A warm container is not looked
	// at: one whose process 1 exited has its lease's attach ended, and the job that
	// takes it starts cold instead (beginWarm), or, when it exits later still, learns
	// why at its first step's exec (Run), as a cold job would.
	if s.role != "pool" {
		r, err := d.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if err != nil {
			return fmt.Errorf("inspect the job's container of %s: %w", j.Image, err)
		}
		if st := r.Container.State; st != nil && !st.Running {
			return s.exitedError(ctx, st.ExitCode)
		}
	}
	if j.User != "" {
		return s.prepareHome(ctx)
	}
	return nil
}

// checkServices checks that j's services have names and images, each name once.
func checkServices(j executor.Job) error {
	seen := map[string]bool{}
	for _, s := range j.Services {
		if s.Name == "" || s.Image == "" {
			return fmt.Errorf("docker: job %s: a service needs a name and an image", j.ID)
		}
		if seen[s.Name] {
			return fmt.Errorf("docker: job %s: two services named %q", j.ID, s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}

// createNetwork creates the job's bridge network, named name.
func (s *session) createNetwork(ctx context.Context, name string) error {
	n, err := s.d.cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{
		Driver: "bridge",
		Labels: s.d.labels(s.job, "network"),
	})
	if err != nil {
		return fmt.Errorf("create the job's network: %w", err)
	}
	s.network, s.networkID = name, n.ID
	return nil
}

// JobContainer is the ids of the job's container and of its network ("" on the
// engine's default bridge).
func (s *session) JobContainer() (id, network string) { return s.container, s.networkID }

// Running is the job's services as its steps reach them: by their names, at their
// own ports.
func (s *session) Running() []executor.RunningService {
	out := make([]executor.RunningService, 0, len(s.services))
	for i, id := range s.services {
		svc := s.job.Services[i]
		ports := map[string]string{}
		for _, p := range svc.Ports {
			if port, err := network.ParsePort(p); err == nil {
				ports[port.Port()] = port.Port()
			}
		}
		out = append(out, executor.RunningService{Name: svc.Name, ID: id, Network: s.networkID, Ports: ports, Host: svc.Name})
	}
	return out
}

// ImagePath is the PATH the job's image gives its steps ("" when its config sets none,
// and the engine gives the usual one). A step's env that sets PATH replaces it, so the
// agent puts the directories a step added to $GANTRY_PATH before this one.
func (s *session) ImagePath() string { return s.path }

// homeFallback is the home of a step user the image does not know (its HOME is "/").
const homeFallback = "/tmp/home"

// prepareHome makes sure the job's user can write its HOME, as tools that keep caches
// and settings there (go, npm, pip) need: a user the image's /etc/passwd lacks has "/"
// for HOME, and an image may ship a home that root owns. The home the image gives the
// user is created or given to the user; one for a user the image does not know is
// homeFallback, which the steps then get as HOME.
func (s *session) prepareHome(ctx context.Context) error {
	const probe = `printf '%s\n%s:%s\n' "$HOME" "$(id -u)" "$(id -g)"; [ "$HOME" != / ] && [ -d "$HOME" ] && [ -w "$HOME" ] && echo writable`
	code, out, err := s.execOnce(ctx, s.container, s.user, []string{"sh", "-c", probe}, apiTimeout)
	if err != nil {
		return fmt.Errorf("find the home of user %s in the job's container: %w", s.job.User, err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 && len(lines) < 2 || code < 0 {
		return fmt.Errorf("find the home of user %s in the job's container: exit %d: %s", s.job.User, code, lastLines(out, 3))
	}
	home, owner := lines[0], lines[1]
	s.userOwner = owner
	if len(lines) == 3 && lines[2] == "writable" {
		s.userHome = home
		return nil
	}
	if home == "" || home == "/" {
		home = homeFallback
		s.home = home
	}
	code, out, err = s.execOnce(ctx, s.container, "0", []string{"sh", "-c", `mkdir -p "$1" && chown "$2" "$1" && chmod u+rwx "$1"`, "sh", home, owner}, apiTimeout)
	if err == nil && code != 0 {
		err = fmt.Errorf("exit %d: %s", code, lastLines(out, 3))
	}
	if err != nil {
		return fmt.Errorf("give user %s its home %s in the job's container: %w", s.job.User, home, err)
	}
	s.userHome = home
	return nil
}

// exitedError says that the job's container exited, with its code and last output.
func (s *session) exitedError(ctx context.Context, code int) error {
	if fenceReason(code) != "" {
		return errFenced(code)
	}
	msg := fmt.Sprintf("the job's container of %s exited with code %d (%s)", s.job.Image, code, notRunningHint)
	if logs := s.tailLogs(ctx, s.container); logs != "" {
		msg += ": " + logs
	}
	return errors.New(msg)
}

func serviceImages(svcs []executor.Service) []string {
	var refs []string
	for _, s := range svcs {
		refs = append(refs, s.Image)
	}
	return refs
}

// imageVolumes creates a labelled volume for each VOLUME of the image, so that none is
// anonymous: an anonymous volume carries no label, and a sweep could not find it.
func (s *session) imageVolumes(ctx context.Context, owner string, img image.InspectResponse) ([]mount.Mount, error) {
	if img.Config == nil || len(img.Config.Volumes) == 0 {
		return nil, nil
	}
	paths := make([]string, 0, len(img.Config.Volumes))
	for p := range img.Config.Volumes {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var mounts []mount.Mount
	for i, p := range paths {
		name := fmt.Sprintf("%s-v%d", owner, i)
		if _, err := s.d.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Labels: s.d.labels(s.job, "volume")}); err != nil {
			return nil, fmt.Errorf("create volume for %s: %w", p, err)
		}
		s.volumes = append(s.volumes, name)
		mounts = append(mounts, mount.Mount{Type: mount.TypeVolume, Source: name, Target: p})
	}
	return mounts, nil
}

// Run runs the step in the job's container with exec, streaming its output as it
// comes. Cancel and the step's timeout send SIGTERM to every process of the step, wait
// the grace, then SIGKILL; when Run returns, none of the step's processes is left
// (only a process that changed to another user, with su or a setuid program, outlives
// a step that exits on its own).
func (s *session) Run(ctx context.Context, st executor.Step) (executor.Result, error) {
	args, err := executor.ShellArgs(st.Shell, st.Script)
	if err != nil {
		return executor.Result{}, err
	}
	dir, err := s.containerDir(st.Dir)
	if err != nil {
		return executor.Result{}, err
	}
	grace := st.Grace
	if grace <= 0 {
		grace = executor.DefaultGrace
	}
	run := `"$@"`
	if st.Stdout != nil && sameWriter(st.Stdout, st.Stderr) {
		// Two pipes would lose the order of lines between stdout and stderr; one
		// writer wants them in order, so the step gets one pipe for both.
		run = `"$@" 2>&1`
	}
	args = append([]string{"sh", "-c", stepWrapper(run), "sh"}, args...)
	// The engine calls must outlive a cancel: the step still has to be stopped and
	// its exit code read.
	actx := context.WithoutCancel(ctx)
	cli := s.d.cli

	env := append([]string{}, st.Env...)
	if s.home != "" && !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "HOME=") }) {
		env = append(env, "HOME="+s.home)
	}
	ex, err := cli.ExecCreate(actx, s.container, client.ExecCreateOptions{
		User:         s.user,
		AttachStdout: true,
		AttachStderr: true,
		Env:          env,
		WorkingDir:   dir,
		Cmd:          args,
	})
	if err != nil {
		if r, ierr := cli.ContainerInspect(actx, s.container, client.ContainerInspectOptions{}); ierr == nil &&
			r.Container.State != nil && !r.Container.State.Running {
			return executor.Result{}, s.exitedError(actx, r.Container.State.ExitCode)
		}
		return executor.Result{}, fmt.Errorf("create the step's exec in the job's container: %w", err)
	}
	att, err := cli.ExecAttach(actx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return executor.Result{}, fmt.Errorf("start the step's exec: %w", err)
	}
	defer att.Close()

	streamed := demux(att.Reader, st.Stdout, st.Stderr)

	exited := make(chan execExit, 1)
	stopWaiting := make(chan struct{})
	defer close(stopWaiting)
	go func() { exited <- s.waitExec(actx, ex.ID, streamed, stopWaiting) }()

	var timedOut <-chan time.Time
	if st.Timeout > 0 {
		t := time.NewTimer(st.Timeout)
		defer t.Stop()
		timedOut = t.C
	}
	var res executor.Result
	var exit execExit
	stopped := false
	select {
	case exit = <-exited:
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), executor.ErrKillNow) {
			grace = 0
		}
		exit, stopped = s.stop(actx, exited, grace)
		res.Cancelled = stopped
	case <-timedOut:
		exit, stopped = s.stop(actx, exited, grace)
		res.TimedOut = stopped
	}
	if stopped {
		// The wrapper may have died with the step, before it could end the step's
		// leftovers.
		s.killAll(actx, syscall.SIGKILL)
	}
	timer := time.NewTimer(outputDrain)
	select {
	case <-streamed:
	case <-timer.C:
		att.Close() // unblocks the copy
		<-streamed
	}
	timer.Stop()

	if !stopped && (exit.err != nil || exit.code != 0) {
		// The container may have killed the step itself, its worker's lease on it
		// having run out (a worker that was frozen): that is the job's environment
		// lost, not the step failing.
		if err := s.fencedError(actx); err != nil {
			return res, err
		}
	}
	if exit.err != nil {
		return res, exit.err
	}
	res.ExitCode = exit.code
	// The engine reports a process killed by a signal as 128+signal; when we sent the
	// signal, say so as the shell executor does.
	if (res.Cancelled || res.TimedOut) && exit.code > 128 && exit.code <= 128+64 {
		res.ExitCode = -1
		res.Signal = syscall.Signal(exit.code - 128).String()
	}
	return res, nil
}

// stepWrapper is the script that runs a step (its argv is the wrapper's "$@") as the
// job's user and, when the step has exited, ends whatever it left running (a
// background child, a process that called setsid): kill(-1) reaches every process of
// the user but process 1 and the wrapper itself. The wrapper outlives a SIGTERM that
// stops the step (a handler, not an ignore, which the step would inherit), so that it
// still ends the leftovers and passes on the step's own exit code. Process 1's lease
// reader is among those it kills, which process 1 starts again (lease.go).
func stepWrapper(run string) string {
	return "trap : TERM INT\n" + run + "\nrc=$?\nkill -9 -1 2>/dev/null\nexit $rc"
}

// sameWriter reports whether a and b are the same writer; writers of uncomparable
// types are taken as different.
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

type execExit struct {
	code int
	err  error
}

// waitExec waits for the exec's process to exit. The end of its output stream is the
// usual sign, and the engine is asked only then: an inspect right after it mostly finds
// the exit recorded, else one a millisecond later, then two, four... A process that
// holds the stream open (one of another user, which the step's wrapper cannot end) is
// why it also polls, from 200 ms on; the wait between polls doubles up to a second.
func (s *session) waitExec(ctx context.Context, id string, streamed, stop <-chan struct{}) execExit {
	poll := 200 * time.Millisecond
	timer := time.NewTimer(poll)
	defer timer.Stop()
	var ended time.Time // when the stream ended
	for {
		select {
		case <-streamed:
			// The stream has ended, and mostly so has the process: the engine
			// records the exit a moment later.
			streamed = nil
			ended = time.Now()
			poll = time.Millisecond
		case <-timer.C:
			poll = min(2*poll, time.Second)
		case <-stop:
			return execExit{err: errors.New("stopped waiting for the step's exec")}
		}
		r, err := s.d.cli.ExecInspect(ctx, id, client.ExecInspectOptions{})
		if err != nil {
			return execExit{err: fmt.Errorf("inspect the step's exec: %w", err)}
		}
		if h := s.d.execInspected.Load(); h != nil {
			r = (*h)(r)
		}
		// An exec the engine has not started yet is not running either, and has no
		// pid and no exit code (which the client gives as 0): that is not an exit 0.
		started := r.PID != 0 || r.ExitCode != 0
		if !r.Running && started {
			return execExit{code: r.ExitCode}
		}
		if !r.Running && !ended.IsZero() && time.Since(ended) > outputDrain {
			return execExit{err: errors.New("the step's exec ended its output without the engine starting it")}
		}
		timer.Reset(poll)
	}
}

// stop ends a running step: SIGTERM to all its processes, the grace, then SIGKILL. It
// reports false when the step had exited on its own already.
func (s *session) stop(ctx context.Context, exited <-chan execExit, grace time.Duration) (execExit, bool) {
	select {
	case e := <-exited:
		return e, false
	default:
	}
	if grace > 0 {
		s.killAll(ctx, syscall.SIGTERM)
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case e := <-exited:
			return e, true
		case <-timer.C:
		}
	}
	s.killAll(ctx, syscall.SIGKILL)
	return <-exited, true
}

// killAll signals every process in the job's container but its process 1: a step's
// processes, and whatever they started, even those that left the step's process group
// or lost their parent. The exec API has no kill, so it runs kill in the container, as
// root; kill(-1) spares the caller and process 1. The job's steps run one at a time,
// so every other process is the running step's, but for process 1's lease reader,
// which process 1 starts again (lease.go).
func (s *session) killAll(ctx context.Context, sig syscall.Signal) {
	kctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	cli := s.d.cli
	// Attached, so that the stream ends only once kill has run: a kill still on its
	// way would hit the next step.
	ex, err := cli.ExecCreate(kctx, s.container, client.ExecCreateOptions{
		User:         "0",
		AttachStdout: true,
		AttachStderr: true,
		Cmd:          []string{"sh", "-c", fmt.Sprintf("kill -%d -1; echo sent", int(sig))},
	})
	if err != nil {
		s.d.log.Warn("docker: signal the step's processes", "container", s.container, "err", err)
		return
	}
	att, err := cli.ExecAttach(kctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		s.d.log.Warn("docker: signal the step's processes", "container", s.container, "err", err)
		return
	}
	defer att.Close()
	_, _ = io.Copy(io.Discard, att.Reader)
	for {
		r, err := cli.ExecInspect(kctx, ex.ID, client.ExecInspectOptions{})
		if err != nil || !r.Running {
			return
		}
		select {
		case <-kctx.Done():
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// containerDir maps a directory of the workspace on the worker to the container.
func (s *session) containerDir(dir string) (string, error) {
	if dir == "" {
		return executor.WorkspacePath, nil
	}
	rel, err := filepath.Rel(s.job.Workspace, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", fmt.Errorf("docker: step directory %s is not inside the job's workspace %s", dir, s.job.Workspace)
	}
	return path.Join(executor.WorkspacePath, filepath.ToSlash(rel)), nil
}

// End stops and removes the job's container, its services, volumes and network. Every
// step has ended by now, each with its own grace, and what is left holds nothing anyone
// will read, so the job is done when End returns: the removal goes on in the
// background, off the job's critical path (Close waits for it), and once the container
// is gone the workspace is disarmed (harden.go): what the job's caches and artifacts take
// from it meanwhile never carried set-user-ID bits or device files. A removal that fails
// is left to the periodic sweep, which removes the objects of ended jobs too.
func (s *session) End(ctx context.Context) error {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return nil
	}
	s.ended = true
	s.mu.Unlock()
	// Nothing of the job runs any more that the container must keep: it goes at once,
	// whenever the removal comes.
	s.lease.close()

	d := s.d
	key := s.owner
	d.endMu.Lock()
	d.ending[key] = true
	d.endMu.Unlock()
	d.removalsMu.Lock()
	d.removals.Add(1)
	d.removalsMu.Unlock()
	go func() {
		defer d.removals.Done()
		if hold := d.holdRemovals.Load(); hold != nil {
			<-*hold
		}
		err := s.remove(context.WithoutCancel(ctx))
		// The container is gone (or, when its removal failed, killed by its process 1,
		// the lease closed): nothing of it changes the workspace any more.
		if n, derr := disarm(s.job.Workspace); derr != nil {
			d.log.Warn("docker: disarm an ended job's workspace", "job", s.job.ID, "err", derr)
		} else if n > 0 {
			d.log.Info("docker: cleared set-user-ID and set-group-ID bits, file capabilities and device files the job left in its workspace",
				"job", s.job.ID, "files", n)
		}
		if err != nil {
			d.log.Warn("docker: remove an ended job's objects; the sweep will", "job", s.job.ID, "err", err)
			return
		}
		d.endMu.Lock()
		delete(d.ending, key)
		d.endMu.Unlock()
	}()
	return nil
}

// remove force-removes the job's containers (at once, in parallel: a process 1 that
// ignores SIGTERM, sh or httpd, would otherwise make every job wait out a grace), then
// its volumes and network.
func (s *session) remove(ctx context.Context) error {
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	cli := s.d.cli
	// Its stdin closed, the container's process 1 kills what is left in it and exits,
	// which makes the removal quick.
	s.lease.close()

	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	remove := func(id, what string) {
		defer wg.Done()
		if _, err := cli.ContainerRemove(actx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			fail(fmt.Errorf("remove %s: %w", what, err))
		}
	}
	if s.container != "" {
		wg.Add(1)
		go remove(s.container, "the job's container")
	}
	for i, id := range s.services {
		wg.Add(1)
		go remove(id, fmt.Sprintf("service %s", s.job.Services[i].Name))
	}
	wg.Wait()
	for _, v := range s.volumes {
		if _, err := cli.VolumeRemove(actx, v, client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove volume %s: %w", v, err))
		}
	}
	if s.network != "" {
		if _, err := cli.NetworkRemove(actx, s.network, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove the job's network: %w", err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("docker: end job %s: %w", s.job.ID, errors.Join(errs...))
	}
	return nil
}

// networkEndpoint attaches a container to the job's network under aliases.
func networkEndpoint(net string, aliases ...string) *network.NetworkingConfig {
	return &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
		net: {Aliases: aliases},
	}}
}

// demux copies an attached container's or exec's multiplexed output to stdout and
// stderr (nil discards) as it comes; the channel closes when the stream ends.
func demux(r io.Reader, stdout, stderr io.Writer) <-chan struct{} {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	streamed := make(chan struct{})
	go func() {
		defer close(streamed)
		_, _ = stdcopy.StdCopy(stdout, stderr, r)
	}()
	return streamed
}
