package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantry-ci/gantry/internal/agent"
	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/executor/docker"
	"github.com/gantry-ci/gantry/internal/metrics/workermetrics"
	"github.com/gantry-ci/gantry/internal/pipeline"
)

// workerConfig is everything `gantry worker` acts on.
type workerConfig struct {
	// Server is the coordinator's URL, or the URLs of several replicas of one, separated
	// by commas: the worker moves to the next when one cannot be reached.
	Server string
	// Token is the register token from --token or GANTRY_TOKEN; TokenFile and TokenFD
	// are the ways that keep it off the command line and out of the environment.
	Token     string
	TokenFile string
	TokenFD   int
	Name      string
	Labels    string
	// PlatformLabels adds the worker's system and processor to Labels
	// (pipeline.PlatformLabels), so that a workflow's runs-on: windows-latest finds a
	// Windows worker and no other. The kubernetes executor adds none: its jobs run on the
	// cluster's nodes, not on the worker's machine.
	PlatformLabels bool
	MaxJobs        int
	CPU            string
	Memory         string
	WorkDir        string
	Mirrors        string // the git mirror cache; empty: WorkDir/mirrors
	KeepFailed     bool
	LogLevel       string
	LogFormat      string
	Executor       string
	// MetricsAddr is where GET /metrics is served; empty serves none.
	MetricsAddr string
	// StepUser runs steps as this user instead of the worker's; empty: the worker's.
	StepUser string
	// StepCgroup puts each step in a cgroup of its own where the host allows it;
	// false contains steps with a subreaper and parent-death signal only.
	StepCgroup bool
	// DockerHost is the Docker Engine of --executor docker ("" is DOCKER_HOST or the
	// default socket); DefaultImage the image it runs jobs without one in ("" runs
	// them on the host).
	DockerHost   string
	DefaultImage string
	// DockerNetworkPerJob gives every job of --executor docker a network of its own.
	DockerNetworkPerJob bool
	// DockerAllowPrivileged lets jobs of --executor docker have a privileged container.
	DockerAllowPrivileged bool
	// DockerWarmPool is how many containers --executor docker keeps started ahead of
	// need for each kind of job it ran lately (docker.Config.WarmPool).
	DockerWarmPool int
	// Kube configures --executor kubernetes (workerk8s.go).
	Kube workerKubeConfig
}

