package sqlstore

import (
	"context"
	"fmt"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// RetryRun implements store.Runs.
func (e *Engine) RetryRun(ctx context.Context, id uuid.UUID) error {
	err := e.writeAlone(ctx, func(t *tx) error {
		status, err := t.lockRun(id)
		if err != nil {
			return err
		}
		if !status.Terminal() {
			return fmt.Errorf("run %s is still %s: %w", id, status, store.ErrConflict)
		}
		ids, err := t.ids(`SELECT id FROM jobs WHERE run_id = ? AND status IN ('failed', 'cancelled', 'skipped') ORDER BY seq`, id)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return fmt.Errorf("run %s has no failed, cancelled or skipped job: %w", id, store.ErrConflict)
		}
		return t.reopen(id, ids, "")
	})
	if err != nil {
		return fmt.Errorf("retry run %s: %w", id, err)
	}
	return nil
}

// RetryJob implements store.Runs.
func (e *Engine) RetryJob(ctx context.Context, id uuid.UUID) error {
	err := e.writeAlone(ctx, func(t *tx) error {
		j, err := t.lockJob(id)
		if err != nil {
			return err
		}
		switch j.status {
		case store.JobFailed, store.JobCancelled, store.JobSkipped:
		default:
			return fmt.Errorf("job %s is %s: %w", id, j.status, store.ErrConflict)
		}
		if _, err := t.lockRun(j.runID); err != nil {
			return err
		}
		// The job and every unsuccessful job downstream of it.
		ids, err := t.downstream([]uuid.UUID{id}, `d.status IN ('failed', 'cancelled', 'skipped')`)
		if err != nil {
			return err
		}
		return t.reopen(j.runID, ids, "")
	})
	if err != nil {
		return fmt.Errorf("retry job %s: %w", id, err)
	}
	return nil
}

// Rerun implements store.Reruns.
func (e *Engine) Rerun(ctx context.Context, p store.RerunParams) ([]uuid.UUID, error) {
	var out []uuid.UUID
	err := e.writeAlone(ctx, func(t *tx) error {
		out = nil
		var runID uuid.UUID
		var roots []uuid.UUID
		switch {
		case p.JobID != uuid.Nil:
			j, err := t.lockJob(p.JobID)
			if err != nil {
				return err
			}
			if !j.status.Terminal() {
				return fmt.Errorf("job %s is %s; a job is re-run once it has finished: %w", p.JobID, j.status, store.ErrConflict)
			}
			if _, err := t.lockRun(j.runID); err != nil {
				return err
			}
			runID, roots = j.runID, []uuid.UUID{p.JobID}
		case p.RunID != uuid.Nil:
			status, err := t.lockRun(p.RunID)
			if err != nil {
				return err
			}
			if !status.Terminal() {
				return fmt.Errorf("run %s is still %s; a run is re-run once it has finished: %w", p.RunID, status, store.ErrConflict)
			}
			var which string
			switch p.Jobs {
			case store.RerunFailed:
				which = ` AND status IN ('failed', 'cancelled', 'skipped')`
			case store.RerunAll:
			default:
				return fmt.Errorf("re-run %q jobs: want %q or %q: %w", p.Jobs, store.RerunFailed, store.RerunAll, store.ErrInvalid)
			}
			if roots, err = t.ids(`SELECT id FROM jobs WHERE run_id = ?`+which+` ORDER BY seq`, p.RunID); err != nil {
				return err
			}
			if len(roots) == 0 {
				return fmt.Errorf("run %s has no failed, cancelled or skipped job: %w", p.RunID, store.ErrConflict)
			}
			runID = p.RunID
		default:
			return fmt.Errorf("re-run: name a run or a job: %w", store.ErrInvalid)
		}
		// What is downstream reruns with what it needs, as it would have run after it.
		ids, err := t.downstream(roots, "")
		if err != nil {
			return err
		}
		if err := t.reopen(runID, ids, p.By); err != nil {
			return err
		}
		out = ids
		return nil
	})
	if err != nil {
		if p.JobID != uuid.Nil {
			return nil, fmt.Errorf("re-run job %s: %w", p.JobID, err)
		}
		return nil, fmt.Errorf("re-run run %s: %w", p.RunID, err)
	}
	return out, nil
}

// downstream returns roots and every job downstream of them that matches cond (a
// condition on d, the dependent job; "" for all), roots first.
func (t *tx) downstream(roots []uuid.UUID, cond string) ([]uuid.UUID, error) {
	if cond != "" {
		cond = " AND " + cond
	}
	ids := append([]uuid.UUID(nil), roots...)
	seen := map[uuid.UUID]bool{}
	for _, id := range roots {
		seen[id] = true
	}
	for frontier := ids; len(frontier) > 0; {
		next, err := t.ids(`SELECT jn.job_id FROM job_needs jn JOIN jobs d ON d.id = jn.job_id
			WHERE jn.need_id IN (`+inList(len(frontier))+`)`+cond, uuidArgs(frontier)...)
		if err != nil {
			return nil, err
		}
		frontier = nil
		for _, d := range next {
			if !seen[d] {
				seen[d] = true
				ids = append(ids, d)
				frontier = append(frontier, d)
			}
		}
	}
	return ids, nil
}

