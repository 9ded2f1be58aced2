package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// PutQuarantineRule implements store.QuarantineRules.
func (e *Engine) PutQuarantineRule(ctx context.Context, r *store.QuarantineRule) error {
	if r == nil {
		return fmt.Errorf("set a quarantine rule: no rule: %w", store.ErrInvalid)
	}
	if msg := store.CheckQuarantineRule(r); msg != "" {
		return fmt.Errorf("set the quarantine rule of project %q: %s: %w", r.Project, msg, store.ErrInvalid)
	}
	audit, err := auditOf(ctx)
	if err != nil {
		return fmt.Errorf("set the quarantine rule of project %q: %w", r.Project, err)
	}
	now := e.clock.Now()
	err = e.write(ctx, func(t *tx) error {
		var pid uuid.UUID
		err := t.row(`SELECT id FROM projects WHERE name = ?`, r.Project).Scan(&pid)
		if isNoRows(err) {
			return fmt.Errorf("project %q: %w", r.Project, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if _, err := t.exec(`INSERT INTO test_quarantine_rules (project_id, flaky_commits, within_s, for_s, owner, updated_by, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (project_id) DO UPDATE SET flaky_commits = excluded.flaky_commits, within_s = excluded.within_s,
				for_s = excluded.for_s, owner = excluded.owner, updated_by = excluded.updated_by, updated_at = excluded.updated_at`,
			pid, r.FlakyCommits, seconds(r.Within), seconds(r.For), r.Owner, r.UpdatedBy, us(now)); err != nil {
			return err
		}
		return t.appendAudit(audit)
	})
	if err != nil {
		return fmt.Errorf("set the quarantine rule of project %q: %w", r.Project, err)
	}
	r.UpdatedAt = fromUS(us(now))
	return nil
}

// seconds is d in whole seconds, as the rules keep their spans.
func seconds(d time.Duration) int64 { return int64(d / time.Second) }

// GetQuarantineRule implements store.QuarantineRules.
func (e *Engine) GetQuarantineRule(ctx context.Context, project string) (*store.QuarantineRule, error) {
	var (
		pid                uuid.UUID
		commits            *int64
		within, length, at *int64
		owner, by          *string
	)
	err := e.readRow(ctx, `SELECT p.id, r.flaky_commits, r.within_s, r.for_s, r.owner, r.updated_by, r.updated_at
		FROM projects p LEFT JOIN test_quarantine_rules r ON r.project_id = p.id WHERE p.name = ?`, project).
		Scan(&pid, &commits, &within, &length, &owner, &by, &at)
	if isNoRows(err) {
		return nil, fmt.Errorf("quarantine rule: project %q: %w", project, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("quarantine rule of project %q: %w", project, err)
	}
	if commits == nil {
		return nil, nil
	}
	return &store.QuarantineRule{Project: project, FlakyCommits: int(*commits), Within: time.Duration(*within) * time.Second,
		For: time.Duration(*length) * time.Second, Owner: *owner, UpdatedBy: *by, UpdatedAt: fromUS(*at)}, nil
}

// DeleteQuarantineRule implements store.QuarantineRules.
func (e *Engine) DeleteQuarantineRule(ctx context.Context, project string) error {
	audit, err := auditOf(ctx)
	if err != nil {
		return fmt.Errorf("delete the quarantine rule of project %q: %w", project, err)
	}
	err = e.write(ctx, func(t *tx) error {
		res, err := t.exec(`DELETE FROM test_quarantine_rules WHERE project_id = (SELECT id FROM projects WHERE name = ?)`, project)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("project %q has no quarantine rule: %w", project, store.ErrNotFound)
		}
		return t.appendAudit(audit)
	})
	if err != nil {
		return fmt.Errorf("delete the quarantine rule of project %q: %w", project, err)
	}
	return nil
}
