package sqlstore

import (
	"context"
	"fmt"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// CancelRun implements store.Runs.
func (e *Engine) CancelRun(ctx context.Context, id uuid.UUID) error {
	err := e.write(ctx, func(t *tx) error {
		status, err := t.lockRun(id)
		if err != nil {
			return err
		}
		if status.Terminal() {
			return fmt.Errorf("run %s already %s: %w", id, status, store.ErrConflict)
		}
		if _, err := t.exec(`UPDATE runs SET cancel_requested = TRUE WHERE id = ?`, id); err != nil {
			return fmt.Errorf("cancel run %s: %w", id, err)
		}
		res, err := t.exec(`UPDATE jobs SET cancel_requested = TRUE WHERE run_id = ? AND status IN ('assigned', 'running')`, id)
		if err != nil {
			return fmt.Errorf("cancel leased jobs of run %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			t.cancelled = true
		}
		ids, err := t.ids(`SELECT id FROM jobs WHERE run_id = ? AND status IN ('pending', 'queued', 'retrying', 'waiting_approval') ORDER BY seq`, id)
		if err != nil {
			return err
		}
		now := us(e.clock.Now())
		done, err := t.cancelNow(ids, id, now)
		t.ended = append(t.ended, done...)
		return err
	})
	if err != nil {
		return fmt.Errorf("cancel run %s: %w", id, err)
	}
	return nil
}

// CancelJob implements store.Runs.
func (e *Engine) CancelJob(ctx context.Context, id uuid.UUID) error {
	err := e.write(ctx, func(t *tx) error {
		j, err := t.lockJob(id)
		if err != nil {
			return err
		}
		if j.status.Terminal() {
			return fmt.Errorf("job %s already %s: %w", id, j.status, store.ErrConflict)
		}
		if j.status.Leased() {
			_, err := t.exec(`UPDATE jobs SET cancel_requested = TRUE WHERE id = ?`, id)
			if err != nil {
				return fmt.Errorf("flag job %s cancelled: %w", id, err)
			}
			t.cancelled = true
			return nil
		}
		// The job has not run, so everything downstream of it is still pending: cancel the
		// whole pending subtree with it.
		ids := []uuid.UUID{id}
		frontier := []uuid.UUID{id}
		seen := map[uuid.UUID]bool{id: true}
		for len(frontier) > 0 {
			next, err := t.ids(`SELECT jn.job_id FROM job_needs jn JOIN jobs d ON d.id = jn.job_id
				WHERE jn.need_id IN (`+inList(len(frontier))+`) AND d.status = 'pending'`, uuidArgs(frontier)...)
			if err != nil {
				return err
			}
			frontier = frontier[:0]
			for _, d := range next {
				if !seen[d] {
					seen[d] = true
					ids = append(ids, d)
					frontier = append(frontier, d)
				}
			}
		}
		now := us(e.clock.Now())
		done, err := t.cancelNow(ids, j.runID, now)
		t.ended = append(t.ended, done...)
		return err
	})
	if err != nil {
		return fmt.Errorf("cancel job %s: %w", id, err)
	}
	return nil
}

func (t *tx) ids(q string, args ...any) ([]uuid.UUID, error) {
	rows, err := t.query(q, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	var out []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func uuidArgs(ids []uuid.UUID) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// CancelRequested implements store.Store.
func (e *Engine) CancelRequested(ctx context.Context, workerID string) ([]uuid.UUID, error) {
	rows, err := e.readRows(ctx, `SELECT id FROM jobs WHERE worker_id = ? AND cancel_requested = TRUE
		AND status IN ('assigned', 'running') ORDER BY id`, workerID)
	if err != nil {
		return nil, fmt.Errorf("list cancelled jobs of worker %s: %w", workerID, err)
	}
	defer rows.Close()
	var out []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list cancelled jobs of worker %s: %w", workerID, err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// lockRun reads a run's status for an update of it, with the lock that update takes
// (FOR NO KEY UPDATE on PostgreSQL): FOR UPDATE would also wait for, and hold back, every
// transaction that checks a foreign key to the run (writing one of its jobs).
func (t *tx) lockRun(id uuid.UUID) (store.RunStatus, error) {
	var status string
	err := t.row(`SELECT status FROM runs WHERE id = ?`+t.e.d.ForNoKeyUpdate, id).Scan(&status)
	if isNoRows(err) {
		return "", fmt.Errorf("run %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("read run %s: %w", id, err)
	}
	return store.RunStatus(status), nil
}
