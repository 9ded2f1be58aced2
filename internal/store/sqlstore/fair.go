package sqlstore

import (
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// vtimeScale is how far a project's virtual time advances per job at weight 1; a project
// of weight w advances vtimeScale/w per job, so while projects are all backlogged each is
// dispatched in proportion to its weight.
const vtimeScale = 1_000_000

// fairStart returns the first of consecutive virtual start times for a project's jobs
// entering a lane, and the step between them (vtimeScale over the project's weight).
// This is start-time fair queueing: a project's next job
// starts no earlier than the lane's clock (the earliest start still waiting) and after
// the project's own latest waiting job, so a burst of many jobs from one project is
// interleaved with other projects' jobs instead of being served first, while each
// project's own jobs stay in order. Dispatch then simply takes the lowest start times.
//
// Both values are read from the queued jobs themselves, through partial indexes, so there
// is no counter row that every enqueue would have to lock. Two transactions may read the
// same values and hand out equal start times; ties fall back to queue time.
func (t *tx) fairStart(projectID uuid.UUID, lane int) (start, step int64, err error) {
	var c fairClocks
	// ORDER BY ... LIMIT 1 rather than MIN and MAX: both databases then read one index
	// entry, where PostgreSQL may otherwise aggregate over every waiting job.
	err = t.row(`SELECT (SELECT vtime FROM jobs WHERE status = 'queued' AND lane = ? ORDER BY vtime LIMIT 1),
		(SELECT vtime FROM jobs WHERE status = 'queued' AND project_id = ? AND lane = ? ORDER BY vtime DESC LIMIT 1),
		(SELECT fair_weight FROM projects WHERE id = ?)`,
		lane, projectID, lane, projectID).Scan(c.dest()...)
	if err != nil {
		return 0, 0, fmt.Errorf("read fair-queue clocks: %w", err)
	}
	start, step = c.start()
	return start, step, nil
}

// fairClocks is what fairStart reads: the lane's clock, the project's latest start in
// the lane and the project's weight.
type fairClocks struct{ clock, latest, weight sql.NullInt64 }

func (c *fairClocks) dest() []any { return []any{&c.clock, &c.latest, &c.weight} }

func (c *fairClocks) start() (start, step int64) {
	step = vtimeStep(int(c.weight.Int64))
	start = c.clock.Int64
	if c.latest.Valid {
		start = max(start, c.latest.Int64+step)
	}
	return start, step
}

// runStart reads, in one statement, what a new run of the project reports (notifyFlags)
// and the fair-queue start and step of its first queued jobs, in lane (fairStart).
func (t *tx) runStart(projectID uuid.UUID, name string, tr store.Trigger, jobs, lane int) (notify int, start, step int64, err error) {
	var r projectReports
	var c fairClocks
	err = t.row(`SELECT `+projectReportsCols+`,
		(SELECT vtime FROM jobs WHERE status = 'queued' AND lane = ? ORDER BY vtime LIMIT 1),
		(SELECT vtime FROM jobs WHERE status = 'queued' AND project_id = ? AND lane = ? ORDER BY vtime DESC LIMIT 1),
		p.fair_weight
		FROM projects p WHERE p.id = ?`, name, lane, projectID, lane, projectID).Scan(append(r.dest(), c.dest()...)...)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("read what project %s reports and its fair-queue clocks: %w", projectID, err)
	}
	start, step = c.start()
	return r.flags(tr, jobs), start, step, nil
}

// vtimeStep is the virtual time one job of a project of weight w takes.
func vtimeStep(w int) int64 {
	w = min(max(w, 1), store.MaxFairWeight)
	return vtimeScale / int64(w)
}

// queuedJob is a job about to become queued.
type queuedJob struct {
	id        uuid.UUID
	projectID uuid.UUID
	lane      int
	from      string // the status it must still have
}

