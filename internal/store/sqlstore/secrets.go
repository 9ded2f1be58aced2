package sqlstore

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

const secretCols = `s.project_id, p.name, s.environment, s.scope, s.name, s.key_id, s.wrapped_key, s.ciphertext, s.created_at, s.updated_at`

func scanSecret(r scanner) (*store.Secret, error) {
	var s store.Secret
	var wrapped, ct string
	var created, updated int64
	if err := r.Scan(&s.ProjectID, &s.Project, &s.Environment, &s.Scope, &s.Name, &s.KeyID, &wrapped, &ct, &created, &updated); err != nil {
		return nil, err
	}
	var err error
	if s.WrappedKey, err = base64.StdEncoding.DecodeString(wrapped); err != nil {
		return nil, fmt.Errorf("decode wrapped key of secret %s: %w", s.Name, err)
	}
	if s.Ciphertext, err = base64.StdEncoding.DecodeString(ct); err != nil {
		return nil, fmt.Errorf("decode ciphertext of secret %s: %w", s.Name, err)
	}
	s.CreatedAt, s.UpdatedAt = fromUS(created), fromUS(updated)
	return &s, nil
}

func (t *tx) secretProject(action, name string) (uuid.UUID, error) {
	var id uuid.UUID
	err := t.row(`SELECT id FROM projects WHERE name = ?`, name).Scan(&id)
	if isNoRows(err) {
		return id, fmt.Errorf("%s: project %q: %w", action, name, store.ErrNotFound)
	}
	if err != nil {
		return id, fmt.Errorf("%s: look up project %q: %w", action, name, err)
	}
	return id, nil
}

