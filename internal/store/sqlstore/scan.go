package sqlstore

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

type scanner interface{ Scan(dest ...any) error }

var lanes = []pipeline.Priority{pipeline.PriorityCritical, pipeline.PriorityHigh, pipeline.PriorityNormal, pipeline.PriorityLow}

func laneOf(p pipeline.Priority) int { return p.Rank() }

func priorityOf(lane int) pipeline.Priority {
	if lane < 0 || lane >= len(lanes) {
		return pipeline.PriorityNormal
	}
	return lanes[lane]
}

// labelKey is the canonical text of a label set: sorted, unique, comma-joined.
func labelKey(labels []string) string {
	s := append([]string(nil), labels...)
	sort.Strings(s)
	out := s[:0]
	for i, l := range s {
		if i == 0 || l != s[i-1] {
			out = append(out, l)
		}
	}
	return strings.Join(out, ",")
}

func splitLabels(key string) []string {
	if key == "" {
		return nil
	}
	return strings.Split(key, ",")
}

const jobCols = `id, run_id, project_id, key, name, status, lane, label_set, milli_cpu, memory,
	attempt, max_attempts, redeliveries, retry_after, lease_token, worker_id, lease_expires_at,
	deadline, concurrency_group, exit_code, failure_kind, cancel_requested, created_at,
	queued_at, started_at, finished_at, reason, evaluated_name, environment_url`

// jobWithSpec selects a job row and its spec; scanJob reads it.
const jobWithSpec = `SELECT ` + jobCols + `, s.spec FROM jobs JOIN job_specs s ON s.job_id = jobs.id `

func scanJob(s scanner) (*store.Job, error) {
	var spec string
	j, err := scanJobRow(s, &spec)
	if err != nil {
		return nil, err
	}
	if err := decodeSpec(j, spec); err != nil {
		return nil, err
	}
	return j, nil
}

// scanJobRow reads a job row, and its spec's JSON too when spec is not nil.
func scanJobRow(s scanner, spec *string) (*store.Job, error) {
	var (
		j                                                        store.Job
		status, labels, kind                                     string
		lane                                                     int
		retryAfter, leaseExp, deadline, created, queued, st, fin int64
		exit                                                     sql.NullInt64
	)
	dest := []any{&j.ID, &j.RunID, &j.ProjectID, &j.Key, &j.Name, &status, &lane, &labels, &j.MilliCPU, &j.Memory,
		&j.Attempt, &j.MaxAttempts, &j.Redeliveries, &retryAfter, &j.LeaseToken, &j.WorkerID, &leaseExp,
		&deadline, &j.ConcurrencyGroup, &exit, &kind, &j.CancelRequested, &created,
		&queued, &st, &fin, &j.Reason, &j.EvaluatedName, &j.EnvironmentURL}
	if spec != nil {
		dest = append(dest, spec)
	}
	if err := s.Scan(dest...); err != nil {
		return nil, err
	}
	j.Status = store.JobStatus(status)
	j.Priority = priorityOf(lane)
	j.Labels = splitLabels(labels)
	j.FailureKind = store.FailureKind(kind)
	if exit.Valid {
		v := int(exit.Int64)
		j.ExitCode = &v
	}
	j.RetryAfter, j.LeaseExpiresAt, j.Deadline = fromUS(retryAfter), fromUS(leaseExp), fromUS(deadline)
	j.CreatedAt, j.QueuedAt, j.StartedAt, j.FinishedAt = fromUS(created), fromUS(queued), fromUS(st), fromUS(fin)
	return &j, nil
}

func decodeSpec(j *store.Job, spec string) error {
	j.Spec = new(pipeline.Job)
	if err := json.Unmarshal([]byte(spec), j.Spec); err != nil {
		return fmt.Errorf("decode spec of job %s: %w", j.ID, err)
	}
	return nil
}

