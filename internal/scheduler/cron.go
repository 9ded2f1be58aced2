package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/source"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/trigger"
	"github.com/google/uuid"
)

// CronStore is the part of the store that schedules use.
type CronStore interface {
	ListProjects(ctx context.Context) ([]*store.Project, error)
	ListWorkflows(ctx context.Context, p store.ListWorkflowsParams) ([]*store.Workflow, error)
	ScheduleTicks(ctx context.Context, projectID uuid.UUID) (map[string]time.Time, error)
	SkipTick(ctx context.Context, projectID uuid.UUID, tick store.ScheduleTick) (bool, error)
	CreateRun(ctx context.Context, p store.CreateRunParams) (*store.Run, []*store.Job, bool, error)
	// What workflow_run needs besides: the run whose activity it tells, its project, and
	// the record of what the project's pipeline file listens for.
	GetRun(ctx context.Context, id uuid.UUID) (*store.Run, error)
	GetProjectByName(ctx context.Context, name string) (*store.Project, error)
	store.WorkflowRunListeners
}

// Defaults for CronConfig.
const (
	// DefaultCronEvery is how often schedules are looked at: well within
	// trigger.OnTimeWindow, so a tick is fired on time even when a pass fails once.
	DefaultCronEvery = 15 * time.Second
	// DefaultCronFetchTimeout bounds one project's fetch and read in a pass.
	DefaultCronFetchTimeout = time.Minute
)

// CronConfig configures Cron.
type CronConfig struct {
	Store  CronStore
	Clock  clock.Clock
	Logger *slog.Logger
	// Every is the time between passes (DefaultCronEvery).
	Every time.Duration
	// MirrorsDir holds the coordinator's git mirrors, shared with webhook intake.
	MirrorsDir string
	// Credentials, when set, opens a project's repository credential from its secrets
	// (a private repository); nil fetches every repository without one.
	Credentials func(ctx context.Context, p *store.Project) (source.Credentials, error)
	// FetchTimeout bounds reaching one project's repository (DefaultCronFetchTimeout).
	FetchTimeout time.Duration
	// Limits are passed to pipeline.Compile.
	Limits pipeline.Limits
	// Pin, when set, pins the actions a run's plan uses before the run is made
	// (actions.Resolver.Pin); a tick whose actions cannot be resolved is tried again on
	// the next pass.
	Pin func(ctx context.Context, plan *pipeline.Plan) (*pipeline.Plan, error)
	// Workflows, when set, reads the reusable workflows a pipeline calls: those of its
	// repository with read (nil for a registered workflow, which has none), others from
	// the actions source (actions.Resolver.Workflows). Without it a call is an error.
	// A file is compiled once per commit (or version), so a call's ref is resolved then.
	Workflows func(ctx context.Context, read func(file string) ([]byte, error)) pipeline.WorkflowLoader
	// Passed, when set, is told the outcome of each pass of Run once it is over (tests
	// wait on it; it must not block).
	Passed func(PassResult)
	// PublicURL is where people reach the dashboard (http://host:port): a run's
	// github.event.workflow_run.html_url starts with it.
	PublicURL string
}

// PassResult is what one pass over the schedules did.
type PassResult struct {
	Fired   []uuid.UUID // the runs created
	Skipped int         // ticks given up under missed: skip
	Lost    int         // ticks another replica took first
	Shared  int         // ticks of a schedule whose definition had run for that tick (or a later one) already
	Capped  int         // scheduled workflows that did not fire: their project has more than trigger.MaxScheduledWorkflows
	Err     error       // the first failure; the pass went on past it
}

// Cron fires the runs of schedules: the on: schedule of each repository project's
// pipeline file on its default branch's tip, and of each enabled registered workflow.
// It keeps only a cache of compiled files; which ticks were handled lives in the store,
// where taking a tick is a compare-and-swap in the transaction that creates its run, so
// every replica may run a Cron and each tick fires once.
type Cron struct {
	cfg CronConfig

	mu    sync.Mutex
	files map[uuid.UUID]*cachedFile // by project
	flows map[uuid.UUID]*cachedFile // by workflow, for its version
	// seen holds, by project, then pipeline file (file:PATH), then schedule key, when
	// this coordinator first read each schedule of a file (see sighted).
	seen map[uuid.UUID]map[string]map[string]time.Time
}

// cachedFile is a definition compiled once per commit (or workflow version), so an
// unchanged branch costs one ResolveRef a pass.
type cachedFile struct {
	at   string // the sha, or the workflow version
	def  []byte
	plan *pipeline.Plan
	err  error // why it has no plan; logged once
	// message and author are the commit's (a project file's), for the runs list.
	message, author string
}

