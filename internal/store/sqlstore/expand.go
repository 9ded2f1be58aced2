package sqlstore

import (
	"fmt"
	"slices"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// A placeholder job (pipeline.Job.DynamicMatrix: a matrix computed from its needs'
// outputs) is expanded in the transaction in which it becomes ready: the one that ended
// its last need, and saw its count of unfinished needs reach zero under the job's row
// lock (advance), or the retry that reopened it with every need done (reopen). So:
//
//   - exactly once: one transaction sees the count reach zero, on any number of replicas;
//     and the placeholder row is rewritten only while it is still the pending placeholder
//     (compare-and-swap on status and key), so a second attempt changes nothing;
//   - atomically: the instances, their steps and edges, the dependents' counts and the
//     run's total commit together with the need's end, or not at all; a coordinator that
//     dies mid-expansion leaves the need unfinished, and the worker's completion (or the
//     reaper) ends it again and expands then;
//   - what the matrix is, and whether the job can run, is pipeline.Job.ExpandMatrix's
//     decision, a pure function of the run's definition and the needs' results and
//     outputs: the store only writes rows.
//
// The placeholder's row becomes the first instance (its id, given out when the run was
// created, stays a job of the run) and the others are new rows just after it in the
// run's order. A job that needed the placeholder needs every instance.

// expandMatrix replaces the ready placeholder q by its instances, or fails it when its
// matrix cannot be made. It returns the placeholder as ended when it failed, or an
// instance that ended at once (its environment refused it); the others are queued or
// wait for approval.
func (t *tx) expandMatrix(q queuedJob, runID uuid.UUID, spec *pipeline.Job, run *runState, in pipeline.ConditionInput, nowUS int64) ([]ended, error) {
	if run.definition == nil {
		if err := t.row(`SELECT definition FROM run_definitions WHERE run_id = ?`, runID).Scan(&run.definition); err != nil {
			return nil, fmt.Errorf("read definition of run %s: %w", runID, err)
		}
	}
	in.RunID = runID.String() // as when the run was created: run values are put in alike
	instances, err := spec.ExpandMatrix(run.definition, in)
	if err != nil {
		reason := clipReason(err.Error())
		done, ferr := t.failWaiting(q.id, string(store.JobPending), store.FailureMatrix, reason, nowUS)
		if ferr != nil || done == nil {
			return nil, ferr
		}
		return []ended{*done}, nil
	}
	return t.replacePlaceholder(q, runID, spec, instances, run.trigger, nowUS)
}

// maxReason bounds the reason a failed expansion records.
const maxReason = 4000

func clipReason(s string) string {
	if len(s) <= maxReason {
		return s
	}
	cut := maxReason
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut-- // not in the middle of a character
	}
	return s[:cut] + " ..."
}

