package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantry-ci/gantry/internal/actions"
	"github.com/gantry-ci/gantry/internal/agent"
	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/executor/docker"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/scheduler"
	"github.com/gantry-ci/gantry/internal/store"
)

// upConfig is everything `gantry up` acts on.
type upConfig struct {
	Addr     string
	Data     string
	Workers  int
	Executor string
	LogLevel string
	// LogFormat is text, json or auto.
	LogFormat string
	LeaseTTL  time.Duration
	// ReapGrace is the coordinator's --reap-grace.
	ReapGrace time.Duration
	// Labels are the workers' labels besides the operating system and architecture
	// (linux, amd64) they always have.
	Labels string
	// Throwaway says the data directory is deleted when the process ends (gantry run's
	// temporary one), so the database need not survive a crash and skips its fsyncs.
	Throwaway bool
	// StepUser runs the local workers' steps as this user; stepUser is it, looked up
	// by validate.
	StepUser string
	stepUser *executor.User
	// ActionsSource is the coordinator's --actions-source.
	ActionsSource string
	// Mirrors is the git mirror cache of the coordinator and the workers, which share
	// it; empty is DATA/mirrors.
	Mirrors string
	// Docker says whether the local workers also run jobs with an image: auto (when a
	// Docker Engine answers at DOCKER_HOST or the default socket), on (it must) or off.
	Docker string
	// DockerAllowPrivileged lets the docker worker's jobs have a privileged container.
	DockerAllowPrivileged bool
	// DockerWarmPool is how many containers the docker worker keeps started ahead of
	// need for each kind of job it ran lately (docker.Config.WarmPool).
	DockerWarmPool int
	// Auth is --auth: on, off or auto (on unless Addr is loopback), as gantry server's.
	// With it on, an admin token is kept in AdminTokenFile for the CLI.
	Auth string
}

// adminTokenFile is where gantry up keeps the admin token it makes when authentication
// is on, in the data directory (its owner's only).
const adminTokenFile = "admin.token"

// dockerModes are the values of --docker.
var dockerModes = []string{"auto", "on", "off"}

const dockerUsage = "the local workers also run jobs with an image, in containers: auto (when a Docker Engine answers at DOCKER_HOST or the default socket), on or off"

func (a *app) upCommand() *cobra.Command {
	cfg := upConfig{Addr: "127.0.0.1:8080", Data: ".gantry", Workers: runtime.NumCPU(), Executor: "shell", LogLevel: "info",
		LeaseTTL: 10 * time.Second, Docker: "auto", DockerWarmPool: defaultDockerWarmPool, Auth: "auto"}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run everything on this machine: coordinator, workers and dashboard",
		Long: "Up runs an all-in-one Gantry: the coordinator with its dashboard on --addr, and\n" +
			"--workers local workers, with everything (SQLite, logs, artifact blobs, job\n" +
			"workspaces) in the --data directory.\n\n" +
			"The first Ctrl-C stops claiming jobs and waits for the running ones to finish; a\n" +
			"second cancels them. Starting again on the same data directory picks up where it\n" +
			"stopped: queued jobs run, and jobs that were running when the process died go back\n" +
			"to the queue once their lease (--lease-ttl) runs out.\n\n" +
			"--auth on requires a token on every call, as gantry server --auth on does: the\n" +
			"workers get their own, and an admin token for the CLI is kept in\n" +
			"DATA/admin.token (made at the first start, made again if revoked). off is allowed\n" +
			"only on a loopback --addr; auto, the default, is on unless --addr is loopback.",
		Example: "  gantry up\n" +
			"  gantry up --workers 8 --executor sandbox --data /var/lib/gantry\n" +
			"  gantry up --auth on && export GANTRY_TOKEN_FILE=.gantry/admin.token",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.validate(); err != nil {
				return err
			}
			return a.up(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Addr, "addr", cfg.Addr, "address of the API and dashboard")
	f.StringVar(&cfg.Data, "data", cfg.Data, "directory for the database, logs, artifacts and workspaces")
	f.IntVar(&cfg.Workers, "workers", cfg.Workers, "local workers, each running one job at a time: N jobs at once on this machine, with or without an image")
	f.StringVar(&cfg.Executor, "executor", cfg.Executor, "shell, or sandbox (bubblewrap: no network unless the job sets network: true)")
	f.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "debug, info, warn or error")
	f.StringVar(&cfg.LogFormat, "log-format", "auto", logFormatUsage)
	f.DurationVar(&cfg.LeaseTTL, "lease-ttl", cfg.LeaseTTL, "how long a job of a crashed process waits before it runs again")
	f.DurationVar(&cfg.ReapGrace, "reap-grace", cfg.ReapGrace, "how long past --lease-ttl a lease not renewed is left before its job runs again (0: an eighth of --lease-ttl)")
	f.StringVar(&cfg.Labels, "labels", "", "comma-separated labels for the workers, besides "+runtime.GOOS+" and "+runtime.GOARCH)
	f.StringVar(&cfg.StepUser, "step-user", "", "run steps as this unprivileged user (name or uid); gantry up must run as root")
	f.StringVar(&cfg.Docker, "docker", cfg.Docker, dockerUsage)
	f.StringVar(&cfg.ActionsSource, "actions-source", "", actionsSourceUsage)
	f.BoolVar(&cfg.DockerAllowPrivileged, "docker-allow-privileged", false, "the docker worker: "+dockerAllowPrivilegedUsage)
	f.IntVar(&cfg.DockerWarmPool, "docker-warm-pool", cfg.DockerWarmPool, "the docker worker: "+dockerWarmPoolUsage)
	f.StringVar(&cfg.Auth, "auth", cfg.Auth, "on (every call needs a token; an admin one is kept in DATA/"+adminTokenFile+"), off (loopback --addr only) or auto (on unless --addr is loopback)")
	return cmd
}

