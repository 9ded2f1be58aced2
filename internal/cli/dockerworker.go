package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gantry-ci/gantry/internal/agent"
	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/executor/docker"
)

// dockerSweepEvery is how often a docker worker looks again for what dead workers on its
// work dir left on the engine (a sweep that failed at start is tried again then).
const dockerSweepEvery = 5 * time.Minute

// dockerExecutor is the docker worker's executor: a job with an image (or any job, with
// a default image) runs in containers on the engine; a job without one runs on the
// host, contained like a shell worker's, its services (if any) in containers on the
// engine.
type dockerExecutor struct {
	host   agent.Executor
	engine *docker.Docker
}

var (
	_ executor.JobExecutor    = dockerExecutor{}
	_ executor.ServiceStarter = dockerExecutor{}
)

// RunAction runs a docker action's container on the engine (the agent runs docker
// actions and docker:// steps through it).
func (x dockerExecutor) RunAction(ctx context.Context, c docker.ActionContainer) (executor.Result, error) {
	return x.engine.RunAction(ctx, c)
}

func (x dockerExecutor) Run(ctx context.Context, s executor.Step) (executor.Result, error) {
	return x.host.Run(ctx, s)
}

func (x dockerExecutor) Begin(ctx context.Context, j executor.Job) (executor.Session, error) {
	return x.engine.Begin(ctx, j)
}

// BeginServices starts the services of a job on the host on the engine, their ports
// published on the worker's loopback, where its steps reach them.
func (x dockerExecutor) BeginServices(ctx context.Context, j executor.Job) (executor.Services, error) {
	return x.engine.BeginServices(ctx, j)
}

// Contained says whether the host executor ends every process of a step with it.
func (x dockerExecutor) Contained() bool {
	c, ok := x.host.(interface{ Contained() bool })
	return ok && c.Contained()
}

// PrepareWorkspace readies a host job's workspace as the host executor would.
func (x dockerExecutor) PrepareWorkspace(dir string) error {
	if p, ok := x.host.(interface{ PrepareWorkspace(string) error }); ok {
		return p.PrepareWorkspace(dir)
	}
	return nil
}

// WorkspaceDir is where the container jobs' workspaces are made (docker.WorkspaceDir).
func (x dockerExecutor) WorkspaceDir() string { return x.engine.WorkspaceDir() }

// connectDocker reaches the Docker Engine at cfg.Host ("" is DOCKER_HOST, else the
// default socket) with the docker worker's settings in cfg.
func connectDocker(ctx context.Context, cfg docker.Config, log *slog.Logger) (*docker.Docker, error) {
	cfg.Logger = log
	return docker.New(ctx, cfg)
}

// dockerAllowPrivilegedUsage is --docker-allow-privileged's help, for every command that
// starts a docker worker.
const dockerAllowPrivilegedUsage = "let jobs have a privileged container (container: {options: {privileged: true}}), which can take over the Docker Engine's host; without it such a job fails before its first step"

// defaultDockerWarmPool is --docker-warm-pool's default: two, so that the next job of a
// chain finds one made while the one before it made its replacement.
const defaultDockerWarmPool = 2

// maxDockerWarmPool bounds --docker-warm-pool: the containers sit idle, with their
// memory.
const maxDockerWarmPool = 16

// dockerWarmPoolUsage is --docker-warm-pool's help, for every command that starts a
// docker worker.
const dockerWarmPoolUsage = "containers kept created and started ahead of need for each of the last few kinds of job (image, user, limits) the docker worker ran, so that the next such job does not wait for the engine to start one; each serves one job. Jobs with services, a network of their own or a privileged container start cold. 0: none"

// checkDockerWarmPool checks --docker-warm-pool.
func checkDockerWarmPool(n int) error {
	if n < 0 || n > maxDockerWarmPool {
		return usagef("--docker-warm-pool must be from 0 to %d", maxDockerWarmPool)
	}
	return nil
}

