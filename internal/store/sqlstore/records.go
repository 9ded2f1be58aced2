package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// UpsertWorker implements store.Workers.
func (e *Engine) UpsertWorker(ctx context.Context, w *store.Worker) error {
	if w.ID == "" {
		return fmt.Errorf("upsert worker: id is required: %w", store.ErrInvalid)
	}
	if w.State == "" {
		w.State = store.WorkerIdle
	}
	labels := mustJSON(w.Labels)
	return e.write(ctx, func(t *tx) error {
		now := us(e.clock.Now())
		_, err := t.exec(`INSERT INTO workers (id, name, labels, milli_cpu, memory, max_jobs, state, version, registered_at, last_seen_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET name = excluded.name, labels = excluded.labels, milli_cpu = excluded.milli_cpu,
			memory = excluded.memory, max_jobs = excluded.max_jobs, state = excluded.state, version = excluded.version,
			last_seen_at = excluded.last_seen_at`,
			w.ID, w.Name, labels, w.MilliCPU, w.Memory, w.MaxJobs, string(w.State), w.Version, now, now)
		if err != nil {
			return fmt.Errorf("upsert worker %s: %w", w.ID, err)
		}
		return nil
	})
}

// TouchWorker implements store.Workers.
func (e *Engine) TouchWorker(ctx context.Context, id string, state store.WorkerState) error {
	return e.write(ctx, func(t *tx) error {
		res, err := t.exec(`UPDATE workers SET state = ?, last_seen_at = ? WHERE id = ?`, string(state), us(e.clock.Now()), id)
		if err != nil {
			return fmt.Errorf("touch worker %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("worker %s: %w", id, store.ErrNotFound)
		}
		return nil
	})
}

// ListWorkers implements store.Workers.
func (e *Engine) ListWorkers(ctx context.Context) ([]*store.Worker, error) {
	rows, err := e.readRows(ctx, `SELECT id, name, labels, milli_cpu, memory, max_jobs, state, version, registered_at, last_seen_at
		FROM workers ORDER BY name, id`)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	defer rows.Close()
	var out []*store.Worker
	for rows.Next() {
		var (
			w             store.Worker
			labels, state string
			reg, seen     int64
		)
		if err := rows.Scan(&w.ID, &w.Name, &labels, &w.MilliCPU, &w.Memory, &w.MaxJobs, &state, &w.Version, &reg, &seen); err != nil {
			return nil, fmt.Errorf("list workers: %w", err)
		}
		if err := json.Unmarshal([]byte(labels), &w.Labels); err != nil {
			return nil, fmt.Errorf("decode labels of worker %s: %w", w.ID, err)
		}
		w.State = store.WorkerState(state)
		w.RegisteredAt, w.LastSeenAt = fromUS(reg), fromUS(seen)
		out = append(out, &w)
	}
	return out, rows.Err()
}

const artifactCols = `id, job_id, attempt, name, sha256, size, media_type, mode, state, created_at, expires_at, set_name, set_path`

func scanArtifact(s scanner) (*store.Artifact, error) {
	var (
		a              store.Artifact
		state          string
		created, expir int64
	)
	if err := s.Scan(&a.ID, &a.JobID, &a.Attempt, &a.Name, &a.SHA256, &a.Size, &a.MediaType, &a.Mode, &state, &created, &expir, &a.Set, &a.SetPath); err != nil {
		return nil, err
	}
	a.State = store.ArtifactState(state)
	a.CreatedAt, a.ExpiresAt = fromUS(created), fromUS(expir)
	return &a, nil
}

// PutArtifact implements store.Artifacts.
func (e *Engine) PutArtifact(ctx context.Context, l store.LeaseRef, a *store.Artifact) (*store.Artifact, error) {
	if a.Name == "" || len(a.SHA256) != 64 || a.Size < 0 {
		return nil, fmt.Errorf("put artifact: name, a SHA-256 hex digest and a size are required: %w", store.ErrInvalid)
	}
	var out *store.Artifact
	err := e.write(ctx, func(t *tx) error {
		var attempt int
		err := t.row(`SELECT attempt FROM jobs WHERE id = ? AND lease_token = ? AND lease_token <> '' AND status IN ('assigned', 'running')`,
			l.JobID, l.Token).Scan(&attempt)
		if isNoRows(err) {
			return t.leaseError(l.JobID)
		}
		if err != nil {
			return fmt.Errorf("check lease of job %s: %w", l.JobID, err)
		}
		now := us(e.clock.Now())
		mode := a.Mode
		if mode == 0 {
			mode = 0o644
		}
		if _, err := t.exec(`INSERT INTO artifacts (id, job_id, attempt, name, sha256, size, media_type, mode, state, created_at, expires_at, set_name, set_path)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job_id, attempt, set_name, name) DO NOTHING`,
			store.NewID(), l.JobID, attempt, a.Name, a.SHA256, a.Size, a.MediaType, mode, string(store.ArtifactPending), now, us(a.ExpiresAt),
			a.Set, a.SetPath); err != nil {
			return fmt.Errorf("insert artifact: %w", err)
		}
		out, err = scanArtifact(t.row(`SELECT `+artifactCols+` FROM artifacts WHERE job_id = ? AND attempt = ? AND set_name = ? AND name = ?`,
			l.JobID, attempt, a.Set, a.Name))
		if err != nil {
			return fmt.Errorf("read artifact: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("put artifact %q of job %s: %w", a.Name, l.JobID, err)
	}
	return out, nil
}

// MarkArtifactStored implements store.Artifacts.
func (e *Engine) MarkArtifactStored(ctx context.Context, id uuid.UUID) error {
	return e.write(ctx, func(t *tx) error {
		var (
			project uuid.UUID
			digest  string
		)
		err := t.row(`SELECT j.project_id, a.sha256 FROM artifacts a JOIN jobs j ON j.id = a.job_id WHERE a.id = ?`, id).Scan(&project, &digest)
		if isNoRows(err) {
			return fmt.Errorf("artifact %s: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("mark artifact %s stored: %w", id, err)
		}
		if owned, err := t.blobOwned(project, digest); err != nil {
			return fmt.Errorf("mark artifact %s stored: %w", id, err)
		} else if !owned {
			return fmt.Errorf("mark artifact %s stored: its project has not uploaded blob %s: %w", id, digest, store.ErrForbidden)
		}
		if _, err := t.exec(`UPDATE artifacts SET state = ? WHERE id = ?`, string(store.ArtifactStored), id); err != nil {
			return fmt.Errorf("mark artifact %s stored: %w", id, err)
		}
		return nil
	})
}

func (t *tx) blobOwned(project uuid.UUID, digest string) (bool, error) {
	var n int
	if err := t.row(`SELECT COUNT(*) FROM blob_owners WHERE project_id = ? AND sha256 = ?`, project, digest).Scan(&n); err != nil {
		return false, fmt.Errorf("look up the owners of blob %s: %w", digest, err)
	}
	return n > 0, nil
}

// AddBlobOwner implements store.Artifacts.
func (e *Engine) AddBlobOwner(ctx context.Context, projectID uuid.UUID, sha256 string) error {
	if projectID == uuid.Nil || len(sha256) != 64 {
		return fmt.Errorf("add blob owner: a project and a SHA-256 hex digest are required: %w", store.ErrInvalid)
	}
	return e.write(ctx, func(t *tx) error {
		var n int
		if err := t.row(`SELECT COUNT(*) FROM projects WHERE id = ?`, projectID).Scan(&n); err != nil {
			return fmt.Errorf("add owner %s of blob %s: %w", projectID, sha256, err)
		}
		if n == 0 {
			return fmt.Errorf("add owner %s of blob %s: project: %w", projectID, sha256, store.ErrNotFound)
		}
		_, err := t.exec(`INSERT INTO blob_owners (project_id, sha256, created_at) VALUES (?, ?, ?)
			ON CONFLICT (project_id, sha256) DO NOTHING`, projectID, sha256, us(e.clock.Now()))
		if err != nil {
			return fmt.Errorf("add owner %s of blob %s: %w", projectID, sha256, err)
		}
		return nil
	})
}

// BlobOwned implements store.Artifacts.
func (e *Engine) BlobOwned(ctx context.Context, projectID uuid.UUID, sha256 string) (bool, error) {
	var n int
	err := e.readRow(ctx, `SELECT COUNT(*) FROM blob_owners WHERE project_id = ? AND sha256 = ?`, projectID, sha256).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("look up the owners of blob %s: %w", sha256, err)
	}
	return n > 0, nil
}

// DeleteBlobOwners implements store.Artifacts.
func (e *Engine) DeleteBlobOwners(ctx context.Context, sha256 string) error {
	return e.write(ctx, func(t *tx) error {
		if _, err := t.exec(`DELETE FROM blob_owners WHERE sha256 = ?`, sha256); err != nil {
			return fmt.Errorf("delete the owners of blob %s: %w", sha256, err)
		}
		return nil
	})
}

// GetArtifact implements store.Artifacts.
func (e *Engine) GetArtifact(ctx context.Context, id uuid.UUID) (*store.Artifact, error) {
	a, err := scanArtifact(e.readRow(ctx, `SELECT `+artifactCols+` FROM artifacts WHERE id = ?`, id))
	if isNoRows(err) {
		return nil, fmt.Errorf("artifact %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get artifact %s: %w", id, err)
	}
	return a, nil
}

// ListArtifacts implements store.Artifacts.
func (e *Engine) ListArtifacts(ctx context.Context, jobID uuid.UUID) ([]*store.Artifact, error) {
	rows, err := e.readRows(ctx, `SELECT `+artifactCols+` FROM artifacts WHERE job_id = ? ORDER BY attempt, set_name, name`, jobID)
	if err != nil {
		return nil, fmt.Errorf("list artifacts of job %s: %w", jobID, err)
	}
	defer rows.Close()
	var out []*store.Artifact
	for rows.Next() {
		a, err := scanArtifact(rows)
		if err != nil {
			return nil, fmt.Errorf("list artifacts of job %s: %w", jobID, err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// ListRunArtifacts implements store.Artifacts.
func (e *Engine) ListRunArtifacts(ctx context.Context, runID uuid.UUID) ([]*store.Artifact, error) {
	rows, err := e.readRows(ctx, `SELECT a.id, a.job_id, a.attempt, a.name, a.sha256, a.size, a.media_type, a.mode, a.state, a.created_at, a.expires_at,
		a.set_name, a.set_path FROM artifacts a JOIN jobs j ON j.id = a.job_id WHERE j.run_id = ? ORDER BY j.key, a.attempt, a.set_name, a.name`, runID)
	if err != nil {
		return nil, fmt.Errorf("list artifacts of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []*store.Artifact
	for rows.Next() {
		a, err := scanArtifact(rows)
		if err != nil {
			return nil, fmt.Errorf("list artifacts of run %s: %w", runID, err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// DeleteExpiredArtifacts implements store.Artifacts.
func (e *Engine) DeleteExpiredArtifacts(ctx context.Context, t time.Time) (int, error) {
	var n int64
	err := e.write(ctx, func(tx *tx) error {
		res, err := tx.exec(`DELETE FROM artifacts WHERE expires_at <> 0 AND expires_at <= ?`, us(t))
		if err != nil {
			return fmt.Errorf("delete expired artifacts: %w", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return int(n), err
}

// BlobInUse implements store.Artifacts.
func (e *Engine) BlobInUse(ctx context.Context, sha256 string) (bool, error) {
	var n int
	err := e.readRow(ctx, `SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM artifacts WHERE sha256 = ? LIMIT 1) AS a) +
		(SELECT COUNT(*) FROM (SELECT 1 FROM cache_entries WHERE sha256 = ? LIMIT 1) AS c) +
		(SELECT COUNT(*) FROM (SELECT 1 FROM log_chunks WHERE location = ? LIMIT 1) AS l)`, sha256, sha256, store.LogBlobLocation(sha256)).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("look up the users of blob %s: %w", sha256, err)
	}
	return n > 0, nil
}

// AppendLogChunk implements store.LogIndex.
func (e *Engine) AppendLogChunk(ctx context.Context, c *store.LogChunk) error {
	if c.FirstSeq < 1 || c.LastSeq < c.FirstSeq {
		return fmt.Errorf("append log chunk: seqs %d-%d: %w", c.FirstSeq, c.LastSeq, store.ErrInvalid)
	}
	return e.write(ctx, func(t *tx) error {
		var last int64
		err := t.row(`SELECT last_seq FROM log_chunks WHERE job_id = ? AND attempt = ?
			ORDER BY first_seq DESC LIMIT 1`, c.JobID, c.Attempt).Scan(&last)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("append log chunk of job %s: %w", c.JobID, err)
		}
		if c.FirstSeq != last+1 {
			return fmt.Errorf("append log chunk of job %s at seq %d: the log ends at %d: %w",
				c.JobID, c.FirstSeq, last, store.ErrConflict)
		}
		res, err := t.exec(`INSERT INTO log_chunks (job_id, attempt, first_seq, last_seq, bytes, location, data, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job_id, attempt, first_seq) DO NOTHING`,
			c.JobID, c.Attempt, c.FirstSeq, c.LastSeq, c.Bytes, c.Location, c.Data, us(e.clock.Now()))
		if err != nil {
			return fmt.Errorf("append log chunk of job %s: %w", c.JobID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("append log chunk of job %s at seq %d: written meanwhile: %w", c.JobID, c.FirstSeq, store.ErrConflict)
		}
		return nil
	})
}

// LastLogSeq implements store.LogIndex.
func (e *Engine) LastLogSeq(ctx context.Context, jobID uuid.UUID, attempt int) (seq, bytes int64, err error) {
	err = e.readRow(ctx, `SELECT COALESCE(MAX(last_seq), 0), COALESCE(SUM(bytes), 0) FROM log_chunks
		WHERE job_id = ? AND attempt = ?`, jobID, attempt).Scan(&seq, &bytes)
	if err != nil {
		return 0, 0, fmt.Errorf("last log seq of job %s: %w", jobID, err)
	}
	return seq, bytes, nil
}

// ListLogChunks implements store.LogIndex.
func (e *Engine) ListLogChunks(ctx context.Context, jobID uuid.UUID, attempt int, afterSeq int64, max int) ([]*store.LogChunk, error) {
	if max <= 0 {
		max = 100
	}
	rows, err := e.readRows(ctx, `SELECT job_id, attempt, first_seq, last_seq, bytes, location, data, created_at
		FROM log_chunks WHERE job_id = ? AND attempt = ? AND last_seq > ? ORDER BY first_seq LIMIT ?`,
		jobID, attempt, afterSeq, max)
	if err != nil {
		return nil, fmt.Errorf("list log chunks of job %s: %w", jobID, err)
	}
	defer rows.Close()
	var out []*store.LogChunk
	for rows.Next() {
		var c store.LogChunk
		var created int64
		if err := rows.Scan(&c.JobID, &c.Attempt, &c.FirstSeq, &c.LastSeq, &c.Bytes, &c.Location, &c.Data, &created); err != nil {
			return nil, fmt.Errorf("list log chunks of job %s: %w", jobID, err)
		}
		c.CreatedAt = fromUS(created)
		out = append(out, &c)
	}
	return out, rows.Err()
}

// ReplaceLogChunks implements store.LogIndex.
func (e *Engine) ReplaceLogChunks(ctx context.Context, jobID uuid.UUID, attempt int, cs []*store.LogChunk) error {
	return e.write(ctx, func(t *tx) error {
		if _, err := t.exec(`DELETE FROM log_chunks WHERE job_id = ? AND attempt = ?`, jobID, attempt); err != nil {
			return fmt.Errorf("replace log chunks of job %s: %w", jobID, err)
		}
		now := us(e.clock.Now())
		for _, c := range cs {
			_, err := t.exec(`INSERT INTO log_chunks (job_id, attempt, first_seq, last_seq, bytes, location, data, created_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, jobID, attempt, c.FirstSeq, c.LastSeq, c.Bytes, c.Location, c.Data, now)
			if err != nil {
				return fmt.Errorf("replace log chunks of job %s: %w", jobID, err)
			}
		}
		return nil
	})
}

// DeleteLogChunksBefore implements store.LogIndex.
func (e *Engine) DeleteLogChunksBefore(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := e.write(ctx, func(t *tx) error {
		res, err := t.exec(`DELETE FROM log_chunks WHERE created_at < ?`, us(before))
		if err != nil {
			return fmt.Errorf("delete old log chunks: %w", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return int(n), err
}
