package agent

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/ghaexpr"
	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/metrics/workermetrics"
	"github.com/gantry-ci/gantry/internal/pipeline"
)

// Executor runs one step; executor.Shell is the one used by default.
type Executor interface {
	Run(ctx context.Context, s executor.Step) (executor.Result, error)
}

// Config configures an Agent.
type Config struct {
	Server string // coordinator base URL
	// Servers, when given instead of Server, are the base URLs of several coordinator
	// replicas of one store: the worker uses one at a time, and moves to the next when it
	// cannot reach it (client), keeping its id and its jobs' leases.
	Servers []string
	Token   string // register token (with auth on)
	Name    string
	Labels  []string
	MaxJobs int
	// ReportLinger is how long a job's log line or step report waits for more before it
	// goes out, and so for the job's end, whose completion then carries it (features
	// complete.logs and complete.steps); 0 means logs.DefaultLinger.
	ReportLinger time.Duration
	// MilliCPU and Memory are the capacity shared by the jobs running at once; zero means
	// unlimited.
	MilliCPU int64
	Memory   int64
	WorkDir  string // workspaces are made here; default os.TempDir()
	// Mirrors is the cache of git mirrors jobs check their run's commit out from;
	// default WorkDir/mirrors.
	Mirrors string
	// KeepFailed keeps the workspace of a failed job for inspection.
	KeepFailed bool
	// Executor runs the steps. One that is an executor.JobExecutor (docker) runs a job
	// with an image in a container of its own, through a Session.
	Executor Executor
	// DefaultImage is the image a JobExecutor runs jobs without one in; "" runs them on
	// the worker's host.
	DefaultImage string
	Logger       *slog.Logger
	HTTPClient   *http.Client
	// Metrics counts what the worker does; nil counts nothing.
	Metrics *workermetrics.Worker
	// Registered, when set, is called with the worker's id once it has registered and
	// before it claims a job (the docker worker sweeps what its dead predecessors left);
	// its context ends once the worker has stopped and its jobs with it.
	Registered func(ctx context.Context, workerID string)
}

// Agent is a running worker.
type Agent struct {
	cfg Config
	c   *client
	log *slog.Logger

	workerID       string
	heartbeatEvery time.Duration
	// leaseTTL is the coordinator's lease TTL, for a claim answer that does not say it.
	leaseTTL time.Duration
	// completeSteps says the coordinator takes step reports with a job's completion;
	// claimStart that a claim can start the jobs it hands out, so none needs a start
	// report; completeClaim that a completion can carry the next claim; completeLogs
	// that it can carry the attempt's last log lines.
	completeSteps, claimStart, completeClaim, completeLogs bool
	// toolCacheDir is RUNNER_TOOL_CACHE, found once (toolCache).
	toolCacheOnce sync.Once
	toolCacheDir  string
	// logCommands says the coordinator takes log lines with what workflow commands made
	// of them (folds, levels, annotations); an older one gets them plain (plainLines).
	logCommands bool
	// keepSummaries says the coordinator keeps step summaries (featureSummaries).
	keepSummaries bool
	// keepTests says the coordinator keeps test results (featureTests).
	keepTests bool
	// drain ends when the worker is to claim no more.
	drain context.Context

	mu      sync.Mutex
	running map[string]*runningJob
	// cpu and mem are what the jobs handed to the worker take of its capacity, counted
	// from the claim's answer until the job has ended (reserve, release).
	cpu      int64
	mem      int64
	draining bool
	// spares are finished jobs' directories kept for the next (jobdirs.go).
	spares []spareDirs

	// uploads counts artifact uploads retrying in the background after their job ended;
	// they stop when uploadCtx ends (the worker is killed) and Run waits for them.
	uploads   sync.WaitGroup
	uploadCtx context.Context
	// blobHTTP moves artifacts: the protocol client's transport without its overall
	// timeout, which a large file would outlast.
	blobHTTP *http.Client
}

type runningJob struct {
	cancel    context.CancelCauseFunc
	done      chan struct{} // closed once the job ended and was reported
	cancelled bool
}

// How long a report about a job is tried while the coordinator is unreachable or failing,
// and the longest wait between two tries.
const (
	reportFor        = 10 * time.Minute
	reportBackoffCap = 10 * time.Second
)

// maxClaim is the most jobs one claim may ask for (the coordinator refuses more); a
// worker with more free slots claims again for the rest.
const maxClaim = 64

// Causes a job's context can end with. A job whose lease is gone is killed without the
// SIGTERM grace (executor.ErrKillNow): another attempt may be starting elsewhere.
var (
	errCancelled = errors.New("cancelled by the coordinator")
	errTimeout   = errors.New("job timed out")
	errLeaseGone = fmt.Errorf("the coordinator gave the job to another attempt: %w", executor.ErrKillNow)
	errFenced    = fmt.Errorf("lease not renewed in time: %w", executor.ErrKillNow)
)

// New returns an agent with cfg's defaults filled in.
func New(cfg Config) *Agent {
	if cfg.MaxJobs <= 0 {
		cfg.MaxJobs = 1
	}
	if cfg.WorkDir == "" {
		cfg.WorkDir = os.TempDir()
	}
	// Steps are told their workspace (GANTRY_WORKSPACE) and may cd away from it.
	if abs, err := filepath.Abs(cfg.WorkDir); err == nil {
		cfg.WorkDir = abs
	}
	if cfg.Executor == nil {
		cfg.Executor = executor.Shell{}
	}
	if _, ok := cfg.Executor.(executor.JobExecutor); ok && !slices.Contains(cfg.Labels, pipeline.DockerLabel) {
		// The capability jobs with an image ask for (the planner puts it in their
		// runs_on): only this worker's executor can give them a container.
		cfg.Labels = append(slices.Clip(cfg.Labels), pipeline.DockerLabel)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ReportLinger <= 0 {
		cfg.ReportLinger = logs.DefaultLinger
	}
	if len(cfg.Servers) == 0 {
		cfg.Servers = []string{cfg.Server}
	}
	if cfg.HTTPClient == nil {
		// Every running job keeps requests going at once (heartbeats, log batches, step
		// reports) beside the claim and control long polls: keep a connection idle for
		// each, rather than the default two, so they are reused instead of dialled.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 3*cfg.MaxJobs + 8
		tr.MaxIdleConns = max(tr.MaxIdleConns, tr.MaxIdleConnsPerHost)
		if len(cfg.Servers) > 1 {
			// A replica cut off by a partition drops the packets of a dial: give up on it
			// within seconds rather than the default half minute, while another may
			// answer.
			d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
			tr.DialContext = d.DialContext
		}
		cfg.HTTPClient = &http.Client{Timeout: 2 * time.Minute, Transport: tr}
	}
	return &Agent{
		cfg: cfg, log: cfg.Logger, running: map[string]*runningJob{}, uploadCtx: context.Background(),
		blobHTTP: &http.Client{Transport: cfg.HTTPClient.Transport},
		c:        newClient(cfg.Servers, cfg.Token, cfg.HTTPClient, cfg.Logger),
	}
}

// servers names the coordinators the worker works with, for its log and errors.
func (a *Agent) servers() string { return strings.Join(a.cfg.Servers, ",") }

// state is what the worker tells the coordinator it is doing.
func (a *Agent) state() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.draining:
		return "draining"
	case len(a.running) > 0:
		return "busy"
	}
	return "idle"
}

