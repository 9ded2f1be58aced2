package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// labelRefresh bounds how long a label set first used on another replica can go unseen
// by this one's claims.
const labelRefresh = time.Second

type candidate struct {
	id, projectID    uuid.UUID
	lane             int
	vtime, queuedAt  int64
	group            string
	milliCPU, memory int64
	timeoutUS        int64
}

func (a candidate) before(b candidate) bool {
	if a.lane != b.lane {
		return a.lane < b.lane
	}
	if a.vtime != b.vtime {
		return a.vtime < b.vtime
	}
	if a.queuedAt != b.queuedAt {
		return a.queuedAt < b.queuedAt
	}
	return a.id.String() < b.id.String()
}

// Claim implements store.Queue.
//
// Concurrent claims that search for the same jobs (the same labels, free resources,
// projects and lease terms) are served together: the first opens a group, those that
// arrive while its write waits for the writer join it, and one search and one assigning
// statement serve every member, each getting jobs of its own. Many workers woken by the
// same queued jobs then cost one round of statements, not one each.
func (e *Engine) Claim(ctx context.Context, p store.ClaimParams) ([]*store.Claim, error) {
	if p.Max <= 0 {
		p.Max = 1
	}
	if p.LeaseTTL <= 0 {
		return nil, fmt.Errorf("claim: lease TTL must be positive: %w", store.ErrInvalid)
	}
	if p.FreeMilliCPU <= 0 {
		p.FreeMilliCPU = math.MaxInt64
	}
	if p.FreeMemory <= 0 {
		p.FreeMemory = math.MaxInt64
	}
	m := &claimMember{ctx: ctx, p: p, done: make(chan struct{})}
	if g, leader := e.claimGroups.join(m); leader {
		// The group's write runs whatever becomes of the leader's request: the other
		// members wait for it, and each hands back what it cannot take.
		err := e.write(context.WithoutCancel(ctx), func(t *tx) error { return t.claimFor(g) })
		var loadErr error
		if err == nil {
			loadErr = e.loadClaims(context.WithoutCancel(ctx), g.claims())
		}
		g.finish(err, loadErr)
	}
	<-m.done
	claims, err := m.claims, m.err
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		// The claims committed but cannot be handed out (most often the claimer went
		// away meanwhile): give the jobs back now rather than when their leases expire.
		if len(claims) > 0 {
			if _, rerr := e.ReleaseClaims(context.WithoutCancel(ctx), leaseRefs(claims)); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
		return nil, fmt.Errorf("claim for worker %s: %w", p.WorkerID, err)
	}
	return claims, nil
}

// loadClaims reads what the worker needs of the claims' runs and specs (trigger,
// environment, steps), after the commit and off the one writer: it never changes. One
// read of each serves a whole group of claims.
func (e *Engine) loadClaims(ctx context.Context, claims []*store.Claim) error {
	if len(claims) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, txTimeout)
	defer cancel()
	jobs := make([]*store.Job, len(claims))
	for i, c := range claims {
		jobs[i] = c.Job
	}
	if err := e.loadRuns(ctx, claims); err != nil {
		return err
	}
	return e.loadSpecs(ctx, jobs)
}