// enqueue makes jobs queued, giving each its fair-queue start and clearing any lease, and
// reports each as pending, waiting for a worker, to the forge when its run reports per
// job. A job no longer in its expected status is left alone.
func (t *tx) enqueue(jobs []queuedJob, now int64) (int, error) {
	type key struct {
		project uuid.UUID
		lane    int
	}
	type clock struct{ next, step int64 }
	next := map[key]*clock{}
	for _, j := range jobs {
		k := key{j.projectID, j.lane}
		if _, ok := next[k]; ok {
			continue
		}
		start, step, err := t.fairStart(k.project, k.lane)
		if err != nil {
			return 0, err
		}
		next[k] = &clock{start, step}
	}
	changed := 0
	var runs []uuid.UUID
	byRun := map[uuid.UUID][]uuid.UUID{}
	for _, j := range jobs {
		k := key{j.projectID, j.lane}
		var group string
		var cancels bool
		var runID uuid.UUID
		err := t.row(`UPDATE jobs SET status = 'queued', vtime = ?, queued_at = ?, retry_after = 0,
			lease_token = '', worker_id = '', lease_expires_at = 0, deadline = 0
			WHERE id = ? AND status = ? RETURNING concurrency_group, group_cancels, run_id`, next[k].next, now, j.id, j.from).Scan(&group, &cancels, &runID)
		if isNoRows(err) {
			continue
		}
		if err != nil {
			return changed, fmt.Errorf("queue job %s: %w", j.id, err)
		}
		next[k].next += next[k].step
		changed++
		t.markQueued()
		if _, ok := byRun[runID]; !ok {
			runs = append(runs, runID)
		}
		byRun[runID] = append(byRun[runID], j.id)
		if cancels && group != "" {
			if err := t.cancelGroupHolders(j.projectID, group, j.id); err != nil {
				return changed, err
			}
		}
	}
	for _, runID := range runs {
		if err := t.reportJobsChanged(runID, byRun[runID], now); err != nil {
			return changed, err
		}
	}
	return changed, nil
}

// labelCache remembers the label sets jobs have asked for. The table only grows, so the
// cache only needs topping up from other replicas now and then.
type labelCache struct {
	mu      sync.Mutex
	sets    map[string]struct{}
	checked time.Time
}

func (c *labelCache) has(labels string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.sets[labels]
	return ok
}

func (c *labelCache) add(labels string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sets[labels] = struct{}{}
}

// subsetsOf lists the known label sets that are subsets of the worker's labels.
func (c *labelCache) subsetsOf(worker map[string]bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for set := range c.sets {
		ok := true
		for _, l := range splitLabels(set) {
			if !worker[l] {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, set)
		}
	}
	slices.Sort(out)
	return out
}

// refreshLabels reloads the label sets when the last load is older than maxAge, so sets
// that jobs created on another replica asked for are found. It uses the wall clock: this is
// cache upkeep, not a decision about jobs.
func (t *tx) refreshLabels(maxAge time.Duration) error {
	now := time.Now()
	c := &t.e.labels
	c.mu.Lock()
	stale := now.Sub(c.checked) > maxAge || now.Before(c.checked)
	c.mu.Unlock()
	if !stale {
		return nil
	}
	rows, err := t.query(`SELECT labels FROM label_sets`)
	if err != nil {
		return fmt.Errorf("load label sets: %w", err)
	}
	defer rows.Close()
	var sets []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return fmt.Errorf("load label sets: %w", err)
		}
		sets = append(sets, s)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load label sets: %w", err)
	}
	c.mu.Lock()
	for _, s := range sets {
		c.sets[s] = struct{}{}
	}
	c.checked = now
	c.mu.Unlock()
	return nil
}

// cancelGroupHolders flags for cancellation the jobs holding a concurrency group when a
// job of that group that cancels in progress work is queued; their workers hear it on
// their next heartbeat, and the group frees when they end.
func (t *tx) cancelGroupHolders(projectID uuid.UUID, group string, except uuid.UUID) error {
	res, err := t.exec(`UPDATE jobs SET cancel_requested = TRUE WHERE project_id = ? AND concurrency_group = ?
		AND status IN ('assigned', 'running') AND id <> ?`, projectID, group, except)
	if err != nil {
		return fmt.Errorf("cancel the holder of concurrency group %q: %w", group, err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		t.cancelled = true
	}
	return nil
}
