package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/pipeline"
)

// endFor bounds how long ending a job's container may take beyond its grace: stopping
// and removing containers, a network and volumes through the engine.
const endFor = time.Minute

// containerJob is the environment a job's steps run in: the job's image, or the
// worker's default image for a job without one. ok is false for a job that runs on the
// worker's host, whose Job has no image and is what its services (if any) start with.
func (a *Agent) containerJob(j claimedJob, ws string, grace time.Duration) (executor.Job, bool) {
	spec := j.Spec
	image := spec.Image
	if image == "" {
		image = a.cfg.DefaultImage
	}
	job := executor.Job{
		ID: j.ID, Attempt: j.Attempt, WorkerID: a.workerID,
		Workspace: ws, Image: image,
		MilliCPU: spec.Resources.MilliCPU, Memory: spec.Resources.MemoryBytes,
		Grace: grace, Labels: spec.RunsOn,
		// A job written without an image reaches its services on localhost.
		HostServices: spec.Image == "" && len(spec.Services) > 0,
	}
	if c := spec.Container; c != nil && spec.Image != "" {
		job.Pull, job.User, job.Privileged = c.Pull, c.User, c.Privileged
		if cr := c.Credentials; cr != nil {
			registry := cr.Registry
			if registry == "" {
				registry = pipeline.ImageRegistry(spec.Image)
			}
			job.RegistryAuth = map[string]executor.RegistryCredential{registry: {
				Username: pipeline.ExpandSecrets(cr.Username, j.Secrets),
				Password: pipeline.ExpandSecrets(cr.Password, j.Secrets),
			}}
		}
	}
	for _, s := range spec.Services {
		svc := executor.Service{Name: s.Name, Image: s.Image, Command: s.Command, Ports: s.Ports}
		if !job.HostServices {
			// A job in its own container reaches a service's ports by its name: what
			// a port of the host would be published at means nothing to it.
			svc.Ports = make([]string, len(s.Ports))
			for i, p := range s.Ports {
				svc.Ports[i] = pipeline.ContainerPort(p)
			}
		}
		for k, v := range s.Env {
			svc.Env = append(svc.Env, k+"="+pipeline.ExpandSecrets(v, j.Secrets))
		}
		slices.Sort(svc.Env)
		if h := s.Healthcheck; h != nil {
			svc.Healthcheck = &executor.Healthcheck{Command: h.Command, Interval: time.Duration(h.Interval),
				Timeout: time.Duration(h.Timeout), Retries: h.Retries}
		}
		job.Services = append(job.Services, svc)
	}
	return job, image != ""
}

// inContainer says whether the job's steps run in a container rather than on the host.
func (a *Agent) inContainer(j claimedJob) bool {
	_, je := a.cfg.Executor.(executor.JobExecutor)
	return j.Spec.Image != "" || je && a.cfg.DefaultImage != ""
}

// beginContainer starts a job's container and services. The returned end stops and
// removes them; it is to be called once, whatever happened to the steps. A job that
// needs a container this worker cannot give fails with a message in its log.
func (a *Agent) beginContainer(ctx context.Context, log *slog.Logger, rec *logs.Recorder, job executor.Job) (executor.Session, func(), error) {
	je, ok := a.cfg.Executor.(executor.JobExecutor)
	if !ok {
		return nil, nil, fmt.Errorf("the job runs in image %s, and this worker's executor runs steps on its host; start the worker with --executor docker", job.Image)
	}
	names := make([]string, len(job.Services))
	for i, s := range job.Services {
		names[i] = s.Name + " (" + s.Image + ")"
	}
	msg := "container: image " + job.Image
	if len(names) > 0 {
		msg += ", services " + strings.Join(names, ", ")
	}
	rec.System(msg)
	if job.User != "" {
		if err := shareWorkspace(job.Workspace, job.User); err != nil {
			return nil, nil, fmt.Errorf("give the workspace to user %s: %w", job.User, err)
		}
	}
	// What the executor sees while the environment starts (a pod pending, an image
	// pulling) is the user's to see too.
	job.Events = rec.System
	began := time.Now()
	sess, err := je.Begin(ctx, job)
	if err != nil {
		return nil, nil, err
	}
	log.Info("job container started", "image", job.Image, "services", len(job.Services), "took", time.Since(began).Round(time.Millisecond).String())
	end := func() {
		// A cancel or a timeout must not skip the clean-up: it runs on a context of its
		// own, bounded by the grace and the time the engine needs. A job whose lease is
		// gone has its containers killed without the grace (executor.ErrKillNow).
		ectx, stop := context.WithTimeout(context.WithoutCancel(ctx), job.Grace+endFor)
		defer stop()
		if cause := context.Cause(ctx); errors.Is(cause, executor.ErrKillNow) {
			kctx, kill := context.WithCancelCause(ectx)
			kill(cause)
			ectx = kctx
		}
		if err := sess.End(ectx); err != nil {
			log.Warn("remove the job's containers", "err", err)
			rec.System("the worker could not remove the job's containers; its sweeper will: " + err.Error())
		}
	}
	return sess, end, nil
}