// dockerStateDir is where a docker worker marks itself alive, in its work dir (one per
// user in the shared temp dir).
func dockerStateDir(workDir string) string {
	if workDir == "" {
		return filepath.Join(os.TempDir(), fmt.Sprintf("gantry-docker-%d", os.Geteuid()))
	}
	return filepath.Join(workDir, "gantry-docker")
}

// dockerSweeper is a docker worker's Registered hook. Every object the docker executor
// makes is labelled with its worker's id, and a worker's id is new each time it starts:
// so each worker keeps a file named after its id in state, locked for as long as it
// runs. A file nobody holds locked is a dead worker's (the lock goes with its process,
// even one killed with SIGKILL): its containers, networks and volumes are swept, then
// the file is removed. Objects are also labelled with the process that made them, so
// those of every dead process on this machine are swept too, whatever its work dir: a
// `gantry run` killed with SIGKILL had its work dir in a temporary directory no later run
// looks in. That happens before the new worker claims a job, and again every
// dockerSweepEvery until ctx ends, when the worker's own file goes.
func dockerSweeper(engine *docker.Docker, state string, log *slog.Logger) func(ctx context.Context, workerID string) {
	return func(ctx context.Context, workerID string) {
		if err := os.MkdirAll(state, 0o700); err != nil {
			log.Error("docker: the sweeper has no state dir; a killed worker's containers stay", "dir", state, "err", err)
			return
		}
		own, err := holdDockerState(state, workerID)
		if err != nil {
			log.Error("docker: mark this worker alive; a killed worker's containers stay", "err", err)
			return
		}
		sweepDeadDockerWorkers(ctx, engine, state, workerID, log)
		sweepDeadDockerProcesses(ctx, engine, log)
		go func() {
			t := time.NewTicker(dockerSweepEvery)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					_ = os.Remove(own.Name())
					_ = own.Close()
					return
				case <-t.C:
					sweepDeadDockerWorkers(ctx, engine, state, workerID, log)
					sweepDeadDockerProcesses(ctx, engine, log)
				}
			}
		}()
	}
}

const dockerStatePrefix = "worker-"

// holdDockerState creates and locks this worker's file.
func holdDockerState(state, workerID string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(state, dockerStatePrefix+workerID), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return f, nil
}

// sweepDeadDockerWorkers sweeps the objects of every worker whose file in state nobody
// holds, and removes the files of those swept whole.
func sweepDeadDockerWorkers(ctx context.Context, engine *docker.Docker, state, self string, log *slog.Logger) {
	entries, err := os.ReadDir(state)
	if err != nil {
		log.Warn("docker: read the sweeper's state dir", "dir", state, "err", err)
		return
	}
	for _, e := range entries {
		id, ok := strings.CutPrefix(e.Name(), dockerStatePrefix)
		if !ok || id == self || ctx.Err() != nil {
			continue
		}
		path := filepath.Join(state, e.Name())
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			continue
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close() // a live worker's
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		n, err := engine.Sweep(sctx, id)
		cancel()
		switch {
		case err != nil && !errors.Is(err, context.Canceled):
			log.Warn("docker: sweep a dead worker's containers; trying again later", "dead_worker", id, "removed", n, "err", err)
		default:
			if n > 0 {
				log.Info("docker: removed what a dead worker left", "dead_worker", id, "objects", n)
			}
			_ = os.Remove(path)
		}
		f.Close()
	}
}

// sweepDeadDockerProcesses sweeps the objects of the dead processes of this machine
// (docker.LabelProcess).
func sweepDeadDockerProcesses(ctx context.Context, engine *docker.Docker, log *slog.Logger) {
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	n, err := engine.SweepDeadProcesses(sctx)
	if n > 0 {
		log.Info("docker: removed what dead processes of this machine left", "objects", n)
	}
	if err != nil && ctx.Err() == nil {
		log.Warn("docker: sweep what dead processes of this machine left; trying again later", "removed", n, "err", err)
	}
}