// PutSecret implements store.Secrets.
func (e *Engine) PutSecret(ctx context.Context, s *store.Secret) (bool, error) {
	if s == nil || s.Project == "" || s.Name == "" || s.KeyID == "" || len(s.WrappedKey) == 0 || len(s.Ciphertext) == 0 {
		return false, fmt.Errorf("put secret: a project, a name and a sealed value are required: %w", store.ErrInvalid)
	}
	audit, err := auditOf(ctx)
	if err != nil {
		return false, fmt.Errorf("put secret %s: %w", s.Name, err)
	}
	created := false
	err = e.write(ctx, func(t *tx) error {
		id, err := t.secretProject("put secret "+s.Name, s.Project)
		if err != nil {
			return err
		}
		now := us(e.clock.Now())
		first := now
		err = t.row(`SELECT created_at FROM secrets WHERE project_id = ? AND scope = ? AND environment = ? AND name = ?`,
			id, s.Scope, s.Environment, s.Name).Scan(&first)
		switch {
		case isNoRows(err):
			created = true
			_, err = t.exec(`INSERT INTO secrets (project_id, environment, scope, name, key_id, wrapped_key, ciphertext, created_at, updated_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, id, s.Environment, s.Scope, s.Name, s.KeyID,
				base64.StdEncoding.EncodeToString(s.WrappedKey), base64.StdEncoding.EncodeToString(s.Ciphertext), now, now)
		case err != nil:
		default:
			created = false
			_, err = t.exec(`UPDATE secrets SET key_id = ?, wrapped_key = ?, ciphertext = ?, updated_at = ?
				WHERE project_id = ? AND scope = ? AND environment = ? AND name = ?`, s.KeyID,
				base64.StdEncoding.EncodeToString(s.WrappedKey), base64.StdEncoding.EncodeToString(s.Ciphertext), now,
				id, s.Scope, s.Environment, s.Name)
		}
		if err != nil {
			return fmt.Errorf("put secret %s of project %q: %w", s.Name, s.Project, err)
		}
		s.ProjectID, s.CreatedAt, s.UpdatedAt = id, fromUS(first), fromUS(now)
		return t.appendAudit(audit)
	})
	return created, err
}

// GetSecret implements store.Secrets.
func (e *Engine) GetSecret(ctx context.Context, k store.SecretKey) (*store.Secret, error) {
	s, err := scanSecret(e.readRow(ctx, `SELECT `+secretCols+` FROM secrets s JOIN projects p ON p.id = s.project_id
		WHERE p.name = ? AND s.scope = ? AND s.environment = ? AND s.name = ?`, k.Project, k.Scope, k.Environment, k.Name))
	if isNoRows(err) {
		return nil, fmt.Errorf("secret %s of project %q: %w", k.Name, k.Project, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get secret %s of project %q: %w", k.Name, k.Project, err)
	}
	return s, nil
}

// ListSecrets implements store.Secrets.
func (e *Engine) ListSecrets(ctx context.Context, project string) ([]*store.Secret, error) {
	var id uuid.UUID
	err := e.readRow(ctx, `SELECT id FROM projects WHERE name = ?`, project).Scan(&id)
	if isNoRows(err) {
		return nil, fmt.Errorf("list secrets: project %q: %w", project, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("list secrets of project %q: %w", project, err)
	}
	rows, err := e.readRows(ctx, `SELECT `+secretCols+` FROM secrets s JOIN projects p ON p.id = s.project_id
		WHERE s.project_id = ? AND s.scope = '' ORDER BY s.name, s.environment`, id)
	if err != nil {
		return nil, fmt.Errorf("list secrets of project %q: %w", project, err)
	}
	defer rows.Close()
	out := []*store.Secret{}
	for rows.Next() {
		s, err := scanSecret(rows)
		if err != nil {
			return nil, fmt.Errorf("list secrets of project %q: %w", project, err)
		}
		// A listing is metadata: the sealed value stays where it is.
		s.WrappedKey, s.Ciphertext = nil, nil
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list secrets of project %q: %w", project, err)
	}
	return out, nil
}

// DeleteSecret implements store.Secrets.
func (e *Engine) DeleteSecret(ctx context.Context, k store.SecretKey) error {
	audit, err := auditOf(ctx)
	if err != nil {
		return fmt.Errorf("delete secret %s: %w", k.Name, err)
	}
	return e.write(ctx, func(t *tx) error {
		id, err := t.secretProject("delete secret "+k.Name, k.Project)
		if err != nil {
			return err
		}
		res, err := t.exec(`DELETE FROM secrets WHERE project_id = ? AND scope = ? AND environment = ? AND name = ?`,
			id, k.Scope, k.Environment, k.Name)
		if err != nil {
			return fmt.Errorf("delete secret %s of project %q: %w", k.Name, k.Project, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("delete secret %s of project %q: %w", k.Name, k.Project, store.ErrNotFound)
		}
		return t.appendAudit(audit)
	})
}

// SealedSecrets implements store.Secrets.
func (e *Engine) SealedSecrets(ctx context.Context, notKeyID string) ([]*store.Secret, error) {
	rows, err := e.readRows(ctx, `SELECT `+secretCols+` FROM secrets s JOIN projects p ON p.id = s.project_id
		WHERE s.key_id <> ? ORDER BY p.name, s.scope, s.environment, s.name`, notKeyID)
	if err != nil {
		return nil, fmt.Errorf("list sealed secrets: %w", err)
	}
	defer rows.Close()
	var out []*store.Secret
	for rows.Next() {
		s, err := scanSecret(rows)
		if err != nil {
			return nil, fmt.Errorf("list sealed secrets: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sealed secrets: %w", err)
	}
	return out, nil
}

// RewrapSecret implements store.Secrets.
func (e *Engine) RewrapSecret(ctx context.Context, k store.SecretKey, oldKeyID string, oldWrapped []byte, newKeyID string, newWrapped []byte) error {
	if newKeyID == "" || len(newWrapped) == 0 {
		return fmt.Errorf("rewrap secret %s: a key id and a wrapped key are required: %w", k.Name, store.ErrInvalid)
	}
	return e.write(ctx, func(t *tx) error {
		id, err := t.secretProject("rewrap secret "+k.Name, k.Project)
		if err != nil {
			return err
		}
		var keyID, wrapped string
		err = t.row(`SELECT key_id, wrapped_key FROM secrets WHERE project_id = ? AND scope = ? AND environment = ? AND name = ?`+e.d.ForUpdate,
			id, k.Scope, k.Environment, k.Name).Scan(&keyID, &wrapped)
		if isNoRows(err) {
			return fmt.Errorf("rewrap secret %s of project %q: %w", k.Name, k.Project, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("rewrap secret %s of project %q: %w", k.Name, k.Project, err)
		}
		cur, _ := base64.StdEncoding.DecodeString(wrapped)
		if keyID != oldKeyID || !bytes.Equal(cur, oldWrapped) {
			return fmt.Errorf("rewrap secret %s of project %q: changed meanwhile: %w", k.Name, k.Project, store.ErrConflict)
		}
		if _, err := t.exec(`UPDATE secrets SET key_id = ?, wrapped_key = ? WHERE project_id = ? AND scope = ? AND environment = ? AND name = ?`,
			newKeyID, base64.StdEncoding.EncodeToString(newWrapped), id, k.Scope, k.Environment, k.Name); err != nil {
			return fmt.Errorf("rewrap secret %s of project %q: %w", k.Name, k.Project, err)
		}
		return nil
	})
}

// SecretsForForks implements store.Secrets.
func (e *Engine) SecretsForForks(ctx context.Context, project string) (bool, error) {
	var allow int64
	err := e.readRow(ctx, `SELECT secrets_for_forks FROM projects WHERE name = ?`, project).Scan(&allow)
	if isNoRows(err) {
		return false, fmt.Errorf("project %q: %w", project, store.ErrNotFound)
	}
	if err != nil {
		return false, fmt.Errorf("read secrets_for_forks of project %q: %w", project, err)
	}
	return allow != 0, nil
}

// SetSecretsForForks implements store.Secrets.
func (e *Engine) SetSecretsForForks(ctx context.Context, project string, allow bool) error {
	v := 0
	if allow {
		v = 1
	}
	audit, err := auditOf(ctx)
	if err != nil {
		return fmt.Errorf("set secrets_for_forks: %w", err)
	}
	return e.write(ctx, func(t *tx) error {
		res, err := t.exec(`UPDATE projects SET secrets_for_forks = ? WHERE name = ?`, v, project)
		if err != nil {
			return fmt.Errorf("set secrets_for_forks of project %q: %w", project, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("set secrets_for_forks: project %q: %w", project, store.ErrNotFound)
		}
		return t.appendAudit(audit)
	})
}
