package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/gantry-ci/gantry/internal/actions"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// runConfig is everything `gantry run` acts on.
type runConfig struct {
	upConfig
	File string
	// Client names the coordinator asked when the argument is a run id.
	Client clientConfig
	// Ref, SHA and Event are the run's trigger, as a push of them would make it; Inputs
	// its dispatch inputs (NAME=VALUE).
	Ref, SHA, Event string
	Inputs          []string
	// Dirty checks out the working tree's uncommitted changes to tracked files;
	// NoCheckout checks nothing out.
	Dirty, NoCheckout bool
	// eventSet says --event was given: a tag's ref then does not make the event tag.
	eventSet bool
	// Force runs a workflow whose on: would not start a run for the event simulated.
	Force bool
	// Secrets are --secret NAME or NAME=VALUE, SecretsFile a file of NAME=VALUE lines:
	// the run's project's secrets while it lasts. Vars are --var NAME=VALUE, a workflow's
	// vars.NAME.
	Secrets     []string
	SecretsFile string
	Vars        []string
}

func (a *app) runCommand() *cobra.Command {
	cfg := runConfig{upConfig: upConfig{Workers: runtime.NumCPU(), Executor: "shell", LogLevel: "error", LeaseTTL: 10 * time.Second, Docker: "auto",
		DockerWarmPool: defaultDockerWarmPool}, Event: "push"}
	cmd := &cobra.Command{
		Use:   "run FILE|RUN-ID",
		Short: "Run a pipeline on this machine, with no server to set up; or show a run",
		Long: "Run starts a coordinator and --workers workers inside this process, on a\n" +
			"temporary data directory (or --data), submits FILE, prints every job's log as it\n" +
			"is written, each line prefixed by its job (in colour, with a live status line,\n" +
			"on a terminal), and exits with the run's result: 0 success, 1 failed or\n" +
			"cancelled. Ctrl-C cancels the run.\n\n" +
			"When FILE lies in a git work tree, every job's workspace gets that repository at\n" +
			"HEAD (--sha: another commit; --dirty: HEAD with the uncommitted changes to\n" +
			"tracked files, untracked files left out), and steps see GANTRY_SHA, GANTRY_REF\n" +
			"and the rest as a push would give them (--ref, --event, --input change them).\n" +
			"--no-checkout runs in empty workspaces.\n\n" +
			"A GitHub Actions workflow runs only when its on: would start it for that event\n" +
			"and branch, as on GitHub; --force runs it anyway. --secret NAME (value from the\n" +
			"environment, else asked for on a terminal) and --secrets-file give the secrets\n" +
			"its jobs read, --var NAME=VALUE its vars.\n\n" +
			"Given a run id instead of a file, it shows that run of the coordinator at\n" +
			"--server as gantry runs get does: its jobs wave by wave.",
		Example: "  gantry run .gantry.yml\n" +
			"  gantry run --executor sandbox --workers 8 examples/diamond.yml\n" +
			"  gantry run --dirty .gantry.yml\n" +
			"  gantry run --ref refs/tags/v1.2.0 --sha v1.2.0 .gantry.yml\n" +
			"  gantry run --event dispatch --input environment=staging deploy.yml\n" +
			"  gantry run --secret NPM_TOKEN --secrets-file .secrets .github/workflows/release.yml\n" +
			"  gantry run 0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b --server http://ci:8080",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if isRunID(args[0]) {
				return a.runsGet(cmd.Context(), cfg.Client, args[0])
			}
			cfg.File = args[0]
			cfg.eventSet = cmd.Flags().Changed("event")
			if cfg.Data == "" {
				cfg.Data = "-" // validated as set; replaced by a temporary directory
			}
			if err := cfg.validate(); err != nil {
				return err
			}
			return a.runLocal(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Data, "data", "", "keep the database, logs, artifacts and workspaces here (default: a temporary directory, deleted at the end)")
	f.IntVar(&cfg.Workers, "workers", cfg.Workers, "workers, each running one job at a time")
	f.StringVar(&cfg.Executor, "executor", cfg.Executor, "shell, or sandbox (bubblewrap: no network unless the job sets network: true)")
	f.StringVar(&cfg.Labels, "labels", "", "comma-separated labels for the workers, besides "+runtime.GOOS+" and "+runtime.GOARCH)
	f.StringVar(&cfg.Docker, "docker", cfg.Docker, dockerUsage+" (auto starts it only for a pipeline with an image or services)")
	f.BoolVar(&cfg.DockerAllowPrivileged, "docker-allow-privileged", false, "the docker worker: "+dockerAllowPrivilegedUsage)
	f.StringVar(&cfg.ActionsSource, "actions-source", "", actionsSourceUsage)
	f.StringVar(&cfg.Mirrors, "mirrors", "", "git mirror cache of the actions steps use and of checkouts (default: gantry/mirrors in the user's cache directory, kept between runs)")
	f.IntVar(&cfg.DockerWarmPool, "docker-warm-pool", cfg.DockerWarmPool, "the docker worker: "+dockerWarmPoolUsage)
	f.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "level of the coordinator's and workers' own log on stderr: debug, info, warn or error")
	f.StringVar(&cfg.LogFormat, "log-format", "auto", logFormatUsage)
	f.StringVar(&cfg.Ref, "ref", "", "git ref the run is for (default: the branch checked out)")
	f.StringVar(&cfg.SHA, "sha", "", "commit to check out and run for, any name git knows it by (default: HEAD)")
	f.StringVar(&cfg.Event, "event", cfg.Event, "event the run is for: "+strings.Join(runEvents, ", ")+" (default push; tag for a --ref refs/tags/...)")
	f.StringArrayVar(&cfg.Inputs, "input", nil, "NAME=VALUE, a dispatch input, checked against the pipeline's on: dispatch inputs (repeatable)")
	f.BoolVar(&cfg.Dirty, "dirty", false, "check out HEAD with the uncommitted changes to tracked files (untracked files are left out)")
	f.BoolVar(&cfg.NoCheckout, "no-checkout", false, "do not check out the git repository FILE lies in")
	f.BoolVar(&cfg.Force, "force", false, "run a GitHub Actions workflow even when its on: would not start it for the event and branch")
	f.StringArrayVarP(&cfg.Secrets, "secret", "s", nil, "NAME: a secret the jobs read as secrets.NAME, its value from the environment variable NAME, else asked for on a terminal; NAME=VALUE gives the value (repeatable)")
	f.StringVar(&cfg.SecretsFile, "secrets-file", "", "file of secrets, NAME=VALUE lines (# comments, quoted values), as docker's --env-file; --secret wins for a name in both")
	f.StringArrayVar(&cfg.Vars, "var", nil, "NAME=VALUE: a configuration variable, a workflow's vars.NAME (repeatable)")
	a.clientFlags(cmd, &cfg.Client)
	return cmd
}