// NewCron returns a Cron with cfg's zero fields set to their defaults.
func NewCron(cfg CronConfig) *Cron {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Every <= 0 {
		cfg.Every = DefaultCronEvery
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = DefaultCronFetchTimeout
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	return &Cron{cfg: cfg, files: map[uuid.UUID]*cachedFile{}, flows: map[uuid.UUID]*cachedFile{},
		seen: map[uuid.UUID]map[string]map[string]time.Time{}}
}

// Run makes a pass at once and then every cfg.Every until ctx ends.
func (c *Cron) Run(ctx context.Context) {
	for {
		// The next pass's timer is set before this one, so a test that advances a fake
		// clock after being told of a pass always finds it set.
		next := c.cfg.Clock.After(c.cfg.Every)
		res := c.Pass(ctx)
		if res.Err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("schedules: pass failed; trying again next pass", "err", res.Err)
		}
		if c.cfg.Passed != nil {
			c.cfg.Passed(res)
		}
		select {
		case <-ctx.Done():
			return
		case <-next:
		}
	}
}

// scheduleSource is one definition whose schedules a pass looks at.
type scheduleSource struct {
	key      string // prefixes its schedules' keys: file:PATH or workflow:ID
	file     *cachedFile
	workflow *store.Workflow
}

// Pass looks at every schedule once, at the clock's now, and fires those due.
func (c *Cron) Pass(ctx context.Context) PassResult {
	var res PassResult
	fail := func(err error) {
		if res.Err == nil {
			res.Err = err
		}
	}
	projects, err := c.cfg.Store.ListProjects(ctx)
	if err != nil {
		fail(fmt.Errorf("list projects: %w", err))
		return res
	}
	flows, err := c.cfg.Store.ListWorkflows(ctx, store.ListWorkflowsParams{EnabledOnly: true})
	if err != nil {
		fail(fmt.Errorf("list workflows: %w", err))
		return res
	}
	byProject := map[uuid.UUID][]*store.Workflow{}
	for _, wf := range flows {
		byProject[wf.ProjectID] = append(byProject[wf.ProjectID], wf)
	}
	for _, p := range projects {
		if ctx.Err() != nil {
			fail(ctx.Err())
			return res
		}
		c.passProject(ctx, p, byProject[p.ID], &res, fail)
	}
	c.forget(projects, flows)
	return res
}

