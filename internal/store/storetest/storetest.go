package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// Harness tells the suite how to make stores of one driver.
type Harness struct {
	// NewDSN returns a data source for a fresh, empty database that lives as long as the test.
	NewDSN func(t *testing.T) string
	// NewMigratedDSN, when set, returns a data source for a fresh database that Open has
	// already migrated (a copy of a template, say). Most tests start from it, since
	// migrating costs more than many a test; those that open or migrate a database, or
	// that need it empty, use NewDSN.
	NewMigratedDSN func(t *testing.T) string
	// Open opens (migrating if needed) a store on dsn using clk for every timestamp and lease decision.
	Open func(ctx context.Context, dsn string, clk clock.Clock) (store.Store, error)
	// Replicas says that stores opened on one database share published notices, as
	// coordinator replicas do.
	Replicas bool
	// ExactChangeFeed says that ListJobsChanged lists only the jobs that changed after
	// the run was read, never one again that did not (SQLite's single writer numbers
	// changes in commit order; PostgreSQL's cursor may stay below a change already seen).
	ExactChangeFeed bool
}

// Run runs the whole suite as subtests, each parallel and each on its own NewDSN database.
func Run(t *testing.T, h Harness) {
	if h.NewDSN == nil || h.Open == nil {
		t.Fatal("storetest: Harness needs both NewDSN and Open")
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.fn(t, h)
				})
			}
		})
	}
}

type test struct {
	name string
	fn   func(t *testing.T, h Harness)
}

// groups lists every test of the suite; each file of the package contributes one or more
// groups.
var groups = []struct {
	name  string
	tests []test
}{
	{"CreateRun", createRunTests},
	{"RunNumbers", runNumberTests},
	{"ListRuns", listRunsTests},
	{"ChangeFeed", changeFeedTests},
	{"Claim", claimTests},
	{"ConcurrencyGroup", concurrencyGroupTests},
	{"Lease", leaseTests},
	{"Reap", reapTests},
	{"Retry", retryTests},
	{"Timeout", timeoutTests},
	{"DAG", dagTests},
	{"Steps", stepTests},
	{"Cancel", cancelTests},
	{"Terminal", terminalTests},
	{"Workers", workerTests},
	{"Artifacts", artifactTests},
	{"LogChunks", logChunkTests},
	{"Outbox", outboxTests},
	{"OutboxReports", outboxReportTests},
	{"Notifier", notifierTests},
	{"Crash", crashTests},
	{"Open", openTests},
	{"Reopen", reopenTests},
	{"Stats", statsTests},
	{"Tokens", tokenTests},
	{"ConcurrencyCancel", groupCancelTests},
	{"Projects", projectTests},
	{"Workflows", workflowTests},
	{"WorkflowRun", workflowRunTests},
	{"Schedules", scheduleTests},
	{"Secrets", secretTests},
	{"Variables", variableTests},
	{"Audit", auditTests},
	{"Environments", environmentTests},
	{"Caches", cacheTests},
	{"Quotas", quotaTests},
	{"Outputs", outputTests},
	{"EvaluatedValues", evaluatedTests},
	{"ComputedMatrix", matrixTests},
	{"Members", memberTests},
	{"Annotations", annotationTests},
	{"Summaries", summaryTests},
	{"TestResults", testResultTests},
	{"QuarantineRules", quarantineRuleTests},
	{"Rerun", rerunTests},
}

const (
	// leaseTTL and timeoutGrace are what the suite's claims ask for unless a test says
	// otherwise.
	leaseTTL     = 45 * time.Second
	timeoutGrace = time.Minute
	// timeTolerance absorbs the precision a driver stores timestamps with (PostgreSQL keeps
	// microseconds). The fake clock moves in whole seconds, so only jittered times such as
	// retry_after can have finer parts.
	timeTolerance = time.Millisecond
	// signalWait bounds how long a test waits for a notification before it fails. It is a
	// failure deadline, never a pause: a working driver answers at once.
	signalWait = 10 * time.Second
	// defaultWorker is the worker id of the suite's claims unless a test says otherwise.
	defaultWorker = "worker-1"
)

// epoch is where every fake clock starts: far from the zero time and from the wall clock,
// so a driver that reads time.Now instead of its clock shows up.
var epoch = time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)