func (a *app) workerCommand() *cobra.Command {
	host, _ := os.Hostname()
	cfg := workerConfig{Server: "http://127.0.0.1:8080", Name: host, MaxJobs: runtime.NumCPU(), LogLevel: "info", Executor: "shell", TokenFD: -1,
		StepCgroup: true, DockerWarmPool: defaultDockerWarmPool, PlatformLabels: true}
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a worker that claims jobs from a coordinator and runs them",
		Long: "Worker registers with the coordinator at --server, claims the jobs its labels and\n" +
			"capacity allow, and runs their steps with the shell executor in a fresh workspace\n" +
			"per job (--executor docker: jobs with an image in containers on the Docker Engine,\n" +
			"the workspace mounted at /workspace). The first SIGINT or SIGTERM drains (running jobs finish, none is\n" +
			"claimed); a second cancels the running jobs.\n\n" +
			"--server may list several replicas of one coordinator (a,b,c): the worker uses one\n" +
			"and, when it cannot reach it (connection refused, reset or timed out; 502, 503 or 504\n" +
			"from a proxy), moves to the next, keeping its id and its jobs' leases.",
		Example: "  gantry worker --server http://ci.example:8080 --token-file /etc/gantry/register-token --labels linux,amd64\n" +
			"  gantry worker --server http://ci-1.example:8080,http://ci-2.example:8080 --token-file /etc/gantry/register-token",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.workerToken(cmd, &cfg); err != nil {
				return err
			}
			ac, err := cfg.agentConfig()
			if err != nil {
				return err
			}
			if _, err := logLevel(cfg.LogLevel); err != nil {
				return err
			}
			if err := checkLogFormat(cfg.LogFormat); err != nil {
				return err
			}
			ac.Logger = newLogger(a.stderr, cfg.LogLevel, cfg.LogFormat)
			if cfg.Executor == "kubernetes" {
				ke, err := cfg.Kube.newKubeExecutor(cfg.Name, ac.Logger)
				if err != nil {
					return err
				}
				// The workspace server stops when the worker returns, its jobs done,
				// not at the signal that drains it.
				serve, stopServe := context.WithCancel(context.WithoutCancel(cmd.Context()))
				defer stopServe()
				if err := ke.start(cmd.Context(), serve, ac.Logger); err != nil {
					return err
				}
				ac.Executor = ke.exec
			}
			stopContaining, err := containSteps(&ac, cfg.StepCgroup)
			if err != nil {
				return err
			}
			defer stopContaining()
			if cfg.Executor == "docker" {
				engine, err := connectDocker(cmd.Context(), docker.Config{Host: cfg.DockerHost,
					NetworkPerJob: cfg.DockerNetworkPerJob, AllowPrivileged: cfg.DockerAllowPrivileged,
					WarmPool: cfg.DockerWarmPool, WorkDir: cfg.WorkDir}, ac.Logger)
				if err != nil {
					return fmt.Errorf("--executor docker: %w", err)
				}
				defer engine.Close()
				ac.Executor = dockerExecutor{host: ac.Executor, engine: engine}
				ac.Registered = dockerSweeper(engine, dockerStateDir(cfg.WorkDir), ac.Logger)
			}
			if err := hideMemory(); err != nil {
				// Not fatal: a container may forbid prctl, and the token is out of argv
				// and environ all the same.
				ac.Logger.Warn("processes of this user can read the worker's memory", "err", err)
			}
			return a.worker(cmd.Context(), ac, cfg.MetricsAddr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Server, "server", cfg.Server, "coordinator URL; several replicas' URLs separated by commas (a,b,c): the worker uses one and moves to the next when it cannot reach it")
	f.StringVar(&cfg.Token, "token", "", "register token (when the coordinator requires authentication); prefer --token-file")
	f.StringVar(&cfg.TokenFile, "token-file", "", "read the register token from this file (its first line)")
	f.IntVar(&cfg.TokenFD, "token-fd", -1, "read the register token from this inherited file descriptor")
	_ = f.MarkHidden("token-fd") // the worker hands its token to itself this way
	f.StringVar(&cfg.Name, "name", cfg.Name, "worker name shown by the coordinator")
	f.StringVar(&cfg.Labels, "labels", "", "comma-separated labels jobs can ask for with runs_on")
	f.BoolVar(&cfg.PlatformLabels, "platform-labels", cfg.PlatformLabels, "carry the machine's system and processor as labels too ("+strings.Join(pipeline.PlatformLabels(runtime.GOOS, runtime.GOARCH), ",")+"), except with --executor kubernetes; =false for a register token scoped to labels that do not name them")
	f.IntVar(&cfg.MaxJobs, "max-jobs", cfg.MaxJobs, "jobs run at once")
	f.StringVar(&cfg.CPU, "cpu", "", "CPU offered to jobs (2, 0.5, 500m); empty: unlimited")
	f.StringVar(&cfg.Memory, "memory", "", "memory offered to jobs (8Gi); empty: unlimited")
	f.StringVar(&cfg.WorkDir, "work-dir", "", "where job workspaces are made (default: the temp dir)")
	f.StringVar(&cfg.Mirrors, "mirrors", "", "git mirror cache the run's commit is checked out from into each workspace (default: <work-dir>/mirrors)")
	f.BoolVar(&cfg.KeepFailed, "keep-failed", false, "keep the workspaces of failed jobs")
	f.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "debug (shows step output), info, warn or error")
	f.StringVar(&cfg.LogFormat, "log-format", "auto", logFormatUsage)
	f.StringVar(&cfg.Executor, "executor", cfg.Executor, "shell, sandbox (bubblewrap: no network unless the job sets network: true), docker (jobs with an image run in containers on the Docker Engine; the worker carries the label docker), or kubernetes (each job a pod; see docs/kubernetes.md)")
	f.BoolVar(&cfg.DockerNetworkPerJob, "docker-network-per-job", false, "--executor docker: a bridge network of its own for every job, so that jobs running at the same time cannot reach each other (default: only for a job with services; the others share the engine's default bridge, which starts faster)")
	f.BoolVar(&cfg.DockerAllowPrivileged, "docker-allow-privileged", false, "--executor docker: "+dockerAllowPrivilegedUsage)
	f.IntVar(&cfg.DockerWarmPool, "docker-warm-pool", cfg.DockerWarmPool, "--executor docker: "+dockerWarmPoolUsage)
	f.StringVar(&cfg.DockerHost, "docker-host", "", "--executor docker: the Docker Engine (unix:///var/run/docker.sock, tcp://host:2375); default DOCKER_HOST, else the default socket")
	f.StringVar(&cfg.DefaultImage, "default-image", "", "--executor docker or kubernetes: run jobs without an image in this one (default: on the worker's host; kubernetes: such jobs fail)")
	f.StringVar(&cfg.StepUser, "step-user", "", "run steps as this unprivileged user (name or uid); the worker must run as root")
	f.BoolVar(&cfg.StepCgroup, "step-cgroup", cfg.StepCgroup, "put each step in a cgroup v2 group of its own where the host allows it (false: subreaper and parent-death signal only)")
	cfg.Kube.flags(f)
	f.StringVar(&cfg.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics at GET /metrics on this address (127.0.0.1:9091); empty: off")
	return cmd
}