// isRunID says whether run's argument names a run rather than a file: a UUID that is
// not also the name of a file here.
func isRunID(arg string) bool {
	if _, err := uuid.Parse(arg); err != nil {
		return false
	}
	_, err := os.Stat(arg)
	return errors.Is(err, fs.ErrNotExist)
}

// runGCPercent is the garbage collector's GOGC in gantry run, unless GOGC says otherwise:
// the process lives as long as its run, and a heap let grow to five times what is live
// (tens of MB) costs less than collecting it four times as often. Measured interleaved
// on 200 independent jobs: 0.86x the CPU per job of the default 100, for 1.25x the
// peak RSS (86 against 69 MB).
const runGCPercent = 400

func (a *app) runLocal(ctx context.Context, cfg runConfig) error {
	if _, set := os.LookupEnv("GOGC"); !set { // the runtime reads it from the process, as here
		defer debug.SetGCPercent(debug.SetGCPercent(runGCPercent))
	}
	srcs, err := a.readSources([]string{cfg.File})
	if err != nil {
		return err
	}
	src := srcs[0]
	if cfg.Mirrors == "" {
		// Kept between runs, so an action is fetched once, not by every run.
		if dir, err := os.UserCacheDir(); err == nil {
			cfg.Mirrors = filepath.Join(dir, "gantry", "mirrors")
		}
	}
	// The reusable workflows the file calls are read as its actions are: those of its
	// repository from the working tree, others from --actions-source.
	actionsSrc, err := actions.ParseSource(cfg.ActionsSource)
	if err != nil {
		return usagef("--actions-source: %v", err)
	}
	resolver := &actions.Resolver{Source: actionsSrc, MirrorsDir: cfg.mirrors(), Logger: newLogger(a.stderr, cfg.LogLevel, cfg.LogFormat)}
	res := a.compileSource(src, a.workflowsOf(ctx, src, resolver), false)
	if len(res.errs) > 0 {
		writeErrors(a.stderr, res)
		writeSummary(a.stderr, len(res.errs), 1)
		return &exitError{code: exitFailure}
	}
	lr, err := localTrigger(ctx, cfg, res.plan)
	if err != nil {
		return err
	}
	if !cfg.Force && pipeline.IsWorkflow(src.data, src.name) {
		if err := checkWorkflowOn(res.plan, lr.trigger); err != nil {
			return err
		}
	}
	secrets, err := a.runSecrets(cfg)
	if err != nil {
		return err
	}
	if lr.note != "" {
		fmt.Fprintln(a.stderr, "gantry: "+lr.note)
	}
	if cfg.Data == "-" {
		dir, err := os.MkdirTemp("", "gantry-run-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg.Data, cfg.Throwaway = dir, true
	}
	cfg.Addr = "127.0.0.1:0"
	if cfg.Docker == "auto" && !slices.ContainsFunc(res.plan.Jobs, func(j *pipeline.Job) bool {
		// An image, services, a docker action: what only a docker worker runs.
		return j.Image != "" || slices.Contains(j.RunsOn, pipeline.DockerLabel)
	}) {
		cfg.Docker = "off" // nothing to run in a container: no engine to reach
	}
	// The coordinator and workers log from their own goroutines to the stderr the run's
	// messages go to: one lock keeps their writes whole and apart.
	local := *a
	local.stderr = &lockedWriter{w: a.stderr}
	a = &local
	log := newLogger(a.stderr, cfg.LogLevel, cfg.LogFormat)
	stopTracing, err := startTracing(ctx, "gantry", log)
	if err != nil {
		return err
	}
	defer stopTracing()
	// The workers outlive ctx: a Ctrl-C cancels the run, whose jobs the workers then
	// cancel and report, and only then do they stop.
	l, err := startLocal(context.WithoutCancel(ctx), cfg.upConfig, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := l.stop(context.WithoutCancel(ctx)); err != nil {
			log.Error("stop", "err", err)
		}
	}()
	if len(secrets) > 0 {
		drop, err := putRunSecrets(ctx, l.base, secrets)
		if !cfg.Throwaway {
			defer func() {
				if err := drop(context.WithoutCancel(ctx)); err != nil {
					log.Error("delete the run's secrets", "err", err)
				}
			}()
		}
		if err != nil {
			return err
		}
	}
	// The run is made in the store, not over the API: its trigger names a repository on
	// this machine, which the API takes from no submitter.
	plan, err := pinLocal(ctx, cfg.upConfig, res.plan, log)
	if err != nil {
		return err
	}
	run, _, _, err := l.store.CreateRun(ctx, store.CreateRunParams{Plan: plan, Definition: src.data, Trigger: lr.trigger, Env: lr.env})
	if err != nil {
		return fmt.Errorf("create the run: %w", err)
	}
	done := make(chan error, 1)
	go func() {
		labels := cfg.labels()
		if l.docker != "" {
			labels = append(cfg.dockerLabels(), pipeline.DockerLabel)
		}
		done <- a.followLocal(ctx, l.base, run.ID.String(), func(j jobView) error { return cannotRun(j, labels) })
	}()
	select {
	case err = <-done:
	case <-l.failed:
		return errors.New("the local coordinator or a worker stopped")
	}
	var cannot *cannotRunError
	if errors.As(err, &cannot) && ctx.Err() == nil {
		if cerr := cancelAll(context.WithoutCancel(ctx), l.base); cerr != nil {
			log.Error("cancel", "err", cerr)
		}
		return err
	}
	if ctx.Err() != nil {
		fmt.Fprintln(a.stderr, "gantry: cancelling the run")
		if cerr := cancelAll(context.WithoutCancel(ctx), l.base); cerr != nil {
			log.Error("cancel", "err", cerr)
		}
		return &exitError{code: exitFailure}
	}
	return err
}

// followLocal prints the run's jobs, then every job's log until the run ends, as gantry
// submit --follow does, and returns an exit error unless the run succeeded.
func (a *app) followLocal(ctx context.Context, base, id string, noWorker func(jobView) error) error {
	c, err := (&clientConfig{Server: base, lookupEnv: a.lookupEnv}).client()
	if err != nil {
		return err
	}
	run, _, err := getRun(ctx, c, id)
	if err != nil {
		return err
	}
	writeSubmitted(a.stdout, run, a.outputWidth())
	tty, _ := terminal(a.stdout)
	status, err := followRunWith(ctx, c, id, a.stdout, tty, followOptions{noWorker: noWorker})
	if err != nil {
		return err
	}
	if status != "success" {
		return &exitError{code: exitFailure}
	}
	return nil
}

// cannotRun says whether job, which no live worker can take, can never run on the
// workers of `gantry run`, which carry labels: only they will ever serve the run, so such
// a job would wait forever. A job that asks only for labels they carry waits on workers
// slow to show they are alive (a starved machine), not forever, and is left to wait.
func cannotRun(job jobView, labels []string) error {
	for _, l := range job.Waiting.Labels {
		if !slices.Contains(labels, l) {
			return &cannotRunError{job: job.Key, waiting: *job.Waiting}
		}
	}
	return nil
}

// cannotRunError says that a job of `gantry run` waits for a worker the run does not
// have, and how to give it one.
type cannotRunError struct {
	job     string
	waiting waitingView
}

func (e *cannotRunError) Error() string {
	msg := fmt.Sprintf("job %s cannot run here: %s", e.job, strings.TrimPrefix(e.waiting.Message, "waiting: "))
	labels := slices.DeleteFunc(slices.Clone(e.waiting.Labels), func(l string) bool { return l == pipeline.DockerLabel })
	if len(labels) < len(e.waiting.Labels) {
		msg += "; gantry run starts a docker worker for a pipeline with an image or services when a Docker Engine answers at DOCKER_HOST or the default socket (--docker)"
	}
	if i := slices.Index(labels, pipeline.PrivilegedLabel); i >= 0 {
		labels = slices.Delete(labels, i, i+1)
		msg += "; gantry run --docker-allow-privileged lets its docker worker run them"
	}
	// A job for another system (a workflow's runs-on: windows-latest) cannot be helped
	// with --labels: that would run it on this machine's system and report what it did.
	var systems []string
	labels = slices.DeleteFunc(labels, func(l string) bool {
		if slices.Contains(systemLabels, l) {
			systems = append(systems, l)
			return true
		}
		return false
	})
	if len(systems) > 0 {
		msg += fmt.Sprintf("; it runs on %s and this machine is %s: run it on a worker of that system", strings.Join(systems, " and "), runtime.GOOS)
	}
	if len(labels) > 0 {
		msg += fmt.Sprintf("; add --labels %s to give this run's workers those labels", strings.Join(labels, ","))
	}
	return msg
}

// systemLabels name an operating system: a worker carries its own (pipeline.PlatformLabels)
// and no other.
var systemLabels = []string{pipeline.LinuxLabel, pipeline.WindowsLabel, pipeline.MacOSLabel, "darwin"}

// cancelAll cancels every run of the private coordinator at base that has not ended, and
// waits until they have.
func cancelAll(ctx context.Context, base string) error {
	ctx, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	c := &apiClient{base: base, http: http.DefaultClient}
	var page struct {
		Runs []runDetails `json:"runs"`
	}
	if err := c.getJSON(ctx, "/api/v1/runs?limit=100", &page); err != nil {
		return err
	}
	for _, r := range page.Runs {
		if runTerminal(r.Status) {
			continue
		}
		if _, err := c.call(ctx, http.MethodPost, "/api/v1/runs/"+r.ID+"/cancel", nil, nil); err != nil {
			return err
		}
		for !runTerminal(r.Status) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
			next, _, err := getRun(ctx, c, r.ID)
			if err != nil {
				return err
			}
			r = next
		}
	}
	return nil
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// pinLocal pins the actions the plan's steps use, as the coordinator does for a run it is
// sent: to the commit each one's ref names in --actions-source.
func pinLocal(ctx context.Context, cfg upConfig, plan *pipeline.Plan, log *slog.Logger) (*pipeline.Plan, error) {
	if !actions.Uses(plan) {
		return plan, nil
	}
	src, err := actions.ParseSource(cfg.ActionsSource)
	if err != nil {
		return nil, usagef("--actions-source: %v", err)
	}
	r := &actions.Resolver{Source: src, MirrorsDir: cfg.mirrors(), Logger: log}
	return r.Pin(ctx, plan)
}
