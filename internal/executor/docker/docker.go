package docker

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"
	"golang.org/x/sync/singleflight"

	"github.com/gantry-ci/gantry/internal/executor"
)

// Labels every object the executor creates carries. A later incarnation of the worker
// finds what a dead one left behind by them.
const (
	LabelWorker      = "gantry.worker"
	LabelJob         = "gantry.job"
	LabelAttempt     = "gantry.attempt"
	LabelIncarnation = "gantry.incarnation" // one Docker value's; Sweep spares its own
	LabelRole        = "gantry.role"        // "job", "service", or "pool" for a warm container
	// LabelProcess names the process that made the object, so that another process on
	// its machine can tell that it is dead, whatever its worker id or work dir
	// (SweepDeadProcesses): "HOST/BOOT/PIDNS/UID/PID/START" (process_linux.go).
	// Objects made where there is no /proc go without it.
	LabelProcess = "gantry.process"
)

// Pull policies (Job.Pull).
const (
	PullAlways       = "always"
	PullIfNotPresent = "if-not-present"
	PullNever        = "never"
)

// idleConns is how many idle connections to the engine the client keeps.
const idleConns = 16

// pullTimeout bounds one pull, which runs on after a job that asked for it gave up, so
// that the next job finds the image.
const pullTimeout = 30 * time.Minute

// ErrPrivilegedNotAllowed is Begin's error for a privileged job on an executor whose
// Config.AllowPrivileged is false.
var ErrPrivilegedNotAllowed = errors.New("this worker does not run privileged containers")

// Config says how a Docker executor reaches its engine and what it runs steps without a
// Job in.
type Config struct {
	// Host is the engine's address ("unix:///var/run/docker.sock", "tcp://host:2375");
	// "" takes DOCKER_HOST and the other DOCKER_* variables, else the default socket.
	Host string
	// WorkerID labels the containers of steps run without a Job (Run), and of jobs whose
	// Job.WorkerID is "".
	WorkerID string
	// DefaultImage is the image Run runs a step in when it has no Job.
	DefaultImage string
	// DefaultPull is the pull policy for DefaultImage ("" is if-not-present).
	DefaultPull string
	// Logger receives what the executor does on its own (sweeps); nil discards it.
	Logger *slog.Logger
	// NetworkPerJob gives every job a bridge network of its own, which keeps jobs that
	// run at the same time from reaching each other. Without it only a job with
	// services gets one; the others share the engine's default bridge, which costs
	// less to start on.
	NetworkPerJob bool
	// AllowPrivileged lets jobs have a privileged container (container: {options:
	// {privileged: true}}), which can take over the engine's host: the worker's operator
	// opts in. Without it, Begin fails such a job before anything is created.
	AllowPrivileged bool
	// WarmPool is how many containers the executor keeps created and started ahead of
	// need for each of the last few kinds of job it ran (image, user, limits), so that
	// the next such job does not wait for the engine to make one; 0 keeps none. Jobs
	// with services, a network of their own or a privileged container always start
	// cold.
	WarmPool int
	// WorkDir is where the executor makes the directory its jobs' workspaces are to be
	// made in (WorkspaceDir); "" is the temp dir.
	WorkDir string
}

// Docker runs steps in containers on a Docker Engine. It is an executor.JobExecutor:
// Begin starts a job's services and its container, each step runs in that container
// with exec, End removes them all.
type Docker struct {
	cfg         Config
	cli         *client.Client
	log         *slog.Logger
	incarnation string
	pulls       singleflight.Group
	pool        *pool // nil without Config.WarmPool
	// wsDir is WorkspaceDir; wsNosuid says whether it is on a nosuid,nodev mount,
	// wsMounted whether this value made that mount.
	wsDir               string
	wsNosuid, wsMounted bool

	// removals counts the ended jobs whose objects are being removed; ending holds
	// their endedKey until that succeeded, so that a sweep may remove what is left.
	removals sync.WaitGroup
	// removalsMu orders a removal's Add with waiting for them (waitRemovals): a
	// WaitGroup's Add from zero must not race its Wait.
	removalsMu sync.Mutex
	endMu      sync.Mutex
	ending     map[string]bool
	// holdRemovals, when set, keeps removals from starting until it is closed (tests).
	holdRemovals atomic.Pointer[chan struct{}]
	// execInspected, when set, is given each answer to an inspect of a step's exec and
	// answers in its place (tests: the answer of an exec the engine has not started).
	execInspected atomic.Pointer[func(client.ExecInspectResult) client.ExecInspectResult]

	// Counters for tests: pulls made, callers waiting on one.
	pullsMade, pullWaiters atomic.Int64
}