// Run registers and works until drain ends: then it claims no more and waits for the
// jobs it runs. When kill ends too, running jobs are cancelled (their processes get
// SIGTERM, then SIGKILL after their grace) and reported cancelled.
func (a *Agent) Run(drain, kill context.Context) error {
	if err := a.register(drain); err != nil {
		return err
	}
	a.log.Info("worker registered", "worker", a.workerID, "server", a.c.base(), "servers", len(a.cfg.Servers), "max_jobs", a.cfg.MaxJobs)
	defer a.dropSpares() // last: after the jobs that might leave some
	jobsCtx, stopJobs := context.WithCancelCause(context.WithoutCancel(kill))
	defer stopJobs(nil)
	if a.cfg.Registered != nil {
		// Given the context of the jobs, which ends only once the last of them has.
		a.cfg.Registered(jobsCtx, a.workerID)
	}
	go func() {
		select {
		case <-kill.Done():
			stopJobs(errCancelled)
		case <-jobsCtx.Done():
		}
	}()
	controlCtx, stopControl := context.WithCancel(jobsCtx)
	defer stopControl()
	go a.control(controlCtx)
	a.uploadCtx = jobsCtx
	defer a.uploads.Wait()

	a.drain = drain
	slots := make(chan struct{}, a.cfg.MaxJobs)
	for range a.cfg.MaxJobs {
		slots <- struct{}{}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	backoff := time.Second
	for {
		select {
		case <-drain.Done():
			a.mu.Lock()
			a.draining = true
			a.mu.Unlock()
			a.log.Info("draining: finishing running jobs, claiming none")
			return nil
		case <-slots:
		}
		free := 1
	more:
		for free < min(a.cfg.MaxJobs, maxClaim) {
			select {
			case <-slots:
				free++
			default:
				break more
			}
		}
		jobs, err := a.claim(drain, free)
		for range free - len(jobs) {
			slots <- struct{}{}
		}
		if err != nil {
			if drain.Err() != nil {
				continue
			}
			a.cfg.Metrics.ClaimFailed()
			a.log.Warn("claim failed; trying again", "err", err, "in", backoff)
			select {
			case <-time.After(backoff):
			case <-drain.Done():
			}
			backoff = min(backoff*2, 30*time.Second)
			continue
		}
		backoff = time.Second
		for _, j := range jobs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// The job's files are removed once its slot is free: a next job need not
				// wait for the file system.
				var cleanup []func()
				defer func() {
					for _, f := range cleanup {
						f()
					}
				}()
				defer func() { slots <- struct{}{} }()
				a.runJobs(jobsCtx, j, func(f func()) { cleanup = append(cleanup, f) })
			}()
		}
	}
}

// register registers the worker, trying again with backoff while the coordinator is
// unreachable or failing (5xx), so that workers may start before it; a 4xx (a bad token)
// or the end of ctx ends it.
func (a *Agent) register(ctx context.Context) error {
	var ans registerAnswer
	body := map[string]any{"name": a.cfg.Name, "labels": a.cfg.Labels, "milli_cpu": a.cfg.MilliCPU, "memory": a.cfg.Memory,
		"max_jobs": a.cfg.MaxJobs, "version": "dev"}
	for backoff := time.Second; ; backoff = min(backoff*2, 30*time.Second) {
		err := a.c.post(ctx, "/api/v1/agent/register", body, &ans)
		if err == nil {
			break
		}
		var ae *apiError
		if errors.As(err, &ae) && ae.Status < 500 || ctx.Err() != nil {
			return fmt.Errorf("register with %s: %w", a.servers(), err)
		}
		a.log.Warn("register failed; trying again", "err", err, "in", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return fmt.Errorf("register with %s: %w", a.servers(), err)
		}
	}
	a.workerID = ans.WorkerID
	a.heartbeatEvery = duration(ans.HeartbeatEvery, 10*time.Second)
	a.leaseTTL = duration(ans.LeaseTTL, 0)
	a.completeSteps = slices.Contains(ans.Features, featureCompleteSteps)
	a.claimStart = slices.Contains(ans.Features, featureClaimStart)
	a.completeClaim = slices.Contains(ans.Features, featureCompleteClaim)
	a.completeLogs = slices.Contains(ans.Features, featureCompleteLogs)
	a.logCommands = slices.Contains(ans.Features, featureLogCommands)
	a.keepSummaries = slices.Contains(ans.Features, featureSummaries)
	a.keepTests = slices.Contains(ans.Features, featureTests)
	if ans.Credential != "" {
		a.c.token = ans.Credential
	}
	return nil
}

// claim asks for up to max jobs that fit the capacity not taken by running jobs.
func (a *Agent) claim(ctx context.Context, max int) ([]claimedJob, error) {
	a.mu.Lock()
	used, usedMem := a.cpu, a.mem
	a.mu.Unlock()
	var ans struct {
		Jobs []claimedJob `json:"jobs"`
	}
	sent := time.Now()
	err := a.c.post(ctx, "/api/v1/agent/claim", a.claimBody(max, used, usedMem), &ans)
	if err != nil {
		// Whatever part of an answer was read is not run: none of it is the worker's.
		return nil, err
	}
	for i := range ans.Jobs {
		ans.Jobs[i].sent = sent
	}
	a.reserve(ans.Jobs)
	return ans.Jobs, nil
}

// reserve counts what jobs just claimed take of the worker's capacity. It is done at the
// claim's answer, before the caller hands back a slot or claims again: the jobs' own
// goroutines start later, and a claim sent before they counted their jobs offered the
// same capacity twice (a worker of 2 CPUs ran two jobs of 1.5 at once). release gives it
// back once a job has ended.
func (a *Agent) reserve(jobs []claimedJob) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range jobs {
		cpu, mem := jobs[i].resources()
		a.cpu += cpu
		a.mem += mem
	}
}

// resources is what j takes of the worker's capacity.
func (j *claimedJob) resources() (milliCPU, memory int64) {
	if j.Spec == nil {
		return 0, 0
	}
	return j.Spec.Resources.MilliCPU, j.Spec.Resources.MemoryBytes
}

// release gives back what reserve counted for j, once j has ended.
func (a *Agent) release(j *claimedJob) {
	cpu, mem := j.resources()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cpu -= cpu
	a.mem -= mem
}

// claimBody is a claim for up to max jobs, with used of the worker's CPU and usedMem of
// its memory taken by running jobs.
func (a *Agent) claimBody(max int, used, usedMem int64) map[string]any {
	cpu, mem := int64(0), int64(0)
	if a.cfg.MilliCPU > 0 {
		cpu = max64(1, a.cfg.MilliCPU-used)
	}
	if a.cfg.Memory > 0 {
		mem = max64(1, a.cfg.Memory-usedMem)
	}
	return map[string]any{"worker_id": a.workerID, "labels": a.cfg.Labels,
		"free_milli_cpu": cpu, "free_memory": mem, "max": max, "wait": "30s", "start": a.claimStart}
}

// runJobs runs j and then, while its completion carried a claim that brought one, each
// next job in the same slot. later is given what is left to do of the last job once the
// slot is free (runJob).
func (a *Agent) runJobs(ctx context.Context, j claimedJob, later func(func())) {
	for {
		var cleanup []func()
		cc := a.runJob(ctx, j, func(f func()) { cleanup = append(cleanup, f) })
		// Before the slot goes back to the claim loop, which claims with what is free.
		a.release(&j)
		if cc == nil {
			for _, f := range cleanup {
				later(f)
			}
			return
		}
		// The claim for the slot is with the coordinator already: the job's files go
		// while it waits, and none is left behind by a run of jobs in one slot.
		for _, f := range cleanup {
			f()
		}
		jobs, err := cc.next(a.drain)
		a.reserve(jobs)
		if err != nil {
			// The job was reported; the slot is claimed for by the worker's own claims.
			if a.drain.Err() == nil {
				a.log.Debug("no claim with the completion", "err", err)
			}
			return
		}
		if len(jobs) == 0 {
			return
		}
		j = jobs[0]
	}
}

