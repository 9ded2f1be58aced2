package sqlstore

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
)

// quotaRefresh bounds how long a limit set on another replica can go unseen by this one's
// claims. A limit set through this engine applies from its commit.
const quotaRefresh = time.Second

// quotaCache remembers which projects limit their concurrent jobs, so a claim when none
// does costs no extra statement. The map is replaced, never changed, so a reader may keep
// it after unlocking.
type quotaCache struct {
	mu      sync.Mutex
	limits  map[uuid.UUID]int
	gen     int // bumped by every local change, so a reload that raced one is not kept
	checked time.Time
}

// snapshot returns the limits by project; the caller must not change the map.
func (c *quotaCache) snapshot() map[uuid.UUID]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.limits
}

// limited reports whether the project limits its concurrent jobs.
func (c *quotaCache) limited(id uuid.UUID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.limits[id]
	return ok
}

// set records a project's limit (0 = none).
func (c *quotaCache) set(id uuid.UUID, limit int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.limits[id] == limit {
		return
	}
	m := maps.Clone(c.limits)
	if m == nil {
		m = map[uuid.UUID]int{}
	}
	if limit > 0 {
		m[id] = limit
	} else {
		delete(m, id)
	}
	c.limits = m
	c.gen++
}

// quotaChanged updates the cache once the transaction commits with the project's new
// limit.
func (t *tx) quotaChanged(id uuid.UUID, limit int) {
	t.onCommit = append(t.onCommit, func() { t.e.quotas.set(id, limit) })
}

// refreshQuotas reloads the limits when the last load is older than maxAge, so limits
// set through another replica are found. Like refreshLabels it uses the wall clock: this is
// cache upkeep, not a decision about jobs.
func (t *tx) refreshQuotas(maxAge time.Duration) error {
	now := time.Now()
	c := &t.e.quotas
	c.mu.Lock()
	stale := now.Sub(c.checked) > maxAge || now.Before(c.checked)
	gen := c.gen
	c.mu.Unlock()
	if !stale {
		return nil
	}
	rows, err := t.query(`SELECT id, max_concurrent_jobs FROM projects WHERE max_concurrent_jobs > 0`)
	if err != nil {
		return fmt.Errorf("load project limits: %w", err)
	}
	defer rows.Close()
	limits := map[uuid.UUID]int{}
	for rows.Next() {
		var id uuid.UUID
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return fmt.Errorf("load project limits: %w", err)
		}
		limits[id] = n
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load project limits: %w", err)
	}
	c.mu.Lock()
	if c.gen == gen {
		c.limits = limits
		c.checked = now
	}
	c.mu.Unlock()
	return nil
}

// quota tracks, through one claim, how many more jobs each limited project may have
// leased.
type quota struct {
	t      *tx
	limits map[uuid.UUID]int
	room   map[uuid.UUID]int
	locked map[uuid.UUID]bool // projects this claim holds the quota lock of (or failed to take)
}

// claimQuota reads how many jobs each limited project has leased. It costs nothing when no
// project is limited.
func (t *tx) claimQuota() (*quota, error) {
	if err := t.refreshQuotas(quotaRefresh); err != nil {
		return nil, err
	}
	q := &quota{t: t, limits: t.e.quotas.snapshot()}
	if len(q.limits) == 0 {
		return q, nil
	}
	ids := slices.SortedFunc(maps.Keys(q.limits), func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	leased, err := t.leasedByProject(args)
	if err != nil {
		return nil, err
	}
	q.room = make(map[uuid.UUID]int, len(ids))
	q.locked = map[uuid.UUID]bool{}
	for _, id := range ids {
		q.room[id] = q.limits[id] - leased[id]
	}
	return q, nil
}

func (t *tx) leasedByProject(ids []any) (map[uuid.UUID]int, error) {
	rows, err := t.query(`SELECT project_id, COUNT(*) FROM jobs WHERE status IN ('assigned', 'running')
		AND project_id IN (`+inList(len(ids))+`) GROUP BY project_id`, ids...)
	if err != nil {
		return nil, fmt.Errorf("count leased jobs of limited projects: %w", err)
	}
	defer rows.Close()
	out := map[uuid.UUID]int{}
	for rows.Next() {
		var id uuid.UUID
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("count leased jobs of limited projects: %w", err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count leased jobs of limited projects: %w", err)
	}
	return out, nil
}

// full lists the projects with no room left, in a stable order: the claim's search leaves
// their jobs out, so they cannot crowd the others out of its window of candidates.
func (q *quota) full() []uuid.UUID {
	var out []uuid.UUID
	for id, n := range q.room {
		if n <= 0 {
			out = append(out, id)
		}
	}
	slices.SortFunc(out, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	return out
}

// allows reports whether the claim may lease one more job of the project. Where claimers
// run in parallel (PostgreSQL) the first look at a limited project takes its quota lock
// for the rest of the transaction and counts its leased jobs again under it; a project
// whose lock another claim holds is left to that claim.
func (q *quota) allows(project uuid.UUID) (bool, error) {
	if _, ok := q.limits[project]; !ok {
		return true, nil
	}
	if d := q.t.e.d; d.GroupLock != nil && !q.locked[project] {
		q.locked[project] = true
		ok, err := d.GroupLock(q.t.ctx, q.t.tx, "quota/"+project.String())
		if err != nil {
			return false, fmt.Errorf("lock the quota of project %s: %w", project, err)
		}
		if !ok {
			q.room[project] = 0
			return false, nil
		}
		leased, err := q.t.leasedByProject([]any{project})
		if err != nil {
			return false, err
		}
		q.room[project] = q.limits[project] - leased[project]
	}
	return q.room[project] > 0, nil
}

// use counts a job of the project the claim leases.
func (q *quota) use(project uuid.UUID) {
	if _, ok := q.limits[project]; ok {
		q.room[project]--
	}
}

// quotaFreed wakes claimers when a leased job of a limited project ends: its project may
// have room again, though no job became queued.
func (t *tx) quotaFreed(j *jobState) {
	if j.status.Leased() && t.e.quotas.limited(j.projectID) {
		t.markQueued()
	}
}