// reopen runs alone (Engine.writeAlone): a job a batch's earlier operation ended would
// otherwise look finished to it while its dependents wait for the advance at the batch's
// end, and would be reopened under them.
//
// reopen puts finished (or still pending) jobs of a run back to pending, keeping the
// attempt each ended and naming by (a user, "" for none) as the next one's starter,
// recounts what each still needs, queues those that need nothing more, and recounts the
// run. A job in any other status is ErrConflict: its attempt is not over, and a second
// one must never start beside it.
func (t *tx) reopen(runID uuid.UUID, ids []uuid.UUID, by string) error {
	now := us(t.e.clock.Now())
	for _, id := range ids {
		if err := t.keepAttempt(id, keptAttempt{}, store.CauseRerun, by); err != nil {
			return err
		}
		res, err := t.exec(`UPDATE jobs SET status = 'pending', failure_kind = '', reason = '', exit_code = NULL, finished_at = 0,
			queued_at = 0, retry_after = 0, cancel_requested = FALSE, upstream_failed = FALSE
			WHERE id = ? AND status IN ('pending', 'success', 'failed', 'cancelled', 'skipped')`, id)
		if err != nil {
			return fmt.Errorf("reopen job %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			var status string
			_ = t.row(`SELECT status FROM jobs WHERE id = ?`, id).Scan(&status)
			return fmt.Errorf("job %s is %s; it is re-run once it has finished: %w", id, status, store.ErrConflict)
		}
		if _, err := t.exec(`UPDATE steps SET status = 'pending', exit_code = NULL, failure_kind = '', started_at = 0, finished_at = 0
			WHERE job_id = ?`, id); err != nil {
			return fmt.Errorf("reset steps of job %s: %w", id, err)
		}
	}
	var ready, gated []queuedJob
	var gatedSpecs []*pipeline.Job
	var placeholders []uuid.UUID
	for _, id := range ids {
		var left int
		err := t.row(`SELECT COUNT(*) FROM job_needs jn JOIN jobs n ON n.id = jn.need_id
			WHERE jn.job_id = ? AND n.status <> 'success'`, id).Scan(&left)
		if err != nil {
			return fmt.Errorf("count needs of job %s: %w", id, err)
		}
		q := queuedJob{id: id, from: string(store.JobPending)}
		err = t.row(`UPDATE jobs SET needs_left = ? WHERE id = ? RETURNING project_id, lane`, left, id).Scan(&q.projectID, &q.lane)
		if err != nil {
			return fmt.Errorf("reopen job %s: %w", id, err)
		}
		if left == 0 {
			var specJSON string
			if err := t.row(`SELECT spec FROM job_specs WHERE job_id = ?`, id).Scan(&specJSON); err != nil {
				return fmt.Errorf("read spec of job %s: %w", id, err)
			}
			spec := &pipeline.Job{}
			if err := jsonUnmarshal(specJSON, spec); err != nil {
				return fmt.Errorf("decode spec of job %s: %w", id, err)
			}
			if spec.DynamicMatrix != nil {
				// A placeholder whose needs are done is expanded, as when they ended.
				placeholders = append(placeholders, id)
				continue
			}
			if spec.Environment != nil {
				gated = append(gated, q)
				gatedSpecs = append(gatedSpecs, spec)
				continue
			}
			ready = append(ready, q)
		}
	}
	if _, err := t.enqueue(ready, now); err != nil {
		return err
	}
	// Recount the run from its jobs: a retry is rare, and the counters must be exact.
	var notify int
	var status string
	err := t.row(`UPDATE runs SET cancel_requested = FALSE, finished_at = 0,
		status = CASE WHEN started_at = 0 THEN 'pending' ELSE 'running' END,
		jobs_finished = (SELECT COUNT(*) FROM jobs WHERE run_id = ? AND status IN ('success', 'failed', 'cancelled', 'skipped')),
		jobs_failed = (SELECT COUNT(*) FROM jobs WHERE run_id = ? AND status = 'failed' AND continue_on_error = FALSE),
		jobs_cancelled = (SELECT COUNT(*) FROM jobs WHERE run_id = ? AND status = 'cancelled')
		WHERE id = ? RETURNING notify, status`, runID, runID, runID, runID).Scan(&notify, &status)
	if err != nil {
		return fmt.Errorf("reopen run %s: %w", runID, err)
	}
	// The forge's status goes back from the old result to pending or running.
	if err := t.reportRun(runID, notify&notifyStatus, now); err != nil {
		return err
	}
	// Listeners hear of the new attempt as of a new run: requested, and in progress at
	// once when the run had started (its start does not come again).
	if notify&notifyWorkflowRunRequested != 0 {
		if err := t.reportWorkflowRun(runID, pipeline.WorkflowRunRequested, now); err != nil {
			return err
		}
	}
	if notify&notifyWorkflowRunInProgress != 0 && store.RunStatus(status) == store.RunRunning {
		if err := t.reportWorkflowRun(runID, pipeline.WorkflowRunInProgress, now); err != nil {
			return err
		}
	}
	// Placeholders are decided and expanded after the recount too: instances they add
	// are counted by the expansion, and one that fails is counted as it ends.
	runs := map[uuid.UUID]*runState{}
	for _, id := range placeholders {
		done, err := t.decide(id, runs, now)
		if err != nil {
			return err
		}
		t.ended = append(t.ended, done...)
	}
	// A job naming an environment goes through its gate again (a retried deploy is
	// approved anew), after the recount: one it fails is counted as it ends.
	if len(gated) == 0 {
		return nil
	}
	var trJSON string
	if err := t.row(`SELECT trigger FROM runs WHERE id = ?`, runID).Scan(&trJSON); err != nil {
		return fmt.Errorf("read trigger of run %s: %w", runID, err)
	}
	var tr store.Trigger
	if err := jsonUnmarshal(trJSON, &tr); err != nil {
		return fmt.Errorf("decode trigger of run %s: %w", runID, err)
	}
	for i, q := range gated {
		done, err := t.admit(q, gatedSpecs[i], tr, now)
		if err != nil {
			return err
		}
		if done != nil {
			t.ended = append(t.ended, *done)
		}
	}
	return nil
}