// carriesClaim says whether a completion claims the next job for its slot: with the
// coordinator's leave, for a worker of one slot (one of many would hold a claim open per
// busy slot, more than the coordinator lets a worker hold), not draining.
func (a *Agent) carriesClaim() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.completeClaim && a.cfg.MaxJobs == 1 && !a.draining && a.drain != nil && a.drain.Err() == nil
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// control keeps the control channel open and cancels the jobs the coordinator names.
func (a *Agent) control(ctx context.Context) {
	for ctx.Err() == nil {
		var ans struct {
			Cancel []string `json:"cancel"`
		}
		// The request doubles as the worker's sign of life: it comes back at least once
		// per heartbeat interval, saying what the worker is doing.
		wait := cmp.Or(a.heartbeatEvery, 10*time.Second)
		err := a.c.post(ctx, "/api/v1/agent/control", map[string]any{"worker_id": a.workerID, "wait": wait.String(), "state": a.state()}, &ans)
		if err != nil {
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
			continue
		}
		for _, id := range ans.Cancel {
			a.cancelJob(id)
		}
		if len(ans.Cancel) > 0 {
			a.awaitEnded(ctx, ans.Cancel)
		}
	}
}

// awaitEnded waits, at most a second, for the named jobs to end and be reported. Their
// cancel flags stay until then, so polling again earlier would spin on them; waiting the
// whole second instead would leave the next cancel of another job unheard meanwhile.
// A job this worker does not run (any more) is waited for the whole second.
func (a *Agent) awaitEnded(ctx context.Context, ids []string) {
	timeout := time.After(time.Second)
	for _, id := range ids {
		var done chan struct{} // nil: wait for the timeout
		a.mu.Lock()
		if j, ok := a.running[id]; ok {
			done = j.done
		}
		a.mu.Unlock()
		select {
		case <-done:
		case <-timeout:
			return
		case <-ctx.Done():
			return
		}
	}
}

func (a *Agent) cancelJob(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if j, ok := a.running[id]; ok && !j.cancelled {
		j.cancelled = true
		a.log.Info("job cancelled by the coordinator", "job", id)
		j.cancel(errCancelled)
	}
}

