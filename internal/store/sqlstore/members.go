package sqlstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

const memberCols = `m.project_id, p.name, m.principal, m.role, m.created_at, m.updated_at`

func scanMember(r rowScanner) (*store.Member, error) {
	var m store.Member
	var role string
	var created, updated int64
	if err := r.Scan(&m.ProjectID, &m.Project, &m.Principal, &role, &created, &updated); err != nil {
		return nil, err
	}
	m.Role = store.Role(role)
	m.CreatedAt, m.UpdatedAt = fromUS(created), fromUS(updated)
	return &m, nil
}

// PutMember implements store.Members.
func (e *Engine) PutMember(ctx context.Context, m *store.Member) error {
	switch {
	case m == nil || m.ProjectID == uuid.Nil:
		return fmt.Errorf("put member: a project is required: %w", store.ErrInvalid)
	case !m.Role.IsMemberRole():
		return fmt.Errorf("put member %s: role %q: want viewer, developer or maintainer: %w", m.Principal, m.Role, store.ErrInvalid)
	case m.Principal == "" || len(m.Principal) > store.MaxPrincipal || strings.TrimSpace(m.Principal) != m.Principal:
		return fmt.Errorf("put member %q: want a user name of 1 to %d bytes without spaces around it: %w",
			m.Principal, store.MaxPrincipal, store.ErrInvalid)
	}
	audit, err := auditOf(ctx)
	if err != nil {
		return fmt.Errorf("put member %s: %w", m.Principal, err)
	}
	return e.write(ctx, func(t *tx) error {
		var name string
		if err := t.row(`SELECT name FROM projects WHERE id = ?`, m.ProjectID).Scan(&name); isNoRows(err) {
			return fmt.Errorf("put member %s: project %s: %w", m.Principal, m.ProjectID, store.ErrNotFound)
		} else if err != nil {
			return fmt.Errorf("put member %s: look up project: %w", m.Principal, err)
		}
		now := us(e.clock.Now())
		first := now
		err := t.row(`SELECT created_at FROM project_members WHERE project_id = ? AND principal = ?`,
			m.ProjectID, m.Principal).Scan(&first)
		switch {
		case isNoRows(err):
			_, err = t.exec(`INSERT INTO project_members (project_id, principal, role, created_at, updated_at)
				VALUES (?, ?, ?, ?, ?)`, m.ProjectID, m.Principal, string(m.Role), now, now)
		case err == nil:
			_, err = t.exec(`UPDATE project_members SET role = ?, updated_at = ? WHERE project_id = ? AND principal = ?`,
				string(m.Role), now, m.ProjectID, m.Principal)
		}
		if err != nil {
			return fmt.Errorf("put member %s of project %q: %w", m.Principal, name, err)
		}
		m.Project, m.CreatedAt, m.UpdatedAt = name, fromUS(first), fromUS(now)
		return t.appendAudit(audit)
	})
}

// DeleteMember implements store.Members.
func (e *Engine) DeleteMember(ctx context.Context, projectID uuid.UUID, principal string) error {
	audit, err := auditOf(ctx)
	if err != nil {
		return fmt.Errorf("delete member %s: %w", principal, err)
	}
	return e.write(ctx, func(t *tx) error {
		res, err := t.exec(`DELETE FROM project_members WHERE project_id = ? AND principal = ?`, projectID, principal)
		if err != nil {
			return fmt.Errorf("delete member %s: %w", principal, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("member %s: %w", principal, store.ErrNotFound)
		}
		return t.appendAudit(audit)
	})
}

// ListMembers implements store.Members.
func (e *Engine) ListMembers(ctx context.Context, projectID uuid.UUID) ([]*store.Member, error) {
	return e.members(ctx, "list members", `m.project_id = ? ORDER BY m.principal`, projectID)
}

// Memberships implements store.Members.
func (e *Engine) Memberships(ctx context.Context, principal string) ([]*store.Member, error) {
	return e.members(ctx, "list memberships", `m.principal = ? ORDER BY p.name`, principal)
}

func (e *Engine) members(ctx context.Context, action, where string, arg any) ([]*store.Member, error) {
	rows, err := e.readRows(ctx, `SELECT `+memberCols+` FROM project_members m JOIN projects p ON p.id = m.project_id WHERE `+where, arg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", action, err)
	}
	defer rows.Close()
	out := []*store.Member{}
	for rows.Next() {
		m, err := scanMember(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", action, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", action, err)
	}
	return out, nil
}