// checkSandboxUser checks that the user sb runs steps as is not root and can reach the
// workspaces in workDir: a root worker's sandbox steps run as --step-user, or as
// executor.DefaultSandboxUser without one.
func checkSandboxUser(sb executor.Sandbox, workDir string) error {
	u := sb.StepUser()
	switch {
	case u == nil:
		return nil
	case u.UID == 0:
		return usagef("--step-user %s: %v", u.Name, executor.ErrSandboxRoot)
	case sb.User == nil:
		if err := u.CanReach(workDir); err != nil {
			return usagef("--executor sandbox: a worker that runs as root runs sandbox steps as %s (or --step-user), and %v; choose a --work-dir it can reach",
				u.Name, err)
		}
	}
	return nil
}

func (c *workerConfig) agentConfig() (agent.Config, error) {
	ac := agent.Config{Token: c.Token, Name: c.Name, MaxJobs: c.MaxJobs, WorkDir: c.WorkDir, Mirrors: c.Mirrors, KeepFailed: c.KeepFailed}
	servers, err := parseServers(c.Server)
	if err != nil {
		return ac, err
	}
	ac.Servers, ac.Server = servers, servers[0]
	if c.MaxJobs <= 0 || c.MaxJobs > 1024 {
		return ac, usagef("--max-jobs must be from 1 to 1024")
	}
	if c.Name == "" {
		return ac, usagef("--name is required")
	}
	var user *executor.User
	if c.StepUser != "" {
		u, err := executor.LookupUser(c.StepUser)
		if err != nil {
			return ac, usagef("--step-user: %v", err)
		}
		if err := u.CanReach(cmp.Or(c.WorkDir, os.TempDir())); err != nil {
			return ac, usagef("--step-user: %v; choose a --work-dir it can reach", err)
		}
		user = u
	}
	switch c.Executor {
	case "shell", "docker":
		// A docker worker runs jobs without an image on its host, as a shell worker
		// does; the caller gives it the engine.
		ac.Executor = executor.Shell{User: user}
	case "sandbox":
		if _, err := exec.LookPath("bwrap"); err != nil {
			return ac, usagef("--executor sandbox: %v", executor.ErrNoSandbox)
		}
		sb := executor.Sandbox{User: user}
		if err := checkSandboxUser(sb, cmp.Or(c.WorkDir, os.TempDir())); err != nil {
			return ac, err
		}
		ac.Executor = sb
	case "kubernetes":
		// Made in RunE, once the logger is: it connects to the cluster.
		if user != nil {
			return ac, usagef("--step-user: the kubernetes executor runs steps as the job's image says (container: user)")
		}
	default:
		return ac, usagef("--executor %q: want shell, sandbox, docker or kubernetes", c.Executor)
	}
	if c.Executor != "docker" && c.DockerHost != "" {
		return ac, usagef("--docker-host is for --executor docker")
	}
	if c.Executor != "docker" && c.DockerNetworkPerJob {
		return ac, usagef("--docker-network-per-job is for --executor docker")
	}
	if err := checkDockerWarmPool(c.DockerWarmPool); err != nil {
		return ac, err
	}
	if c.Executor != "docker" && c.DockerAllowPrivileged {
		return ac, usagef("--docker-allow-privileged is for --executor docker")
	}
	if c.Executor != "docker" && c.Executor != "kubernetes" && c.DefaultImage != "" {
		return ac, usagef("--default-image is for --executor docker or kubernetes")
	}
	if c.DefaultImage != "" {
		if msg := pipeline.CheckImageRef(c.DefaultImage); msg != "" {
			return ac, usagef("--default-image %q %s", c.DefaultImage, msg)
		}
		ac.DefaultImage = c.DefaultImage
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return ac, usagef("--metrics-addr %q: want host:port", c.MetricsAddr)
		}
		ac.Metrics = workermetrics.New()
	}
	for _, l := range strings.Split(c.Labels, ",") {
		if l = strings.TrimSpace(l); l != "" {
			if l == pipeline.DockerLabel && c.Executor != "docker" && c.Executor != "kubernetes" {
				return ac, usagef("--labels %s: that label says the worker runs jobs' images, which only --executor docker or kubernetes does", l)
			}
			if l == pipeline.PrivilegedLabel {
				return ac, usagef("--labels %s: that label says the worker runs privileged containers; --executor docker --docker-allow-privileged gives it", l)
			}
			ac.Labels = append(ac.Labels, l)
		}
	}
	if c.PlatformLabels && c.Executor != "kubernetes" {
		for _, l := range pipeline.PlatformLabels(runtime.GOOS, runtime.GOARCH) {
			if !slices.Contains(ac.Labels, l) {
				ac.Labels = append(ac.Labels, l)
			}
		}
	}
	// The label privileged jobs ask for: a docker worker's operator opts in; a
	// kubernetes worker leaves it to the cluster's pod security, as it always did.
	if c.Executor == "docker" && c.DockerAllowPrivileged || c.Executor == "kubernetes" {
		ac.Labels = append(ac.Labels, pipeline.PrivilegedLabel)
	}
	if c.CPU != "" {
		v, err := pipeline.ParseCPU(c.CPU)
		if err != nil || v <= 0 {
			return ac, usagef("--cpu %q: want 2, 0.5 or 500m", c.CPU)
		}
		ac.MilliCPU = v
	}
	if c.Memory != "" {
		v, err := pipeline.ParseSize(c.Memory)
		if err != nil || v <= 0 {
			return ac, usagef("--memory %q: want 512Mi, 8Gi or 1G", c.Memory)
		}
		ac.Memory = v
	}
	return ac, nil
}