// beginHostServices starts the services of a job whose steps run on the worker's host,
// with the worker's ServiceStarter, their ports published on its loopback. The returned
// end stops and removes them; it is to be called once, whatever happened to the steps.
// A worker that cannot start them fails the job, saying what it lacks.
func (a *Agent) beginHostServices(ctx context.Context, log *slog.Logger, rec *logs.Recorder, job executor.Job) (executor.Services, func(), error) {
	starter, ok := a.cfg.Executor.(executor.ServiceStarter)
	if !ok {
		return nil, nil, errors.New("this worker runs steps on its host and has no Docker Engine to start services with; " +
			"a job on the worker's host with services needs a worker with the docker executor (gantry worker --executor docker)")
	}
	names := make([]string, len(job.Services))
	for i, s := range job.Services {
		names[i] = s.Name + " (" + s.Image + ")"
	}
	rec.System("services: " + strings.Join(names, ", ") + ", published on 127.0.0.1")
	job.Events = rec.System
	began := time.Now()
	svcs, err := starter.BeginServices(ctx, job)
	if err != nil {
		return nil, nil, err
	}
	for _, s := range svcs.Running() {
		if len(s.Ports) == 0 {
			continue
		}
		ports := make([]string, 0, len(s.Ports))
		for _, c := range slices.Sorted(maps.Keys(s.Ports)) {
			ports = append(ports, c+" at "+s.Host+":"+s.Ports[c])
		}
		rec.System("service " + s.Name + ": port " + strings.Join(ports, ", port "))
	}
	log.Info("job services started", "services", len(job.Services), "took", time.Since(began).Round(time.Millisecond).String())
	end := func() {
		// As a job container's end: on a context of its own, without a grace when the
		// lease is gone (the engine removes services at once anyway).
		ectx, stop := context.WithTimeout(context.WithoutCancel(ctx), job.Grace+endFor)
		defer stop()
		if err := svcs.End(ectx); err != nil {
			log.Warn("remove the job's services", "err", err)
			rec.System("the worker could not remove the job's services; its sweeper will: " + err.Error())
		}
	}
	return svcs, end, nil
}

// runningServices is how a job's steps reach its services: what the executor's session
// tells (sess: a Session or Services), else what the job says of them (each reached by
// its name at its own ports).
func runningServices(spec *pipeline.Job, sess any) []executor.RunningService {
	if l, ok := sess.(executor.ServiceLister); ok {
		return l.Running()
	}
	var running []executor.RunningService
	for _, s := range spec.Services {
		ports := map[string]string{}
		for _, p := range s.Ports {
			c, _, _ := strings.Cut(pipeline.ContainerPort(p), "/")
			ports[c] = c
		}
		running = append(running, executor.RunningService{Name: s.Name, Ports: ports, Host: s.Name})
	}
	return running
}

// jobContext is GitHub's job.services and job.container for a job's steps (beside
// job.status): the ids of its container and network where the session tells them, and
// for each service its id, network and ports (container port to where the steps reach
// it).
func jobContext(sess any, running []executor.RunningService) map[string]any {
	out := map[string]any{}
	if c, ok := sess.(executor.ContainerLister); ok {
		id, network := c.JobContainer()
		out["container"] = map[string]any{"id": id, "network": network}
	}
	if len(running) == 0 {
		return out
	}
	services := map[string]any{}
	network := ""
	for _, s := range running {
		ports := map[string]any{}
		for k, v := range s.Ports {
			ports[k] = v
		}
		services[s.Name] = map[string]any{"id": s.ID, "network": s.Network, "ports": ports}
		network = cmp.Or(network, s.Network)
	}
	out["services"] = services
	if _, ok := out["container"]; !ok {
		// A job on the host has no container; its network is its services'.
		out["container"] = map[string]any{"id": "", "network": network}
	}
	return out
}

// serviceEnv is the variables that say where a job's steps reach its services:
// GANTRY_SERVICE_<NAME>_HOST (127.0.0.1 for a job on the worker's host, else the
// service's name) and GANTRY_SERVICE_<NAME>_PORT_<PORT> for each container port.
func serviceEnv(running []executor.RunningService) map[string]string {
	env := map[string]string{}
	for _, s := range running {
		prefix := "GANTRY_SERVICE_" + envNamePart(s.Name) + "_"
		env[prefix+"HOST"] = s.Host
		for c, p := range s.Ports {
			env[prefix+"PORT_"+c] = p
		}
	}
	return env
}

// envNamePart is a service name as part of a variable's name: capitals, '-' as '_'.
func envNamePart(name string) string {
	return strings.ReplaceAll(strings.ToUpper(name), "-", "_")
}

// shareWorkspace lets the user a job's container runs its steps as write the workspace,
// which the worker made (and checked out) as its own user: a numeric uid[:gid] is given
// the workspace when the worker may (it runs as root); otherwise, and for a user name only
// the image knows, everyone is let write it. The workspace's parent, the work dir, stays
// the worker's alone, so no other user of the host reaches it.
func shareWorkspace(ws, user string) error {
	uid, gid, numeric := numericUser(user)
	if numeric && os.Geteuid() == 0 {
		return filepath.WalkDir(ws, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, uid, gid)
		})
	}
	return filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode().Perm() | 0o666
		if d.IsDir() || info.Mode().Perm()&0o100 != 0 {
			mode |= 0o111
		}
		return os.Chmod(p, mode)
	})
}

// numericUser reads uid[:gid]; gid is -1 (unchanged) when not given.
func numericUser(user string) (uid, gid int, ok bool) {
	u, g, hasGroup := strings.Cut(user, ":")
	uid, err := strconv.Atoi(u)
	if err != nil || uid < 0 {
		return 0, 0, false
	}
	gid = -1
	if hasGroup {
		if gid, err = strconv.Atoi(g); err != nil || gid < 0 {
			return 0, 0, false
		}
	}
	return uid, gid, true
}

// beginFailureKind is the failure kind of a job whose environment did not start: a
// timeout for one the cluster did not place in time, so that retry.on: [timeout]
// retries it; lost for one that went while starting (its pod evicted or deleted); else
// a failure.
func beginFailureKind(err error) string {
	return executor.RetryKind(err)
}
