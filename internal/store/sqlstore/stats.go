package sqlstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/gantry-ci/gantry/internal/store"
)

// QueueStats implements store.Stats. It reads through the partial indexes on queued,
// leased and retrying jobs, so its cost follows the queue, not the history (the queued
// jobs' resources come from their rows, which the queue's index does not hold).
func (e *Engine) QueueStats(ctx context.Context) (*store.QueueStats, error) {
	out := &store.QueueStats{}
	shapes := &shapeCounts{at: map[shapeKey]int{}}
	// One pass over the queued jobs counts both their lanes and their shapes: rows of one
	// lane and label set come together, one per amount of resources.
	rows, err := e.readRows(ctx, `SELECT lane, label_set, milli_cpu, memory, COUNT(*), MIN(queued_at) FROM jobs WHERE status = 'queued'
		GROUP BY lane, label_set, milli_cpu, memory ORDER BY lane, label_set`)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	var (
		oldest  int64
		lastSet string
		last    = -1 // lane of out.Queued's last entry
	)
	for rows.Next() {
		var (
			lane, n int
			first   int64
			shape   shapeKey
		)
		if err := rows.Scan(&lane, &shape.labelSet, &shape.milliCPU, &shape.memory, &n, &first); err != nil {
			rows.Close()
			return nil, fmt.Errorf("queue stats: %w", err)
		}
		shapes.add(shape, n, 0)
		if lane == last && shape.labelSet == lastSet {
			out.Queued[len(out.Queued)-1].Jobs += n
		} else {
			out.Queued = append(out.Queued, store.QueueDepth{Priority: priorityOf(lane), Labels: splitLabels(shape.labelSet), Jobs: n})
			last, lastSet = lane, shape.labelSet
		}
		if oldest == 0 || (first != 0 && first < oldest) {
			oldest = first
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	out.OldestQueuedAt = fromUS(oldest)
	rows, err = e.readRows(ctx, `SELECT label_set, COUNT(*) FROM jobs WHERE status IN ('assigned', 'running') GROUP BY label_set ORDER BY label_set`)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	for rows.Next() {
		var d store.QueueDepth
		var labels string
		if err := rows.Scan(&labels, &d.Jobs); err != nil {
			rows.Close()
			return nil, fmt.Errorf("queue stats: %w", err)
		}
		d.Labels = splitLabels(labels)
		out.Leased = append(out.Leased, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	rows, err = e.readRows(ctx, `SELECT status, COUNT(*) FROM jobs WHERE status IN ('assigned', 'running', 'retrying') GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			return nil, fmt.Errorf("queue stats: %w", err)
		}
		switch store.JobStatus(status) {
		case store.JobAssigned:
			out.Assigned = n
		case store.JobRunning:
			out.Running = n
		case store.JobRetrying:
			out.Retrying = n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	if out.Held, err = e.heldByQuota(ctx, shapes); err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	out.Shapes = shapes.list()
	return out, nil
}

// shapeKey is a label set and the resources asked with it.
type shapeKey struct {
	labelSet         string
	milliCPU, memory int64
}

// shapeCounts gathers store.QueueShape counts from rows split finer (by lane too).
type shapeCounts struct {
	at   map[shapeKey]int // index in list
	rows []store.QueueShape
	keys []shapeKey
}

func (c *shapeCounts) add(k shapeKey, jobs, held int) {
	i, ok := c.at[k]
	if !ok {
		i = len(c.rows)
		c.at[k] = i
		c.rows = append(c.rows, store.QueueShape{Labels: splitLabels(k.labelSet), MilliCPU: k.milliCPU, Memory: k.memory})
		c.keys = append(c.keys, k)
	}
	c.rows[i].Jobs += jobs
	c.rows[i].Held += held
}

// list returns the shapes by label set, then cpu, then memory.
func (c *shapeCounts) list() []store.QueueShape {
	order := make([]int, len(c.rows))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		ka, kb := c.keys[a], c.keys[b]
		return cmp.Or(cmp.Compare(ka.labelSet, kb.labelSet), cmp.Compare(ka.milliCPU, kb.milliCPU), cmp.Compare(ka.memory, kb.memory))
	})
	var out []store.QueueShape
	for _, i := range order {
		out = append(out, c.rows[i])
	}
	return out
}

// heldByQuota counts by lane and label set the queued jobs that their project's limit of
// concurrent jobs holds back: those after the first limit-minus-leased of the project in
// claim order (lane, vtime, queued_at, id), and adds them to shapes' held counts. Only
// projects with a limit are read.
func (e *Engine) heldByQuota(ctx context.Context, shapes *shapeCounts) ([]store.QueueDepth, error) {
	rows, err := e.readRows(ctx, `SELECT q.lane, q.label_set, q.milli_cpu, q.memory, COUNT(*) FROM (
			SELECT j.lane, j.label_set, j.milli_cpu, j.memory, j.project_id,
				ROW_NUMBER() OVER (PARTITION BY j.project_id ORDER BY j.lane, j.vtime, j.queued_at, j.id) AS n
			FROM jobs j JOIN projects p ON p.id = j.project_id
			WHERE j.status = 'queued' AND p.max_concurrent_jobs > 0) q
		JOIN projects p ON p.id = q.project_id
		WHERE q.n > p.max_concurrent_jobs - (SELECT COUNT(*) FROM jobs l
			WHERE l.project_id = q.project_id AND l.status IN ('assigned', 'running'))
		GROUP BY q.lane, q.label_set, q.milli_cpu, q.memory ORDER BY q.lane, q.label_set`)
	if err != nil {
		return nil, fmt.Errorf("jobs held by project limits: %w", err)
	}
	defer rows.Close()
	var (
		out     []store.QueueDepth
		lastSet string
		last    = -1 // lane of out's last entry
	)
	for rows.Next() {
		var (
			lane, n int
			shape   shapeKey
		)
		if err := rows.Scan(&lane, &shape.labelSet, &shape.milliCPU, &shape.memory, &n); err != nil {
			return nil, fmt.Errorf("jobs held by project limits: %w", err)
		}
		shapes.add(shape, 0, n)
		if lane == last && shape.labelSet == lastSet {
			out[len(out)-1].Jobs += n
			continue
		}
		out = append(out, store.QueueDepth{Priority: priorityOf(lane), Labels: splitLabels(shape.labelSet), Jobs: n})
		last, lastSet = lane, shape.labelSet
	}
	return out, rows.Err()
}