// runJob runs one claimed job to its end and reports it. When the completion carried a
// claim, it returns the claim, whose answer is still to come.
//
// later is given what is left to do once the job's result is reported (removing its
// files), for the caller to do once the job's slot is free again.
func (a *Agent) runJob(parent context.Context, j claimedJob, later func(func())) *carriedClaim {
	log := a.log.With("run", j.RunID, "job", j.ID, "key", j.Key, "attempt", j.Attempt)
	spec := j.Spec
	if spec == nil {
		log.Error("claimed job has no spec")
		return nil
	}
	parent, span := a.startJobSpan(parent, j)
	result := "lost"
	defer func() { endJobSpan(span, result) }()
	jobEnded := func(r string) {
		result = r
		a.cfg.Metrics.JobEnded(r)
	}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	a.mu.Lock()
	rj := &runningJob{cancel: cancel, done: make(chan struct{})}
	a.running[j.ID] = rj
	a.mu.Unlock()
	a.cfg.Metrics.JobStarted()
	defer a.cfg.Metrics.JobStopped()
	defer func() {
		a.mu.Lock()
		close(rj.done)
		delete(a.running, j.ID)
		a.mu.Unlock()
	}()
	if spec.Timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, time.Duration(spec.Timeout), errTimeout)
		defer stop()
	}
	// A lease lost stops the job: told by a heartbeat or by any report (another worker
	// owns it now), or found by the fence (it could not be renewed in time, and the
	// coordinator gives the job to another worker once it runs out). Either way the
	// steps are killed at once and nothing more of this attempt is reported: no step
	// report, no log line, no completion.
	lost := make(chan struct{})
	reportCtx, stopReports := context.WithCancel(context.WithoutCancel(parent))
	defer stopReports()
	var loseOnce sync.Once
	loseLease := func(cause error) {
		loseOnce.Do(func() {
			close(lost)
			stopReports()
			cancel(cause)
		})
	}
	// Once the steps are over nothing runs that could overlap another attempt: a lease
	// running out then stops nothing, and the coordinator, which fences every report by
	// its token, decides whether the result still counts.
	var stepsOver atomic.Bool
	ttl := duration(j.Lease.TTL, a.leaseTTL)
	lease := newFence(j.sent, time.Duration(j.Lease.TTLMillis)*time.Millisecond, fenceMargin(ttl), func(left time.Duration) {
		if stepsOver.Load() {
			log.Warn("lease not renewed in time after the steps ended; the coordinator decides whether the result counts",
				"lease_left", left.Round(time.Millisecond))
			return
		}
		log.Error("lease not renewed in time: killing the job's steps and reporting nothing more of this attempt",
			"lease_left", left.Round(time.Millisecond), "ttl", ttl)
		loseLease(errFenced)
	})
	defer lease.stop()
	// The heartbeats stop before the completion is sent: a heartbeat that reached the
	// coordinator just after the completion would be told the lease is gone, and must not
	// take for a lost lease the end this worker itself reported.
	hbCtx, stopHeartbeat := context.WithCancel(ctx)
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		a.heartbeat(hbCtx, j, lease, loseLease)
	}()
	endHeartbeats := func() {
		stopHeartbeat()
		<-hbDone
	}
	defer endHeartbeats()

	// The final report uses its own context: a cancel must never lose the result. It
	// outlasts a coordinator restart or an outage shorter than the lease, so the result is
	// still wanted when the coordinator is back; only a lost lease ends it.
	report := func(path string, body map[string]any) error {
		rctx, stop := context.WithTimeout(reportCtx, reportFor)
		defer stop()
		body["token"] = j.Lease.Token
		return a.retryPost(rctx, "/api/v1/agent/jobs/"+j.ID+path, body, nil)
	}
	// The start and the step reports go out in order behind the steps, so that a
	// coordinator outage, even one that swallowed the start's answer, never holds the
	// job back; the completion waits for them.
	steps := make(chan stepReport, 4*len(spec.Steps)+2)
	if !a.claimStart {
		steps <- stepReport{path: "/start", step: -1, body: map[string]any{}}
	}
	stepsSent := make(chan struct{})
	// Once the job has ended, the step reports still queued go with the completion
	// instead of each in a request of its own: a quick job costs one write, not three.
	// carried is the reporter's until stepsSent is closed.
	var (
		ending  atomic.Bool
		carried []map[string]any
	)
	go func() {
		defer close(stepsSent)
		// held are step reports waiting, ReportLinger at most from the first, for the
		// job to end and carry them: a quick job's steps cost no request of their own,
		// and a step shows running no later than its first log lines. A report of its
		// own (a summary) goes after them, in order.
		var (
			held []stepReport
			due  <-chan time.Time
		)
		send := func(r stepReport) bool {
			err := report(r.path, r.body)
			if errors.Is(err, errLeaseLost) || (r.path == "/start" && err != nil) {
				log.Warn("the coordinator refused a report; stopping the job", "report", r.path, "err", err)
				loseLease(errLeaseGone)
				for range steps {
				}
				return false
			}
			if err != nil && r.refused != nil {
				r.refused(err)
			}
			return true
		}
		flush := func() bool {
			due = nil
			for len(held) > 0 {
				r := held[0]
				held = held[1:]
				if closed(lost) {
					continue
				}
				if !send(r) {
					return false
				}
			}
			return true
		}
		// carry puts the held reports, then r if given, in the completion.
		carry := func(r ...stepReport) {
			for _, h := range append(held, r...) {
				u := maps.Clone(h.body)
				u["index"] = h.step
				carried = append(carried, u)
			}
			held, due = nil, nil
		}
		for {
			var (
				r  stepReport
				ok bool
			)
			select {
			case r, ok = <-steps:
			case <-due:
				if !flush() {
					return
				}
				continue
			}
			if !ok {
				// The job ended: ending says whether the completion follows at once.
				if ending.Load() && !closed(lost) {
					carry()
					return
				}
				flush()
				return
			}
			if closed(lost) {
				held = nil // nothing more of a lost attempt is reported
				continue
			}
			switch {
			case r.step >= 0 && !r.own && ending.Load():
				carry(r)
			case r.step >= 0 && !r.own && a.completeSteps:
				held = append(held, r)
				if due == nil {
					due = time.After(a.cfg.ReportLinger)
				}
			default:
				if !flush() || !send(r) {
					return
				}
			}
		}
	}()
	// failEarly reports a job that could not get as far as its steps.
	failEarly := func() {
		close(steps)
		<-stepsSent
		select {
		case <-lost:
			jobEnded("lost")
		default:
			endHeartbeats()
			_ = report("/complete", map[string]any{"status": "failed", "failure_kind": "failure"})
			jobEnded("failed")
		}
	}

	jl, err := a.openLog(j, log)
	if err != nil {
		log.Error("open the job's log spool", "err", err)
		failEarly()
		return nil
	}
	maskSecrets(j, jl.rec)
	for _, n := range j.Notices {
		jl.rec.System(n)
	}
	over := make(chan struct{})
	defer close(over)
	go func() {
		select {
		case <-lost:
			jl.ship.Abort()
		case <-over:
		}
	}()
	ws, err := os.MkdirTemp(a.workspaceParent(j), "gantry-job-")
	if err != nil {
		log.Error("create workspace", "err", err)
		jl.rec.System("the worker could not create a workspace: " + err.Error())
		jl.close(parent, log)
		failEarly()
		return nil
	}
	if a.inContainer(j) {
		// Where a container job's caches under ~ stand on the worker's disk, if they do.
		defer later(func() { _ = os.RemoveAll(ws + cacheHomeSuffix) })
	}
	var (
		status, kind string
		exit         *int
		caches       []*jobCache
		ended        stepsEnd
		// failedSteps counts the steps that failed, continue_on_error's too: a job
		// whose only failures are quarantined tests must have failed in one step.
		failedSteps int
	)
	if j.SecretsError != "" {
		// Before the checkout, so nothing of the job ran without what it needs.
		jl.rec.System(j.SecretsError)
		status, kind = "failed", "failure"
	} else if err := a.checkout(ctx, log, j, ws, jl.rec); err != nil {
		status, kind = "failed", "failure"
	} else if err := a.fetchInputs(ctx, j, ws, jl.rec); err != nil {
		log.Error("fetch the artifacts of the jobs this one needs", "err", err)
		jl.rec.System("the worker could not fetch the job's input artifacts: " + err.Error())
		status, kind = "failed", "failure"
	} else {
		caches = a.restoreCaches(ctx, log, j, ws, jl.rec)
		// A step's summary goes out in order with its reports, before the step's end, so
		// that a reader who sees a step end sees its summary; never with the completion,
		// whose body it would make too large.
		var summary func(part, step int, markdown string)
		if a.keepSummaries {
			summary = func(part, step int, markdown string) {
				steps <- stepReport{path: "/summary", step: part, own: true, body: map[string]any{"step": part, "markdown": markdown},
					refused: func(err error) {
						log.Warn("the coordinator refused a step summary", "part", part, "err", err)
						jl.rec.Annotate(step, logs.LevelWarning, summaryTitle, fmt.Sprintf("the coordinator did not keep the step summary: %v", err))
					}}
			}
		}
		status, kind, exit, ended = a.runSteps(ctx, log, jl.rec, j, ws, caches, lease, func(step int, body map[string]any) {
			if body["status"] == "failed" {
				failedSteps++
			}
			steps <- stepReport{path: "/steps/" + strconv.Itoa(step), step: step, body: body}
		}, summary, later)
	}
	stepsOver.Store(true)
	// With artifacts to keep, the steps' ends are told at once rather than after the
	// upload.
	ending.Store(a.completeSteps && spec.Artifacts == nil && spec.Reports == nil && len(caches) == 0)
	close(steps)
	<-stepsSent
	if !closed(lost) {
		// Whatever the steps' outcome: a failed or timed-out job's reports say what broke.
		// Before the caches and artifacts, which go by the job's outcome: a job whose
		// only failures are quarantined tests succeeds.
		tctx, stop := context.WithTimeout(context.WithoutCancel(ctx), reportFor)
		failing, err := a.keepTestReports(tctx, log, j, ws, jl.rec)
		if err != nil && !errors.Is(err, errLeaseLost) {
			log.Error("keep test reports", "err", err)
			jl.rec.System("test reports: not kept: " + err.Error())
		}
		if err == nil && status == "failed" && kind == "failure" && failedSteps == 1 && context.Cause(ctx) == nil {
			switch a.knownFailures(tctx, log, j, failing, jl.rec) {
			case "success":
				status, kind, exit = "success", "", nil
			case string(pipeline.FailureFlaky):
				kind = string(pipeline.FailureFlaky)
			}
		}
		stop()
	}
	if cause := context.Cause(ctx); len(caches) > 0 && !closed(lost) {
		// A cancelled or timed-out job saves nothing: its files may be half written.
		outcome := status
		if status != "success" && cause != nil {
			outcome = "cancelled or timed out"
		}
		cctx, stop := context.WithTimeout(context.WithoutCancel(ctx), reportFor)
		a.saveCaches(cctx, log, j, ws, caches, outcome, jl.rec)
		stop()
	}
	if (status == "success" || context.Cause(ctx) == nil) && spec.Artifacts.KeptAfter(status) && !closed(lost) {
		// The job's result does not hang on the blob store: an upload that fails goes on
		// in the background, and a registration that fails is told in the log.
		actx, stop := context.WithTimeout(context.WithoutCancel(ctx), reportFor)
		if err := a.keepArtifacts(actx, log, j, ws, jl.rec); err != nil && !errors.Is(err, errLeaseLost) {
			log.Error("keep artifacts", "err", err)
			jl.rec.System("artifacts: not kept: " + err.Error())
		}
		stop()
	}
	if cause := context.Cause(ctx); status != "success" && cause != nil {
		switch {
		case errors.Is(cause, errTimeout):
			status, kind = "failed", "timeout"
			jl.rec.System(fmt.Sprintf("the job timed out after %s", time.Duration(spec.Timeout)))
		case errors.Is(cause, errCancelled), errors.Is(cause, context.Canceled):
			status, kind = "cancelled", ""
		}
	}
	select {
	case <-lost:
		if errors.Is(context.Cause(ctx), errFenced) {
			log.Warn("lease ran out: the job's steps were killed; not reporting")
		} else {
			log.Warn("lease lost: another worker owns the job now; not reporting")
		}
		jl.ship.Abort()
		a.countLog(jl)
		jobEnded("lost")
		_ = os.RemoveAll(ws)
		return nil
	default:
	}
	// Every line is stored before the job is reported complete, so that a reader who
	// sees the job end has seen all of its log: the lines not sent yet go with the
	// completion when the coordinator takes them there and they are few, else before it.
	var lastLines []logs.Line
	if a.completeLogs {
		lastLines = jl.finish(parent, log)
	} else {
		jl.close(parent, log)
	}
	a.countLog(jl)
	body := map[string]any{"status": status}
	if len(lastLines) > 0 {
		if !a.logCommands {
			lastLines = plainLines(lastLines)
		}
		body["log"] = map[string]any{"lines": lastLines}
	}
	if spec.Reports == nil {
		// Nothing for the project's quarantine rule to count (keepTestReports reads only
		// the reports the spec names).
		body["no_tests"] = true
	}
	if len(carried) > 0 {
		body["steps"] = carried
	}
	if len(ended.outputs) > 0 && status != "cancelled" {
		body["outputs"] = ended.outputs
	}
	if ended.environmentURL != nil && status != "cancelled" {
		body["environment_url"] = *ended.environmentURL
	}
	if kind != "" {
		body["failure_kind"] = kind
	}
	if exit != nil {
		body["exit_code"] = *exit
	}
	endHeartbeats()
	var next *carriedClaim
	complete := func() error {
		if !a.carriesClaim() {
			return report("/complete", body)
		}
		// The claim for this slot goes with the completion: one request fewer per job.
		body["claim"] = a.claimBody(1, 0, 0)
		body["token"] = j.Lease.Token
		rctx, stop := context.WithTimeout(reportCtx, reportFor)
		defer stop()
		return a.retrying(rctx, func(ctx context.Context) (err error) {
			next, err = a.c.completeAndClaim(ctx, "/api/v1/agent/jobs/"+j.ID+"/complete", body)
			return err
		})
	}
	err = complete()
	var ae *apiError
	if _, carries := body["log"]; carries && errors.As(err, &ae) && ae.Status == http.StatusBadRequest {
		// The job's result must not hang on its lines: as a refused batch of them would
		// be, they are dropped.
		log.Error("the coordinator refused the log lines the completion carried; the job is reported without them", "err", err)
		delete(body, "log")
		err = complete()
	}
	if err != nil {
		log.Error("report completion", "err", err)
	}
	jobEnded(status)
	log.Info("job finished", "status", status)
	if status == "success" || !a.cfg.KeepFailed {
		later(func() { _ = os.RemoveAll(ws) })
	}
	return next
}

