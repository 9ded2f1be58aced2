package sqlstore

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

const cacheCols = `id, project_id, scope, cache_key, sha256, size, created_at, last_used_at`

func scanCache(s scanner) (*store.CacheEntry, error) {
	var (
		c             store.CacheEntry
		created, used int64
	)
	if err := s.Scan(&c.ID, &c.ProjectID, &c.Scope, &c.Key, &c.SHA256, &c.Size, &created, &used); err != nil {
		return nil, err
	}
	c.CreatedAt, c.LastUsedAt = fromUS(created), fromUS(used)
	return &c, nil
}

// PutCache implements store.Caches.
func (e *Engine) PutCache(ctx context.Context, c *store.CacheEntry) (*store.CacheEntry, bool, error) {
	if c.ProjectID == uuid.Nil || c.Key == "" || len(c.SHA256) != 64 || c.Size < 0 {
		return nil, false, fmt.Errorf("put cache: a project, a key, a SHA-256 hex digest and a size are required: %w", store.ErrInvalid)
	}
	var (
		out     *store.CacheEntry
		created bool
	)
	err := e.write(ctx, func(t *tx) error {
		owned, err := t.blobOwned(c.ProjectID, c.SHA256)
		if err != nil {
			return err
		}
		if !owned {
			// Nothing is recorded then, so an entry there already is still the answer.
			out, err = scanCache(t.row(`SELECT `+cacheCols+` FROM cache_entries WHERE project_id = ? AND scope = ? AND cache_key = ?`,
				c.ProjectID, c.Scope, c.Key))
			if isNoRows(err) {
				return fmt.Errorf("the project has not uploaded blob %s: %w", c.SHA256, store.ErrForbidden)
			}
			return err
		}
		now := us(e.clock.Now())
		res, err := t.exec(`INSERT INTO cache_entries (`+cacheCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (project_id, scope, cache_key) DO NOTHING`,
			store.NewID(), c.ProjectID, c.Scope, c.Key, c.SHA256, c.Size, now, now)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		created = n > 0
		out, err = scanCache(t.row(`SELECT `+cacheCols+` FROM cache_entries WHERE project_id = ? AND scope = ? AND cache_key = ?`,
			c.ProjectID, c.Scope, c.Key))
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("put cache %q in scope %q: %w", c.Key, c.Scope, err)
	}
	return out, created, nil
}

// FindCache implements store.Caches.
func (e *Engine) FindCache(ctx context.Context, p store.FindCacheParams) (*store.CacheEntry, error) {
	var out *store.CacheEntry
	err := e.write(ctx, func(t *tx) error {
		for _, scope := range p.Scopes {
			c, err := scanCache(t.row(`SELECT `+cacheCols+` FROM cache_entries WHERE project_id = ? AND scope = ? AND cache_key = ?`,
				p.ProjectID, scope, p.Key))
			if err != nil && !isNoRows(err) {
				return err
			}
			for _, prefix := range p.RestoreKeys {
				if c != nil || prefix == "" {
					break
				}
				// substr, not LIKE: SQLite's LIKE ignores case, and a key may hold % or _.
				c, err = scanCache(t.row(`SELECT `+cacheCols+` FROM cache_entries
					WHERE project_id = ? AND scope = ? AND substr(cache_key, 1, ?) = ?
					ORDER BY created_at DESC, id DESC LIMIT 1`,
					p.ProjectID, scope, utf8.RuneCountInString(prefix), prefix))
				if err != nil && !isNoRows(err) {
					return err
				}
			}
			if c == nil {
				continue
			}
			c.LastUsedAt = e.clock.Now()
			if _, err := t.exec(`UPDATE cache_entries SET last_used_at = ? WHERE id = ?`, us(c.LastUsedAt), c.ID); err != nil {
				return err
			}
			c.LastUsedAt = fromUS(us(c.LastUsedAt))
			out = c
			return nil
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find cache %q: %w", p.Key, err)
	}
	if out == nil {
		return nil, fmt.Errorf("cache %q: %w", p.Key, store.ErrNotFound)
	}
	return out, nil
}

// ListCaches implements store.Caches.
func (e *Engine) ListCaches(ctx context.Context, projectID uuid.UUID) ([]*store.CacheEntry, error) {
	rows, err := e.readRows(ctx, `SELECT `+cacheCols+` FROM cache_entries WHERE project_id = ?
		ORDER BY last_used_at DESC, scope, cache_key`, projectID)
	if err != nil {
		return nil, fmt.Errorf("list caches: %w", err)
	}
	defer rows.Close()
	var out []*store.CacheEntry
	for rows.Next() {
		c, err := scanCache(rows)
		if err != nil {
			return nil, fmt.Errorf("list caches: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// DeleteCaches implements store.Caches.
func (e *Engine) DeleteCaches(ctx context.Context, p store.DeleteCachesParams) (int, error) {
	q := `DELETE FROM cache_entries WHERE project_id = ?`
	args := []any{p.ProjectID}
	if p.ID != uuid.Nil {
		q += ` AND id = ?`
		args = append(args, p.ID)
	}
	if p.Key != "" {
		q += ` AND cache_key = ?`
		args = append(args, p.Key)
	}
	if p.Scope != "" {
		q += ` AND scope = ?`
		args = append(args, p.Scope)
	}
	var n int64
	err := e.write(ctx, func(t *tx) error {
		res, err := t.exec(q, args...)
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("delete caches: %w", err)
	}
	return int(n), nil
}

// EvictCaches implements store.Caches.
func (e *Engine) EvictCaches(ctx context.Context, p store.EvictCachesParams) (int, error) {
	var n int64
	err := e.write(ctx, func(t *tx) error {
		if !p.UnusedSince.IsZero() {
			res, err := t.exec(`DELETE FROM cache_entries WHERE last_used_at < ?`, us(p.UnusedSince))
			if err != nil {
				return fmt.Errorf("by age: %w", err)
			}
			k, _ := res.RowsAffected()
			n += k
		}
		if p.MaxBytes <= 0 {
			return nil
		}
		over, err := t.query(`SELECT project_id FROM cache_entries GROUP BY project_id HAVING SUM(size) > ?`, p.MaxBytes)
		if err != nil {
			return fmt.Errorf("by size: %w", err)
		}
		var projects []uuid.UUID
		for over.Next() {
			var id uuid.UUID
			if err := over.Scan(&id); err != nil {
				over.Close()
				return fmt.Errorf("by size: %w", err)
			}
			projects = append(projects, id)
		}
		over.Close()
		if err := over.Err(); err != nil {
			return fmt.Errorf("by size: %w", err)
		}
		for _, project := range projects {
			rows, err := t.query(`SELECT id, size FROM cache_entries WHERE project_id = ?
				ORDER BY last_used_at DESC, created_at DESC, id DESC`, project)
			if err != nil {
				return fmt.Errorf("by size: %w", err)
			}
			var (
				kept  int64
				evict []uuid.UUID
			)
			for rows.Next() {
				var (
					id   uuid.UUID
					size int64
				)
				if err := rows.Scan(&id, &size); err != nil {
					rows.Close()
					return fmt.Errorf("by size: %w", err)
				}
				// Most recently used first: once the budget is spent, the rest go.
				if len(evict) > 0 || kept+size > p.MaxBytes {
					evict = append(evict, id)
					continue
				}
				kept += size
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("by size: %w", err)
			}
			for _, id := range evict {
				if _, err := t.exec(`DELETE FROM cache_entries WHERE id = ?`, id); err != nil {
					return fmt.Errorf("by size: %w", err)
				}
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("evict caches: %w", err)
	}
	return int(n), nil
}
