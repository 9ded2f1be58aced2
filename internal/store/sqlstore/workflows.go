package sqlstore

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// workflowCols are read joined with projects, so a workflow left behind by a deleted
// project (SQLite does not enforce the cascade) is never seen.
const workflowCols = `w.id, w.project_id, p.name, w.name, w.version, w.definition, w.enabled, w.created_at, w.updated_at`

const workflowFrom = ` FROM workflows w JOIN projects p ON p.id = w.project_id`

func scanWorkflow(s scanner) (*store.Workflow, error) {
	var w store.Workflow
	var created, updated int64
	if err := s.Scan(&w.ID, &w.ProjectID, &w.Project, &w.Name, &w.Version, &w.Definition, &w.Enabled,
		&created, &updated); err != nil {
		return nil, err
	}
	w.CreatedAt, w.UpdatedAt = fromUS(created), fromUS(updated)
	return &w, nil
}

// CreateWorkflow implements store.Workflows.
func (e *Engine) CreateWorkflow(ctx context.Context, w *store.Workflow) error {
	if w == nil || strings.TrimSpace(w.Name) == "" || len(w.Definition) == 0 {
		return fmt.Errorf("create workflow: a name and a definition are required: %w", store.ErrInvalid)
	}
	if w.Project == "" {
		w.Project = "default"
	}
	for _, l := range w.Listens {
		if err := checkListen(l); err != nil {
			return fmt.Errorf("create workflow %q: %w", w.Name, err)
		}
	}
	id := store.NewID()
	var projectID uuid.UUID
	var now int64
	err := e.write(ctx, func(t *tx) error {
		now = us(e.clock.Now())
		var err error
		if projectID, err = t.project(w.Project, now); err != nil {
			return err
		}
		// The unique (project, name) decides between two concurrent creates.
		res, err := t.exec(`INSERT INTO workflows (id, project_id, name, version, definition, enabled, created_at, updated_at)
			VALUES (?, ?, ?, 1, ?, ?, ?, ?) ON CONFLICT (project_id, name) DO NOTHING`,
			id, projectID, w.Name, w.Definition, true, now, now)
		if err != nil {
			return fmt.Errorf("insert workflow: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("project %q already has a workflow named %q: %w", w.Project, w.Name, store.ErrConflict)
		}
		return t.setListeners(projectID, store.WorkflowListenerSource(id), w.Listens)
	})
	if err != nil {
		return fmt.Errorf("create workflow %q: %w", w.Name, err)
	}
	w.ID, w.ProjectID, w.Version, w.Enabled = id, projectID, 1, true
	w.CreatedAt, w.UpdatedAt = fromUS(now), fromUS(now)
	return nil
}

// GetWorkflow implements store.Workflows.
func (e *Engine) GetWorkflow(ctx context.Context, id uuid.UUID) (*store.Workflow, error) {
	w, err := scanWorkflow(e.readRow(ctx, `SELECT `+workflowCols+workflowFrom+` WHERE w.id = ?`, id))
	if isNoRows(err) {
		return nil, fmt.Errorf("workflow %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get workflow %s: %w", id, err)
	}
	return w, nil
}

// ListWorkflows implements store.Workflows.
func (e *Engine) ListWorkflows(ctx context.Context, p store.ListWorkflowsParams) ([]*store.Workflow, error) {
	q := `SELECT ` + workflowCols + workflowFrom + ` WHERE 1 = 1`
	var args []any
	if p.Project != "" {
		q += ` AND p.name = ?`
		args = append(args, p.Project)
	}
	if p.EnabledOnly {
		q += ` AND w.enabled = ?`
		args = append(args, true)
	}
	rows, err := e.readRows(ctx, q+` ORDER BY p.name, w.name`, args...)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	defer rows.Close()
	var out []*store.Workflow
	for rows.Next() {
		w, err := scanWorkflow(rows)
		if err != nil {
			return nil, fmt.Errorf("list workflows: %w", err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	return out, nil
}

// UpdateWorkflow implements store.Workflows.
func (e *Engine) UpdateWorkflow(ctx context.Context, p store.UpdateWorkflowParams) (*store.Workflow, error) {
	if p.Definition != nil && len(p.Definition) == 0 {
		return nil, fmt.Errorf("update workflow %s: the definition is empty: %w", p.ID, store.ErrInvalid)
	}
	for _, l := range p.Listens {
		if err := checkListen(l); err != nil {
			return nil, fmt.Errorf("update workflow %s: %w", p.ID, err)
		}
	}
	var out *store.Workflow
	err := e.write(ctx, func(t *tx) error {
		out = nil
		w, err := scanWorkflow(t.row(`SELECT `+workflowCols+workflowFrom+` WHERE w.id = ?`, p.ID))
		if isNoRows(err) {
			return fmt.Errorf("workflow %s: %w", p.ID, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("read workflow: %w", err)
		}
		if p.IfVersion != 0 && p.IfVersion != w.Version {
			return fmt.Errorf("workflow %s is at version %d, not %d: %w", p.ID, w.Version, p.IfVersion, store.ErrConflict)
		}
		version, def, enabled := w.Version, w.Definition, w.Enabled
		if p.Definition != nil && !bytes.Equal(p.Definition, w.Definition) {
			version, def = version+1, p.Definition
		}
		if p.Enabled != nil {
			enabled = *p.Enabled
		}
		now := us(e.clock.Now())
		// The version condition makes a concurrent update a conflict, not a lost write.
		res, err := t.exec(`UPDATE workflows SET version = ?, definition = ?, enabled = ?, updated_at = ?
			WHERE id = ? AND version = ?`, version, def, enabled, now, p.ID, w.Version)
		if err != nil {
			return fmt.Errorf("update: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("workflow %s changed meanwhile: %w", p.ID, store.ErrConflict)
		}
		if p.Definition != nil {
			if err := t.setListeners(w.ProjectID, store.WorkflowListenerSource(w.ID), p.Listens); err != nil {
				return err
			}
		}
		w.Version, w.Definition, w.Enabled, w.UpdatedAt = version, def, enabled, fromUS(now)
		out = w
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("update workflow: %w", err)
	}
	return out, nil
}

// DeleteWorkflow implements store.Workflows.
func (e *Engine) DeleteWorkflow(ctx context.Context, id uuid.UUID) error {
	return e.write(ctx, func(t *tx) error {
		var projectID uuid.UUID
		err := t.row(`DELETE FROM workflows WHERE id = ? RETURNING project_id`, id).Scan(&projectID)
		if isNoRows(err) {
			return fmt.Errorf("delete workflow %s: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("delete workflow %s: %w", id, err)
		}
		if err := t.setListeners(projectID, store.WorkflowListenerSource(id), nil); err != nil {
			return fmt.Errorf("delete workflow %s: %w", id, err)
		}
		return nil
	})
}