// retryPost posts to the coordinator until it answers, backing off while it is
// unreachable or failing (5xx), until ctx ends. A lease lost or another refusal (4xx) is
// returned at once.
func (a *Agent) retryPost(ctx context.Context, path string, body, out any) error {
	return a.retrying(ctx, func(ctx context.Context) error { return a.c.post(ctx, path, body, out) })
}

// retrying makes call until the coordinator answers it, as retryPost posts.
func (a *Agent) retrying(ctx context.Context, call func(context.Context) error) error {
	for backoff := 500 * time.Millisecond; ; backoff = min(backoff*2, reportBackoffCap) {
		err := call(ctx)
		if err == nil {
			return nil
		}
		a.cfg.Metrics.ReportFailed()
		if errors.Is(err, errLeaseLost) {
			return err
		}
		var ae *apiError
		if errors.As(err, &ae) && ae.Status < 500 {
			return err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return err
		}
	}
}

// runSteps runs the steps in order and returns the job's status, failure kind, the
// exit code of the step that decided it, and the job's outputs and environment url.
// lease is the job's fence, whose deadlines a session that fences itself is told.
//
// A step without an if: runs only while every step before it succeeded; one with an
// if: runs when it holds (always() and failure() run after a failure). A cancel or the
// job's timeout ends the steps at once. What a step appends to $GANTRY_ENV and
// $GANTRY_PATH reaches the steps after it; what it writes to $GANTRY_OUTPUT is its
// outputs (steps.ID.outputs.NAME). A job output that holds a secret the log masks is
// withheld from the job's outputs (withholdSecretOutputs).
//
// The step files are removed by what is given to later, after the job is reported.
func (a *Agent) runSteps(ctx context.Context, log *slog.Logger, rec *logs.Recorder, j claimedJob, ws string, caches []*jobCache,
	lease *fence, report func(step int, body map[string]any), summary func(part, step int, markdown string), later func(func())) (string, string, *int, stepsEnd) {
	spec := j.Spec
	once := map[int]bool{}
	for _, i := range j.OnceDone {
		once[i] = true
	}
	grace := duration(j.Lease.CancelGrace, 10*time.Second)
	skipAll := func(msg string) (string, string, *int, stepsEnd) {
		rec.System(msg)
		for _, st := range spec.Steps {
			report(st.Index, map[string]any{"status": "skipped"})
		}
		return "failed", "failure", nil, stepsEnd{}
	}
	run, host, stepWS := a.cfg.Executor.Run, true, ws
	// collector is the session of an environment whose workspace is a copy of ws, to be
	// brought back before caches and artifacts are read from ws.
	var collector executor.Collector
	// homeCopier is the session of a container whose home the caches' paths under ~
	// are copied out of, from home on the worker's disk.
	var homeCopier executor.HomeCopier
	home := ""
	job, inContainer := a.containerJob(j, ws, grace)
	files, err := a.newStepFiles(ws, inContainer)
	if err != nil {
		log.Error("make the step files", "err", err)
		return skipAll("the worker could not make the step files: " + err.Error())
	}
	later(func() {
		var err error
		if inContainer {
			// In the workspace, which goes with them.
			err = errors.Join(files.remove(), os.RemoveAll(files.runner))
		} else {
			err = a.releaseDirs(files)
		}
		if err != nil {
			log.Warn("remove the step files", "err", err)
		}
	})
	if inContainer {
		sess, end, err := a.beginContainer(ctx, log, rec, job)
		if err != nil {
			log.Error("start the job's container", "image", job.Image, "err", err)
			status, _, code, end := skipAll("the job's container could not start: " + err.Error())
			return status, beginFailureKind(err), code, end
		}
		defer end()
		if f, ok := sess.(executor.Fenced); ok {
			// The environment kills the steps when the worker's fence would, should
			// the worker be dead or frozen then.
			defer lease.watch(f.SetDeadline)()
		}
		run, host, stepWS = sess.Run, false, executor.WorkspacePath
		collector, _ = sess.(executor.Collector)
		if len(caches) > 0 {
			home = a.stepHome(j, ws)
			homeCopier = a.copyHomeIn(ctx, log, rec, sess, home)
		}
		if p, ok := sess.(imagePather); ok {
			files.imagePath = p.ImagePath()
		}
		files.stepDir = path.Join(stepWS, stepFilesInWorkspace)
		j.services = runningServices(spec, sess)
		j.jobContext = jobContext(sess, j.services)
	} else {
		if p, ok := a.cfg.Executor.(workspacePreparer); ok {
			// Steps that run as another user must be able to write their workspace.
			if err := p.PrepareWorkspace(ws); err != nil {
				log.Error("prepare the workspace", "err", err)
				return skipAll("the worker could not prepare the workspace: " + err.Error())
			}
		}
		if len(spec.Services) > 0 {
			svcs, end, err := a.beginHostServices(ctx, log, rec, job)
			if err != nil {
				log.Error("start the job's services", "err", err)
				status, _, code, end := skipAll("the job's services could not start: " + err.Error())
				return status, beginFailureKind(err), code, end
			}
			defer end()
			j.services = svcs.Running()
			j.jobContext = jobContext(svcs, j.services)
		}
	}
	in := stepConditionInput(j)
	in.Steps = map[string]pipeline.StepState{}
	var written []map[string]string
	status, kind := "success", ""
	var exit *int
	fail := func(k string, code *int) {
		if status == "success" {
			status, kind, exit = "failed", k, code
		}
	}
	jobStatus := func() string { return status }
	if err := makeRunnerDir(files, a.cfg.WorkDir, ws, stepWS, inContainer, j); err != nil {
		log.Error("make the runner files", "err", err)
		return skipAll("the worker could not make the step files: " + err.Error())
	}
	acts := newActionRunner(a, j, log, rec, run, files, ws, stepWS, host, grace)
	acts.collector = collector
	sums := newSummaries(files, rec, summary)
	// The summaries of the actions' pres and posts are parts after the last step's, in
	// the order they ran.
	nextPart := 0
	for _, st := range spec.Steps {
		nextPart = max(nextPart, st.Index+1)
	}
	acts.phaseEnded = func(st pipeline.Step, name string) {
		sums.take(nextPart, st.Index, name)
		nextPart++
	}
	record := func(st pipeline.Step, outcome string, outputs map[string]string) {
		if st.ID == "" {
			return
		}
		conclusion := outcome
		if outcome == pipeline.ResultFailed && st.ContinueOnError {
			conclusion = pipeline.ResultSuccess
		}
		in.Steps[st.ID] = pipeline.StepState{Outcome: outcome, Conclusion: conclusion, Outputs: outputs}
	}
	// The pres of the actions the steps use run first, in the order of the steps, as on
	// GitHub: what their with:, env and name read of steps.* is empty then.
	for _, st := range spec.Steps {
		if st.Uses == "" || once[st.Index] || ctx.Err() != nil {
			continue
		}
		env, err := a.stepEnvMap(j, st, stepWS, host, files, in.Steps)
		if err == nil {
			st, err = a.expandStep(j, st, ws, stepWS, env, in.Steps, jobStatus)
		}
		if err != nil {
			// The step fails saying so when it runs.
			continue
		}
		acts.preStep(ctx, st, env, jobStatus, fail)
	}
	for _, st := range spec.Steps {
		span := startStepSpan(ctx, st)
		if once[st.Index] {
			log.Info("step already succeeded in an earlier attempt and runs once; skipping", "step", st.Name)
			rec.System(fmt.Sprintf("step %s: skipped, it runs once and succeeded in an earlier attempt", st.Name))
			report(st.Index, map[string]any{"status": "skipped"})
			endStepSpan(span, "skipped", nil)
			record(st, pipeline.ResultSkipped, nil)
			continue
		}
		if ctx.Err() != nil {
			report(st.Index, map[string]any{"status": "cancelled"})
			endStepSpan(span, "cancelled", nil)
			continue
		}
		in.UpstreamFailed = status != "success"
		if run, why := a.stepShouldRun(st, in, spec); !run {
			rec.System(fmt.Sprintf("step %s: skipped, %s", st.Name, why))
			report(st.Index, map[string]any{"status": "skipped"})
			endStepSpan(span, "skipped", nil)
			record(st, pipeline.ResultSkipped, nil)
			continue
		}
		env, exprErr := a.stepEnvMap(j, st, stepWS, host, files, in.Steps)
		st, err = a.expandStep(j, st, ws, stepWS, env, in.Steps, jobStatus)
		exprErr = errors.Join(exprErr, err)
		report(st.Index, map[string]any{"status": "running"})
		rec.System("step " + st.Name)
		out, errOut := rec.StepWriter(logs.Stdout, st.Index), rec.StepWriter(logs.Stderr, st.Index)
		began := time.Now()
		var res executor.Result
		var outputs map[string]string
		switch {
		case exprErr != nil:
			err = exprErr
		case st.Uses != "":
			done := acts.runStep(ctx, st, in.Steps, env, jobStatus)
			res, err, outputs = done.res, done.err, done.outputs
			if len(outputs) > 0 {
				written = append(written, outputs)
			}
		default:
			res, err = run(ctx, executor.Step{
				Shell: st.Shell, Script: st.Run, Env: envList(env), Dir: ws,
				Stdout: out, Stderr: errOut, Grace: grace, Network: spec.Network, Timeout: time.Duration(st.Timeout),
				Binds: files.binds(),
			})
		}
		a.cfg.Metrics.StepEnded(stepResult(res, err), time.Since(began).Seconds())
		_ = out.Close()
		_ = errOut.Close()
		// Whatever the step's outcome, as GitHub keeps a failed step's summary too.
		sums.take(st.Index, st.Index, st.Name)
		code := res.ExitCode
		if err == nil && !res.Cancelled && st.Uses == "" {
			var ferr error
			if outputs, ferr = files.collect(); ferr != nil {
				rec.System(fmt.Sprintf("step %s: %v", st.Name, ferr))
				if code == 0 {
					code = 1
				}
				outputs = nil
			}
			if len(outputs) > 0 {
				written = append(written, outputs)
			}
		}
		switch {
		case err != nil:
			// An environment lost under the step (its pod evicted) is the job's lost, so
			// retry.on: [lost] retries it.
			kind := executor.RetryKind(err)
			if kind == executor.KindLost {
				log.Error("the job's environment was lost under a step", "step", st.Name, "err", err)
				rec.System(fmt.Sprintf("step %s: the job's environment was lost: %v", st.Name, err))
			} else {
				log.Error("step could not run", "step", st.Name, "err", err)
				rec.System(fmt.Sprintf("step %s could not run: %v", st.Name, err))
				kind = executor.KindFailure
			}
			report(st.Index, map[string]any{"status": "failed"})
			endStepSpan(span, "failed", nil)
			record(st, pipeline.ResultFailed, nil)
			fail(kind, nil)
		case res.Cancelled && errors.Is(context.Cause(ctx), errTimeout):
			// The job's timeout stopped the step: the step failed for it too.
			report(st.Index, map[string]any{"status": "failed", "exit_code": code, "failure_kind": "timeout"})
			endStepSpan(span, "failed", &code)
			return "failed", "timeout", &code, stepsEnd{}
		case res.Cancelled:
			rec.System(fmt.Sprintf("step %s: cancelled", st.Name))
			report(st.Index, map[string]any{"status": "cancelled", "exit_code": code})
			endStepSpan(span, "cancelled", &code)
			return "cancelled", "", &code, stepsEnd{}
		case res.TimedOut:
			report(st.Index, map[string]any{"status": "failed", "exit_code": code, "failure_kind": "timeout"})
			endStepSpan(span, "failed", &code)
			record(st, pipeline.ResultFailed, outputs)
			if !st.ContinueOnError {
				rec.System(fmt.Sprintf("step %s timed out after %s", st.Name, time.Duration(st.Timeout)))
				fail("timeout", &code)
				continue
			}
			rec.System(fmt.Sprintf("step %s timed out after %s; continuing (continue_on_error)", st.Name, time.Duration(st.Timeout)))
		case code != 0:
			report(st.Index, map[string]any{"status": "failed", "exit_code": code})
			endStepSpan(span, "failed", &code)
			record(st, pipeline.ResultFailed, outputs)
			if !st.ContinueOnError {
				rec.System(fmt.Sprintf("step %s failed with exit code %d", st.Name, code))
				fail("failure", &code)
				continue
			}
			rec.System(fmt.Sprintf("step %s failed with exit code %d; continuing (continue_on_error)", st.Name, code))
		default:
			report(st.Index, map[string]any{"status": "success", "exit_code": 0})
			endStepSpan(span, "success", &code)
			record(st, pipeline.ResultSuccess, outputs)
		}
	}
	if ctx.Err() == nil && !acts.runPosts(ctx, jobStatus) {
		fail("failure", nil)
	}
	if ctx.Err() != nil && status == "success" {
		return "cancelled", "", nil, stepsEnd{}
	}
	if collector != nil && ctx.Err() == nil && (spec.Artifacts != nil || len(spec.Caches) > 0) {
		if err := collector.Collect(ctx); err != nil {
			log.Error("copy the workspace back from the job's environment", "err", err)
			rec.System("the worker could not copy the workspace back from the job's environment, so its artifacts and caches are not what the steps made: " + err.Error())
			if executor.RetryKind(err) == executor.KindLost {
				fail(executor.KindLost, nil)
			} else {
				fail(executor.KindFailure, nil)
			}
		}
	}
	if homeCopier != nil && ctx.Err() == nil {
		a.copyHomeOut(ctx, log, rec, homeCopier, home, caches, status)
	}
	outputs := jobOutputs(spec, written)
	if err := a.expandOutputs(j, ws, stepWS, files, outputs, in.Steps, jobStatus); err != nil {
		rec.System("the job's outputs: " + err.Error())
		fail("failure", nil)
	}
	withholdSecretOutputs(rec, outputs)
	if err := pipeline.CheckOutputs(outputs); err != nil {
		rec.System("the job's outputs: " + err.Error())
		fail("failure", nil)
		outputs = nil
	}
	return status, kind, exit, stepsEnd{outputs: outputs, environmentURL: a.environmentURL(rec, j, ws, stepWS, files, in.Steps, jobStatus)}
}

