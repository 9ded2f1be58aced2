package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// maintenanceBatch bounds how many jobs one maintenance pass changes in a transaction;
// the loops call again while there is more.
const maintenanceBatch = 500

// ReapExpiredLeases implements store.Maintenance.
func (e *Engine) ReapExpiredLeases(ctx context.Context) (int, error) {
	changed := 0
	err := e.write(ctx, func(t *tx) error {
		changed = 0
		now := e.clock.Now()
		ids, err := t.ids(`SELECT id FROM jobs WHERE status IN ('assigned', 'running') AND lease_expires_at < ?
			ORDER BY lease_expires_at LIMIT ?`+e.d.SkipLocked, us(now), maintenanceBatch)
		if err != nil {
			return err
		}
		for _, id := range ids {
			j, err := t.lockJob(id)
			if err != nil {
				return err
			}
			if !j.status.Leased() || j.leaseExpires >= us(now) {
				continue // renewed or finished since the scan
			}
			changed++
			if j.cancelRequested {
				_, err = t.end(j, store.JobCancelled, store.FailureCancelled, nil, now)
			} else {
				var again bool
				if again, err = t.requeueLost(j, now); err == nil && !again {
					_, err = t.end(j, store.JobFailed, store.FailureLost, nil, now)
				}
			}
			if err != nil {
				return fmt.Errorf("reap job %s: %w", j.id, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("reap expired leases: %w", err)
	}
	return changed, nil
}

// requeueLost puts a leased job whose attempt was lost back in the queue at once, and
// says whether it did: the one rule for a lost attempt, whether its lease lapsed (the
// reaper) or its worker reported its environment gone (CompleteJob with failure kind
// lost). A lost attempt is not the job's fault: unless the job's retry policy lists
// lost, it is a free redelivery, not counted against max_attempts, while the engine's
// free redeliveries last; with lost listed it counts like any attempt and is retried
// while attempts are left. A job asked to cancel is never requeued.
func (t *tx) requeueLost(j *jobState, now time.Time) (bool, error) {
	again := []queuedJob{{id: j.id, projectID: j.projectID, lane: j.lane, from: string(j.status)}}
	retriesLost := j.retry.Retries(pipeline.FailureLost)
	switch {
	case j.cancelRequested:
		return false, nil
	case retriesLost && j.attempt-j.redeliveries < j.maxAttempts:
	case !retriesLost && j.redeliveries < t.e.free:
		if _, err := t.exec(`UPDATE jobs SET redeliveries = redeliveries + 1 WHERE id = ?`, j.id); err != nil {
			return false, fmt.Errorf("count a free redelivery of job %s: %w", j.id, err)
		}
	default:
		return false, nil
	}
	if err := t.keepAttempt(j.id, keptAttempt{status: store.JobFailed, kind: store.FailureLost, finished: us(now)}, store.CauseRetry, ""); err != nil {
		return false, err
	}
	if _, err := t.enqueue(again, us(now)); err != nil {
		return false, err
	}
	return true, nil
}

// PromoteRetries implements store.Maintenance.
func (e *Engine) PromoteRetries(ctx context.Context) (int, error) {
	changed := 0
	err := e.write(ctx, func(t *tx) error {
		now := us(e.clock.Now())
		rows, err := t.query(`SELECT id, project_id, lane FROM jobs WHERE status = 'retrying' AND retry_after <= ?
			ORDER BY retry_after LIMIT ?`+e.d.SkipLocked, now, maintenanceBatch)
		if err != nil {
			return fmt.Errorf("find due retries: %w", err)
		}
		var due []queuedJob
		for rows.Next() {
			q := queuedJob{from: string(store.JobRetrying)}
			if err := rows.Scan(&q.id, &q.projectID, &q.lane); err != nil {
				rows.Close()
				return fmt.Errorf("find due retries: %w", err)
			}
			due = append(due, q)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("find due retries: %w", err)
		}
		changed, err = t.enqueue(due, now)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("promote retries: %w", err)
	}
	return changed, nil
}

// RevokeTimedOut implements store.Maintenance.
func (e *Engine) RevokeTimedOut(ctx context.Context) (int, error) {
	changed := 0
	err := e.write(ctx, func(t *tx) error {
		changed = 0
		now := e.clock.Now()
		ids, err := t.ids(`SELECT id FROM jobs WHERE status IN ('assigned', 'running') AND deadline <> 0 AND deadline < ?
			ORDER BY deadline LIMIT ?`+e.d.SkipLocked, us(now), maintenanceBatch)
		if err != nil {
			return err
		}
		for _, id := range ids {
			j, err := t.lockJob(id)
			if err != nil {
				return err
			}
			if !j.status.Leased() || j.deadline == 0 || j.deadline >= us(now) {
				continue
			}
			changed++
			if j.cancelRequested {
				_, err = t.end(j, store.JobCancelled, store.FailureCancelled, nil, now)
			} else {
				var retried *store.Job
				if retried, err = t.retryLater(j, store.FailureTimeout, nil, now); err == nil && retried == nil {
					_, err = t.end(j, store.JobFailed, store.FailureTimeout, nil, now)
				}
			}
			if err != nil {
				return fmt.Errorf("revoke job %s: %w", j.id, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("revoke timed-out jobs: %w", err)
	}
	return changed, nil
}
