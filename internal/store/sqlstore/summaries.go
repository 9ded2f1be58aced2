package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// PutSummary implements store.Summaries.
func (e *Engine) PutSummary(ctx context.Context, p store.PutSummaryParams) error {
	switch {
	case p.Step < 0:
		return fmt.Errorf("put summary of job %s: step %d: steps count from 0: %w", p.JobID, p.Step, store.ErrInvalid)
	case p.Markdown == "":
		return fmt.Errorf("put summary of job %s step %d: the summary is empty: %w", p.JobID, p.Step, store.ErrInvalid)
	case len(p.Markdown) > store.MaxSummaryBytes:
		return fmt.Errorf("put summary of job %s step %d: %d bytes, more than the limit of %d: %w",
			p.JobID, p.Step, len(p.Markdown), store.MaxSummaryBytes, store.ErrInvalid)
	case !utf8.ValidString(p.Markdown) || strings.IndexByte(p.Markdown, 0) >= 0:
		// PostgreSQL's text holds neither; SQLite is held to the same rule.
		return fmt.Errorf("put summary of job %s step %d: the summary is not UTF-8 text without NUL: %w", p.JobID, p.Step, store.ErrInvalid)
	}
	err := e.write(ctx, func(t *tx) error {
		// The job's row is locked so that concurrent puts (a report re-sent to another
		// replica) count each other's parts: the bound holds exactly.
		var (
			runID   uuid.UUID
			attempt int
		)
		err := t.row(`SELECT run_id, attempt FROM jobs WHERE id = ? AND lease_token = ? AND lease_token <> ''
			AND status IN ('assigned', 'running')`+e.d.ForNoKeyUpdate, p.JobID, p.Token).Scan(&runID, &attempt)
		if isNoRows(err) {
			return t.leaseError(p.JobID)
		}
		if err != nil {
			return err
		}
		var others int
		if err := t.row(`SELECT COUNT(*) FROM step_summaries WHERE job_id = ? AND attempt = ? AND step <> ?`,
			p.JobID, attempt, p.Step).Scan(&others); err != nil {
			return err
		}
		if others >= store.MaxSummarySteps {
			return fmt.Errorf("attempt %d keeps the summaries of %d steps already, the most it may: %w", attempt, others, store.ErrConflict)
		}
		_, err = t.exec(`INSERT INTO step_summaries (job_id, attempt, step, run_id, bytes, markdown, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (job_id, attempt, step) DO UPDATE SET bytes = excluded.bytes, markdown = excluded.markdown,
				created_at = excluded.created_at`,
			p.JobID, attempt, p.Step, runID, len(p.Markdown), p.Markdown, us(e.clock.Now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("put summary of job %s step %d: %w", p.JobID, p.Step, err)
	}
	return nil
}

// ListSummaries implements store.Summaries.
func (e *Engine) ListSummaries(ctx context.Context, p store.ListSummariesParams) ([]*store.SummaryPart, error) {
	text := `''`
	if p.Markdown {
		text = `s.markdown`
	}
	cols := `s.job_id, s.run_id, s.attempt, s.step, s.bytes, ` + text + `, s.created_at`
	var (
		q    string
		args []any
	)
	switch {
	case p.JobID != uuid.Nil:
		var current int
		err := e.readRow(ctx, `SELECT attempt FROM jobs WHERE id = ?`, p.JobID).Scan(&current)
		if isNoRows(err) {
			return nil, fmt.Errorf("list summaries: job %s: %w", p.JobID, store.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("list summaries of job %s: %w", p.JobID, err)
		}
		attempt := p.Attempt
		if attempt <= 0 {
			attempt = current
		}
		q = `SELECT ` + cols + ` FROM step_summaries s WHERE s.job_id = ? AND s.attempt = ? ORDER BY s.step`
		args = []any{p.JobID, attempt}
	case p.RunID != uuid.Nil:
		q = `SELECT ` + cols + ` FROM step_summaries s JOIN jobs j ON j.id = s.job_id
			WHERE s.run_id = ? AND s.attempt = j.attempt ORDER BY j.seq, s.step`
		args = []any{p.RunID}
	default:
		return nil, fmt.Errorf("list summaries: a run or a job is required: %w", store.ErrInvalid)
	}
	rows, err := e.readRows(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list summaries: %w", err)
	}
	defer rows.Close()
	var out []*store.SummaryPart
	for rows.Next() {
		var (
			s       store.SummaryPart
			created int64
		)
		if err := rows.Scan(&s.JobID, &s.RunID, &s.Attempt, &s.Step, &s.Bytes, &s.Markdown, &created); err != nil {
			return nil, fmt.Errorf("list summaries: %w", err)
		}
		s.CreatedAt = fromUS(created)
		out = append(out, &s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list summaries: %w", err)
	}
	return out, nil
}

// DeleteSummariesBefore implements store.Summaries.
func (e *Engine) DeleteSummariesBefore(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := e.write(ctx, func(t *tx) error {
		res, err := t.exec(`DELETE FROM step_summaries WHERE created_at < ?`, us(before))
		if err != nil {
			return fmt.Errorf("delete old summaries: %w", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return int(n), err
}
