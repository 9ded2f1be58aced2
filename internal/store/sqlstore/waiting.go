package sqlstore

import (
	"context"
	"fmt"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// ConcurrencyHolders implements store.Stats. One read through the concurrency group index
// answers every group asked for.
func (e *Engine) ConcurrencyHolders(ctx context.Context, projectID uuid.UUID, groups []string) (map[string]*store.Job, error) {
	out := map[string]*store.Job{}
	if len(groups) == 0 {
		return out, nil
	}
	args := make([]any, 0, len(groups)+1)
	args = append(args, projectID)
	for _, g := range groups {
		args = append(args, g)
	}
	rows, err := e.readRows(ctx, `SELECT `+jobCols+` FROM jobs WHERE project_id = ? AND concurrency_group IN (`+inList(len(groups))+`)
		AND status IN ('assigned', 'running') ORDER BY started_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("read holders of concurrency groups: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		j, err := scanJobRow(rows, nil)
		if err != nil {
			return nil, fmt.Errorf("read holders of concurrency groups: %w", err)
		}
		// A group has one holder; should a race have let two in, the first to start is it.
		if out[j.ConcurrencyGroup] == nil {
			out[j.ConcurrencyGroup] = j
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read holders of concurrency groups: %w", err)
	}
	return out, nil
}

// ProjectLoad implements store.Stats.
func (e *Engine) ProjectLoad(ctx context.Context, projectID uuid.UUID) (*store.ProjectLoad, error) {
	var l store.ProjectLoad
	err := e.readRow(ctx, `SELECT name, max_concurrent_jobs,
		(SELECT COUNT(*) FROM jobs WHERE project_id = projects.id AND status IN ('assigned', 'running'))
		FROM projects WHERE id = ?`, projectID).Scan(&l.Name, &l.MaxConcurrentJobs, &l.Leased)
	if isNoRows(err) {
		return nil, fmt.Errorf("project %s: %w", projectID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read load of project %s: %w", projectID, err)
	}
	return &l, nil
}