// forget drops the compiled files of projects and workflows that are gone (or disabled),
// so the cache holds only what the next pass may use.
func (c *Cron) forget(projects []*store.Project, flows []*store.Workflow) {
	keepP := make(map[uuid.UUID]bool, len(projects))
	for _, p := range projects {
		keepP[p.ID] = true
	}
	keepW := make(map[uuid.UUID]bool, len(flows))
	for _, wf := range flows {
		keepW[wf.ID] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.files {
		if !keepP[id] {
			delete(c.files, id)
		}
	}
	for id := range c.seen {
		if !keepP[id] {
			delete(c.seen, id)
		}
	}
	for id := range c.flows {
		if !keepW[id] {
			delete(c.flows, id)
		}
	}
}

func (c *Cron) passProject(ctx context.Context, p *store.Project, flows []*store.Workflow, res *PassResult, fail func(error)) {
	log := c.cfg.Logger.With("project", p.Name)
	var sources []scheduleSource
	var tip source.Ref
	var tipFile *cachedFile             // the pipeline file at tip, with the commit's message
	read := map[string]*pipeline.Plan{} // the pipeline file read this pass, nil when invalid
	// A project with a repository runs its schedules at the default branch's tip.
	hasRepo, repoOK := p.RepoURL != "" && p.DefaultBranch != "", false
	if hasRepo {
		f, ref, err := c.projectFile(ctx, p)
		switch {
		case err != nil:
			log.Warn("schedules: cannot read the default branch's pipeline file", "branch", p.DefaultBranch, "err", err)
			fail(err)
		default:
			tip, repoOK, tipFile = ref, true, f
			if err := c.syncFileListeners(ctx, p, f, log); err != nil {
				// The record stays as it was until a pass can write it.
				log.Warn("schedules: cannot record what the pipeline file listens for with workflow_run", "err", err)
				fail(err)
			}
			src := scheduleSource{key: "file:" + pipelinePath(p), file: f}
			read[src.key] = nil
			if f != nil {
				read[src.key] = f.plan
				sources = append(sources, src)
			}
		}
	}
	born := c.sighted(p.ID, read, c.cfg.Clock.Now())
	var scheduled, over int
	for _, wf := range flows {
		if hasRepo && !repoOK {
			// Its run would check out the default branch, which cannot be reached now:
			// the tick waits for the next pass rather than run without the code.
			continue
		}
		f := c.workflowFile(ctx, wf, log)
		if f == nil || f.plan.On == nil || len(f.plan.On.Schedule) == 0 {
			continue
		}
		// Registration refuses more; a project may still hold more when they were
		// registered at once, or before the cap: the first by name fire, the others are logged.
		if scheduled++; scheduled > trigger.MaxScheduledWorkflows {
			over++
			log.Warn("schedules: the project has more scheduled workflows than a project may have; this one does not fire",
				"workflow", wf.ID, "name", wf.Name, "cap", trigger.MaxScheduledWorkflows)
			continue
		}
		sources = append(sources, scheduleSource{key: "workflow:" + wf.ID.String(), file: f, workflow: wf})
	}
	res.Capped += over
	if !hasSchedules(sources) {
		return
	}
	ticks, err := c.cfg.Store.ScheduleTicks(ctx, p.ID)
	if err != nil {
		fail(fmt.Errorf("schedule ticks of project %q: %w", p.Name, err))
		return
	}
	now := c.cfg.Clock.Now()
	seen := map[string]bool{}
	for _, src := range sources {
		if src.file.plan.On == nil {
			continue
		}
		// The schedule whose run this pass took each tick of the definition, by tick.
		took := map[time.Time]string{}
		for _, s := range src.file.plan.On.Schedule {
			key := scheduleKey(src.key, s)
			if seen[key] {
				continue // the same line twice in one file is one schedule
			}
			seen[key] = true
			since := born[key]
			if wf := src.workflow; wf != nil && ticks[key].IsZero() {
				// The store records when a workflow last changed, not when each of its
				// cron lines came: a new or changed line is a key that never fired, and
				// came with the last change at the latest.
				since = wf.UpdatedAt
			}
			d, err := trigger.Due(s, ticks[key], since, now)
			if err != nil {
				log.Warn("schedules: cannot decide a schedule", "schedule", key, "err", err)
				continue
			}
			if d.Tick.IsZero() {
				continue
			}
			tick := store.ScheduleTick{Key: key, At: d.Tick}
			if !d.Fire {
				won, err := c.cfg.Store.SkipTick(ctx, p.ID, tick)
				if err != nil {
					fail(fmt.Errorf("skip tick of %q: %w", key, err))
					continue
				}
				if won {
					res.Skipped++
					log.Info("schedules: tick given up", "schedule", key, "reason", d.Reason)
				}
				continue
			}
			// One tick of a definition starts one run, however many of its schedules
			// fall on it: the run takes the tick for the whole definition (src.key) in
			// the store, and each schedule then records the tick as handled.
			at := d.Tick.UTC()
			if by, ok := took[at]; ok || !ticks[src.key].Before(d.Tick) {
				if !ok {
					by = "an earlier pass"
				}
				won, err := c.cfg.Store.SkipTick(ctx, p.ID, tick)
				if err != nil {
					fail(fmt.Errorf("record tick of %q: %w", key, err))
					continue
				}
				if won {
					res.Shared++
					log.Debug("schedules: the definition already ran for this tick or a later one", "schedule", key, "tick", d.Tick, "run_by", by)
				}
				continue
			}
			plan := src.file.plan
			if c.cfg.Pin != nil {
				pinned, err := c.cfg.Pin(ctx, plan)
				if err != nil {
					// The tick stays untaken: the next pass tries again.
					fail(fmt.Errorf("schedule %q: %w", key, err))
					continue
				}
				plan = pinned
			}
			took[at] = key
			params := store.CreateRunParams{
				Project: p.Name, Tick: &store.ScheduleTick{Key: src.key, At: d.Tick}, Definition: src.file.def, Plan: plan,
				Trigger: store.Trigger{Event: string(trigger.KindSchedule)},
			}
			atTip(&params, repoOK, tip, tipFile, p.RepoURL, src.workflow)
			run, _, _, err := c.cfg.Store.CreateRun(ctx, params)
			switch {
			case errors.Is(err, store.ErrConflict):
				res.Lost++
				log.Debug("schedules: another replica fired the tick", "schedule", key, "tick", d.Tick)
			case err != nil:
				fail(fmt.Errorf("fire %q: %w", key, err))
				continue
			default:
				res.Fired = append(res.Fired, run.ID)
				log.Info("schedules: fired", "schedule", key, "run", run.ID, "sha", params.Trigger.SHA, "reason", d.Reason)
			}
			// The tick is the definition's now; the schedule's own record moves with it
			// (a coordinator that stops in between finds the definition's tick taken
			// on its next pass, and records it then).
			if _, err := c.cfg.Store.SkipTick(ctx, p.ID, tick); err != nil {
				fail(fmt.Errorf("record tick of %q: %w", key, err))
			}
		}
	}
}

// sighted records the schedules of each pipeline file read this pass (by source key; a
// nil plan for an invalid file, which has none) and returns, by schedule key, when this
// coordinator first read each of them: at, for one new to a file it had read before, and
// zero for one found at its first read of the file since it started, which may be older
// than the coordinator (only the store could tell, and it does not record it). A file not
// read this pass is forgotten, so its next read is a first read. No record says when a
// line came into a file: at is the first read after the push, so a push within a pass
// before a tick may miss that tick, but a schedule never fires for a tick before it.
func (c *Cron) sighted(projectID uuid.UUID, read map[string]*pipeline.Plan, at time.Time) map[string]time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	before := c.seen[projectID]
	files := make(map[string]map[string]time.Time, len(read))
	born := map[string]time.Time{}
	for src, plan := range read {
		old, known := before[src]
		keys := map[string]time.Time{}
		if plan != nil && plan.On != nil {
			for _, s := range plan.On.Schedule {
				key := scheduleKey(src, s)
				first, ok := old[key]
				if !ok && known {
					first = at
				}
				keys[key], born[key] = first, first
			}
		}
		files[src] = keys
	}
	if len(files) == 0 {
		delete(c.seen, projectID)
	} else {
		c.seen[projectID] = files
	}
	return born
}