var _ executor.JobExecutor = (*Docker)(nil)

// New connects to the engine and checks that it answers. The API version is negotiated
// with the engine (20.10, API 1.41, and later).
func New(ctx context.Context, cfg Config) (*Docker, error) {
	// The client's own transport keeps two idle connections: a job's calls, the warm
	// pool's and the removals of ended jobs run at once, and each call past two dialled
	// the engine anew. The options after it apply the host and TLS settings to this
	// transport. (An empty TLSNextProto keeps HTTP/2 from being set up on it, which would
	// give it a TLS config and the client an https:// scheme for a plain socket.)
	opts := []client.Opt{client.WithHTTPClient(&http.Client{CheckRedirect: client.CheckRedirect, Transport: &http.Transport{
		MaxIdleConns: idleConns, MaxIdleConnsPerHost: idleConns, IdleConnTimeout: 30 * time.Second,
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}}), client.WithHost(client.DefaultDockerHost), client.FromEnv}
	if cfg.Host != "" {
		opts = append(opts, client.WithHost(cfg.Host))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("reach the Docker Engine at %s: %w", cli.DaemonHost(), err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Docker{cfg: cfg, cli: cli, log: log, incarnation: randomHex(8), ending: map[string]bool{}}
	if d.wsDir, d.wsNosuid, d.wsMounted, err = makeWorkspaceDir(cfg.WorkDir, log); err != nil {
		_ = cli.Close()
		return nil, err
	}
	sweepWorkspaceDirs(d.wsDir, log)
	if cfg.WarmPool > 0 {
		d.pool = newPool(d, cfg.WarmPool)
	}
	return d, nil
}

// Client is the engine client, for callers that inspect what the executor made.
func (d *Docker) Client() *client.Client { return d.cli }

// WorkspaceDir is the directory the workspaces of this executor's jobs are to be made in:
// one of its own in Config.WorkDir, mode 0700, so that no other user of the host reaches
// what a job's container leaves in its workspace, and where the worker may, a nosuid,nodev
// mount that the jobs' containers see their workspaces on too (harden.go). A job whose
// workspace is elsewhere runs all the same, without the mount.
func (d *Docker) WorkspaceDir() string { return d.wsDir }

// WorkspaceNosuid says whether WorkspaceDir is on a nosuid,nodev mount.
func (d *Docker) WorkspaceNosuid() bool { return d.wsNosuid }

// Close removes the warm pool's containers and waits for the removal of ended jobs'
// objects, then releases the client's connections and takes WorkspaceDir's mount down
// (the directory goes too unless a kept workspace is in it); sessions still running are
// not ended.
func (d *Docker) Close() error {
	if d.pool != nil {
		d.pool.close()
	}
	d.waitRemovals()
	err := removeWorkspaceDir(d.wsDir, d.wsMounted)
	return errors.Join(d.cli.Close(), err)
}

// endedKey names a job attempt among those being removed.
func endedKey(job string, attempt int) string { return job + "\x00" + strconv.Itoa(attempt) }

// ended says whether objects labelled l belong to a job of this incarnation that ended.
func (d *Docker) ended(l map[string]string) bool {
	d.endMu.Lock()
	defer d.endMu.Unlock()
	return d.ending[l[LabelJob]+"\x00"+l[LabelAttempt]]
}

// Run runs a step that has no Job in a container of its own, of Config.DefaultImage,
// with the step's Dir mounted as the workspace, on the engine's default network, and
// removes the container afterwards.
func (d *Docker) Run(ctx context.Context, s executor.Step) (executor.Result, error) {
	if d.cfg.DefaultImage == "" {
		return executor.Result{}, errors.New("docker: a step without a job needs Config.DefaultImage")
	}
	if s.Dir == "" {
		return executor.Result{}, errors.New("docker: a step without a job needs Step.Dir, its workspace")
	}
	sess, err := d.begin(ctx, executor.Job{
		ID:        "step-" + randomHex(6),
		WorkerID:  d.cfg.WorkerID,
		Workspace: s.Dir,
		Image:     d.cfg.DefaultImage,
		Pull:      d.cfg.DefaultPull,
		Grace:     s.Grace,
	}, false, false)
	if err != nil {
		return executor.Result{}, err
	}
	res, err := sess.Run(ctx, s)
	endCtx := context.WithoutCancel(ctx)
	if errors.Is(context.Cause(ctx), executor.ErrKillNow) {
		var cancel context.CancelCauseFunc
		endCtx, cancel = context.WithCancelCause(endCtx)
		cancel(executor.ErrKillNow)
	}
	if endErr := sess.End(endCtx); endErr != nil && err == nil {
		err = endErr
	}
	return res, err
}

// ensureImages makes each of refs present under the pull policy, with auth, and
// puts what it inspected into imgs, skipping a ref imgs already holds.
func (d *Docker) ensureImages(ctx context.Context, imgs map[string]image.InspectResponse, refs []string, policy string, auth map[string]executor.RegistryCredential) error {
	for _, ref := range refs {
		if _, ok := imgs[ref]; ok {
			continue
		}
		img, err := d.ensureImage(ctx, ref, policy, auth)
		if err != nil {
			return err
		}
		imgs[ref] = img
	}
	return nil
}

// ensureImage makes the image present per the pull policy and returns it.
func (d *Docker) ensureImage(ctx context.Context, ref, policy string, auth map[string]executor.RegistryCredential) (image.InspectResponse, error) {
	switch policy {
	case "", PullIfNotPresent, PullAlways, PullNever:
	default:
		return image.InspectResponse{}, fmt.Errorf("image %s: unknown pull policy %q (want always, if-not-present or never)", ref, policy)
	}
	if policy != PullAlways {
		got, err := d.cli.ImageInspect(ctx, ref)
		if err == nil {
			return got.InspectResponse, nil
		}
		if !cerrdefs.IsNotFound(err) {
			return image.InspectResponse{}, fmt.Errorf("inspect image %s: %w", ref, err)
		}
		if policy == PullNever {
			return image.InspectResponse{}, fmt.Errorf("image %s not found on the worker and pull: never", ref)
		}
	}
	if err := d.pull(ctx, ref, auth); err != nil {
		return image.InspectResponse{}, err
	}
	got, err := d.cli.ImageInspect(ctx, ref)
	if err != nil {
		return image.InspectResponse{}, fmt.Errorf("inspect image %s after pulling it: %w", ref, err)
	}
	return got.InspectResponse, nil
}

// pull pulls ref once for all the jobs that ask for it at the same time. The pull runs
// on its own context: one job giving up does not fail the others.
func (d *Docker) pull(ctx context.Context, ref string, auth map[string]executor.RegistryCredential) error {
	named, encoded, user, err := registryAuth(ref, auth)
	if err != nil {
		return err
	}
	key := named + "\x00" + user
	d.pullWaiters.Add(1)
	defer d.pullWaiters.Add(-1)
	ch := d.pulls.DoChan(key, func() (any, error) {
		d.pullsMade.Add(1)
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pullTimeout)
		defer cancel()
		resp, err := d.cli.ImagePull(pctx, named, client.ImagePullOptions{RegistryAuth: encoded})
		if err != nil {
			return nil, err
		}
		defer resp.Close()
		// Wait reads the progress stream to its end and returns the error it reports.
		return nil, resp.Wait(pctx)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return fmt.Errorf("pull image %s: %w", ref, r.Err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pull image %s: %w", ref, context.Cause(ctx))
	}
}

// registryAuth normalises ref ("busybox" is docker.io/library/busybox:latest) and
// finds the credentials for its registry, encoded for the engine ("" for none).
func registryAuth(ref string, auth map[string]executor.RegistryCredential) (named, encoded, user string, err error) {
	n, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", "", "", fmt.Errorf("image %q: %w", ref, err)
	}
	n = reference.TagNameOnly(n)
	host := reference.Domain(n)
	cred, ok := auth[host]
	if !ok && host == "docker.io" {
		cred, ok = auth["index.docker.io"]
	}
	if !ok {
		return n.String(), "", "", nil
	}
	b, err := json.Marshal(registry.AuthConfig{Username: cred.Username, Password: cred.Password, ServerAddress: host})
	if err != nil {
		return "", "", "", fmt.Errorf("encode credentials for %s: %w", host, err)
	}
	return n.String(), base64.URLEncoding.EncodeToString(b), cred.Username, nil
}

// labels returns the labels of an object of job j.
func (d *Docker) labels(j executor.Job, role string) map[string]string {
	l := map[string]string{
		LabelWorker:      j.WorkerID,
		LabelJob:         j.ID,
		LabelAttempt:     strconv.Itoa(j.Attempt),
		LabelIncarnation: d.incarnation,
		LabelRole:        role,
	}
	if p := thisProcess(); p != "" {
		l[LabelProcess] = p
	}
	return l
}

// Sweep removes the containers, networks and volumes labelled with workerID that
// another incarnation of the worker (one that died) left behind, and those of this
// Docker value's ended jobs that End could not remove; those of its running jobs are
// spared. It returns how many objects it removed.
func (d *Docker) Sweep(ctx context.Context, workerID string) (int, error) {
	if workerID == "" {
		return 0, errors.New("sweep: empty worker id")
	}
	return d.sweep(ctx, LabelWorker+"="+workerID, func(map[string]string) bool { return true })
}

// SweepUnknown removes the gantry-labelled containers, networks and volumes of every
// worker that known does not own up to: objects of workers that are gone for good
// (their ids are never reused). This Docker value's own objects are spared.
func (d *Docker) SweepUnknown(ctx context.Context, known func(workerID string) bool) (int, error) {
	return d.sweep(ctx, LabelWorker, func(l map[string]string) bool { return !known(l[LabelWorker]) })
}

// SweepDeadProcesses removes the gantry-labelled containers, networks and volumes made
// by a process (LabelProcess) of this machine, since its last boot and in this
// process's pid namespace, that has died: what a worker or `gantry run` killed with
// SIGKILL left, whatever its worker id and work dir. The objects of processes it cannot
// see (on another machine, in another pid namespace, another user's where /proc hides
// them) are left to their own sweepers. This Docker value's own objects are spared.
func (d *Docker) SweepDeadProcesses(ctx context.Context) (int, error) {
	return d.sweep(ctx, LabelProcess, func(l map[string]string) bool { return processGone(l[LabelProcess]) })
}

// sweep removes the objects that match label (a label filter: "key" or "key=value"),
// are not this incarnation's, and that remove says to remove.
func (d *Docker) sweep(ctx context.Context, label string, remove func(labels map[string]string) bool) (int, error) {
	f := client.Filters{}.Add("label", label)
	stale := func(l map[string]string) bool {
		if l[LabelIncarnation] == d.incarnation {
			return d.ended(l)
		}
		return remove(l)
	}
	var errs []error
	removed := 0
	note := func(err error, what string) {
		switch {
		case err == nil:
			removed++
		case !cerrdefs.IsNotFound(err):
			errs = append(errs, fmt.Errorf("sweep: remove %s: %w", what, err))
		}
	}

	// Containers first: a network or volume in use cannot be removed.
	cs, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return 0, fmt.Errorf("sweep: list containers (%s): %w", label, err)
	}
	for _, c := range cs.Items {
		if stale(c.Labels) {
			_, err := d.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			note(err, "container "+c.ID)
			// A warm container's workspace, unless a job took it (then it is gone
			// from there, renamed to the job's).
			if dir := c.Labels[LabelPoolDir]; err == nil && isPoolDir(dir) {
				_ = os.RemoveAll(dir)
			}
		}
	}
	ns, err := d.cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		errs = append(errs, fmt.Errorf("sweep: list networks (%s): %w", label, err))
	}
	for _, n := range ns.Items {
		if stale(n.Labels) {
			_, err := d.cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
			note(err, "network "+n.Name)
		}
	}
	vs, err := d.cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		errs = append(errs, fmt.Errorf("sweep: list volumes (%s): %w", label, err))
	}
	for _, v := range vs.Items {
		if stale(v.Labels) {
			_, err := d.cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true})
			note(err, "volume "+v.Name)
		}
	}
	return removed, errors.Join(errs...)
}

// SweepEvery sweeps workerID's leftovers at once and then every interval until ctx
// ends, logging what it removed and what failed.
func (d *Docker) SweepEvery(ctx context.Context, workerID string, every time.Duration) {
	sweep := func() {
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		n, err := d.Sweep(sctx, workerID)
		if n > 0 {
			d.log.Info("docker: removed a dead worker's leftovers", "worker", workerID, "objects", n)
		}
		if err != nil && ctx.Err() == nil {
			d.log.Warn("docker: sweep", "worker", workerID, "err", err)
		}
	}
	sweep()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			sweep()
		}
	}
}

// objectName makes a name the engine accepts from parts of a job's identity.
func objectName(parts ...string) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('-')
		}
		for _, r := range p {
			switch {
			case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.':
				b.WriteRune(r)
			default:
				b.WriteByte('_')
			}
		}
	}
	return b.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = io.ReadFull(rand.Reader, b)
	return hex.EncodeToString(b)
}

// waitRemovals waits for the removals of ended jobs under way; a job that ends meanwhile
// starts its removal once the wait is over.
func (d *Docker) waitRemovals() {
	d.removalsMu.Lock()
	defer d.removalsMu.Unlock()
	d.removals.Wait()
}