// bundle holds what a test needs next to its store.
type bundle struct {
	t   *testing.T
	ctx context.Context
	clk *clock.Fake
	s   store.Store
}

// setup opens a store on a fresh database with a fake clock at epoch and closes it when
// the test ends.
func setup(t *testing.T, h Harness) (store.Store, *bundle) {
	t.Helper()
	ctx := t.Context()
	clk := clock.NewFake(epoch)
	newDSN := h.NewDSN
	if h.NewMigratedDSN != nil {
		newDSN = h.NewMigratedDSN
	}
	s, err := h.Open(ctx, newDSN(t), clk)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return s, &bundle{t: t, ctx: ctx, clk: clk, s: s}
}

// with returns a copy of the bundle that reports to t: rows of a table that share one
// database run as sequential subtests of the test that opened it.
func (b *bundle) with(t *testing.T) *bundle {
	c := *b
	c.t = t
	return &c
}

// compile plans a pipeline definition, failing the test when it does not compile.
func compile(t testing.TB, yaml string) *pipeline.Plan {
	t.Helper()
	p, err := pipeline.Compile([]byte(yaml), pipeline.Options{})
	if err != nil {
		t.Fatalf("compile pipeline: %v\n%s", err, yaml)
	}
	return p
}

// createRun plans yaml and creates a run of it with p (Plan and Definition filled in),
// failing the test unless a new run was created.
func (b *bundle) createRun(yaml string, p store.CreateRunParams) (*store.Run, []*store.Job) {
	b.t.Helper()
	p.Plan = compile(b.t, yaml)
	if p.Definition == nil {
		p.Definition = []byte(yaml)
	}
	run, jobs, created, err := b.s.CreateRun(b.ctx, p)
	if err != nil {
		b.t.Fatalf("CreateRun: %v", err)
	}
	if !created {
		b.t.Fatalf("CreateRun: created = false for a new run")
	}
	if len(jobs) != len(p.Plan.Jobs) {
		b.t.Fatalf("CreateRun returned %d jobs, want %d", len(jobs), len(p.Plan.Jobs))
	}
	return run, jobs
}

// create is createRun in the default project with no parameters.
func (b *bundle) create(yaml string) (*store.Run, []*store.Job) {
	b.t.Helper()
	return b.createRun(yaml, store.CreateRunParams{})
}

func (b *bundle) getRun(id uuid.UUID) *store.Run {
	b.t.Helper()
	r, err := b.s.GetRun(b.ctx, id)
	if err != nil {
		b.t.Fatalf("GetRun(%s): %v", id, err)
	}
	return r
}

func (b *bundle) getJob(id uuid.UUID) *store.Job {
	b.t.Helper()
	j, err := b.s.GetJob(b.ctx, id)
	if err != nil {
		b.t.Fatalf("GetJob(%s): %v", id, err)
	}
	return j
}

func (b *bundle) listJobs(runID uuid.UUID) []*store.Job {
	b.t.Helper()
	js, err := b.s.ListJobs(b.ctx, runID)
	if err != nil {
		b.t.Fatalf("ListJobs(%s): %v", runID, err)
	}
	return js
}

// jobsByKey reads a run's jobs keyed by job key.
func (b *bundle) jobsByKey(runID uuid.UUID) map[string]*store.Job {
	b.t.Helper()
	m := map[string]*store.Job{}
	for _, j := range b.listJobs(runID) {
		m[j.Key] = j
	}
	return m
}

func (b *bundle) listSteps(jobID uuid.UUID) []*store.Step {
	b.t.Helper()
	ss, err := b.s.ListSteps(b.ctx, jobID)
	if err != nil {
		b.t.Fatalf("ListSteps(%s): %v", jobID, err)
	}
	return ss
}

func (b *bundle) countArtifacts(jobID uuid.UUID) int {
	b.t.Helper()
	as, err := b.s.ListArtifacts(b.ctx, jobID)
	if err != nil {
		b.t.Fatalf("ListArtifacts(%s): %v", jobID, err)
	}
	return len(as)
}

