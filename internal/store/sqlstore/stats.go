package sqlstore

import (
	"context"
	"fmt"

	"github.com/gantry-ci/gantry/internal/store"
)

// QueueStats implements store.Stats. It reads through the partial indexes on queued,
// leased and retrying jobs, so its cost follows the queue, not the history.
func (e *Engine) QueueStats(ctx context.Context) (*store.QueueStats, error) {
	out := &store.QueueStats{}
	rows, err := e.readRows(ctx, `SELECT lane, label_set, COUNT(*), MIN(queued_at) FROM jobs WHERE status = 'queued'
		GROUP BY lane, label_set ORDER BY lane, label_set`)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	var oldest int64
	for rows.Next() {
		var d store.QueueDepth
		var lane int
		var labels string
		var first int64
		if err := rows.Scan(&lane, &labels, &d.Jobs, &first); err != nil {
			rows.Close()
			return nil, fmt.Errorf("queue stats: %w", err)
		}
		d.Priority, d.Labels = priorityOf(lane), splitLabels(labels)
		out.Queued = append(out.Queued, d)
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
	if out.Held, err = e.heldByQuota(ctx); err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	return out, nil
}

// heldByQuota counts by lane and label set the queued jobs that their project's limit of
// concurrent jobs holds back: those after the first limit-minus-leased of the project in
// claim order (lane, vtime, queued_at, id). Only projects with a limit are read.
func (e *Engine) heldByQuota(ctx context.Context) ([]store.QueueDepth, error) {
	rows, err := e.readRows(ctx, `SELECT q.lane, q.label_set, COUNT(*) FROM (
			SELECT j.lane, j.label_set, j.project_id,
				ROW_NUMBER() OVER (PARTITION BY j.project_id ORDER BY j.lane, j.vtime, j.queued_at, j.id) AS n
			FROM jobs j JOIN projects p ON p.id = j.project_id
			WHERE j.status = 'queued' AND p.max_concurrent_jobs > 0) q
		JOIN projects p ON p.id = q.project_id
		WHERE q.n > p.max_concurrent_jobs - (SELECT COUNT(*) FROM jobs l
			WHERE l.project_id = q.project_id AND l.status IN ('assigned', 'running'))
		GROUP BY q.lane, q.label_set ORDER BY q.lane, q.label_set`)
	if err != nil {
		return nil, fmt.Errorf("jobs held by project limits: %w", err)
	}
	defer rows.Close()
	var out []store.QueueDepth
	for rows.Next() {
		var d store.QueueDepth
		var lane int
		var labels string
		if err := rows.Scan(&lane, &labels, &d.Jobs); err != nil {
			return nil, fmt.Errorf("jobs held by project limits: %w", err)
		}
		d.Priority, d.Labels = priorityOf(lane), splitLabels(labels)
		out = append(out, d)
	}
	return out, rows.Err()
}