func (c *upConfig) validate() error {
	if c.Workers < 1 || c.Workers > 256 {
		return usagef("--workers must be from 1 to 256")
	}
	if _, err := actions.ParseSource(c.ActionsSource); err != nil {
		return usagef("--actions-source: %v", err)
	}
	if c.Data == "" {
		return usagef("--data is required")
	}
	if c.LeaseTTL < 2*time.Second {
		return usagef("--lease-ttl must be at least 2s")
	}
	if c.ReapGrace < 0 {
		return usagef("--reap-grace must not be negative")
	}
	if _, err := logLevel(c.LogLevel); err != nil {
		return err
	}
	if err := checkLogFormat(c.LogFormat); err != nil {
		return err
	}
	if c.Auth == "" {
		c.Auth = "auto"
	}
	if err := checkAuthMode(c.Auth, c.Addr); err != nil {
		return err
	}
	switch c.Executor {
	case "shell":
	case "sandbox":
		if _, err := exec.LookPath("bwrap"); err != nil {
			return usagef("--executor sandbox: %v", executor.ErrNoSandbox)
		}
	default:
		return usagef("--executor %q: want shell or sandbox", c.Executor)
	}
	if c.Docker == "" {
		c.Docker = "auto"
	}
	if !slices.Contains(dockerModes, c.Docker) {
		return usagef("--docker %q: want auto, on or off", c.Docker)
	}
	if err := checkDockerWarmPool(c.DockerWarmPool); err != nil {
		return err
	}
	if c.Docker == "off" && c.DockerAllowPrivileged {
		return usagef("--docker-allow-privileged is for the docker worker, and --docker is off")
	}
	if slices.Contains(c.labels(), pipeline.DockerLabel) {
		return usagef("--labels %s: that label says a worker runs jobs' images, which the docker worker (--docker) does", pipeline.DockerLabel)
	}
	if slices.Contains(c.labels(), pipeline.PrivilegedLabel) {
		return usagef("--labels %s: that label says a worker runs privileged containers, which the docker worker does with --docker-allow-privileged", pipeline.PrivilegedLabel)
	}
	if c.StepUser != "" {
		u, err := executor.LookupUser(c.StepUser)
		if err != nil {
			return usagef("--step-user: %v", err)
		}
		c.stepUser = u
	}
	if c.Executor == "sandbox" {
		// A root gantry up's sandbox steps run as an unprivileged user all the same
		// (executor.DefaultSandboxUser), who must reach its workspaces as a
		// --step-user does.
		sb := executor.Sandbox{User: c.stepUser}
		if u := sb.StepUser(); u != nil && u.UID == 0 {
			return usagef("--step-user %s: %v", u.Name, executor.ErrSandboxRoot)
		}
		c.stepUser = sb.StepUser()
	}
	return nil
}