func hasSchedules(sources []scheduleSource) bool {
	for _, s := range sources {
		if s.file.plan != nil && s.file.plan.On != nil && len(s.file.plan.On.Schedule) > 0 {
			return true
		}
	}
	return false
}

// scheduleKey names a schedule within its project by where it is declared and what it
// says, so that a changed cron line or zone is a new schedule with no past.
func scheduleKey(src string, s pipeline.Schedule) string {
	tz := s.Timezone
	if tz == "" {
		tz = "UTC"
	}
	return src + " " + s.Cron + " " + tz
}

func pipelinePath(p *store.Project) string {
	if p.PipelinePath == "" {
		return store.DefaultPipelinePath
	}
	return p.PipelinePath
}

// projectFile resolves the project's default branch and returns its pipeline file there,
// compiled; nil (and no error) when there is no file or it does not compile, which is
// logged once per commit.
func (c *Cron) projectFile(ctx context.Context, p *store.Project) (*cachedFile, source.Ref, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.FetchTimeout)
	defer cancel()
	var creds source.Credentials
	if c.cfg.Credentials != nil {
		var err error
		if creds, err = c.cfg.Credentials(ctx, p); err != nil {
			return nil, source.Ref{}, fmt.Errorf("project %q: %w", p.Name, err)
		}
	}
	m, err := source.Open(ctx, source.Config{Dir: c.cfg.MirrorsDir, URL: p.RepoURL, Credentials: creds, Logger: c.cfg.Logger})
	if err != nil {
		return nil, source.Ref{}, fmt.Errorf("open the mirror of project %q: %w", p.Name, err)
	}
	defer m.Close()
	tip, err := m.ResolveRef(ctx, "refs/heads/"+p.DefaultBranch)
	if err != nil {
		return nil, source.Ref{}, fmt.Errorf("project %q: %w", p.Name, err)
	}
	c.mu.Lock()
	f := c.files[p.ID]
	c.mu.Unlock()
	file := pipelinePath(p)
	at := tip.SHA + ":" + file
	if f == nil || f.at != at {
		f = &cachedFile{at: at}
		// Only shown in the runs list: a commit that cannot be read leaves them empty.
		f.message, f.author, _ = m.Commit(ctx, tip.SHA)
		var opts pipeline.Options
		def, err := m.ReadFile(ctx, tip.SHA, file)
		switch {
		case errors.Is(err, source.ErrNotFound):
			f.err = fmt.Errorf("no %s at %s", file, tip.SHA)
		case err != nil:
			return nil, source.Ref{}, fmt.Errorf("project %q: %w", p.Name, err)
		default:
			f.def = def
			opts = pipeline.Options{Limits: c.cfg.Limits, Path: file}
			if c.cfg.Workflows != nil {
				read := func(name string) ([]byte, error) {
					data, err := m.ReadFile(ctx, tip.SHA, name)
					if errors.Is(err, source.ErrNotFound) {
						return nil, fmt.Errorf("there is no %s at %s", name, tip.SHA)
					}
					return data, err
				}
				opts.Workflows = &readFailures{WorkflowLoader: c.cfg.Workflows(ctx, read)}
			}
			if f.plan, f.err = pipeline.Compile(def, opts); f.err != nil {
				c.cfg.Logger.Warn("schedules: the default branch's pipeline file is invalid; its schedules wait for a valid one",
					"project", p.Name, "file", file, "sha", tip.SHA, "err", f.err)
			}
		}
		if !failedToRead(opts.Workflows) {
			// A reusable workflow that could not be fetched is tried again on the next
			// pass, rather than hold the commit's schedules back until the next commit.
			c.mu.Lock()
			c.files[p.ID] = f
			c.mu.Unlock()
		}
	}
	if f.plan == nil {
		return nil, tip, nil
	}
	return f, tip, nil
}

