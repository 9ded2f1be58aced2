package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

const envCols = `project_id, name, branches, tags, required_approvals, approvers, approval_timeout_us, prevent_self_review,
	created_at, updated_at`

func scanEnvironment(r scanner) (*store.Environment, error) {
	var (
		e                        store.Environment
		branches, tags, apprs    string
		timeout, created, update int64
	)
	if err := r.Scan(&e.ProjectID, &e.Name, &branches, &tags, &e.RequiredApprovals, &apprs, &timeout, &e.PreventSelfReview,
		&created, &update); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		src string
		dst *[]string
	}{{branches, &e.Branches}, {tags, &e.Tags}, {apprs, &e.Approvers}} {
		if err := jsonUnmarshal(f.src, f.dst); err != nil {
			return nil, fmt.Errorf("decode environment %s: %w", e.Name, err)
		}
	}
	e.ApprovalTimeout = time.Duration(timeout) * time.Microsecond
	e.CreatedAt, e.UpdatedAt = fromUS(created), fromUS(update)
	return &e, nil
}

// nonNil keeps a list's JSON a list, so an empty one reads back as empty, not null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// PutEnvironment implements store.Environments.
func (e *Engine) PutEnvironment(ctx context.Context, env *store.Environment) error {
	if env == nil || env.ProjectID == uuid.Nil || !pipeline.EnvironmentNamePattern.Regexp().MatchString(env.Name) {
		return fmt.Errorf("put environment: a project and a name of letters, digits and _ . - are required: %w", store.ErrInvalid)
	}
	if err := env.Validate(); err != nil {
		return fmt.Errorf("put environment: %w", err)
	}
	err := e.write(ctx, func(t *tx) error {
		var exists int
		if err := t.row(`SELECT COUNT(*) FROM projects WHERE id = ?`, env.ProjectID).Scan(&exists); err != nil {
			return fmt.Errorf("look up project %s: %w", env.ProjectID, err)
		}
		if exists == 0 {
			return fmt.Errorf("project %s: %w", env.ProjectID, store.ErrNotFound)
		}
		now := us(e.clock.Now())
		first := now
		err := t.row(`SELECT created_at FROM environments WHERE project_id = ? AND name = ?`, env.ProjectID, env.Name).Scan(&first)
		if err != nil && !isNoRows(err) {
			return fmt.Errorf("read environment %s: %w", env.Name, err)
		}
		args := []any{mustJSON(nonNil(env.Branches)), mustJSON(nonNil(env.Tags)), env.RequiredApprovals,
			mustJSON(nonNil(env.Approvers)), env.ApprovalTimeout.Microseconds(), env.PreventSelfReview, now, env.ProjectID, env.Name}
		if isNoRows(err) {
			_, err = t.exec(`INSERT INTO environments (branches, tags, required_approvals, approvers, approval_timeout_us,
				prevent_self_review, updated_at, project_id, name, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, append(args, now)...)
		} else {
			_, err = t.exec(`UPDATE environments SET branches = ?, tags = ?, required_approvals = ?, approvers = ?,
				approval_timeout_us = ?, prevent_self_review = ?, updated_at = ? WHERE project_id = ? AND name = ?`, args...)
		}
		if err != nil {
			return fmt.Errorf("write environment %s: %w", env.Name, err)
		}
		env.CreatedAt, env.UpdatedAt = fromUS(first), fromUS(now)
		return nil
	})
	if err != nil {
		return fmt.Errorf("put environment %s: %w", env.Name, err)
	}
	return nil
}

// GetEnvironment implements store.Environments.
func (e *Engine) GetEnvironment(ctx context.Context, projectID uuid.UUID, name string) (*store.Environment, error) {
	env, err := scanEnvironment(e.readRow(ctx, `SELECT `+envCols+` FROM environments WHERE project_id = ? AND name = ?`, projectID, name))
	if isNoRows(err) {
		return nil, fmt.Errorf("environment %s: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get environment %s: %w", name, err)
	}
	return env, nil
}

// ListEnvironments implements store.Environments.
func (e *Engine) ListEnvironments(ctx context.Context, projectID uuid.UUID) ([]*store.Environment, error) {
	rows, err := e.readRows(ctx, `SELECT `+envCols+` FROM environments WHERE project_id = ? ORDER BY name`, projectID)
	if err != nil {
		return nil, fmt.Errorf("list environments: %w", err)
	}
	defer rows.Close()
	var out []*store.Environment
	for rows.Next() {
		env, err := scanEnvironment(rows)
		if err != nil {
			return nil, fmt.Errorf("list environments: %w", err)
		}
		out = append(out, env)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list environments: %w", err)
	}
	return out, nil
}

// DeleteEnvironment implements store.Environments.
func (e *Engine) DeleteEnvironment(ctx context.Context, projectID uuid.UUID, name string) error {
	return e.write(ctx, func(t *tx) error {
		res, err := t.exec(`DELETE FROM environments WHERE project_id = ? AND name = ?`, projectID, name)
		if err != nil {
			return fmt.Errorf("delete environment %s: %w", name, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("delete environment %s: %w", name, store.ErrNotFound)
		}
		return nil
	})
}

// environment reads the project's environment of that name in the transaction; nil when
// the project defines none (the job then runs with no rules).
func (t *tx) environment(projectID uuid.UUID, name string) (*store.Environment, error) {
	env, err := scanEnvironment(t.row(`SELECT `+envCols+` FROM environments WHERE project_id = ? AND name = ?`, projectID, name))
	if isNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read environment %s: %w", name, err)
	}
	return env, nil
}

// admit moves a job that its if: lets run on through its environment's gate
// (store.Environment.Gate): queued, waiting for approval, or failed when its ref may not
// deploy there. It returns the job as ended when it failed.
func (t *tx) admit(q queuedJob, spec *pipeline.Job, tr store.Trigger, nowUS int64) (*ended, error) {
	var env *store.Environment
	if spec.Environment != nil {
		var err error
		if env, err = t.environment(q.projectID, spec.Environment.Name); err != nil {
			return nil, err
		}
	}
	g := env.Gate(tr)
	switch {
	case g.Fail != "":
		return t.failWaiting(q.id, q.from, store.FailureNotAllowed, g.Fail, nowUS)
	case g.Wait:
		deadline := nowUS + env.Timeout().Microseconds()
		// The deadline also names this wait's approvals (their round), so a retried job's
		// new wait never shares its predecessor's, even on a clock that did not move.
		var runID uuid.UUID
		err := t.row(`UPDATE jobs SET status = 'waiting_approval',
			approval_deadline = CASE WHEN ? > approval_deadline THEN ? ELSE approval_deadline + 1 END WHERE id = ? AND status = ?
			RETURNING run_id`, deadline, deadline, q.id, q.from).Scan(&runID)
		if isNoRows(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("hold job %s for approval: %w", q.id, err)
		}
		return nil, t.reportJobsChanged(runID, []uuid.UUID{q.id}, nowUS)
	}
	_, err := t.enqueue([]queuedJob{q}, nowUS)
	return nil, err
}

// failWaiting fails a job that never ran (its environment stopped it) and returns it as
// ended. A job no longer in status from is left alone.
func (t *tx) failWaiting(id uuid.UUID, from string, kind store.FailureKind, reason string, nowUS int64) (*ended, error) {
	var (
		runID                  uuid.UUID
		coe, hasDeps, upstream bool
	)
	err := t.row(`UPDATE jobs SET status = 'failed', failure_kind = ?, reason = ?, finished_at = ?
		WHERE id = ? AND status = ? RETURNING run_id, continue_on_error, has_dependents, upstream_failed`,
		string(kind), reason, nowUS, id, from).Scan(&runID, &coe, &hasDeps, &upstream)
	if isNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fail job %s: %w", id, err)
	}
	return &ended{id: id, runID: runID, status: store.JobFailed, failed: !coe, upstreamFailed: upstream, noDependents: !hasDeps}, nil
}

// DecideJob implements store.Environments.
func (e *Engine) DecideJob(ctx context.Context, p store.DecideJobParams) (*store.Job, error) {
	if p.Decision != store.Approved && p.Decision != store.Rejected {
		return nil, fmt.Errorf("decide job %s: decision must be approved or rejected: %w", p.JobID, store.ErrInvalid)
	}
	if p.Approver == "" {
		return nil, fmt.Errorf("decide job %s: an approver is required: %w", p.JobID, store.ErrInvalid)
	}
	err := e.write(ctx, func(t *tx) error {
		j, err := t.lockJob(p.JobID)
		if err != nil {
			return err
		}
		if j.status != store.JobWaitingApproval {
			return fmt.Errorf("job %s is %s, not waiting for approval: %w", j.id, j.status, store.ErrConflict)
		}
		var specJSON, triggerJSON string
		var round int64
		if err := t.row(`SELECT s.spec, j.approval_deadline, r.trigger FROM jobs j JOIN job_specs s ON s.job_id = j.id
			JOIN runs r ON r.id = j.run_id WHERE j.id = ?`, j.id).Scan(&specJSON, &round, &triggerJSON); err != nil {
			return fmt.Errorf("read job %s: %w", j.id, err)
		}
		var spec pipeline.Job
		if err := jsonUnmarshal(specJSON, &spec); err != nil {
			return fmt.Errorf("decode spec of job %s: %w", j.id, err)
		}
		var tr store.Trigger
		if err := jsonUnmarshal(triggerJSON, &tr); err != nil {
			return fmt.Errorf("decode trigger of the run of job %s: %w", j.id, err)
		}
		var env *store.Environment
		if spec.Environment != nil {
			if env, err = t.environment(j.projectID, spec.Environment.Name); err != nil {
				return err
			}
		}
		// With the environment deleted meanwhile nobody is named, so only an admin (or
		// anyone, with auth off) can still decide.
		allowed := p.Anyone || (env != nil && env.MayApprove(p.Approver, p.Role)) || (env == nil && p.Role == store.RoleAdmin)
		switch {
		case allowed:
		case env == nil:
			return fmt.Errorf("%s may not approve or reject job %s: its environment is no longer defined, so only an admin may: %w",
				p.Approver, j.id, store.ErrForbidden)
		default:
			return fmt.Errorf("%s may not approve or reject job %s: environment %s is approved by %s: %w",
				p.Approver, j.id, env.Name, env.WhoMayApprove(), store.ErrForbidden)
		}
		if env.SelfReview(p.Decision, p.Approver, tr) {
			return fmt.Errorf("%s started this run, and environment %s prevents self-review: another approver must approve job %s: %w",
				p.Approver, env.Name, j.id, store.ErrForbidden)
		}
		now := us(e.clock.Now())
		if _, err := t.exec(`INSERT INTO approvals (job_id, round, attempt, approver, decision, comment, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job_id, round, approver) DO UPDATE SET decision = ?, comment = ?, created_at = ?`,
			j.id, round, j.attempt, p.Approver, string(p.Decision), p.Comment, now, string(p.Decision), p.Comment, now); err != nil {
			return fmt.Errorf("record decision on job %s: %w", j.id, err)
		}
		if p.Decision == store.Rejected {
			done, err := t.failWaiting(j.id, string(store.JobWaitingApproval), store.FailureRejected, "rejected by "+p.Approver, now)
			if done != nil {
				t.ended = append(t.ended, *done)
			}
			return err
		}
		required := 1
		if env != nil {
			required = max(env.RequiredApprovals, 1)
		}
		var approved int
		if err := t.row(`SELECT COUNT(*) FROM approvals WHERE job_id = ? AND round = ? AND decision = 'approved'`, j.id, round).
			Scan(&approved); err != nil {
			return fmt.Errorf("count approvals of job %s: %w", j.id, err)
		}
		if approved < required {
			return nil
		}
		_, err = t.enqueue([]queuedJob{{id: j.id, projectID: j.projectID, lane: j.lane, from: string(store.JobWaitingApproval)}}, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("decide job %s: %w", p.JobID, err)
	}
	return e.GetJob(ctx, p.JobID)
}

// ListApprovals implements store.Environments.
func (e *Engine) ListApprovals(ctx context.Context, jobID uuid.UUID) ([]*store.Approval, error) {
	rows, err := e.readRows(ctx, `SELECT a.attempt, a.approver, a.decision, a.comment, a.created_at FROM approvals a
		JOIN jobs j ON j.id = a.job_id AND a.round = j.approval_deadline WHERE a.job_id = ? ORDER BY a.created_at, a.approver`, jobID)
	if err != nil {
		return nil, fmt.Errorf("list approvals of job %s: %w", jobID, err)
	}
	defer rows.Close()
	var out []*store.Approval
	for rows.Next() {
		a := &store.Approval{JobID: jobID}
		var decision string
		var at int64
		if err := rows.Scan(&a.Attempt, &a.Approver, &decision, &a.Comment, &at); err != nil {
			return nil, fmt.Errorf("list approvals of job %s: %w", jobID, err)
		}
		a.Decision, a.At = store.Decision(decision), fromUS(at)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list approvals of job %s: %w", jobID, err)
	}
	return out, nil
}

// ExpireApprovals implements store.Environments.
func (e *Engine) ExpireApprovals(ctx context.Context) (int, error) {
	changed := 0
	err := e.write(ctx, func(t *tx) error {
		changed = 0
		now := us(e.clock.Now())
		ids, err := t.ids(`SELECT id FROM jobs WHERE status = 'waiting_approval' AND approval_deadline <= ?
			ORDER BY approval_deadline LIMIT ?`+e.d.SkipLocked, now, maintenanceBatch)
		if err != nil {
			return err
		}
		for _, id := range ids {
			// The status in the UPDATE is the compare-and-swap: a job approved, rejected or
			// cancelled meanwhile, here or on another replica, is left alone.
			done, err := t.failWaiting(id, string(store.JobWaitingApproval), store.FailureRejected, "not approved before the approval timeout", now)
			if err != nil {
				return err
			}
			if done != nil {
				changed++
				t.ended = append(t.ended, *done)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("expire approvals: %w", err)
	}
	return changed, nil
}
