package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// keptAttempt is how an attempt that is not the job's last ended: the job's row no longer
// says so once it is retried. The zero value keeps what the job's row says of a job that
// finished.
type keptAttempt struct {
	status   store.JobStatus
	kind     store.FailureKind
	exit     any
	finished int64
}

// keepAttempt records the job's current attempt as it ended (end, or the job's row when
// end is zero and the job is terminal), with its steps, and names what starts the next
// attempt (cause, by). An attempt already kept is not changed; a job that never ran keeps
// nothing of its own. It runs before the job's row is changed for the next attempt.
func (t *tx) keepAttempt(id uuid.UUID, end keptAttempt, cause store.AttemptCause, by string) error {
	steps, err := t.attemptSteps(id)
	if err != nil {
		return err
	}
	const set = ` ON CONFLICT (job_id, attempt) DO UPDATE SET status = excluded.status, failure_kind = excluded.failure_kind,
		exit_code = excluded.exit_code, reason = excluded.reason, worker_id = excluded.worker_id, queued_at = excluded.queued_at,
		started_at = excluded.started_at, finished_at = excluded.finished_at, steps = excluded.steps
		WHERE job_attempts.status = ''`
	if end.status == "" {
		_, err = t.exec(`INSERT INTO job_attempts (job_id, attempt, status, failure_kind, exit_code, reason, worker_id,
			queued_at, started_at, finished_at, steps)
			SELECT id, attempt, status, failure_kind, exit_code, reason, worker_id, queued_at, started_at, finished_at, ?
			FROM jobs WHERE id = ? AND attempt > 0 AND status IN ('success', 'failed', 'cancelled', 'skipped')`+set, steps, id)
	} else {
		_, err = t.exec(`INSERT INTO job_attempts (job_id, attempt, status, failure_kind, exit_code, reason, worker_id,
			queued_at, started_at, finished_at, steps)
			SELECT id, attempt, ?, ?, ?, '', worker_id, queued_at, started_at, ?, ?
			FROM jobs WHERE id = ? AND attempt > 0`+set, string(end.status), string(end.kind), end.exit, end.finished, steps, id)
	}
	if err != nil {
		return fmt.Errorf("keep the attempt of job %s: %w", id, err)
	}
	if _, err := t.exec(`INSERT INTO job_attempts (job_id, attempt, cause, started_by)
		SELECT id, attempt + 1, ?, ? FROM jobs WHERE id = ?
		ON CONFLICT (job_id, attempt) DO UPDATE SET cause = excluded.cause, started_by = excluded.started_by
		WHERE job_attempts.status = ''`, string(cause), by, id); err != nil {
		return fmt.Errorf("name the next attempt of job %s: %w", id, err)
	}
	return nil
}

// attemptSteps reads the job's steps as its current attempt left them, as JSON.
func (t *tx) attemptSteps(id uuid.UUID) (string, error) {
	rows, err := t.query(stepsQuery, id)
	if err != nil {
		return "", fmt.Errorf("read steps of job %s: %w", id, err)
	}
	steps, err := scanSteps(rows)
	if err != nil {
		return "", fmt.Errorf("read steps of job %s: %w", id, err)
	}
	if steps == nil {
		steps = []*store.Step{}
	}
	return mustJSON(steps), nil
}

const stepsQuery = `SELECT job_id, idx, name, attempt, status, exit_code, failure_kind, started_at, finished_at, once_succeeded
	FROM steps WHERE job_id = ? ORDER BY idx`

// scanSteps reads the rows of stepsQuery and closes them.
func scanSteps(rows *sql.Rows) ([]*store.Step, error) {
	defer rows.Close()
	var out []*store.Step
	for rows.Next() {
		var (
			s            store.Step
			status, kind string
			exit         sql.NullInt64
			st, fin      int64
		)
		if err := rows.Scan(&s.JobID, &s.Index, &s.Name, &s.Attempt, &status, &exit, &kind, &st, &fin, &s.OnceSucceeded); err != nil {
			return nil, err
		}
		s.Status, s.FailureKind = store.StepStatus(status), store.FailureKind(kind)
		if exit.Valid {
			v := int(exit.Int64)
			s.ExitCode = &v
		}
		s.StartedAt, s.FinishedAt = fromUS(st), fromUS(fin)
		out = append(out, &s)
	}
	return out, rows.Err()
}

// ListJobAttempts implements store.Reruns.
func (e *Engine) ListJobAttempts(ctx context.Context, jobID uuid.UUID) ([]*store.JobAttempt, error) {
	rows, err := e.readRows(ctx, `SELECT attempt, status, failure_kind, exit_code, reason, cause, started_by,
		queued_at, started_at, finished_at, steps FROM job_attempts WHERE job_id = ? ORDER BY attempt`, jobID)
	if err != nil {
		return nil, fmt.Errorf("list attempts of job %s: %w", jobID, err)
	}
	defer rows.Close()
	var out []*store.JobAttempt
	for rows.Next() {
		var (
			a                          = store.JobAttempt{JobID: jobID}
			status, kind, cause, steps string
			exit                       sql.NullInt64
			queued, started, finished  int64
		)
		if err := rows.Scan(&a.Attempt, &status, &kind, &exit, &a.Reason, &cause, &a.StartedBy,
			&queued, &started, &finished, &steps); err != nil {
			return nil, fmt.Errorf("list attempts of job %s: %w", jobID, err)
		}
		a.Status, a.FailureKind, a.Cause = store.JobStatus(status), store.FailureKind(kind), store.AttemptCause(cause)
		if exit.Valid {
			v := int(exit.Int64)
			a.ExitCode = &v
		}
		a.QueuedAt, a.StartedAt, a.FinishedAt = fromUS(queued), fromUS(started), fromUS(finished)
		if err := json.Unmarshal([]byte(steps), &a.Steps); err != nil {
			return nil, fmt.Errorf("decode steps of attempt %d of job %s: %w", a.Attempt, jobID, err)
		}
		out = append(out, &a)
	}
	return out, rows.Err()
}

// ListWaitingApproval implements store.ApprovalInbox. It reads the partial index of
// waiting jobs (jobs_approvals).
func (e *Engine) ListWaitingApproval(ctx context.Context, p store.ListWaitingApprovalParams) ([]*store.Job, error) {
	if p.ProjectIDs != nil && len(p.ProjectIDs) == 0 {
		return nil, nil
	}
	limit := p.Limit
	switch {
	case limit <= 0:
		limit = 200
	case limit > 1000:
		limit = 1000
	}
	q := jobWithSpec + `WHERE jobs.status = 'waiting_approval'`
	var args []any
	if p.ProjectIDs != nil {
		q += ` AND jobs.project_id IN (` + inList(len(p.ProjectIDs)) + `)`
		args = uuidArgs(p.ProjectIDs)
	}
	rows, err := e.readRows(ctx, q+` ORDER BY jobs.approval_deadline, jobs.id LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list jobs waiting for approval: %w", err)
	}
	defer rows.Close()
	var out []*store.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("list jobs waiting for approval: %w", err)
		}
		out = append(out, j)
	}
	return out, rows.Err()
}