// runColumns is what a read of runs on d selects, the change feed's cursor last (the
// run's counter, r.job_seq, or the dialect's RunChangeCursor).
func runColumns(d *Dialect) string {
	cursor := "r.job_seq"
	if d.RunChangeCursor != "" {
		cursor = d.RunChangeCursor
	}
	return runColsBase + cursor
}

const runColsBase = `r.id, r.project_id, p.name, r.name, r.status, r.trigger, r.idempotency_key, r.env,
	r.cancel_requested, r.jobs_total, r.jobs_finished, r.created_at, r.started_at, r.finished_at, r.errors, r.number, `

const runFrom = ` FROM runs r JOIN projects p ON p.id = r.project_id `

func scanRun(s scanner) (*store.Run, error) {
	var (
		r                          store.Run
		status, trigger, env, errs string
		idem                       sql.NullString
		created, started, finished int64
	)
	err := s.Scan(&r.ID, &r.ProjectID, &r.Project, &r.Name, &status, &trigger, &idem, &env,
		&r.CancelRequested, &r.JobsTotal, &r.JobsFinished, &created, &started, &finished, &errs, &r.Number, &r.JobSeq)
	if err != nil {
		return nil, err
	}
	r.Status = store.RunStatus(status)
	r.IdempotencyKey = idem.String
	if err := json.Unmarshal([]byte(trigger), &r.Trigger); err != nil {
		return nil, fmt.Errorf("decode trigger of run %s: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(env), &r.Env); err != nil {
		return nil, fmt.Errorf("decode env of run %s: %w", r.ID, err)
	}
	if errs != "" {
		if err := json.Unmarshal([]byte(errs), &r.Errors); err != nil {
			return nil, fmt.Errorf("decode errors of run %s: %w", r.ID, err)
		}
	}
	r.CreatedAt, r.StartedAt, r.FinishedAt = fromUS(created), fromUS(started), fromUS(finished)
	return &r, nil
}

// jobState is the part of a job row that state transitions decide on, read without
// decoding the job's spec.
type jobState struct {
	id, runID, projectID uuid.UUID
	status               store.JobStatus
	lane                 int
	attempt, maxAttempts int
	redeliveries         int
	leaseToken           string
	leaseExpires         int64
	deadline             int64
	cancelRequested      bool
	upstreamFailed       bool
	continueOnError      bool
	hasDependents        bool
	retry                pipeline.RetryPolicy
}

const stateCols = `id, run_id, project_id, status, lane, attempt, max_attempts, redeliveries, lease_token,
	lease_expires_at, deadline, cancel_requested, upstream_failed, continue_on_error, has_dependents, retry_on, backoff_us,
	max_backoff_us`

func scanState(s scanner) (*jobState, error) {
	var (
		j                   jobState
		status, on          string
		backoff, maxBackoff int64
	)
	err := s.Scan(&j.id, &j.runID, &j.projectID, &status, &j.lane, &j.attempt, &j.maxAttempts, &j.redeliveries, &j.leaseToken,
		&j.leaseExpires, &j.deadline, &j.cancelRequested, &j.upstreamFailed, &j.continueOnError, &j.hasDependents, &on,
		&backoff, &maxBackoff)
	if err != nil {
		return nil, err
	}
	j.status = store.JobStatus(status)
	j.retry = pipeline.RetryPolicy{
		MaxAttempts: j.maxAttempts,
		Backoff:     pipeline.Duration(time.Duration(backoff) * time.Microsecond),
		MaxBackoff:  pipeline.Duration(time.Duration(maxBackoff) * time.Microsecond),
	}
	for _, k := range splitLabels(on) {
		j.retry.On = append(j.retry.On, pipeline.FailureKind(k))
	}
	return &j, nil
}

// retryOn is the text form of a retry policy's failure kinds.
func retryOn(r pipeline.RetryPolicy) string {
	parts := make([]string, len(r.On))
	for i, k := range r.On {
		parts[i] = string(k)
	}
	return strings.Join(parts, ",")
}
