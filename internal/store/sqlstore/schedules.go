package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// ScheduleTicks implements store.Schedules.
func (e *Engine) ScheduleTicks(ctx context.Context, projectID uuid.UUID) (map[string]time.Time, error) {
	rows, err := e.readRows(ctx, `SELECT schedule_key, last_tick FROM schedule_ticks WHERE project_id = ?`, projectID)
	if err != nil {
		return nil, fmt.Errorf("schedule ticks of project %s: %w", projectID, err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var key string
		var tick int64
		if err := rows.Scan(&key, &tick); err != nil {
			return nil, fmt.Errorf("schedule ticks of project %s: %w", projectID, err)
		}
		out[key] = fromUS(tick)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("schedule ticks of project %s: %w", projectID, err)
	}
	return out, nil
}

// SkipTick implements store.Schedules.
func (e *Engine) SkipTick(ctx context.Context, projectID uuid.UUID, tick store.ScheduleTick) (bool, error) {
	if err := checkTick(tick); err != nil {
		return false, fmt.Errorf("skip tick: %w", err)
	}
	var won bool
	err := e.write(ctx, func(t *tx) error {
		var err error
		won, err = t.takeTick(projectID, tick, nil, us(e.clock.Now()))
		return err
	})
	if err != nil {
		return false, fmt.Errorf("skip tick %s of %q: %w", tick.At.UTC().Format(time.RFC3339), tick.Key, err)
	}
	return won, nil
}

func checkTick(tick store.ScheduleTick) error {
	if tick.Key == "" || tick.At.IsZero() {
		return fmt.Errorf("a schedule key and a tick time are required: %w", store.ErrInvalid)
	}
	return nil
}

// takeTick moves the schedule's last tick forward to tick.At, recording runID (nil for a
// tick given up), and reports whether it did: false when the schedule already handled
// that tick or a later one. It is the compare-and-swap that makes a tick fire once: on
// PostgreSQL a concurrent transaction taking the same tick waits on the row and then
// finds the condition false.
func (t *tx) takeTick(projectID uuid.UUID, tick store.ScheduleTick, runID any, now int64) (bool, error) {
	res, err := t.exec(`INSERT INTO schedule_ticks (project_id, schedule_key, last_tick, run_id, updated_at)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (project_id, schedule_key) DO UPDATE
		SET last_tick = excluded.last_tick, run_id = excluded.run_id, updated_at = excluded.updated_at
		WHERE schedule_ticks.last_tick < excluded.last_tick`,
		projectID, tick.Key, us(tick.At), runID, now)
	if err != nil {
		return false, fmt.Errorf("take tick: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("take tick: %w", err)
	}
	return n == 1, nil
}

// takeRunTick is CreateRun's half of a schedule's run: ErrConflict when the tick is
// taken, so the run is not created.
func (t *tx) takeRunTick(projectID uuid.UUID, tick *store.ScheduleTick, runID uuid.UUID, now int64) error {
	if err := checkTick(*tick); err != nil {
		return err
	}
	won, err := t.takeTick(projectID, *tick, runID, now)
	if err != nil {
		return err
	}
	if !won {
		return fmt.Errorf("schedule %q already handled tick %s: %w", tick.Key, tick.At.UTC().Format(time.RFC3339), store.ErrConflict)
	}
	return nil
}
