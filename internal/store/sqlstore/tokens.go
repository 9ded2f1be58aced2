package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

const tokenCols = `id, name, role, hash, worker_id, labels, projects, parent_id, created_at, expires_at, revoked_at, last_used_at, user_name`

// CreateToken implements store.Tokens.
func (e *Engine) CreateToken(ctx context.Context, tk *store.Token) error {
	if len(tk.Hash) != 64 || tk.Role == "" {
		return fmt.Errorf("create token: a role and a SHA-256 hash are required: %w", store.ErrInvalid)
	}
	if tk.ID == [16]byte{} {
		tk.ID = store.NewID()
	}
	parent := ""
	if tk.ParentID != uuid.Nil {
		parent = tk.ParentID.String()
	}
	audit, err := auditOf(ctx)
	if err != nil {
		return fmt.Errorf("create token: %w", err)
	}
	return e.write(ctx, func(t *tx) error {
		if parent != "" {
			// Checked in the same transaction as the insert, so a revocation either
			// comes first and refuses the credential or comes after and revokes it.
			var revoked int64
			err := t.row(`SELECT revoked_at FROM tokens WHERE id = ?`, tk.ParentID).Scan(&revoked)
			if isNoRows(err) {
				return fmt.Errorf("create token: parent token %s: %w", tk.ParentID, store.ErrNotFound)
			}
			if err != nil {
				return fmt.Errorf("create token: read parent token: %w", err)
			}
			if revoked != 0 {
				return fmt.Errorf("create token: parent token %s was revoked: %w", tk.ParentID, store.ErrConflict)
			}
		}
		tk.CreatedAt = e.clock.Now()
		res, err := t.exec(`INSERT INTO tokens (`+tokenCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?)
			ON CONFLICT (hash) DO NOTHING`, tk.ID, tk.Name, string(tk.Role), tk.Hash, tk.WorkerID,
			listJSON(tk.Labels), listJSON(tk.Projects), parent, us(tk.CreatedAt), us(tk.ExpiresAt), tk.User)
		if err != nil {
			return fmt.Errorf("create token: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("create token: hash already taken: %w", store.ErrConflict)
		}
		tk.RevokedAt, tk.LastUsedAt = time.Time{}, time.Time{}
		return t.appendAudit(audit)
	})
}

// listJSON encodes a scope list; no list is the empty one, which means any.
func listJSON(l []string) string {
	if len(l) == 0 {
		return "[]"
	}
	return mustJSON(l)
}

type rowScanner interface{ Scan(dest ...any) error }

func scanToken(r rowScanner) (*store.Token, error) {
	var tk store.Token
	var role, labels, projects, parent string
	var created, expires, revoked, used int64
	if err := r.Scan(&tk.ID, &tk.Name, &role, &tk.Hash, &tk.WorkerID, &labels, &projects, &parent,
		&created, &expires, &revoked, &used, &tk.User); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(labels), &tk.Labels); err != nil {
		return nil, fmt.Errorf("decode labels of token %s: %w", tk.ID, err)
	}
	if err := json.Unmarshal([]byte(projects), &tk.Projects); err != nil {
		return nil, fmt.Errorf("decode projects of token %s: %w", tk.ID, err)
	}
	if parent != "" {
		id, err := uuid.Parse(parent)
		if err != nil {
			return nil, fmt.Errorf("decode parent of token %s: %w", tk.ID, err)
		}
		tk.ParentID = id
	}
	tk.Role = store.Role(role)
	tk.CreatedAt, tk.ExpiresAt, tk.RevokedAt, tk.LastUsedAt = fromUS(created), fromUS(expires), fromUS(revoked), fromUS(used)
	return &tk, nil
}

// LookupToken implements store.Tokens.
func (e *Engine) LookupToken(ctx context.Context, hash string) (*store.Token, error) {
	tk, err := scanToken(e.readRow(ctx, `SELECT `+tokenCols+` FROM tokens WHERE hash = ?`, hash))
	if isNoRows(err) {
		return nil, fmt.Errorf("token: %w", store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("look up token: %w", err)
	}
	return tk, nil
}

// ListTokens implements store.Tokens.
func (e *Engine) ListTokens(ctx context.Context, p store.ListTokensParams) ([]*store.Token, error) {
	q := `SELECT ` + tokenCols + ` FROM tokens`
	var args []any
	if !p.Agents {
		q += ` WHERE role <> ?`
		args = append(args, string(store.RoleAgent))
	}
	rows, err := e.readRows(ctx, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	out := []*store.Token{}
	for rows.Next() {
		tk, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		out = append(out, tk)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// RevokeToken implements store.Tokens.
func (e *Engine) RevokeToken(ctx context.Context, id uuid.UUID) error {
	audit, err := auditOf(ctx)
	if err != nil {
		return fmt.Errorf("revoke token %s: %w", id, err)
	}
	return e.write(ctx, func(t *tx) error {
		var found string
		if err := t.row(`SELECT name FROM tokens WHERE id = ?`, id).Scan(&found); isNoRows(err) {
			return fmt.Errorf("revoke token %s: %w", id, store.ErrNotFound)
		} else if err != nil {
			return fmt.Errorf("revoke token %s: %w", id, err)
		}
		if _, err := t.exec(`UPDATE tokens SET revoked_at = ? WHERE (id = ? OR parent_id = ?) AND revoked_at = 0`,
			us(e.clock.Now()), id, id.String()); err != nil {
			return fmt.Errorf("revoke token %s: %w", id, err)
		}
		return t.appendAudit(audit)
	})
}

// TouchToken implements store.Tokens.
func (e *Engine) TouchToken(ctx context.Context, id uuid.UUID, at time.Time) error {
	return e.write(ctx, func(t *tx) error {
		if _, err := t.exec(`UPDATE tokens SET last_used_at = ? WHERE id = ? AND last_used_at < ?`, us(at), id, us(at)); err != nil {
			return fmt.Errorf("record use of token %s: %w", id, err)
		}
		return nil
	})
}
