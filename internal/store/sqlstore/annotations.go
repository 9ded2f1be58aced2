package sqlstore

import (
	"context"
	"fmt"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

const annotationCols = `job_id, run_id, attempt, seq, step, level, message, title, file, line, col, end_line, end_column, created_at`

func scanAnnotation(s scanner) (*store.Annotation, error) {
	var (
		a       store.Annotation
		created int64
	)
	if err := s.Scan(&a.JobID, &a.RunID, &a.Attempt, &a.Seq, &a.Step, &a.Level, &a.Message, &a.Title, &a.File,
		&a.Line, &a.Col, &a.EndLine, &a.EndColumn, &created); err != nil {
		return nil, err
	}
	a.CreatedAt = fromUS(created)
	return &a, nil
}

// AddAnnotations implements store.Annotations.
func (e *Engine) AddAnnotations(ctx context.Context, p store.AddAnnotationsParams) (int, error) {
	if p.JobID == uuid.Nil || p.Attempt < 1 {
		return 0, fmt.Errorf("add annotations: a job and an attempt from 1 are required: %w", store.ErrInvalid)
	}
	for _, a := range p.Annotations {
		switch {
		case a.Level != store.AnnotationError && a.Level != store.AnnotationWarning && a.Level != store.AnnotationNotice:
			return 0, fmt.Errorf("add annotations of job %s: level %q is not error, warning or notice: %w", p.JobID, a.Level, store.ErrInvalid)
		case a.Seq < 1:
			return 0, fmt.Errorf("add annotations of job %s: seq %d: seq starts at 1: %w", p.JobID, a.Seq, store.ErrInvalid)
		}
	}
	if len(p.Annotations) == 0 {
		return 0, nil
	}
	var added int
	err := e.write(ctx, func(t *tx) error {
		added = 0
		// The job's row is locked so that concurrent adds (a batch re-sent to another
		// replica) count each other's rows: the bounds hold exactly.
		var runID uuid.UUID
		err := t.row(`SELECT run_id FROM jobs WHERE id = ?`+e.d.ForNoKeyUpdate, p.JobID).Scan(&runID)
		if isNoRows(err) {
			return fmt.Errorf("job %s: %w", p.JobID, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		type stepKey struct {
			level string
			step  int
		}
		perStep, perJob := map[stepKey]int{}, map[string]int{}
		rows, err := t.query(`SELECT level, step, COUNT(*) FROM annotations WHERE job_id = ? AND attempt = ? GROUP BY level, step`,
			p.JobID, p.Attempt)
		if err != nil {
			return err
		}
		for rows.Next() {
			var (
				k stepKey
				n int
			)
			if err := rows.Scan(&k.level, &k.step, &n); err != nil {
				rows.Close()
				return err
			}
			perStep[k] += n
			perJob[k.level] += n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		now := us(e.clock.Now())
		for _, a := range p.Annotations {
			step := max(a.Step, -1)
			k := stepKey{a.Level, step}
			if perJob[a.Level] >= store.MaxAnnotationsPerJob || step >= 0 && perStep[k] >= store.MaxAnnotationsPerStep {
				continue
			}
			res, err := t.exec(`INSERT INTO annotations (`+annotationCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (job_id, attempt, seq) DO NOTHING`,
				p.JobID, runID, p.Attempt, a.Seq, step, a.Level, a.Message, a.Title, a.File,
				a.Line, a.Col, a.EndLine, a.EndColumn, now)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n > 0 {
				added++
				perStep[k]++
				perJob[a.Level]++
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("add annotations of job %s attempt %d: %w", p.JobID, p.Attempt, err)
	}
	return added, nil
}

// ListAnnotations implements store.Annotations.
func (e *Engine) ListAnnotations(ctx context.Context, p store.ListAnnotationsParams) ([]*store.Annotation, error) {
	var (
		q    string
		args []any
	)
	switch {
	case p.JobID != uuid.Nil:
		attempt := p.Attempt
		if attempt <= 0 {
			err := e.readRow(ctx, `SELECT attempt FROM jobs WHERE id = ?`, p.JobID).Scan(&attempt)
			if isNoRows(err) {
				return nil, fmt.Errorf("list annotations: job %s: %w", p.JobID, store.ErrNotFound)
			}
			if err != nil {
				return nil, fmt.Errorf("list annotations of job %s: %w", p.JobID, err)
			}
		}
		q = `SELECT ` + annotationCols + ` FROM annotations WHERE job_id = ? AND attempt = ? ORDER BY seq`
		args = []any{p.JobID, attempt}
	case p.RunID != uuid.Nil:
		q = `SELECT a.job_id, a.run_id, a.attempt, a.seq, a.step, a.level, a.message, a.title, a.file, a.line, a.col,
			a.end_line, a.end_column, a.created_at
			FROM annotations a JOIN jobs j ON j.id = a.job_id
			WHERE a.run_id = ? AND a.attempt = j.attempt ORDER BY j.seq, a.seq`
		args = []any{p.RunID}
	default:
		return nil, fmt.Errorf("list annotations: a run or a job is required: %w", store.ErrInvalid)
	}
	rows, err := e.readRows(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list annotations: %w", err)
	}
	defer rows.Close()
	var out []*store.Annotation
	for rows.Next() {
		a, err := scanAnnotation(rows)
		if err != nil {
			return nil, fmt.Errorf("list annotations: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list annotations: %w", err)
	}
	return out, nil
}
