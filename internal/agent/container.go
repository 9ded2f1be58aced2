package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
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

// containerJob is the environment a job's steps run in when it has one: the job's image,
// or the worker's default image for a job without one. ok is false for a job that runs on
// the worker's host.
func (a *Agent) containerJob(j claimedJob, ws string, grace time.Duration) (executor.Job, bool) {
	spec := j.Spec
	image := spec.Image
	if image == "" {
		image = a.cfg.DefaultImage
	}
	if image == "" {
		return executor.Job{}, false
	}
	job := executor.Job{
		ID: j.ID, Attempt: j.Attempt, WorkerID: a.workerID,
		Workspace: ws, Image: image,
		MilliCPU: spec.Resources.MilliCPU, Memory: spec.Resources.MemoryBytes,
		Grace: grace, Labels: spec.RunsOn,
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
	return job, true
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