// claim claims with p, filling in the suite's worker, lease TTL and grace when p leaves
// them out.
func (b *bundle) claim(p store.ClaimParams) []*store.Claim {
	b.t.Helper()
	cs, err := b.s.Claim(b.ctx, withClaimDefaults(p))
	if err != nil {
		b.t.Fatalf("Claim: %v", err)
	}
	max := p.Max
	if max <= 0 {
		max = 1
	}
	if len(cs) > max {
		b.t.Fatalf("Claim(Max %d) returned %d claims", p.Max, len(cs))
	}
	return cs
}

func withClaimDefaults(p store.ClaimParams) store.ClaimParams {
	if p.WorkerID == "" {
		p.WorkerID = defaultWorker
	}
	if p.LeaseTTL == 0 {
		p.LeaseTTL = leaseTTL
	}
	if p.TimeoutGrace == 0 {
		p.TimeoutGrace = timeoutGrace
	}
	return p
}

// claimOne claims exactly one job for a worker with no labels.
func (b *bundle) claimOne() *store.Claim {
	b.t.Helper()
	cs := b.claim(store.ClaimParams{Max: 1})
	if len(cs) != 1 {
		b.t.Fatalf("Claim returned %d jobs, want 1", len(cs))
	}
	return cs[0]
}

// claimAll claims every queued job the default worker can take.
func (b *bundle) claimAll() []*store.Claim {
	b.t.Helper()
	var all []*store.Claim
	for {
		cs := b.claim(store.ClaimParams{Max: 8})
		if len(cs) == 0 {
			return all
		}
		all = append(all, cs...)
	}
}

// byKey indexes claims of one run by job key.
func byKey(cs []*store.Claim) map[string]*store.Claim {
	m := map[string]*store.Claim{}
	for _, c := range cs {
		m[c.Job.Key] = c
	}
	return m
}

// expectNoClaim fails the test when p claims anything.
func (b *bundle) expectNoClaim(p store.ClaimParams) {
	b.t.Helper()
	if cs := b.claim(p); len(cs) != 0 {
		b.t.Fatalf("Claim returned %d jobs (first %q, %s), want none", len(cs), cs[0].Job.Key, cs[0].Job.Status)
	}
}

func ref(c *store.Claim) store.LeaseRef {
	return store.LeaseRef{JobID: c.Job.ID, Token: c.Lease.Token}
}

// complete ends the claimed attempt with status: a failure has exit code 1 and kind
// failure.
func (b *bundle) complete(c *store.Claim, status store.JobStatus) *store.Job {
	b.t.Helper()
	p := store.CompleteParams{LeaseRef: ref(c), Status: status}
	if status == store.JobFailed {
		p.FailureKind = store.FailureExit
		p.ExitCode = intPtr(1)
	}
	if status == store.JobSuccess {
		p.ExitCode = intPtr(0)
	}
	j, err := b.s.CompleteJob(b.ctx, p)
	if err != nil {
		b.t.Fatalf("CompleteJob(%s, %s): %v", c.Job.Key, status, err)
	}
	return j
}

func (b *bundle) reap() int {
	b.t.Helper()
	n, err := b.s.ReapExpiredLeases(b.ctx)
	if err != nil {
		b.t.Fatalf("ReapExpiredLeases: %v", err)
	}
	return n
}

func (b *bundle) promote() int {
	b.t.Helper()
	n, err := b.s.PromoteRetries(b.ctx)
	if err != nil {
		b.t.Fatalf("PromoteRetries: %v", err)
	}
	return n
}

func (b *bundle) revoke() int {
	b.t.Helper()
	n, err := b.s.RevokeTimedOut(b.ctx)
	if err != nil {
		b.t.Fatalf("RevokeTimedOut: %v", err)
	}
	return n
}

// wantJobStatus fails the test unless the job is in status want.
func (b *bundle) wantJobStatus(id uuid.UUID, want store.JobStatus) *store.Job {
	b.t.Helper()
	j := b.getJob(id)
	if j.Status != want {
		b.t.Fatalf("job %q status = %s, want %s", j.Key, j.Status, want)
	}
	return j
}

