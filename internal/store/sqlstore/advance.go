package sqlstore

import (
	"bytes"
	"cmp"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// ended is a job that just reached a terminal status, whose run and dependents must hear
// of it.
type ended struct {
	id, runID uuid.UUID
	status    store.JobStatus
	// failed: the job failed and does not continue on error; this fails the run and
	// makes failure() true downstream.
	failed bool
	// upstreamFailed: some job before it failed.
	upstreamFailed bool
	// noDependents: no job needs it, so there is no DAG to advance.
	noDependents bool
}

// end makes a leased job terminal and advances its run and DAG. It returns the job's
// row, without its spec.
func (t *tx) end(j *jobState, status store.JobStatus, kind store.FailureKind, exit any, now time.Time) (*store.Job, error) {
	job, err := scanJobRow(t.row(`UPDATE jobs SET status = ?, failure_kind = ?, exit_code = ?, finished_at = ?,
		lease_token = '', worker_id = '', lease_expires_at = 0, deadline = 0
		WHERE id = ? RETURNING `+jobCols, string(status), string(kind), exit, us(now), j.id), nil)
	if err != nil {
		return nil, fmt.Errorf("end job %s: %w", j.id, err)
	}
	t.quotaFreed(j)
	t.ended = append(t.ended, ended{
		id: j.id, runID: j.runID, status: status,
		failed:         status == store.JobFailed && !j.continueOnError,
		upstreamFailed: j.upstreamFailed,
		noDependents:   !j.hasDependents,
	})
	if status == store.JobFailed && !j.continueOnError {
		if err := t.failFast(job, now); err != nil {
			return nil, err
		}
	}
	return job, nil
}

// failFast cancels the other instances of a matrix job with fail_fast when one of them
// failed for good: those not started are cancelled at once, leased ones asked to cancel,
// as CancelJob would.
func (t *tx) failFast(job *store.Job, now time.Time) error {
	if !strings.Contains(job.Key, " (") {
		return nil // not a matrix instance
	}
	var specJSON string
	if err := t.row(`SELECT spec FROM job_specs WHERE job_id = ?`, job.ID).Scan(&specJSON); err != nil {
		return fmt.Errorf("read spec of job %s: %w", job.ID, err)
	}
	var spec struct {
		FailFast bool `json:"fail_fast"`
	}
	if err := jsonUnmarshal(specJSON, &spec); err != nil {
		return fmt.Errorf("decode spec of job %s: %w", job.ID, err)
	}
	if !spec.FailFast {
		return nil
	}
	res, err := t.exec(`UPDATE jobs SET cancel_requested = TRUE WHERE run_id = ? AND name = ? AND id <> ? AND status IN ('assigned', 'running')`,
		job.RunID, job.Name, job.ID)
	if err != nil {
		return fmt.Errorf("cancel the other instances of job %s: %w", job.Key, err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		t.cancelled = true
	}
	ids, err := t.ids(`SELECT id FROM jobs WHERE run_id = ? AND name = ? AND id <> ?
		AND status IN ('pending', 'queued', 'retrying', 'waiting_approval') ORDER BY seq`, job.RunID, job.Name, job.ID)
	if err != nil {
		return err
	}
	done, err := t.cancelNow(ids, job.RunID, us(now))
	t.ended = append(t.ended, done...)
	return err
}

// advance tells runs and dependents about jobs that ended, and keeps going for the
// dependents that end in turn (skipped or cancelled without running). The committer calls
// it once per batch, just before commit, for every job its operations ended: run counters
// are then updated once per run, in id order, and row locks are held only for the end of
// the transaction, which keeps concurrent writers from queueing behind each other on a
// busy run's row.
//
// Each dependent's count of unfinished needs is decremented under its row lock, so when
// two needs end in concurrent transactions exactly one of them sees the count reach zero.
func (t *tx) advance(queue []ended, now time.Time) error {
	nowUS := us(now)
	runs := map[uuid.UUID]*runState{}
	type delta struct {
		finished, failed, cancelled int
		jobs                        []uuid.UUID // for job.finished webhooks
	}
	deltas := map[uuid.UUID]*delta{}
	for len(queue) > 0 {
		j := queue[0]
		queue = queue[1:]
		d := deltas[j.runID]
		if d == nil {
			d = &delta{}
			deltas[j.runID] = d
		}
		d.finished++
		d.jobs = append(d.jobs, j.id)
		if j.failed {
			d.failed++
		}
		if j.status == store.JobCancelled {
			d.cancelled++
		}
		if j.noDependents {
			continue
		}
		rows, err := t.query(`UPDATE jobs SET needs_left = needs_left - 1, upstream_failed = (upstream_failed OR ?)
			WHERE id IN (SELECT job_id FROM job_needs WHERE need_id = ?) AND status = 'pending'
			RETURNING id, needs_left`, j.failed || j.upstreamFailed, j.id)
		if err != nil {
			return fmt.Errorf("update dependents of job %s: %w", j.id, err)
		}
		var ready []uuid.UUID
		for rows.Next() {
			var id uuid.UUID
			var left int
			if err := rows.Scan(&id, &left); err != nil {
				rows.Close()
				return fmt.Errorf("update dependents of job %s: %w", j.id, err)
			}
			if left == 0 {
				ready = append(ready, id)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("update dependents of job %s: %w", j.id, err)
		}
		for _, id := range ready {
			next, err := t.decide(id, runs, nowUS)
			if err != nil {
				return err
			}
			queue = append(queue, next...)
		}
	}
	// Runs whose counters move by the same amounts (single-job runs that each ended one
	// job, most often) are counted by one statement: a statement counts the next runs in
	// order that moved alike. Where writers run at once (PostgreSQL), the order is the
	// runs' ids, so that each statement takes rows after those of the one before and
	// writers never deadlock on them; a single writer orders by amounts first, for the
	// fewest statements.
	type counts struct{ finished, failed, cancelled int }
	ids := make([]uuid.UUID, 0, len(deltas))
	for id := range deltas {
		ids = append(ids, id)
	}
	byAmounts := t.e.d.Writers <= 1
	slices.SortFunc(ids, func(a, b uuid.UUID) int {
		if byAmounts {
			da, db := deltas[a], deltas[b]
			if c := cmp.Or(cmp.Compare(da.finished, db.finished), cmp.Compare(da.failed, db.failed),
				cmp.Compare(da.cancelled, db.cancelled)); c != 0 {
				return c
			}
		}
		return bytes.Compare(a[:], b[:])
	})
	for len(ids) > 0 {
		d := deltas[ids[0]]
		k := counts{d.finished, d.failed, d.cancelled}
		n := 1
		for n < len(ids) && n < maxInList {
			o := deltas[ids[n]]
			if (counts{o.finished, o.failed, o.cancelled}) != k {
				break
			}
			n++
		}
		chunk := ids[:n]
		ids = ids[n:]
		notify, err := t.countEnded(chunk, k.finished, k.failed, k.cancelled, nowUS)
		if err != nil {
			return err
		}
		for _, id := range chunk {
			if n := notify[id]; n != 0 {
				if err := t.reportEnded(id, n, deltas[id].jobs, nowUS); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// maxInList bounds the ids one statement names, well below either database's limit of
// parameters.
const maxInList = 500

type runState struct {
	trigger   store.Trigger
	env       map[string]string
	cancelled bool
	// definition is read only when a placeholder is expanded (expand.go).
	definition []byte
}

// decide runs a job whose needs have all ended through its if: condition: queued when it
// says run (a placeholder replaced by its instances), otherwise skipped (cancelled when
// the run or a need was cancelled). It returns the jobs that ended without running.
func (t *tx) decide(id uuid.UUID, runs map[uuid.UUID]*runState, nowUS int64) ([]ended, error) {
	var (
		runID, projectID uuid.UUID
		lane             int
		upstream         bool
		specJSON         string
	)
	err := t.row(`SELECT j.run_id, j.project_id, j.lane, j.upstream_failed, s.spec FROM jobs j JOIN job_specs s ON s.job_id = j.id
		WHERE j.id = ?`, id).
		Scan(&runID, &projectID, &lane, &upstream, &specJSON)
	if err != nil {
		return nil, fmt.Errorf("read ready job %s: %w", id, err)
	}
	run, ok := runs[runID]
	if !ok {
		var trigger, env string
		run = &runState{}
		if err := t.row(`SELECT trigger, env, cancel_requested FROM runs WHERE id = ?`, runID).Scan(&trigger, &env, &run.cancelled); err != nil {
			return nil, fmt.Errorf("read run %s: %w", runID, err)
		}
		if err := jsonUnmarshal(trigger, &run.trigger); err != nil {
			return nil, fmt.Errorf("decode trigger of run %s: %w", runID, err)
		}
		if err := jsonUnmarshal(env, &run.env); err != nil {
			return nil, fmt.Errorf("decode env of run %s: %w", runID, err)
		}
		runs[runID] = run
	}
	var spec pipeline.Job
	if err := jsonUnmarshal(specJSON, &spec); err != nil {
		return nil, fmt.Errorf("decode spec of job %s: %w", id, err)
	}
	needs, anyCancelled, err := needResults(t.query, id, (spec.If != nil && spec.If.ReadsNeedOutputs()) || spec.DynamicMatrix != nil)
	if err != nil {
		return nil, err
	}
	in := conditionInput(run.trigger, run.env)
	in.Needs, in.NeedOutputs = make(map[string]string, len(needs)), make(map[string]map[string]string, len(needs))
	for name, n := range needs {
		in.Needs[name], in.NeedOutputs[name] = n.Result, n.Outputs
	}
	in.UpstreamFailed, in.Cancelled = upstream, run.cancelled
	d := spec.Decide(in)
	if d.Err != nil {
		// A condition that compiled at plan time can still fail on odd data; not running
		// the job is the safe reading, and the log says why.
		t.e.log.Warn("if: condition failed to evaluate; skipping job", "job", id, "err", d.Err)
	}
	if d.Run && spec.DynamicMatrix != nil {
		return t.expandMatrix(queuedJob{id: id, projectID: projectID, lane: lane, from: string(store.JobPending)}, runID, &spec, run, in, nowUS)
	}
	if d.Run {
		// The environment has the last word: queued, waiting for approval, or failed.
		done, err := t.admit(queuedJob{id: id, projectID: projectID, lane: lane, from: string(store.JobPending)}, &spec, run.trigger, nowUS)
		if done == nil {
			return nil, err
		}
		return []ended{*done}, err
	}
	status, kind := store.JobSkipped, store.FailureNone
	if run.cancelled || anyCancelled {
		status, kind = store.JobCancelled, store.FailureCancelled
	}
	if _, err := t.exec(`UPDATE jobs SET status = ?, failure_kind = ?, finished_at = ?, reason = ? WHERE id = ? AND status = 'pending'`,
		string(status), string(kind), nowUS, d.Reason, id); err != nil {
		return nil, fmt.Errorf("skip job %s: %w", id, err)
	}
	return []ended{{id: id, runID: runID, status: status, upstreamFailed: upstream}}, nil
}

// conditionInput is what an if: reads of the run: its trigger and its env. A job's if:
// reads the run's variables, not its environment's: as on GitHub, it is decided before
// the job enters its environment.
func conditionInput(tr store.Trigger, env map[string]string) pipeline.ConditionInput {
	in := pipeline.ConditionInput{
		Ref: tr.Ref, Branch: tr.Branch, Tag: tr.Tag, SHA: tr.SHA, Event: tr.Event, Repository: tr.Repository,
		PRNumber: tr.PRNumber, Fork: tr.Fork, Env: env, Actor: tr.Actor, BaseRef: tr.BaseRef, HeadRef: tr.HeadRef,
		WorkflowRun: tr.WorkflowRunValues(),
	}
	if tr.Inputs != nil {
		in.Inputs = *tr.Inputs
	}
	if tr.Payload != nil {
		in.Payload = *tr.Payload
	}
	if tr.Vars != nil {
		in.Vars = *tr.Vars
	}
	return in
}

// needResults gives each need's result by definition name, matrix instances combined,
// and, when outputs is set, its outputs, instances merged in plan order. A failed job
// that continues on error reads as a success.
func needResults(query func(string, ...any) (*sql.Rows, error), id uuid.UUID, outputs bool) (map[string]store.NeedResult, bool, error) {
	q := `SELECT n.name, n.status, n.continue_on_error, '' FROM job_needs jn JOIN jobs n ON n.id = jn.need_id
		WHERE jn.job_id = ? ORDER BY n.seq`
	if outputs {
		q = `SELECT n.name, n.status, n.continue_on_error, COALESCE(o.outputs, '') FROM job_needs jn JOIN jobs n ON n.id = jn.need_id
		LEFT JOIN job_outputs o ON o.job_id = n.id WHERE jn.job_id = ? ORDER BY n.seq`
	}
	rows, err := query(q, id)
	if err != nil {
		return nil, false, fmt.Errorf("read needs of job %s: %w", id, err)
	}
	defer rows.Close()
	byName := map[string][]string{}
	outs := map[string]map[string]string{}
	cancelled := false
	for rows.Next() {
		var name, status, outJSON string
		var coe bool
		if err := rows.Scan(&name, &status, &coe, &outJSON); err != nil {
			return nil, false, fmt.Errorf("read needs of job %s: %w", id, err)
		}
		if status == string(store.JobFailed) && coe {
			status = string(store.JobSuccess)
		}
		cancelled = cancelled || status == string(store.JobCancelled)
		byName[name] = append(byName[name], status)
		if outJSON != "" {
			var o map[string]string
			if err := jsonUnmarshal(outJSON, &o); err != nil {
				return nil, false, fmt.Errorf("decode outputs of a need of job %s: %w", id, err)
			}
			if outs[name] == nil {
				outs[name] = map[string]string{}
			}
			for k, v := range o {
				outs[name][k] = v
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("read needs of job %s: %w", id, err)
	}
	out := make(map[string]store.NeedResult, len(byName))
	for name, rs := range byName {
		out[name] = store.NeedResult{Result: pipeline.CombineResults(rs), Outputs: outs[name]}
	}
	return out, cancelled, nil
}

// countEnded adds ended jobs to the counters of runs that each ended as many and, with a
// run's last job, sets its final status: one statement, so it costs the same whether or
// not the runs end. It returns what each run reports (runs.notify) of the jobs that
// ended, with notifyStatus and notifyRunHook only when the run just ended.
func (t *tx) countEnded(runIDs []uuid.UUID, finished, failed, cancelled int, nowUS int64) (map[uuid.UUID]int, error) {
	ids := make([]any, len(runIDs))
	for i, id := range runIDs {
		ids[i] = id
	}
	ids = padded(ids)
	args := append([]any{finished, failed, cancelled, finished, nowUS, finished, failed, cancelled}, ids...)
	rows, err := t.query(`UPDATE runs SET
		status = CASE WHEN jobs_finished + ? < jobs_total THEN status
			WHEN cancel_requested THEN 'cancelled'
			WHEN jobs_failed + ? > 0 THEN 'failed'
			WHEN jobs_cancelled + ? > 0 THEN 'cancelled'
			ELSE 'success' END,
		finished_at = CASE WHEN jobs_finished + ? < jobs_total THEN finished_at ELSE ? END,
		jobs_finished = jobs_finished + ?, jobs_failed = jobs_failed + ?, jobs_cancelled = jobs_cancelled + ?
		WHERE id IN (`+t.e.runsInOrder(len(ids), "")+`) RETURNING id, notify, jobs_finished, jobs_total`, args...)
	if err != nil {
		return nil, fmt.Errorf("count ended jobs of %d runs: %w", len(runIDs), err)
	}
	defer rows.Close()
	out := make(map[uuid.UUID]int, len(runIDs))
	for rows.Next() {
		var (
			id                  uuid.UUID
			notify, done, total int
		)
		if err := rows.Scan(&id, &notify, &done, &total); err != nil {
			return nil, fmt.Errorf("count ended jobs of %d runs: %w", len(runIDs), err)
		}
		if done < total {
			notify &^= notifyStatus | notifyRunHook | notifyWorkflowRunCompleted
		}
		out[id] = notify
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count ended jobs of %d runs: %w", len(runIDs), err)
	}
	if len(out) != len(runIDs) {
		return nil, fmt.Errorf("count ended jobs: %d of %d runs found", len(out), len(runIDs))
	}
	return out, nil
}

// reportEnded enqueues, in the transaction that ended them, job.finished for the jobs and,
// when the run ended with them, its final status and run.finished.
func (t *tx) reportEnded(runID uuid.UUID, notify int, jobs []uuid.UUID, nowUS int64) error {
	if notify&notifyJobHook != 0 {
		if err := t.reportJobs(runID, jobs, nowUS); err != nil {
			return err
		}
	}
	if notify&notifyJobStatus != 0 {
		if err := t.reportJobStatuses(runID, jobs, nowUS); err != nil {
			return err
		}
	}
	return t.reportRun(runID, notify, nowUS)
}

// cancelNow makes unleased, unfinished jobs cancelled and reports them as ended.
func (t *tx) cancelNow(ids []uuid.UUID, runID uuid.UUID, nowUS int64) ([]ended, error) {
	var out []ended
	for _, id := range ids {
		res, err := t.exec(`UPDATE jobs SET status = 'cancelled', failure_kind = 'cancelled', finished_at = ?
			WHERE id = ? AND status IN ('pending', 'queued', 'retrying', 'waiting_approval')`, nowUS, id)
		if err != nil {
			return nil, fmt.Errorf("cancel job %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			out = append(out, ended{id: id, runID: runID, status: store.JobCancelled})
		}
	}
	return out, nil
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