// worker runs the agent. The command's context ends on the first signal: that drains.
// A second signal, caught here, cancels the running jobs.
func (a *app) worker(ctx context.Context, ac agent.Config, metricsAddr string) error {
	stopTracing, err := startTracing(ctx, "gantry-worker", ac.Logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	if ac.Metrics != nil {
		stopMetrics, err := serveMetrics(metricsAddr, ac.Metrics.Handler(), ac.Logger)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	kill, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	go func() {
		<-ctx.Done()
		second, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer cancel()
		select {
		case <-second.Done():
			ac.Logger.Warn("second signal: cancelling running jobs")
			stop()
		case <-kill.Done():
		}
	}()
	return agent.New(ac).Run(ctx, kill)
}

// serveMetrics serves h at GET /metrics on its own listener at addr, until the returned
// stop is called.
func serveMetrics(addr string, h http.Handler, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener", "err", err)
		}
	}()
	log.Info("serving metrics", "addr", "http://"+ln.Addr().String()+"/metrics")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}

// workerToken settles where the register token comes from and makes sure the process
// does not keep it where a step could read it: a token given with --token or
// GANTRY_TOKEN makes the worker re-execute itself without it in its command line or
// environment, handing it over on a pipe (--token-fd). Once its configuration is
// valid, the worker also makes itself undumpable (hideMemory).
func (a *app) workerToken(cmd *cobra.Command, cfg *workerConfig) error {
	flags := cmd.Flags()
	given := 0
	for _, name := range []string{"token", "token-file", "token-fd"} {
		if flags.Changed(name) {
			given++
		}
	}
	if given > 1 {
		return usagef("give the register token once: --token-file, --token or GANTRY_TOKEN")
	}
	if cfg.TokenFD >= 0 {
		token, err := readTokenFD(cfg.TokenFD)
		if err != nil {
			return err
		}
		cfg.Token, cfg.TokenFD = token, -1
	} else if cfg.TokenFile != "" {
		token, err := readTokenFile(cfg.TokenFile)
		if err != nil {
			return err
		}
		cfg.Token = token
	}
	// Only what this very process was started with can leak through /proc: a token
	// given to an in-process Run (tests) is in neither.
	inArgs := hasTokenArg(os.Args)
	inEnv := os.Getenv(envName("token")) != ""
	if inArgs {
		fmt.Fprintln(a.stderr, "gantry: warning: --token shows the register token to every process of this user "+
			"until the worker re-executes itself without it; use --token-file")
	}
	if inArgs || inEnv {
		handOver := cfg.Token
		if cfg.TokenFile != "" {
			handOver = "" // the new process reads the file again
		}
		if err := reexecWithoutToken(handOver); err != nil {
			return err
		}
	}
	return nil
}