// drive claims and completes jobs until none is left to claim, completing each with its
// outcome by key (success when absent), and returns the run's jobs by key.
func (b *bundle) drive(runID uuid.UUID, outcomes map[string]store.JobStatus) map[string]*store.Job {
	b.t.Helper()
	for range 1000 {
		cs := b.claim(store.ClaimParams{Max: 8})
		if len(cs) == 0 {
			return b.jobsByKey(runID)
		}
		for _, c := range cs {
			st := outcomes[c.Job.Key]
			if st == "" {
				st = store.JobSuccess
			}
			b.complete(c, st)
		}
	}
	b.t.Fatal("drive: jobs kept coming after 1000 claims")
	return nil
}

// wantRunDone checks that a run finished with status want and consistent counters.
func (b *bundle) wantRunDone(runID uuid.UUID, want store.RunStatus) *store.Run {
	b.t.Helper()
	r := b.getRun(runID)
	if r.Status != want {
		b.t.Errorf("run status = %s, want %s", r.Status, want)
	}
	if r.JobsFinished != r.JobsTotal {
		b.t.Errorf("run JobsFinished = %d, want JobsTotal %d", r.JobsFinished, r.JobsTotal)
	}
	wantTime(b.t, "run FinishedAt", r.FinishedAt, b.clk.Now())
	return r
}

// wantErr fails the test unless err is one of targets.
func wantErr(t testing.TB, what string, err error, targets ...error) {
	t.Helper()
	for _, target := range targets {
		if errors.Is(err, target) {
			return
		}
	}
	names := make([]string, len(targets))
	for i, target := range targets {
		names[i] = target.Error()
	}
	t.Errorf("%s: err = %v, want errors.Is one of [%s]", what, err, strings.Join(names, ", "))
}

// wantTime checks a stored timestamp against the fake clock's value, within the precision
// a driver may store. A zero want means the timestamp must be unset.
func wantTime(t testing.TB, what string, got, want time.Time) {
	t.Helper()
	if want.IsZero() {
		if !got.IsZero() {
			t.Errorf("%s = %v, want unset", what, got)
		}
		return
	}
	if d := got.Sub(want); got.IsZero() || d > timeTolerance || d < -timeTolerance {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// jobState summarises everything about a job that a rejected call must leave alone.
func jobState(j *store.Job) string {
	exit := "nil"
	if j.ExitCode != nil {
		exit = fmt.Sprint(*j.ExitCode)
	}
	return fmt.Sprintf("status=%s attempt=%d redeliveries=%d token=%q worker=%q lease=%d deadline=%d retry_after=%d started=%d finished=%d exit=%s kind=%q cancel=%v",
		j.Status, j.Attempt, j.Redeliveries, j.LeaseToken, j.WorkerID, unixNano(j.LeaseExpiresAt),
		unixNano(j.Deadline), unixNano(j.RetryAfter), unixNano(j.StartedAt), unixNano(j.FinishedAt),
		exit, j.FailureKind, j.CancelRequested)
}

// stepsState summarises a job's steps for the same purpose.
func stepsState(ss []*store.Step) string {
	var b strings.Builder
	for _, s := range ss {
		exit := "nil"
		if s.ExitCode != nil {
			exit = fmt.Sprint(*s.ExitCode)
		}
		fmt.Fprintf(&b, "[%d %s attempt=%d status=%s exit=%s started=%d finished=%d once=%v] ",
			s.Index, s.Name, s.Attempt, s.Status, exit, unixNano(s.StartedAt), unixNano(s.FinishedAt), s.OnceSucceeded)
	}
	return b.String()
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func intPtr(i int) *int { return &i }

// ids returns the ids of jobs, in order.
func jobIDs(js []*store.Job) []uuid.UUID {
	out := make([]uuid.UUID, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

func runIDs(rs []*store.Run) []uuid.UUID {
	out := make([]uuid.UUID, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// sortIDs sorts ids in place and returns them.
func sortIDs(ids []uuid.UUID) []uuid.UUID {
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return ids
}

// sortedCopy returns s sorted, leaving s alone.
func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// drain empties a notification channel without waiting.
func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// waitSignal fails the test unless ch receives within signalWait.
func waitSignal(t testing.TB, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(signalWait):
		t.Fatalf("%s: no wake-up within %v", what, signalWait)
	}
}

// singleJob is the smallest pipeline: one job with one step.
const singleJob = `
name: single
jobs:
  only:
    steps:
      - run: "true"
`
