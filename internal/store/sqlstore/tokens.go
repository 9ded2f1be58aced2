package sqlstore

import (
	"context"
	"fmt"

	"github.com/gantry-ci/gantry/internal/store"
)

// CreateToken implements store.Tokens.
func (e *Engine) CreateToken(ctx context.Context, tk *store.Token) error {
	if len(tk.Hash) != 64 || tk.Role == "" {
		return fmt.Errorf("create token: a role and a SHA-256 hash are required: %w", store.ErrInvalid)
	}
	if tk.ID == [16]byte{} {
		tk.ID = store.NewID()
	}
	return e.write(ctx, func(t *tx) error {
		tk.CreatedAt = e.clock.Now()
		res, err := t.exec(`INSERT INTO tokens (id, name, role, hash, worker_id, created_at) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (hash) DO NOTHING`, tk.ID, tk.Name, string(tk.Role), tk.Hash, tk.WorkerID, us(tk.CreatedAt))
		if err != nil {
			return fmt.Errorf("create token: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("create token: hash already taken: %w", store.ErrConflict)
		}
		return nil
	})
}

// LookupToken implements store.Tokens.
func (e *Engine) LookupToken(ctx context.Context, hash string) (*store.Token, error) {
	var tk store.Token
	var role string
	var created int64
	err := e.readRow(ctx, `SELECT id, name, role, hash, worker_id, created_at FROM tokens WHERE hash = ?`, hash).
		Scan(&tk.ID, &tk.Name, &role, &tk.Hash, &tk.WorkerID, &created)
	if isNoRows(err) {
		return nil, fmt.Errorf("token: %w", store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("look up token: %w", err)
	}
	tk.Role, tk.CreatedAt = store.Role(role), fromUS(created)
	return &tk, nil
}