// stepShouldRun decides whether a step runs, and when not says why.
func (a *Agent) stepShouldRun(st pipeline.Step, in pipeline.ConditionInput, spec *pipeline.Job) (bool, string) {
	if st.If == nil {
		if in.UpstreamFailed {
			return false, "a step before it failed"
		}
		return true, ""
	}
	ok, err := st.If.EvalStep(in, spec)
	switch {
	case err != nil:
		return false, fmt.Sprintf("if: %s could not be evaluated: %v", st.If.Text(), err)
	case !ok:
		return false, fmt.Sprintf("if: %s was false", st.If.Text())
	}
	return true, ""
}

// stepConditionInput is what a step's if: reads of its run and the jobs its job needs.
func stepConditionInput(j claimedJob) pipeline.ConditionInput {
	tr := j.Trigger
	in := pipeline.ConditionInput{
		Ref: tr.Ref, Branch: tr.Branch, Tag: tr.Tag, SHA: tr.SHA, Event: tr.Event, Repository: tr.Repository,
		PRNumber: tr.PRNumber, Fork: tr.Fork, Env: j.RunEnv, Inputs: tr.Inputs, Payload: tr.Payload, Actor: tr.Actor, Vars: tr.Vars,
		BaseRef: tr.BaseRef, HeadRef: tr.HeadRef, RunNumber: int(j.RunNumber),
		Needs: map[string]string{}, NeedOutputs: map[string]map[string]string{},
	}
	for name, n := range j.Needs {
		in.Needs[name], in.NeedOutputs[name] = n.Result, n.Outputs
	}
	if w := tr.WorkflowRun; w != nil {
		in.WorkflowRun = pipeline.WorkflowRunValues{ID: w.RunID, Name: w.Name, Number: w.Number, Action: w.Action,
			Conclusion: w.Conclusion, Branch: w.Branch, SHA: w.SHA}
	}
	return in
}