// replacePlaceholder writes the instances in place of the placeholder q.
func (t *tx) replacePlaceholder(q queuedJob, runID uuid.UUID, spec *pipeline.Job, instances []*pipeline.Job, tr store.Trigger, nowUS int64) ([]ended, error) {
	first := instances[0]
	specs := make([]string, len(instances))
	labels := make([]plannedJob, len(instances))
	for i, inst := range instances {
		specs[i] = mustJSON(inst)
		labels[i] = plannedJob{labels: labelKey(inst.RunsOn)}
	}
	if err := t.ensureLabelSets(labels); err != nil {
		return nil, err
	}
	concurrency := func(j *pipeline.Job) (string, bool) {
		if j.Concurrency == nil {
			return "", false
		}
		return j.Concurrency.Group, j.Concurrency.CancelInProgress
	}
	var (
		seq               int64
		hasDeps, upstream bool
	)
	group, cancels := concurrency(first)
	// The compare-and-swap: only the pending placeholder becomes the first instance.
	err := t.row(`UPDATE jobs SET key = ?, name = ?, label_set = ?, milli_cpu = ?, memory = ?, timeout_us = ?,
		max_attempts = ?, retry_on = ?, backoff_us = ?, max_backoff_us = ?, concurrency_group = ?, group_cancels = ?,
		continue_on_error = ?
		WHERE id = ? AND status = 'pending' AND key = ? AND needs_left = 0 RETURNING seq, has_dependents, upstream_failed`,
		first.Key, first.Name, labels[0].labels, first.Resources.MilliCPU, first.Resources.MemoryBytes,
		time.Duration(first.Timeout).Microseconds(), first.Retry.MaxAttempts, retryOn(first.Retry),
		time.Duration(first.Retry.Backoff).Microseconds(), time.Duration(first.Retry.MaxBackoff).Microseconds(),
		group, cancels, first.ContinueOnError, q.id, spec.Key).Scan(&seq, &hasDeps, &upstream)
	if isNoRows(err) {
		return nil, nil // expanded already, or no longer waiting: nothing to do
	}
	if err != nil {
		return nil, fmt.Errorf("expand job %s: %w", q.id, err)
	}
	if _, err := t.exec(`UPDATE job_specs SET spec = ? WHERE job_id = ?`, specs[0], q.id); err != nil {
		return nil, fmt.Errorf("expand job %s: %w", q.id, err)
	}
	ids := make([]uuid.UUID, len(instances))
	ids[0] = q.id
	if n := len(instances) - 1; n > 0 {
		// The instances follow the placeholder in the run's order.
		if _, err := t.exec(`UPDATE jobs SET seq = seq + ? WHERE run_id = ? AND seq > ?`, n, runID, seq); err != nil {
			return nil, fmt.Errorf("expand job %s: make room: %w", q.id, err)
		}
		if _, err := t.exec(`UPDATE runs SET jobs_total = jobs_total + ? WHERE id = ?`, n, runID); err != nil {
			return nil, fmt.Errorf("expand job %s: count instances: %w", q.id, err)
		}
	}
	var jobRows [][]any
	for i := 1; i < len(instances); i++ {
		inst := instances[i]
		ids[i] = store.NewID()
		g, c := concurrency(inst)
		jobRows = append(jobRows, []any{ids[i], runID, q.projectID, seq + int64(i), inst.Key, inst.Name,
			string(store.JobPending), q.lane, labels[i].labels, inst.Resources.MilliCPU, inst.Resources.MemoryBytes,
			time.Duration(inst.Timeout).Microseconds(), inst.Retry.MaxAttempts, retryOn(inst.Retry),
			time.Duration(inst.Retry.Backoff).Microseconds(), time.Duration(inst.Retry.MaxBackoff).Microseconds(),
			g, c, 0, inst.ContinueOnError, hasDeps, upstream, nowUS})
	}
	needIDs, err := t.ids(`SELECT need_id FROM job_needs WHERE job_id = ?`, q.id)
	if err != nil {
		return nil, err
	}
	deps, err := t.ids(`SELECT job_id FROM job_needs WHERE need_id = ?`, q.id)
	if err != nil {
		return nil, err
	}
	var specRows, needRows, stepRows [][]any
	for i, inst := range instances {
		if i > 0 {
			specRows = append(specRows, []any{ids[i], specs[i]})
			for _, n := range needIDs {
				needRows = append(needRows, []any{n, ids[i]})
			}
			for _, d := range deps {
				needRows = append(needRows, []any{ids[i], d})
			}
		}
		for _, st := range inst.Steps {
			stepRows = append(stepRows, []any{ids[i], st.Index, st.Name, st.Once, 1, string(store.StepPending)})
		}
	}
	if err := t.insertAll(false,
		insertSet{`INSERT INTO jobs (id, run_id, project_id, seq, key, name, status, lane, label_set,
			milli_cpu, memory, timeout_us, max_attempts, retry_on, backoff_us, max_backoff_us, concurrency_group,
			group_cancels, needs_left, continue_on_error, has_dependents, upstream_failed, created_at) VALUES `, 23, jobRows},
		insertSet{`INSERT INTO job_specs (job_id, spec) VALUES `, 2, specRows},
		insertSet{`INSERT INTO job_needs (need_id, job_id) VALUES `, 2, needRows},
		insertSet{`INSERT INTO steps (job_id, idx, name, once, attempt, status) VALUES `, 6, stepRows},
	); err != nil {
		return nil, fmt.Errorf("expand job %s: insert instances: %w", q.id, err)
	}
	if err := t.rewireDependents(q.id, spec.Key, deps, instances); err != nil {
		return nil, err
	}
	// Each instance is admitted as any job whose needs are done: queued, waiting for
	// approval, or failed by its environment.
	var out []ended
	for i, inst := range instances {
		done, err := t.admit(queuedJob{id: ids[i], projectID: q.projectID, lane: q.lane, from: string(store.JobPending)}, inst, tr, nowUS)
		if err != nil {
			return nil, err
		}
		if done != nil {
			out = append(out, *done)
		}
	}
	return out, nil
}

// rewireDependents makes the jobs that needed the placeholder wait for its other
// instances too (the first is the placeholder's row, whose edges stay), and name them
// all where they name their needs.
func (t *tx) rewireDependents(id uuid.UUID, key string, deps []uuid.UUID, instances []*pipeline.Job) error {
	if len(deps) == 0 {
		return nil
	}
	keys := make([]string, len(instances))
	for i, inst := range instances {
		keys[i] = inst.Key
	}
	if n := len(instances) - 1; n > 0 {
		if _, err := t.exec(`UPDATE jobs SET needs_left = needs_left + ? WHERE id IN (`+inList(len(deps))+`) AND status = 'pending'`,
			append([]any{n}, uuidArgs(deps)...)...); err != nil {
			return fmt.Errorf("expand job %s: count the instances in its dependents' needs: %w", id, err)
		}
	}
	for _, d := range deps {
		var specJSON string
		if err := t.row(`SELECT spec FROM job_specs WHERE job_id = ?`, d).Scan(&specJSON); err != nil {
			return fmt.Errorf("read spec of job %s: %w", d, err)
		}
		var spec pipeline.Job
		if err := jsonUnmarshal(specJSON, &spec); err != nil {
			return fmt.Errorf("decode spec of job %s: %w", d, err)
		}
		i := slices.Index(spec.Needs, key)
		if i < 0 {
			continue
		}
		spec.Needs = slices.Concat(spec.Needs[:i], keys, spec.Needs[i+1:])
		if _, err := t.exec(`UPDATE job_specs SET spec = ? WHERE job_id = ?`, mustJSON(&spec), d); err != nil {
			return fmt.Errorf("expand job %s: name the instances in job %s: %w", id, d, err)
		}
	}
	return nil
}