// workflowFile returns the workflow's definition compiled, once per version; nil when it
// does not compile (under limits tighter than when it was stored), logged once.
func (c *Cron) workflowFile(ctx context.Context, wf *store.Workflow, log *slog.Logger) *cachedFile {
	at := fmt.Sprint(wf.Version)
	c.mu.Lock()
	f := c.flows[wf.ID]
	c.mu.Unlock()
	if f == nil || f.at != at {
		// Compiled without the lock held: a reusable workflow it calls may be fetched.
		f = &cachedFile{at: at, def: wf.Definition}
		opts := pipeline.Options{Limits: c.cfg.Limits}
		if c.cfg.Workflows != nil {
			fetch, cancel := context.WithTimeout(ctx, c.cfg.FetchTimeout)
			defer cancel()
			opts.Workflows = &readFailures{WorkflowLoader: c.cfg.Workflows(fetch, nil)}
		}
		if f.plan, f.err = pipeline.Compile(wf.Definition, opts); f.err != nil {
			log.Warn("schedules: a workflow's definition no longer compiles", "workflow", wf.ID, "version", wf.Version, "err", f.err)
		}
		if !failedToRead(opts.Workflows) {
			c.mu.Lock()
			c.flows[wf.ID] = f
			c.mu.Unlock()
		}
	}
	if f.plan == nil {
		return nil
	}
	return f
}

// readFailures notes whether a WorkflowLoader failed to read a file, which a later pass
// may read: a compile that failed then is not kept.
type readFailures struct {
	pipeline.WorkflowLoader
	failed bool
}

func (r *readFailures) LocalWorkflow(file string) ([]byte, error) {
	data, err := r.WorkflowLoader.LocalWorkflow(file)
	r.failed = r.failed || err != nil
	return data, err
}

func (r *readFailures) RemoteWorkflow(owner, repo, file, ref string) ([]byte, string, error) {
	data, commit, err := r.WorkflowLoader.RemoteWorkflow(owner, repo, file, ref)
	r.failed = r.failed || err != nil
	return data, commit, err
}

// failedToRead says whether the loader of a compile failed to read a file.
func failedToRead(w pipeline.WorkflowLoader) bool {
	r, ok := w.(*readFailures)
	return ok && r.failed
}

// atTip makes params a run of the default branch's tip (when the project has a repository,
// hasRepo) and of wf when the definition is a registered workflow. A run of the project's
// file read at the tip in the mirror counts as the branch's; a registered workflow's steps
// are whoever registered it's, not the branch's.
func atTip(params *store.CreateRunParams, hasRepo bool, tip source.Ref, tipFile *cachedFile, cloneURL string, wf *store.Workflow) {
	if hasRepo {
		params.Trigger.Ref, params.Trigger.SHA, params.Trigger.CloneURL = tip.Name, tip.SHA, cloneURL
		params.Trigger.Branch = strings.TrimPrefix(tip.Name, "refs/heads/")
		if tipFile != nil {
			params.Trigger.SetCommit(tipFile.message, tipFile.author)
		}
		if wf == nil {
			params.Trigger.Verified = store.RefFromRepository
		}
	}
	if wf != nil {
		params.Trigger.WorkflowID, params.Trigger.WorkflowVersion = wf.ID.String(), wf.Version
		if params.Plan.Name == "" {
			named := *params.Plan
			named.Name = wf.Name
			params.Plan = &named
		}
	}
}