// imagePather is a job's session that knows the PATH its image gives the steps
// ("" when the image sets none).
type imagePather interface {
	ImagePath() string
}

// containerWorkspaces is an executor that keeps a directory for its container jobs'
// workspaces (the docker executor's: one only the worker enters, where set-user-ID bits
// and device files do nothing).
type containerWorkspaces interface {
	WorkspaceDir() string
}

// workspaceParent is where job j's workspace is made: a container job's in the directory
// its executor keeps for them, if it does, so that nothing its container leaves in the
// workspace reaches the other users of the worker's host (a step of a --step-user worker
// included); every other job's in the work dir.
func (a *Agent) workspaceParent(j claimedJob) string {
	if c, ok := a.cfg.Executor.(containerWorkspaces); ok && a.inContainer(j) {
		if dir := c.WorkspaceDir(); dir != "" {
			return dir
		}
	}
	return a.cfg.WorkDir
}

// workspacePreparer is an executor that readies a job's workspace for its steps (one
// that runs them as another user gives it to that user).
type workspacePreparer interface {
	PrepareWorkspace(dir string) error
}

// stepResult names how a step's process ended, for the step metrics.
func stepResult(res executor.Result, err error) string {
	switch {
	case err != nil || res.ExitCode != 0 && !res.Cancelled:
		return "failed"
	case res.Cancelled:
		return "cancelled"
	}
	return "success"
}

// countLog counts an attempt's shipped and dropped log lines once its shipper is done.
func (a *Agent) countLog(jl *jobLog) {
	st := jl.ship.Stats()
	a.cfg.Metrics.LogShipped(st.Acked, st.Dropped)
}

// Features of the coordinator (api: the register answer's features) the worker uses:
// a completion may carry the step reports not yet sent; a claim may start its jobs; a
// completion may carry the next claim, and the log lines not yet sent.
const (
	featureCompleteSteps = "complete.steps"
	featureClaimStart    = "claim.start"
	featureCompleteClaim = "complete.claim"
	featureCompleteLogs  = "complete.logs"
)

// maxCarriedLog is the most log lines, in bytes as NDJSON, a completion carries; more
// are sent before it, in batches of the logs endpoint.
const maxCarriedLog = logs.DefaultMaxBatchBytes

// stepReport is a step's status on its way to the coordinator; step is -1 for the start.
type stepReport struct {
	path string
	step int
	body map[string]any
	// own reports always go in a request of their own, never with the completion.
	own bool
	// refused, when set, is told of an error other than a lost lease.
	refused func(error)
}

// jobLog carries one attempt's output to the coordinator.
type jobLog struct {
	rec  *logs.Recorder
	ship *logs.Shipper
}

// openLog starts the recorder and shipper of a job attempt; the spool lives in the work
// directory.
func (a *Agent) openLog(j claimedJob, log *slog.Logger) (*jobLog, error) {
	send := func(ctx context.Context, lines []logs.Line) (int64, bool, error) {
		var ans struct {
			NextSeq   int64 `json:"next_seq"`
			Truncated bool  `json:"truncated"`
		}
		if !a.logCommands {
			lines = plainLines(lines)
		}
		err := a.c.post(ctx, "/api/v1/agent/jobs/"+j.ID+"/logs", map[string]any{"token": j.Lease.Token, "lines": lines}, &ans)
		var ae *apiError
		switch {
		case errors.Is(err, errLeaseLost):
			return 0, false, logs.ErrStop
		case errors.As(err, &ae) && ae.Status == http.StatusBadRequest:
			// Sending the same batch again cannot help.
			log.Error("the coordinator refused a log batch; the rest of the log is dropped", "err", err)
			return 0, false, logs.ErrStop
		case err != nil:
			return 0, false, err
		}
		return ans.NextSeq, ans.Truncated, nil
	}
	ship, err := logs.NewShipper(send, logs.ShipperOptions{Dir: a.cfg.WorkDir, Logger: log, Linger: a.cfg.ReportLinger})
	if err != nil {
		return nil, err
	}
	return &jobLog{rec: logs.NewRecorder(ship.Add, recorderOptions(j)), ship: ship}, nil
}

// finish is close for a completion that carries the log's last lines: it returns the
// lines not yet sent when they fit in maxCarriedLog, and sends them otherwise.
func (l *jobLog) finish(parent context.Context, log *slog.Logger) []logs.Line {
	ctx, stop := context.WithTimeout(context.WithoutCancel(parent), reportFor)
	defer stop()
	lines, err := l.ship.Finish(ctx, maxCarriedLog)
	if err != nil && !errors.Is(err, logs.ErrStop) {
		log.Warn("not every log line reached the coordinator", "err", err)
	}
	return lines
}

// close waits until every line is stored, for as long as a report would.
func (l *jobLog) close(parent context.Context, log *slog.Logger) {
	ctx, stop := context.WithTimeout(context.WithoutCancel(parent), reportFor)
	defer stop()
	if err := l.ship.Close(ctx); err != nil && !errors.Is(err, logs.ErrStop) {
		log.Warn("not every log line reached the coordinator", "err", err)
	}
}

// stepInherits lists the only variables a step takes from the worker's environment.
// Nothing else of it reaches a step: the worker's environment may hold its register
// token (GANTRY_TOKEN) and whatever its host put there, and a step is someone else's
// code. docs/security.md lists what a step sees.
var stepInherits = []string{"PATH", "HOME", "LANG", "TMPDIR"}