// containSteps gives the worker's executor a Containment, so that no step outlives its
// worker, and first kills what a previous worker on the same work dir left running. The
// returned stop removes the worker's cgroups.
func containSteps(ac *agent.Config, cgroups bool) (stop func(), err error) {
	return containStepsIn(ac, cgroups, true)
}

// containStepsIn is containSteps, recording each running step in the work dir when
// record is set. A throwaway data directory (gantry run's) has no successor to read the
// records, which cost a synced write per step: it records nothing.
func containStepsIn(ac *agent.Config, cgroups, record bool) (stop func(), err error) {
	state := filepath.Join(ac.WorkDir, "gantry-steps")
	if ac.WorkDir == "" {
		// The temp dir is shared by every user of the machine: one state dir each.
		state = filepath.Join(os.TempDir(), fmt.Sprintf("gantry-steps-%d", os.Geteuid()))
	}
	if !record {
		state = ""
	}
	c, err := executor.NewContainment(executor.ContainmentConfig{StateDir: state, NoCgroup: !cgroups, Logger: ac.Logger})
	if err != nil {
		return nil, fmt.Errorf("contain steps: %w", err)
	}
	switch ex := ac.Executor.(type) {
	case executor.Shell:
		ex.Containment = c
		ac.Executor = ex
	case executor.Sandbox:
		ex.Containment = c
		ac.Executor = ex
	}
	ac.Logger.Info("steps are contained", "mode", c.Mode(), "reclaimed", c.Reclaimed())
	return func() {
		if err := c.Close(); err != nil {
			ac.Logger.Warn("containment", "err", err)
		}
	}, nil
}