// labels are the local workers' labels: the platform's, then --labels.
func (c *upConfig) labels() []string {
	out := pipeline.PlatformLabels(runtime.GOOS, runtime.GOARCH)
	for _, l := range strings.Split(c.Labels, ",") {
		if l = strings.TrimSpace(l); l != "" && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// dockerLabels are the docker worker's labels besides the docker label its executor
// gives it: the local workers', and the one privileged jobs ask for when it runs them.
func (c *upConfig) dockerLabels() []string {
	if c.DockerAllowPrivileged {
		return append(c.labels(), pipeline.PrivilegedLabel)
	}
	return c.labels()
}

// server is the coordinator `up` runs.
func (c *upConfig) server() serverConfig {
	return serverConfig{
		Addr: c.Addr, DB: c.db(), LogLevel: c.LogLevel, LogFormat: c.LogFormat, Auth: cmp.Or(c.Auth, "auto"),
		Mirrors: c.mirrors(), ActionsSource: c.ActionsSource,
		LeaseTTL: c.LeaseTTL, ReapGrace: c.ReapGrace, HeartbeatEvery: c.LeaseTTL / 4, ReapEvery: min(c.LeaseTTL/4, scheduler.DefaultReapEvery),
		CancelGrace: api.DefaultCancelGrace, LogMaxSize: "50Mi", ArtifactsExpireIn: 30 * 24 * time.Hour,
		CacheMaxSize: defaultCacheMaxSize, CacheMaxAge: scheduler.DefaultCacheMaxAge,
		// Secrets work out of the box: a key is made in the data dir on first use.
		SecretsKeyFile: filepath.Join(c.Data, "secrets.key"), CreateSecretsKey: true,
		// With authentication off, whoever can set a webhook can reach this machine's
		// loopback directly anyway: receivers there may be tried out.
		OutboundLoopbackWithoutAuth: true,
		Throwaway:                   c.Throwaway,
	}
}

// mirrors is the git mirror cache the coordinator and the workers share.
func (c *upConfig) mirrors() string {
	return cmp.Or(c.Mirrors, filepath.Join(c.Data, "mirrors"))
}

func (c *upConfig) db() string {
	db := "sqlite://" + filepath.Join(c.Data, "gantry.db")
	if c.Throwaway {
		db += "?synchronous=off"
	}
	return db
}

func (a *app) up(ctx context.Context, cfg upConfig) error {
	log := newLogger(a.stderr, cfg.LogLevel, cfg.LogFormat)
	stopTracing, err := startTracing(ctx, "gantry", log)
	if err != nil {
		return err
	}
	defer stopTracing()
	l, err := startLocal(ctx, cfg, log)
	if err != nil {
		return err
	}
	workers := countOf(cfg.Workers, "local worker", "local workers") + ", one job at a time each"
	if l.docker != "" {
		workers += "; jobs with an image run in containers (Docker Engine at " + l.docker + ")"
	}
	fmt.Fprintf(a.stdout, "Gantry is up: %s (dashboard and API), %s, data in %s\n\n", l.base, workers, cfg.Data)
	if l.noDocker != "" {
		fmt.Fprintf(a.stdout, "No Docker Engine: %s; jobs with an image wait for a docker worker (gantry worker --executor docker).\n\n", l.noDocker)
	}
	if l.auth {
		fmt.Fprintf(a.stdout, "Authentication is on: every call needs a token. An admin token is in %s:\n  export GANTRY_TOKEN_FILE=%s\n\n",
			l.adminTokenFile, l.adminTokenFile)
		fmt.Fprintf(a.stdout, "Submit a pipeline:\n  gantry submit --server %s --follow examples/diamond.yml\n", l.base)
		fmt.Fprintf(a.stdout, "  curl -s -H \"Authorization: Bearer $(cat %s)\" -H 'Content-Type: application/yaml' --data-binary @examples/diamond.yml %s/api/v1/runs\n\n",
			l.adminTokenFile, l.base)
	} else {
		fmt.Fprintf(a.stdout, "Submit a pipeline:\n  gantry submit --server %s --follow examples/diamond.yml\n", l.base)
		fmt.Fprintf(a.stdout, "  curl -s -H 'Content-Type: application/yaml' --data-binary @examples/diamond.yml %s/api/v1/runs\n\n", l.base)
	}
	fmt.Fprintln(a.stdout, "Ctrl-C stops: running jobs finish first; press it again to cancel them.")
	select {
	case <-ctx.Done():
		log.Info("stopping: no new jobs; waiting for the running ones (Ctrl-C again cancels them)")
	case <-l.failed:
	}
	if err := l.stop(ctx); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// keepAdminToken makes sure path holds a valid admin token of st: the one already there,
// or a new one (the first start, or the old one was revoked or the file removed), written
// for the owner only. Starting again keeps the token, so a shell that exported it goes on.
func keepAdminToken(ctx context.Context, st store.Tokens, path string) error {
	if b, err := os.ReadFile(path); err == nil {
		if old := strings.TrimSpace(string(b)); old != "" {
			tk, err := api.LookupToken(ctx, st, old)
			if err == nil && tk.Role == store.RoleAdmin && tk.Valid(time.Now()) {
				return nil
			}
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("check the admin token in %s: %w", path, err)
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read the admin token: %w", err)
	}
	secret, err := api.IssueToken(ctx, st, "gantry up admin", store.RoleAdmin, "")
	if err != nil {
		return fmt.Errorf("issue an admin token: %w", err)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(secret+"\n"), 0o600); err != nil {
		return fmt.Errorf("write the admin token: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write the admin token: %w", err)
	}
	return nil
}

// local is a coordinator and its local workers over one data directory.
type local struct {
	base string
	// store is the coordinator's: gantry run creates its run there, with the trigger of a
	// local repository that the API does not take from a submitter.
	store store.Store
	// failed is closed when the coordinator or a worker stopped on its own.
	failed <-chan struct{}
	// docker is the engine address of the docker worker, "" without one; noDocker says
	// why there is none when --docker is auto.
	docker, noDocker string
	// auth says every call needs a token; adminTokenFile holds an admin one (gantry up).
	auth           bool
	adminTokenFile string
	// stop drains the workers, waiting for their running jobs (which they cancel when a
	// second signal comes, or at once if something failed), then stops the coordinator.
	stop func(ctx context.Context) error
}

// startLocal starts the coordinator and workers of `gantry up` and `gantry run`. The
// workers stop claiming when ctx ends.
func startLocal(ctx context.Context, cfg upConfig, log *slog.Logger) (*local, error) {
	// The data directory holds the database, logs, artifacts and the URL-signing key:
	// its owner's only.
	if err := mkdirPrivate(cfg.Data); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	unlock, err := lockDataDir(cfg.Data)
	if err != nil {
		return nil, err
	}
	workDir := filepath.Join(cfg.Data, "work")
	if err := mkdirPrivate(workDir); err != nil {
		unlock()
		return nil, fmt.Errorf("work directory: %w", err)
	}
	if cfg.stepUser != nil {
		// The step user must pass through the data directory to its workspaces; search
		// permission alone lets it, without listing what else is there.
		for _, d := range []string{cfg.Data, workDir} {
			if err := os.Chmod(d, 0o711); err != nil {
				unlock()
				return nil, fmt.Errorf("let the step user reach its workspaces: %w", err)
			}
		}
		if err := cfg.stepUser.CanReach(workDir); err != nil {
			unlock()
			return nil, fmt.Errorf("--step-user: %w", err)
		}
	}
	// One containment for every local worker: steps die with this process however it
	// ends, and what a killed predecessor on this data directory left running is killed
	// now. A throwaway data directory has no successor to do that. Setting it up starts
	// processes of its own, so it goes on beside the coordinator's start rather than
	// after it.
	contained := agent.Config{WorkDir: workDir, Logger: log, Executor: executor.Shell{User: cfg.stepUser}}
	if cfg.Executor == "sandbox" {
		contained.Executor = executor.Sandbox{User: cfg.stepUser}
	}
	type containment struct {
		stop func()
		err  error
	}
	containing := make(chan containment, 1)
	go func() {
		stop, err := containStepsIn(&contained, true, !cfg.Throwaway)
		containing <- containment{stop, err}
	}()
	sc := cfg.server()
	sc.UI = dashboard()
	coord, err := startCoordinator(ctx, sc, log)
	c := <-containing
	if err != nil || c.err != nil {
		if err == nil {
			_ = coord.stop(ctx)
			err = c.err
		} else if c.err == nil {
			c.stop()
		}
		unlock()
		return nil, err
	}
	stopContaining := c.stop
	fail := func(err error) (*local, error) {
		stopContaining()
		_ = coord.stop(ctx)
		unlock()
		return nil, err
	}
	var token, adminFile string
	if sc.authOn() {
		token, err = api.IssueToken(ctx, coord.store, "gantry up workers", store.RoleRegister, "")
		if err != nil {
			return fail(fmt.Errorf("issue a token for the local workers: %w", err))
		}
		if !cfg.Throwaway {
			adminFile = filepath.Join(cfg.Data, adminTokenFile)
			if err := keepAdminToken(ctx, coord.store, adminFile); err != nil {
				return fail(err)
			}
		}
	}

	// The workers drain when ctx ends (the first signal) or stop is called, and cancel
	// their jobs on a second signal.
	drainCtx, drain := context.WithCancel(ctx)
	kill, cancelJobs := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		select {
		case <-ctx.Done():
		case <-kill.Done():
			return
		}
		second, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		select {
		case <-second.Done():
			log.Warn("second signal: cancelling running jobs")
			cancelJobs()
		case <-kill.Done():
		}
	}()
	host, _ := os.Hostname()
	var wg sync.WaitGroup
	failed := make(chan struct{})
	var failOnce sync.Once
	var runErr error
	failWith := func(err error) {
		failOnce.Do(func() {
			runErr = err
			close(failed)
			drain()
			cancelJobs()
		})
	}
	var engine *docker.Docker
	var noDocker string
	if cfg.Docker != "off" {
		engine, err = connectDocker(ctx, docker.Config{AllowPrivileged: cfg.DockerAllowPrivileged, WarmPool: cfg.DockerWarmPool, WorkDir: workDir}, log)
		switch {
		case err != nil && cfg.Docker == "on":
			drain()
			cancelJobs()
			return fail(fmt.Errorf("--docker on: %w", err))
		case err != nil:
			noDocker = err.Error()
			log.Info("no Docker Engine answers: jobs with an image wait for a docker worker", "err", err)
		}
	}
	// --workers N is N jobs at a time on this machine: with an engine, each local worker
	// also runs the jobs with an image, in containers, rather than a docker worker
	// beside them taking jobs of its own.
	run, labels := contained.Executor, cfg.labels()
	var registered func(context.Context, string)
	if engine != nil {
		run, labels = dockerExecutor{host: contained.Executor, engine: engine}, cfg.dockerLabels()
		registered = dockerSweeper(engine, dockerStateDir(workDir), log)
	}
	for i := range cfg.Workers {
		name := host + "/local-" + strconv.Itoa(i+1)
		// worker_name, not worker: the agent logs its registered id as worker.
		ac := agent.Config{Server: coord.base, Token: token, Name: name, MaxJobs: 1, Labels: labels, WorkDir: workDir,
			Mirrors: cfg.mirrors(), Logger: log.With("worker_name", name), Executor: run, Registered: registered}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := agent.New(ac).Run(drainCtx, kill); err != nil && drainCtx.Err() == nil {
				failWith(fmt.Errorf("worker %d: %w", i+1, err))
			}
		}()
	}
	go func() {
		select {
		case err := <-coord.served:
			failWith(fmt.Errorf("serve: %w", err))
		case <-kill.Done():
		}
	}()
	l := &local{base: coord.base, store: coord.store, failed: failed, noDocker: noDocker, auth: sc.authOn(), adminTokenFile: adminFile}
	if engine != nil {
		l.docker = engine.Client().DaemonHost()
	}
	l.stop = func(ctx context.Context) error {
		drain()
		wg.Wait()
		cancelJobs()
		stopContaining()
		if engine != nil {
			_ = engine.Close()
		}
		err := coord.stop(ctx)
		unlock()
		if runErr != nil {
			return runErr
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
	return l, nil
}

// lockDataDir takes an exclusive lock on the data directory, so that two processes never
// run local workers over the same database and workspaces.
func lockDataDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, "gantry.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by another gantry process", dir)
		}
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