// stepEnv is what a step's process sees, and all of it: the worker's stepInherits, the
// job's and step's env, the run's env over them, the matrix values (GANTRY_MATRIX_*), and
// Gantry's own variables (GANTRY_RUN_ID, GANTRY_RUN_NUMBER, GANTRY_JOB_ID, GANTRY_JOB_NAME, GANTRY_JOB_KEY, GANTRY_ATTEMPT,
// GANTRY_WORKSPACE, GANTRY_IDEMPOTENCY_KEY, and the run's trigger: GANTRY_SHA, GANTRY_REF,
// GANTRY_BRANCH, GANTRY_TAG, GANTRY_EVENT, GANTRY_REPOSITORY, GANTRY_PR_NUMBER, each only
// when it has a value). No credential is among them.
//
// A step in a container (host false) takes nothing of the worker's environment: the
// image has its own PATH and HOME. ws is the workspace as the step sees it.
//
// It has what the steps before left too: the variables appended to $GANTRY_ENV
// (over the job's env, under the step's own), the directories appended to $GANTRY_PATH
// (before PATH, the latest first), GANTRY_OUTPUT, GANTRY_ENV and GANTRY_PATH, and
// ${{ steps.ID... }} put into the step's env values.
func (a *Agent) stepEnv(j claimedJob, st pipeline.Step, ws string, host bool, files *stepFiles, steps map[string]pipeline.StepState) []string {
	vars, _ := a.stepEnvMap(j, st, ws, host, files, steps)
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	return out
}

// stepEnvMap is stepEnv as a map, with the expressions env values keep for the worker
// (pipeline.WorkerExpr) put in; an error says which one could not be evaluated.
func (a *Agent) stepEnvMap(j claimedJob, st pipeline.Step, ws string, host bool, files *stepFiles, steps map[string]pipeline.StepState) (map[string]string, error) {
	vars := map[string]string{}
	for _, k := range stepInherits {
		if v, ok := os.LookupEnv(k); ok && host {
			vars[k] = v
		}
	}
	maps.Copy(vars, a.githubEnv(j, ws, files))
	// written are the values the pipeline's text gives (the job's and the step's env),
	// which are expanded; any other value (what a step wrote to $GANTRY_ENV, the run's
	// env, Gantry's own) is text, never read for references.
	written := map[string]string{}
	for k, v := range j.Spec.Env {
		vars[k], written[k] = v, v
	}
	if files != nil {
		for k, v := range files.addEnv {
			vars[k] = v
			delete(written, k)
		}
	}
	for k, v := range st.Env {
		vars[k], written[k] = v, v
	}
	// The run's env (gantry submit --env) overrides the file's.
	for k, v := range j.RunEnv {
		vars[k] = v
		delete(written, k)
	}
	if files != nil {
		if len(files.addPath) > 0 {
			// Setting PATH replaces the one the step would have had: in a container,
			// the image's (golang's has /usr/local/go/bin), which the session knows, else
			// the usual one.
			base := cmp.Or(vars["PATH"], files.imagePath, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
			vars["PATH"] = strings.Join(append(append([]string(nil), files.addPath...), base), ":")
		}
		maps.Copy(vars, files.vars())
	}
	for _, m := range j.Spec.Matrix {
		vars["GANTRY_MATRIX_"+strings.ToUpper(strings.ReplaceAll(m.Name, "-", "_"))] = m.Value
	}
	key := sha256.Sum256([]byte(j.RunID + "\x00" + j.Key + "\x00" + strconv.Itoa(st.Index)))
	vars["GANTRY_RUN_ID"] = j.RunID
	if j.RunNumber > 0 {
		vars["GANTRY_RUN_NUMBER"] = strconv.FormatInt(j.RunNumber, 10)
	}
	vars["GANTRY_JOB_ID"] = j.ID
	vars["GANTRY_JOB_NAME"] = j.Spec.Name
	vars["GANTRY_JOB_KEY"] = j.Key
	vars["GANTRY_ATTEMPT"] = strconv.Itoa(j.Attempt)
	vars["GANTRY_WORKSPACE"] = ws
	vars["GANTRY_IDEMPOTENCY_KEY"] = hex.EncodeToString(key[:16])
	maps.Copy(vars, triggerEnv(j.Trigger))
	maps.Copy(vars, serviceEnv(j.services))
	for k := range written {
		if _, ok := vars[k]; !ok || vars[k] != written[k] {
			// Gantry's own value won.
			delete(written, k)
		}
	}
	return vars, a.expandEnv(j, vars, written, files, steps)
}

// expandEnv puts in what the env values the pipeline's text gives read (written): the
// job's secrets, the steps so far and the expressions kept for the worker, each value in
// one pass (pipeline.RunValues.Expand) and its expressions read with the env as it is
// before them.
func (a *Agent) expandEnv(j claimedJob, vars, written map[string]string, files *stepFiles, steps map[string]pipeline.StepState) error {
	var names []string
	for k, v := range written {
		if strings.Contains(v, "${{") {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	ws, stepWS := "", vars["GANTRY_WORKSPACE"]
	if files != nil {
		ws = files.ws
	}
	// What an expression reads of env: the values with secrets and steps put in but no
	// expression evaluated, as before. A value read there is a value, never text to scan.
	env := maps.Clone(vars)
	plain := pipeline.RunValues{Steps: steps, Secrets: j.Secrets}
	for _, k := range names {
		env[k], _ = plain.Expand(written[k])
	}
	vals := runValues(steps, j.Secrets, func() *ghaexpr.Context {
		return a.exprContext(j, ws, stepWS, env, nil, stepsContext(steps), func() string { return "success" })
	})
	var errs []error
	for _, k := range names {
		v, err := vals.Expand(written[k])
		if err != nil {
			errs = append(errs, fmt.Errorf("env %s: %w", k, err))
		}
		vars[k] = v
	}
	return errors.Join(errs...)
}

// heartbeat renews the lease on its own goroutine, so that a busy step never delays it.
// A renewal that fails is tried again soon, backing off to half the interval, so that a
// short outage does not let the lease run out; each one that succeeds moves the fence.
// A lost lease ends the job without a report; a cancel asks the job to stop.
func (a *Agent) heartbeat(ctx context.Context, j claimedJob, lease *fence, loseLease func(error)) {
	every := duration(j.Lease.HeartbeatEvery, a.heartbeatEvery)
	ttl := duration(j.Lease.TTL, a.leaseTTL)
	retryMax := max(every/2, 10*time.Millisecond)
	firstRetry := min(250*time.Millisecond, retryMax)
	wait, retry := every, firstRetry
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		var ans struct {
			TTLMillis       int64 `json:"ttl_ms"`
			CancelRequested bool  `json:"cancel_requested"`
		}
		// A request that hangs (its packets dropped) is given up after half an interval
		// and sent again on a new connection, so that one sent into a partition does not
		// hold back the first that could get through; the fence does not wait for it.
		sent := time.Now()
		rctx, stop := context.WithTimeout(ctx, max(every/2, time.Second))
		err := a.c.post(rctx, "/api/v1/agent/jobs/"+j.ID+"/heartbeat", map[string]any{"token": j.Lease.Token}, &ans)
		stop()
		switch {
		case errors.Is(err, errLeaseLost):
			loseLease(errLeaseGone)
			return
		case err != nil && ctx.Err() != nil:
			// The job ended while the heartbeat was on its way: nothing failed.
			return
		case err != nil:
			a.cfg.Metrics.ReportFailed()
			attrs := []any{"job", j.ID, "err", err, "retry_in", retry}
			if left, ok := lease.left(); ok {
				attrs = append(attrs, "lease_left", left.Round(time.Millisecond))
			}
			a.log.Warn("heartbeat failed; the job keeps running while its lease lasts", attrs...)
			wait, retry = retry, min(retry*2, retryMax)
			continue
		}
		lease.renewed(sent, cmp.Or(time.Duration(ans.TTLMillis)*time.Millisecond, ttl))
		wait, retry = every, firstRetry
		if ans.CancelRequested {
			a.cancelJob(j.ID)
		}
	}
}

// closed says whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