// claimFor claims jobs for every member of g that still waits: one search for them all,
// then each member in turn takes the best candidates that fit it, and one statement
// assigns every job taken.
func (t *tx) claimFor(g *claimGroup) error {
	e := t.e
	members := g.take()
	var live []*claimMember
	total := 0
	for _, m := range members {
		// An operation may run twice (its first run rolled back): start clean.
		m.claims = nil
		if m.ctx.Err() == nil {
			live = append(live, m)
			total += m.p.Max
		}
	}
	if len(live) == 0 {
		return nil
	}
	p := live[0].p // what the members search for is the same
	worker := make(map[string]bool, len(p.Labels))
	for _, l := range p.Labels {
		worker[l] = true
	}
	now := e.clock.Now()
	if err := t.refreshLabels(labelRefresh); err != nil {
		return err
	}
	quota, err := t.claimQuota()
	if err != nil {
		return err
	}
	full := quota.full()
	sets := e.labels.subsetsOf(worker)
	searched := fmt.Sprintf("%q %d %d %q %v", sets, p.FreeMilliCPU, p.FreeMemory, p.Projects, full)
	if t.batch.searchedEmpty(searched) {
		return nil
	}
	// A credential scoped to projects only sees their jobs.
	scope, scopeArgs := "", []any(nil)
	if len(p.Projects) > 0 {
		scope = ` AND project_id IN (SELECT id FROM projects WHERE name IN (` + inList(len(p.Projects)) + `))`
		for _, name := range p.Projects {
			scopeArgs = append(scopeArgs, name)
		}
	}
	// Projects at their limit of concurrent jobs are left out of the search.
	if len(full) > 0 {
		scope += ` AND project_id NOT IN (` + inList(len(full)) + `)`
		for _, id := range full {
			scopeArgs = append(scopeArgs, id)
		}
	}
	// The search locks what it finds where claimers run in parallel (SKIP LOCKED), and
	// the others skip it until this transaction ends: there it asks first for as many
	// jobs as the members want, and only when some of those could not be taken (a quota,
	// a concurrency group, the members' resources) and more may wait, for four times as
	// many. A single writer locks nothing and asks for four times as many at once.
	limit := total * 4
	if e.d.SkipLocked != "" {
		limit = total
	}
	// Quotas and concurrency groups hold across the members: a group is taken once, and
	// a project's room is what all of them together may use.
	groups := map[string]bool{}
	owner := map[uuid.UUID]*claimMember{}
	type room struct {
		cpu, mem int64
		n        int
	}
	rooms := make([]room, len(live))
	for i := range rooms {
		rooms[i] = room{cpu: p.FreeMilliCPU, mem: p.FreeMemory}
	}
	// What each member's worker has left of the capacity it registered, read when a
	// candidate first asks for resources; shared by members of the same worker.
	var left map[string]*capacity
	seen := map[uuid.UUID]bool{}
	var chosen []any
	for {
		var cands []candidate
		more := false // a search found as many as it asked for
		for _, set := range sets {
			args := append(append([]any{set, p.FreeMilliCPU, p.FreeMemory}, scopeArgs...), limit)
			rows, err := t.query(`SELECT id, project_id, lane, vtime, queued_at, concurrency_group, milli_cpu, memory, timeout_us
			FROM jobs WHERE status = 'queued' AND label_set = ? AND milli_cpu <= ? AND memory <= ?`+scope+`
			ORDER BY lane, vtime, queued_at, id LIMIT ?`+e.d.SkipLocked, args...)
			if err != nil {
				return fmt.Errorf("find queued jobs: %w", err)
			}
			found := 0
			for rows.Next() {
				var c candidate
				if err := rows.Scan(&c.id, &c.projectID, &c.lane, &c.vtime, &c.queuedAt, &c.group, &c.milliCPU, &c.memory, &c.timeoutUS); err != nil {
					rows.Close()
					return fmt.Errorf("find queued jobs: %w", err)
				}
				found++
				// A second search finds the first one's jobs again (this transaction's own
				// locks do not make it skip them); the members have looked at those.
				if !seen[c.id] {
					seen[c.id] = true
					cands = append(cands, c)
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("find queued jobs: %w", err)
			}
			more = more || found == limit
		}
		if len(seen) == 0 {
			t.batch.foundNothing(searched)
			return nil
		}
		sort.Slice(cands, func(i, j int) bool { return cands[i].before(cands[j]) })

		taken := make([]bool, len(cands))
		for mi, m := range live {
			r := &rooms[mi]
			for i, c := range cands {
				if r.n == m.p.Max {
					break
				}
				if taken[i] || c.milliCPU > r.cpu || c.memory > r.mem {
					continue
				}
				if left == nil && (c.milliCPU > 0 || c.memory > 0) {
					if left, err = t.capacityLeft(live); err != nil {
						return err
					}
				}
				wr := left[m.p.WorkerID]
				if wr != nil && (c.milliCPU > wr.cpu || c.memory > wr.mem) {
					continue
				}
				ok, err := quota.allows(c.projectID)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
				if c.group != "" {
					gk := c.projectID.String() + "/" + c.group
					if groups[gk] {
						continue
					}
					free, err := t.groupFree(c, gk)
					if err != nil {
						return err
					}
					if !free {
						continue
					}
					groups[gk] = true
				}
				quota.use(c.projectID)
				if c.milliCPU > 0 {
					r.cpu -= c.milliCPU
				}
				if c.memory > 0 {
					r.mem -= c.memory
				}
				if wr != nil {
					wr.cpu -= c.milliCPU
					wr.mem -= c.memory
				}
				taken[i] = true
				owner[c.id] = m
				chosen = append(chosen, c.id)
				r.n++
			}
		}
		if len(chosen) == total || !more || limit > total {
			break
		}
		limit = total * 4
	}
	if len(chosen) == 0 {
		return nil
	}
	chosen = padded(chosen)
	// One statement assigns them all. Each lease token is a fresh random prefix, one per
	// member, followed by the job's id: unguessable, and different for every lease.
	expires := now.Add(p.LeaseTTL)
	status, started := store.JobAssigned, int64(0)
	if p.Start {
		status, started = store.JobRunning, us(now)
	}
	tokens, workers, whoArgs := "?", "?", []any(nil)
	if len(live) == 1 {
		whoArgs = []any{uuid.New().String() + "/", p.WorkerID}
	} else {
		prefixes := make(map[*claimMember]string, len(live))
		for _, m := range live {
			prefixes[m] = uuid.New().String() + "/"
		}
		var tokenArgs, workerArgs []any
		for _, id := range chosen {
			m := owner[id.(uuid.UUID)]
			tokenArgs = append(tokenArgs, id, prefixes[m])
			workerArgs = append(workerArgs, id, m.p.WorkerID)
		}
		tokens, workers = caseOfID(len(chosen)), caseOfID(len(chosen))
		whoArgs = append(tokenArgs, workerArgs...)
	}
	args := append(append(append([]any{string(status)}, whoArgs...), us(expires), us(now.Add(p.TimeoutGrace)), started), chosen...)
	rows, err := t.query(`UPDATE jobs SET status = ?, attempt = attempt + 1,
		lease_token = `+tokens+` || CAST(id AS TEXT), worker_id = `+workers+`, lease_expires_at = ?, deadline = ? + timeout_us,
		started_at = ?, exit_code = NULL, failure_kind = ''
		WHERE id IN (`+inList(len(chosen))+`) AND status = 'queued' RETURNING `+jobCols, args...)
	if err != nil {
		return fmt.Errorf("assign jobs: %w", err)
	}
	var claims []*store.Claim
	for rows.Next() {
		j, err := scanJobRow(rows, nil)
		if err != nil {
			rows.Close()
			return fmt.Errorf("assign jobs: %w", err)
		}
		c := &store.Claim{Job: j, Lease: store.Lease{Token: j.LeaseToken, ExpiresAt: expires}}
		claims = append(claims, c)
		m := owner[j.ID]
		m.claims = append(m.claims, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("assign jobs: %w", err)
	}
	runIDs := map[uuid.UUID]bool{}
	var runArgs []any
	for _, c := range claims {
		if c.Job.Attempt > 1 {
			if _, err := t.exec(`UPDATE steps SET status = 'pending', attempt = ?, exit_code = NULL, failure_kind = '', started_at = 0, finished_at = 0
				WHERE job_id = ?`, c.Job.Attempt, c.Job.ID); err != nil {
				return fmt.Errorf("reset steps of job %s: %w", c.Job.ID, err)
			}
			if c.OnceDone, err = t.onceDone(c.Job.ID); err != nil {
				return err
			}
		}
		if !runIDs[c.Job.RunID] {
			runIDs[c.Job.RunID] = true
			runArgs = append(runArgs, c.Job.RunID)
		}
	}
	nowUS := us(now)
	runArgs = padded(runArgs)
	runRows, err := t.query(`UPDATE runs SET status = 'running', started_at = ? WHERE id IN (`+e.runsInOrder(len(runArgs), "status = 'pending'")+`)
		AND status = 'pending' RETURNING id, notify`, append([]any{nowUS}, runArgs...)...)
	if err != nil {
		return fmt.Errorf("start runs: %w", err)
	}
	var reported, inProgress []uuid.UUID
	runNotify := map[uuid.UUID]int{} // what the runs that started report
	for runRows.Next() {
		var id uuid.UUID
		var notify int
		if err := runRows.Scan(&id, &notify); err != nil {
			runRows.Close()
			return fmt.Errorf("start runs: %w", err)
		}
		runNotify[id] = notify
		if notify&notifyStatus != 0 {
			reported = append(reported, id)
		}
		if notify&notifyWorkflowRunInProgress != 0 {
			inProgress = append(inProgress, id)
		}
	}
	runRows.Close()
	if err := runRows.Err(); err != nil {
		return fmt.Errorf("start runs: %w", err)
	}
	// A run that started reports running with the claim that started it.
	for _, id := range reported {
		if err := t.reportRun(id, notifyStatus, nowUS); err != nil {
			return err
		}
	}
	for _, id := range inProgress {
		if err := t.reportWorkflowRun(id, pipeline.WorkflowRunInProgress, nowUS); err != nil {
			return err
		}
	}
	if p.Start {
		// Jobs started by their claim report running, as StartJob's do: one read of
		// what each run reports, however many of its jobs the claim took, and none for a
		// run the claim started, whose flags its start returned.
		started := map[uuid.UUID][]uuid.UUID{}
		for _, c := range claims {
			started[c.Job.RunID] = append(started[c.Job.RunID], c.Job.ID)
		}
		for runID, jobs := range started {
			notify, ok := runNotify[runID]
			var err error
			switch {
			case !ok:
				err = t.reportJobsChanged(runID, jobs, nowUS)
			case notify&notifyJobStatus != 0:
				err = t.reportJobStatuses(runID, jobs, nowUS)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// capacity is what a worker has left to give jobs.
type capacity struct{ cpu, mem int64 }

// capacityLeft reads what each member's worker has left of the capacity it registered,
// whatever its claim says is free (a worker that counted wrong, or claims twice at
// once): the registered capacity less what the jobs it holds ask for. A worker that
// registered no limit (or did not register) is absent, and held to what its claims say;
// one without a limit of memory or CPU gets math.MaxInt64 of it.
//
// Where claims run in parallel transactions it first locks the capacity of the workers
// that registered a limit, so that two claims of one worker count each other's jobs:
// the second reads what the first assigned once it has committed. When none did, there
// is nothing more to read.
func (t *tx) capacityLeft(members []*claimMember) (map[string]*capacity, error) {
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.p.WorkerID
	}
	// In one order, so that two transactions locking some of the same workers cannot
	// each wait for the other.
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if t.e.d.LockWorkers != nil {
		n, err := t.e.d.LockWorkers(t.ctx, t.tx, ids)
		if err != nil {
			return nil, fmt.Errorf("lock the capacity of workers: %w", err)
		}
		if n == 0 {
			return map[string]*capacity{}, nil // none registered a limit
		}
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	args = padded(args)
	rows, err := t.query(`SELECT w.id, w.milli_cpu, w.memory, COALESCE(SUM(j.milli_cpu), 0), COALESCE(SUM(j.memory), 0)
		FROM workers w LEFT JOIN jobs j ON j.worker_id = w.id AND j.status IN ('assigned', 'running')
		WHERE w.id IN (`+inList(len(args))+`) AND (w.milli_cpu > 0 OR w.memory > 0)
		GROUP BY w.id, w.milli_cpu, w.memory`, args...)
	if err != nil {
		return nil, fmt.Errorf("read the capacity left to workers: %w", err)
	}
	defer rows.Close()
	left := map[string]*capacity{}
	for rows.Next() {
		var (
			id                         string
			cpu, mem, heldCPU, heldMem int64
		)
		if err := rows.Scan(&id, &cpu, &mem, &heldCPU, &heldMem); err != nil {
			return nil, fmt.Errorf("read the capacity left to workers: %w", err)
		}
		c := &capacity{cpu: math.MaxInt64, mem: math.MaxInt64}
		if cpu > 0 {
			c.cpu = cpu - heldCPU
		}
		if mem > 0 {
			c.mem = mem - heldMem
		}
		left[id] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the capacity left to workers: %w", err)
	}
	return left, nil
}

// caseOfID returns "CASE id WHEN ? THEN ? ... END" for n jobs: a value per job, in one
// statement.
func caseOfID(n int) string {
	var b strings.Builder
	b.WriteString("CASE id")
	for range n {
		b.WriteString(" WHEN ? THEN ?")
	}
	b.WriteString(" END")
	return b.String()
}

// leaseRefs names the leases of claims.
func leaseRefs(claims []*store.Claim) []store.LeaseRef {
	out := make([]store.LeaseRef, len(claims))
	for i, c := range claims {
		out[i] = store.LeaseRef{JobID: c.Job.ID, Token: c.Lease.Token}
	}
	return out
}

// loadRuns fills in each claim's run: its id, project, name, trigger and environment.
func (e *Engine) loadRuns(ctx context.Context, claims []*store.Claim) error {
	if len(claims) == 0 {
		return nil
	}
	ids := map[uuid.UUID]bool{}
	var args []any
	for _, c := range claims {
		if !ids[c.Job.RunID] {
			ids[c.Job.RunID] = true
			args = append(args, c.Job.RunID)
		}
	}
	// Only what the worker is told: the definition, read with the whole run, is large.
	args = padded(args)
	rows, err := e.readRows(ctx, `SELECT id, project_id, number, name, trigger, env FROM runs WHERE id IN (`+inList(len(args))+`)`, args...)
	if err != nil {
		return fmt.Errorf("read runs: %w", err)
	}
	defer rows.Close()
	runs := map[uuid.UUID]*store.Run{}
	for rows.Next() {
		var (
			r            store.Run
			trigger, env string
		)
		if err := rows.Scan(&r.ID, &r.ProjectID, &r.Number, &r.Name, &trigger, &env); err != nil {
			return fmt.Errorf("read runs: %w", err)
		}
		if err := json.Unmarshal([]byte(trigger), &r.Trigger); err != nil {
			return fmt.Errorf("decode trigger of run %s: %w", r.ID, err)
		}
		if err := json.Unmarshal([]byte(env), &r.Env); err != nil {
			return fmt.Errorf("decode env of run %s: %w", r.ID, err)
		}
		runs[r.ID] = &r
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read runs: %w", err)
	}
	for _, c := range claims {
		c.Run = runs[c.Job.RunID]
	}
	return nil
}

// groupFree reports whether c may take its concurrency group: no job of the group holds
// it, and c is the group's oldest waiter.
func (t *tx) groupFree(c candidate, key string) (bool, error) {
	if t.e.d.GroupLock != nil {
		ok, err := t.e.d.GroupLock(t.ctx, t.tx, key)
		if err != nil || !ok {
			return false, err
		}
	}
	var busy int
	err := t.row(`SELECT COUNT(*) FROM jobs WHERE project_id = ? AND concurrency_group = ? AND status IN ('assigned', 'running')`,
		c.projectID, c.group).Scan(&busy)
	if err != nil {
		return false, fmt.Errorf("check concurrency group %q: %w", c.group, err)
	}
	if busy > 0 {
		return false, nil
	}
	var oldest uuid.UUID
	err = t.row(`SELECT id FROM jobs WHERE project_id = ? AND concurrency_group = ? AND status = 'queued'
		ORDER BY queued_at, id LIMIT 1`, c.projectID, c.group).Scan(&oldest)
	if err != nil {
		return false, fmt.Errorf("check concurrency group %q: %w", c.group, err)
	}
	return oldest == c.id, nil
}

func (t *tx) onceDone(jobID uuid.UUID) ([]int, error) {
	rows, err := t.query(`SELECT idx FROM steps WHERE job_id = ? AND once_succeeded = TRUE ORDER BY idx`, jobID)
	if err != nil {
		return nil, fmt.Errorf("read once steps of job %s: %w", jobID, err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var i int
		if err := rows.Scan(&i); err != nil {
			return nil, fmt.Errorf("read once steps of job %s: %w", jobID, err)
		}
		out = append(out, i)
	}
	return out, rows.Err()
}

// leaseError explains why a lease check changed nothing: the job is unknown, or the token
// is not its current one.
func (t *tx) leaseError(jobID uuid.UUID) error {
	var one int
	err := t.row(`SELECT 1 FROM jobs WHERE id = ?`, jobID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("job %s: %w", jobID, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("look up job %s: %w", jobID, err)
	}
	return fmt.Errorf("job %s: %w", jobID, store.ErrLeaseLost)
}

// StartJob implements store.Queue.
func (e *Engine) StartJob(ctx context.Context, l store.LeaseRef) error {
	return e.write(ctx, func(t *tx) error {
		now := us(e.clock.Now())
		var runID uuid.UUID
		err := t.row(`UPDATE jobs SET status = 'running', started_at = ?
			WHERE id = ? AND lease_token = ? AND lease_token <> '' AND status = 'assigned' RETURNING run_id`, now, l.JobID, l.Token).Scan(&runID)
		if err == nil {
			return t.reportJobsChanged(runID, []uuid.UUID{l.JobID}, now)
		}
		if !isNoRows(err) {
			return fmt.Errorf("start job %s: %w", l.JobID, err)
		}
		// Started already (a redelivered start): it reported running then.
		res, err := t.exec(`UPDATE jobs SET status = 'running', started_at = ?
			WHERE id = ? AND lease_token = ? AND lease_token <> '' AND status = 'running'`, now, l.JobID, l.Token)
		if err != nil {
			return fmt.Errorf("start job %s: %w", l.JobID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return t.leaseError(l.JobID)
		}
		return nil
	})
}

// SetJobName implements store.Queue.
func (e *Engine) SetJobName(ctx context.Context, l store.LeaseRef, name string) error {
	if name == "" || len(name) > pipeline.MaxJobNameBytes || !utf8.ValidString(name) {
		return fmt.Errorf("set name of job %s: a name of 1 to %d bytes of UTF-8: %w", l.JobID, pipeline.MaxJobNameBytes, store.ErrInvalid)
	}
	return e.write(ctx, func(t *tx) error {
		res, err := t.exec(`UPDATE jobs SET evaluated_name = ?
			WHERE id = ? AND lease_token = ? AND lease_token <> '' AND status IN ('assigned', 'running')`, name, l.JobID, l.Token)
		if err != nil {
			return fmt.Errorf("set name of job %s: %w", l.JobID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return t.leaseError(l.JobID)
		}
		return nil
	})
}

// Heartbeat implements store.Queue.
func (e *Engine) Heartbeat(ctx context.Context, p store.HeartbeatParams) (store.HeartbeatResult, error) {
	if p.TTL <= 0 {
		return store.HeartbeatResult{}, fmt.Errorf("heartbeat: TTL must be positive: %w", store.ErrInvalid)
	}
	var res store.HeartbeatResult
	err := e.write(ctx, func(t *tx) error {
		expires := e.clock.Now().Add(p.TTL)
		err := t.row(`UPDATE jobs SET lease_expires_at = ?
			WHERE id = ? AND lease_token = ? AND lease_token <> '' AND status IN ('assigned', 'running')
			RETURNING cancel_requested`, us(expires), p.JobID, p.Token).Scan(&res.CancelRequested)
		if errors.Is(err, sql.ErrNoRows) {
			return t.leaseError(p.JobID)
		}
		if err != nil {
			return fmt.Errorf("heartbeat job %s: %w", p.JobID, err)
		}
		res.ExpiresAt = expires
		return nil
	})
	return res, err
}

// UpdateStep implements store.Queue.
func (e *Engine) UpdateStep(ctx context.Context, p store.UpdateStepParams) error {
	if err := checkStep(p.StepUpdate); err != nil {
		return err
	}
	return e.write(ctx, func(t *tx) error {
		var attempt int
		err := t.row(`SELECT attempt FROM jobs WHERE id = ? AND lease_token = ? AND lease_token <> '' AND status IN ('assigned', 'running')`,
			p.JobID, p.Token).Scan(&attempt)
		if errors.Is(err, sql.ErrNoRows) {
			return t.leaseError(p.JobID)
		}
		if err != nil {
			return fmt.Errorf("update step of job %s: %w", p.JobID, err)
		}
		return t.updateStep(p.JobID, attempt, p.StepUpdate, e.clock.Now())
	})
}

func checkStep(u store.StepUpdate) error {
	switch u.Status {
	case store.StepFailed:
		switch u.FailureKind {
		case store.FailureNone, store.FailureExit, store.FailureTimeout:
			return nil
		}
		return fmt.Errorf("update step: failure kind %q: %w", u.FailureKind, store.ErrInvalid)
	case store.StepPending, store.StepRunning, store.StepSuccess, store.StepSkipped, store.StepCancelled:
		if u.FailureKind != store.FailureNone {
			return fmt.Errorf("update step: a %s step has no failure kind (got %q): %w", u.Status, u.FailureKind, store.ErrInvalid)
		}
		return nil
	}
	return fmt.Errorf("update step: unknown status %q: %w", u.Status, store.ErrInvalid)
}

// updateStep records a step's status in attempt of job; the caller checked the lease.
func (t *tx) updateStep(job uuid.UUID, attempt int, u store.StepUpdate, at time.Time) error {
	return t.changeStep(job, attempt, netSteps([]store.StepUpdate{u})[0], at)
}

// updateSteps records a completion's step reports: one statement per step, whatever
// the number of reports about it.
func (t *tx) updateSteps(job uuid.UUID, attempt int, us []store.StepUpdate, at time.Time) error {
	for _, c := range netSteps(us) {
		if err := t.changeStep(job, attempt, c, at); err != nil {
			return err
		}
	}
	return nil
}

// stepChange is what a sequence of reports about one step, made at one time, leaves:
// the last report's status, exit code and failure kind, a start if any report said
// running, an end time as the last report says, and a success if any report said so.
type stepChange struct {
	last      store.StepUpdate
	running   bool // some report said running: the step started now
	ended     bool // some report ended it: a step never seen running started now too
	succeeded bool
}

// netSteps folds reports about the same step into one change each, in the order the
// steps were first reported. Applying the change is the same as applying the reports one
// after another at the same time.
func netSteps(us []store.StepUpdate) []stepChange {
	out := make([]stepChange, 0, len(us))
	at := map[int]int{}
	for _, u := range us {
		i, ok := at[u.Index]
		if !ok {
			i = len(out)
			at[u.Index] = i
			out = append(out, stepChange{})
		}
		c := &out[i]
		c.last = u
		switch u.Status {
		case store.StepRunning:
			c.running = true
		case store.StepPending:
		default:
			c.ended = true
		}
		c.succeeded = c.succeeded || u.Status == store.StepSuccess
	}
	return out
}

func (t *tx) changeStep(job uuid.UUID, attempt int, c stepChange, at time.Time) error {
	u := c.last
	var exit any
	if u.ExitCode != nil {
		exit = *u.ExitCode
	}
	now := us(at)
	var started, unstarted, finished int64
	if c.running {
		started = now
	}
	if c.ended {
		unstarted = now
	}
	if u.Status != store.StepPending && u.Status != store.StepRunning {
		finished = now
	}
	kind := u.FailureKind
	if u.Status == store.StepFailed && kind == store.FailureNone {
		kind = store.FailureExit
	}
	res, err := t.exec(`UPDATE steps SET status = ?, exit_code = ?, failure_kind = ?, attempt = ?,
		started_at = CASE WHEN CAST(? AS BIGINT) <> 0 THEN ? WHEN started_at = 0 THEN ? ELSE started_at END,
		finished_at = ?,
		once_succeeded = CASE WHEN once = TRUE AND ? THEN TRUE ELSE once_succeeded END
		WHERE job_id = ? AND idx = ?`,
		string(u.Status), exit, string(kind), attempt, started, started, unstarted, finished,
		c.succeeded, job, u.Index)
	if err != nil {
		return fmt.Errorf("update step %d of job %s: %w", u.Index, job, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("job %s has no step %d: %w", job, u.Index, store.ErrInvalid)
	}
	return nil
}

// CompleteJob implements store.Queue.
func (e *Engine) CompleteJob(ctx context.Context, p store.CompleteParams) (*store.Job, error) {
	switch p.Status {
	case store.JobSuccess:
		p.FailureKind = store.FailureNone
	case store.JobFailed:
		if p.FailureKind == store.FailureNone {
			p.FailureKind = store.FailureExit
		}
		// Lost is a worker's too: the environment of the job (its pod) went under it.
		if p.FailureKind != store.FailureExit && p.FailureKind != store.FailureTimeout && p.FailureKind != store.FailureLost &&
			p.FailureKind != store.FailureFlaky {
			return nil, fmt.Errorf("complete job: failure kind %q: %w", p.FailureKind, store.ErrInvalid)
		}
	case store.JobCancelled:
		p.FailureKind = store.FailureCancelled
	default:
		return nil, fmt.Errorf("complete job: status %q is not an end of an attempt: %w", p.Status, store.ErrInvalid)
	}
	for _, u := range p.Steps {
		if err := checkStep(u); err != nil {
			return nil, err
		}
	}
	if err := pipeline.CheckOutputs(p.Outputs); err != nil {
		return nil, fmt.Errorf("complete job %s: %w: %w", p.JobID, err, store.ErrInvalid)
	}
	if p.EnvironmentURL != nil {
		if err := pipeline.CheckEnvironmentURL(*p.EnvironmentURL); err != nil {
			return nil, fmt.Errorf("complete job %s: %w: %w", p.JobID, err, store.ErrInvalid)
		}
	}
	var exit any
	if p.ExitCode != nil {
		exit = *p.ExitCode
	}
	var job *store.Job
	err := e.write(ctx, func(t *tx) error {
		job = nil
		if p.Status == store.JobSuccess {
			var err error
			job, err = t.succeed(p, exit, e.clock.Now())
			return err
		}
		j, err := t.lockJob(p.JobID)
		if err != nil {
			return err
		}
		if j.leaseToken == "" || j.leaseToken != p.Token || !j.status.Leased() {
			return fmt.Errorf("job %s: %w", p.JobID, store.ErrLeaseLost)
		}
		now := e.clock.Now()
		if err := t.updateSteps(p.JobID, j.attempt, p.Steps, now); err != nil {
			return err
		}
		switch {
		case p.Status == store.JobFailed && p.FailureKind == store.FailureLost:
			// The reaper's rule: lost is not the job's fault.
			again, err := t.requeueLost(j, now)
			if err != nil {
				return err
			}
			if again {
				if job, err = scanJobRow(t.row(`SELECT `+jobCols+` FROM jobs WHERE id = ?`, j.id), nil); err != nil {
					return fmt.Errorf("read requeued job %s: %w", j.id, err)
				}
				return nil
			}
		case p.Status == store.JobFailed:
			job, err = t.retryLater(j, p.FailureKind, exit, now)
			if err != nil || job != nil {
				return err
			}
		}
		if err := t.setOutputs(p.JobID, j.attempt, p.Outputs); err != nil {
			return err
		}
		if p.EnvironmentURL != nil {
			if err := t.setEnvironmentURL(p.JobID, *p.EnvironmentURL); err != nil {
				return err
			}
		}
		job, err = t.end(j, p.Status, p.FailureKind, exit, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("complete job %s: %w", p.JobID, err)
	}
	return job, nil
}

// succeed ends a leased job as a success. A success is never retried, so unlike the other
// ends it need not read the job first: one statement checks the lease and ends the job,
// and returns what the DAG's advance needs.
func (t *tx) succeed(p store.CompleteParams, exit any, now time.Time) (*store.Job, error) {
	var upstreamFailed, hasDependents bool
	job, err := scanJobRow(scanAlso{t.row(`UPDATE jobs SET status = 'success', failure_kind = '', exit_code = ?, finished_at = ?,
		lease_token = '', worker_id = '', lease_expires_at = 0, deadline = 0
		WHERE id = ? AND lease_token = ? AND lease_token <> '' AND status IN ('assigned', 'running')
		RETURNING `+jobCols+`, upstream_failed, has_dependents`, exit, us(now), p.JobID, p.Token),
		[]any{&upstreamFailed, &hasDependents}}, nil)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, t.leaseError(p.JobID)
	}
	if err != nil {
		return nil, fmt.Errorf("end job %s: %w", p.JobID, err)
	}
	if err := t.updateSteps(p.JobID, job.Attempt, p.Steps, now); err != nil {
		return nil, err
	}
	if err := t.setOutputs(p.JobID, job.Attempt, p.Outputs); err != nil {
		return nil, err
	}
	if p.EnvironmentURL != nil {
		if err := t.setEnvironmentURL(p.JobID, *p.EnvironmentURL); err != nil {
			return nil, err
		}
		job.EnvironmentURL = *p.EnvironmentURL
	}
	// The job was leased (the statement says so), which is what quotaFreed asks.
	t.quotaFreed(&jobState{status: store.JobRunning, projectID: job.ProjectID})
	t.ended = append(t.ended, ended{id: job.ID, runID: job.RunID, status: store.JobSuccess,
		upstreamFailed: upstreamFailed, noDependents: !hasDependents})
	return job, nil
}

// scanAlso scans a row's leading columns into what its caller asks for and the columns
// after them into also.
type scanAlso struct {
	s    scanner
	also []any
}

func (s scanAlso) Scan(dest ...any) error { return s.s.Scan(append(dest, s.also...)...) }

// lockJob reads a job's state for an update of it, with the lock that update takes, as
// lockRun does.
func (t *tx) lockJob(id uuid.UUID) (*jobState, error) {
	j, err := scanState(t.row(`SELECT `+stateCols+` FROM jobs WHERE id = ?`+t.e.d.ForNoKeyUpdate, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("job %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read job %s: %w", id, err)
	}
	return j, nil
}

// retryLater makes a failed attempt retrying when the job's policy retries this kind of
// failure and attempts are left. The wait is full-jitter exponential backoff: uniform
// between zero and the policy's delay for the next attempt. It returns the job's row when it did, nil when the failure is final.
func (t *tx) retryLater(j *jobState, kind store.FailureKind, exit any, now time.Time) (*store.Job, error) {
	userAttempts := j.attempt - j.redeliveries
	if !j.retry.Retries(pipeline.FailureKind(kind)) || userAttempts >= j.maxAttempts || j.cancelRequested {
		return nil, nil
	}
	ceiling := j.retry.Delay(userAttempts + 1)
	wait := time.Duration(t.e.rand() * float64(ceiling))
	if err := t.keepAttempt(j.id, keptAttempt{status: store.JobFailed, kind: kind, exit: exit, finished: us(now)}, store.CauseRetry, ""); err != nil {
		return nil, err
	}
	job, err := scanJobRow(t.row(`UPDATE jobs SET status = 'retrying', retry_after = ?, failure_kind = ?, exit_code = ?,
		lease_token = '', worker_id = '', lease_expires_at = 0, deadline = 0
		WHERE id = ? RETURNING `+jobCols, us(now.Add(wait)), string(kind), exit, j.id), nil)
	if err != nil {
		return nil, fmt.Errorf("schedule retry of job %s: %w", j.id, err)
	}
	t.quotaFreed(j)
	return job, nil
}

// ReleaseClaims implements store.Queue.
func (e *Engine) ReleaseClaims(ctx context.Context, leases []store.LeaseRef) (int, error) {
	if len(leases) == 0 {
		return 0, nil
	}
	released := 0
	err := e.write(ctx, func(t *tx) error {
		released = 0
		now := e.clock.Now()
		for _, l := range leases {
			j, err := t.lockJob(l.JobID)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if l.Token == "" || j.leaseToken != l.Token || !j.status.Leased() {
				continue // renewed by nobody, but finished or taken back since
			}
			released++
			if j.cancelRequested {
				if _, err := t.end(j, store.JobCancelled, store.FailureCancelled, nil, now); err != nil {
					return fmt.Errorf("release job %s: %w", j.id, err)
				}
				continue
			}
			// The job keeps its vtime and queued_at: it goes back to the place in the
			// queue it had, ahead of jobs queued after it. The attempt never ran, so it is
			// taken back, and so is the steps' attempt the claim set.
			if _, err := t.exec(`UPDATE jobs SET status = 'queued', attempt = attempt - 1, retry_after = 0,
				lease_token = '', worker_id = '', lease_expires_at = 0, deadline = 0, started_at = 0
				WHERE id = ? AND lease_token = ?`, j.id, l.Token); err != nil {
				return fmt.Errorf("release job %s: %w", j.id, err)
			}
			if j.attempt > 1 {
				if _, err := t.exec(`UPDATE steps SET attempt = ? WHERE job_id = ? AND attempt = ?`, j.attempt-1, j.id, j.attempt); err != nil {
					return fmt.Errorf("release steps of job %s: %w", j.id, err)
				}
			}
			t.markQueued()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("release %d claims: %w", len(leases), err)
	}
	return released, nil
}

// setEnvironmentURL keeps the url a job's end gave its environment.
func (t *tx) setEnvironmentURL(id uuid.UUID, url string) error {
	if _, err := t.exec(`UPDATE jobs SET environment_url = ? WHERE id = ?`, url, id); err != nil {
		return fmt.Errorf("keep the environment url of job %s: %w", id, err)
	}
	return nil
}

// setOutputs keeps a job's outputs, replacing an earlier attempt's; none removes them.
// Only a completion writes outputs and attempts only grow, so a first attempt has no
// earlier outputs to remove.
func (t *tx) setOutputs(id uuid.UUID, attempt int, outputs map[string]string) error {
	if len(outputs) == 0 {
		if attempt <= 1 {
			return nil
		}
		if _, err := t.exec(`DELETE FROM job_outputs WHERE job_id = ?`, id); err != nil {
			return fmt.Errorf("clear outputs of job %s: %w", id, err)
		}
		return nil
	}
	if _, err := t.exec(`INSERT INTO job_outputs (job_id, outputs) VALUES (?, ?)
		ON CONFLICT (job_id) DO UPDATE SET outputs = excluded.outputs`, id, mustJSON(outputs)); err != nil {
		return fmt.Errorf("keep outputs of job %s: %w", id, err)
	}
	return nil
}
