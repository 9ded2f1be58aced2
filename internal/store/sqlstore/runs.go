package sqlstore

import (
	"context"
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

// plannedJob is a job row prepared outside the transaction, so the single writer spends
// its time writing, not marshalling.
type plannedJob struct {
	id       uuid.UUID
	spec     *pipeline.Job
	specJSON string
	labels   string
	lane     int
	needs    []uuid.UUID
	needed   bool // some job needs this one
	status   store.JobStatus
	queuedAt int64
	// skip is why a job that needs nothing does not run, decided before the transaction
	// from its if: and the run's trigger and env; empty when it is queued.
	skip string
	// gated: a job that needs nothing and runs, but names an environment whose rules
	// (read in the transaction) decide whether it is queued, waits or fails.
	gated bool
}

// CreateRun implements store.Runs.
func (e *Engine) CreateRun(ctx context.Context, p store.CreateRunParams) (*store.Run, []*store.Job, bool, error) {
	if p.Plan == nil || len(p.Plan.Jobs) == 0 {
		return nil, nil, false, fmt.Errorf("create run: a plan with at least one job is required: %w", store.ErrInvalid)
	}
	if p.Project == "" {
		p.Project = "default"
	}
	if p.Env == nil {
		p.Env = map[string]string{}
	}
	// The run keeps the project's variables as they are now: its conditions, its
	// workers and its retries read these, whatever the project sets later. They are
	// read before the write, which does not wait on them, as the conditions below.
	var err error
	p.Trigger.Vars, p.Trigger.EnvironmentVars, err = e.runVariables(ctx, p.Project, p.Plan, p.Trigger.Vars)
	if err != nil {
		return nil, nil, false, fmt.Errorf("create run: %w", err)
	}
	runID := store.NewID()
	byKey := make(map[string]uuid.UUID, len(p.Plan.Jobs))
	for _, j := range p.Plan.Jobs {
		byKey[j.Key] = store.NewID()
	}
	jobs := make([]plannedJob, len(p.Plan.Jobs))
	skipped, gated := 0, 0
	values := conditionInput(p.Trigger, p.Env)
	values.RunID = runID.String()
	for i, j := range p.Plan.Jobs {
		// The run's own values (${{ ref }}, ${{ inputs.x }} ...) are known from here on;
		// the job the store keeps, and every worker runs, has them put in.
		j, err := j.WithRunValues(values)
		if err != nil {
			return nil, nil, false, fmt.Errorf("create run: %w: %w", err, store.ErrInvalid)
		}
		pj := plannedJob{id: byKey[j.Key], spec: j, specJSON: mustJSON(j), labels: labelKey(j.RunsOn), lane: laneOf(j.Priority)}
		if p.Priority != "" {
			pj.lane = laneOf(p.Priority)
		}
		if j.DynamicMatrix != nil && len(j.Needs) == 0 {
			// Its matrix is made when its needs are done; with none it would never be.
			return nil, nil, false, fmt.Errorf("create run: job %q computes its matrix but needs no job: %w", j.Key, store.ErrInvalid)
		}
		if len(j.Needs) == 0 {
			// A root job's condition is decided now, by the same policy as every other
			// job's when its needs are done; it reads only the plan and the trigger, so
			// the writer does not wait on it.
			d := j.Decide(conditionInput(p.Trigger, p.Env))
			if d.Err != nil {
				e.log.Warn("if: condition failed to evaluate; skipping job", "job", j.Key, "err", d.Err)
			}
			if !d.Run {
				pj.skip = d.Reason
				skipped++
			} else if j.Environment != nil {
				pj.gated = true
				gated++
			}
		}
		for _, n := range j.Needs {
			id, ok := byKey[n]
			if !ok {
				return nil, nil, false, fmt.Errorf("create run: job %q needs unknown job %q: %w", j.Key, n, store.ErrInvalid)
			}
			pj.needs = append(pj.needs, id)
		}
		jobs[i] = pj
	}
	needed := map[uuid.UUID]bool{}
	for _, j := range jobs {
		for _, n := range j.needs {
			needed[n] = true
		}
	}
	for i := range jobs {
		jobs[i].needed = needed[jobs[i].id]
	}
	trigger, env := mustJSON(p.Trigger), mustJSON(p.Env)
	var idem any
	if p.IdempotencyKey != "" {
		idem = p.IdempotencyKey
	}

	existing := uuid.Nil
	var projectID uuid.UUID
	var now int64
	var number int
	err = e.writeNumbered(ctx, func(t *tx) error {
		existing, number = uuid.Nil, 0
		now = us(e.clock.Now())
		var err error
		projectID, err = t.project(p.Project, now)
		if err != nil {
			return err
		}
		if p.IdempotencyKey != "" {
			err := t.row(`SELECT id FROM runs WHERE project_id = ? AND idempotency_key = ?`, projectID, p.IdempotencyKey).Scan(&existing)
			if err == nil {
				return nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("look up idempotency key: %w", err)
			}
		}
		if p.Tick != nil {
			if err := t.takeRunTick(projectID, p.Tick, runID, now); err != nil {
				return err
			}
		}
		// Jobs that need nothing are queued at once, in fair-queue order. What the run
		// reports is read with the first lane's clocks, in one statement.
		next := map[int]int64{}
		var step int64
		notify := -1
		for _, j := range jobs {
			if _, ok := next[j.lane]; ok || len(j.needs) > 0 || j.skip != "" || j.gated {
				continue
			}
			var start, s int64
			if notify < 0 {
				notify, start, s, err = t.runStart(projectID, p.Plan.Name, p.Trigger, len(jobs), j.lane)
			} else {
				start, s, err = t.fairStart(projectID, j.lane)
			}
			if err != nil {
				return err
			}
			next[j.lane], step = start, s
		}
		if notify < 0 {
			if notify, err = t.notifyFlags(projectID, p.Plan.Name, p.Trigger, len(jobs)); err != nil {
				return err
			}
		}
		if err := t.ensureLabelSets(jobs); err != nil {
			return err
		}
		rows := make([][]any, 0, len(jobs))
		var cancelHolders [][2]any
		for i := range jobs {
			j := &jobs[i]
			status, vtime, queuedAt, finishedAt := store.JobPending, int64(0), int64(0), int64(0)
			switch {
			case j.skip != "":
				status, finishedAt = store.JobSkipped, now
			case j.gated:
				// Pending until admit, below, once its rows are in.
			case len(j.needs) == 0:
				status, vtime, queuedAt = store.JobQueued, next[j.lane], now
				next[j.lane] += step
				t.markQueued()
			}
			j.status, j.queuedAt = status, queuedAt
			group, cancels := "", false
			if j.spec.Concurrency != nil {
				group, cancels = j.spec.Concurrency.Group, j.spec.Concurrency.CancelInProgress
				if status == store.JobQueued && cancels {
					cancelHolders = append(cancelHolders, [2]any{j.id, group})
				}
			}
			rows = append(rows, []any{j.id, runID, projectID, i, j.spec.Key, j.spec.Name, string(status), j.lane, j.labels,
				j.spec.Resources.MilliCPU, j.spec.Resources.MemoryBytes, time.Duration(j.spec.Timeout).Microseconds(),
				j.spec.Retry.MaxAttempts, retryOn(j.spec.Retry), time.Duration(j.spec.Retry.Backoff).Microseconds(),
				time.Duration(j.spec.Retry.MaxBackoff).Microseconds(),
				group, cancels, len(j.needs), j.spec.ContinueOnError, j.needed, vtime, now, queuedAt, finishedAt, j.skip})
		}
		specs := make([][]any, len(jobs))
		for i, j := range jobs {
			specs[i] = []any{j.id, j.specJSON}
		}
		var needs, steps [][]any
		for _, j := range jobs {
			for _, n := range j.needs {
				needs = append(needs, []any{n, j.id})
			}
			for _, st := range j.spec.Steps {
				steps = append(steps, []any{j.id, st.Index, st.Name, st.Once, 1, string(store.StepPending)})
			}
		}
		// The run's number is taken last, with the rows: on PostgreSQL the project's next
		// run waits for this transaction from then on.
		if number, err = t.insertRun(projectID, t.queued,
			insertSet{`INSERT INTO runs (id, project_id, name, status, trigger, ref, idempotency_key, env,
				jobs_total, created_at, notify, branch, event, actor, number) VALUES `, 15, [][]any{{runID, projectID, p.Plan.Name,
				string(store.RunPending), trigger, p.Trigger.Ref, idem, env, len(jobs), now, notify,
				p.Trigger.Branch, p.Trigger.Event, p.Trigger.RunActor(), runNumber}}},
			insertSet{`INSERT INTO run_definitions (run_id, definition) VALUES `, 2, [][]any{{runID, p.Definition}}},
			insertSet{`INSERT INTO jobs (id, run_id, project_id, seq, key, name, status, lane, label_set,
				milli_cpu, memory, timeout_us, max_attempts, retry_on, backoff_us, max_backoff_us, concurrency_group,
				group_cancels, needs_left, continue_on_error, has_dependents, vtime, created_at, queued_at, finished_at,
				reason) VALUES `, 26, rows},
			insertSet{`INSERT INTO job_specs (job_id, spec) VALUES `, 2, specs},
			insertSet{`INSERT INTO job_needs (need_id, job_id) VALUES `, 2, needs},
			insertSet{`INSERT INTO steps (job_id, idx, name, once, attempt, status) VALUES `, 6, steps},
		); err != nil {
			return fmt.Errorf("insert run and jobs: %w", err)
		}
		// The pending status commits with the run; if every job is skipped the run ends in
		// this batch too, and its final status follows this one.
		if err := t.reportRun(runID, notify&notifyStatus, now); err != nil {
			return err
		}
		if notify&notifyWorkflowRunRequested != 0 {
			if err := t.reportWorkflowRun(runID, pipeline.WorkflowRunRequested, now); err != nil {
				return err
			}
		}
		for _, h := range cancelHolders {
			if err := t.cancelGroupHolders(projectID, h[1].(string), h[0].(uuid.UUID)); err != nil {
				return err
			}
		}
		if notify&notifyJobStatus != 0 {
			// A job naming an environment reports when its gate, below, decided.
			ids := make([]uuid.UUID, 0, len(jobs))
			for _, j := range jobs {
				if !j.gated {
					ids = append(ids, j.id)
				}
			}
			if err := t.reportJobStatuses(runID, ids, now); err != nil {
				return err
			}
		}
		// Skipped root jobs end like any job that did not run: the run counts them and
		// their dependents are decided, at the end of the batch, once every row is in.
		for _, j := range jobs {
			if j.skip != "" {
				t.ended = append(t.ended, ended{id: j.id, runID: runID, status: store.JobSkipped, noDependents: !j.needed})
			}
		}
		// Root jobs naming an environment go through the same gate as every other job.
		for _, j := range jobs {
			if !j.gated {
				continue
			}
			done, err := t.admit(queuedJob{id: j.id, projectID: projectID, lane: j.lane, from: string(store.JobPending)}, j.spec, p.Trigger, now)
			if err != nil {
				return err
			}
			if done != nil {
				t.ended = append(t.ended, *done)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, false, fmt.Errorf("create run: %w", err)
	}
	if existing != uuid.Nil || skipped > 0 || gated > 0 {
		// A skip or an environment may have ended dependents and the run itself within
		// the transaction: what it left is read back rather than worked out again here.
		id := existing
		if id == uuid.Nil {
			id = runID
		}
		run, err := e.GetRun(ctx, id)
		if err != nil {
			return nil, nil, false, err
		}
		list, err := e.ListJobs(ctx, id)
		if err != nil {
			return nil, nil, false, err
		}
		return run, list, existing == uuid.Nil, nil
	}
	// Everything the new rows hold is known here; reading them back would only cost time.
	run := &store.Run{
		ID: runID, ProjectID: projectID, Project: p.Project, Number: number, Name: p.Plan.Name, Status: store.RunPending,
		Trigger: p.Trigger, IdempotencyKey: p.IdempotencyKey, Env: p.Env,
		JobsTotal: len(jobs), CreatedAt: fromUS(now),
	}
	list := make([]*store.Job, len(jobs))
	for i, j := range jobs {
		job := &store.Job{
			ID: j.id, RunID: runID, ProjectID: projectID, Key: j.spec.Key, Name: j.spec.Name, Status: j.status,
			Priority: priorityOf(j.lane), Labels: splitLabels(j.labels), MilliCPU: j.spec.Resources.MilliCPU,
			Memory: j.spec.Resources.MemoryBytes, MaxAttempts: j.spec.Retry.MaxAttempts, Spec: j.spec,
			CreatedAt: fromUS(now), QueuedAt: fromUS(j.queuedAt),
		}
		if j.spec.Concurrency != nil {
			job.ConcurrencyGroup = j.spec.Concurrency.Group
		}
		list[i] = job
	}
	return run, list, true, nil
}

// project returns the id of the named project, creating it on first use.
func (t *tx) project(name string, now int64) (uuid.UUID, error) {
	if id, ok := t.e.projects.Load(name); ok {
		return id.(uuid.UUID), nil
	}
	var id uuid.UUID
	err := t.row(`SELECT id FROM projects WHERE name = ?`, name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		if _, err := t.exec(`INSERT INTO projects (id, name, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`, store.NewID(), name, now); err != nil {
			return uuid.Nil, fmt.Errorf("insert project: %w", err)
		}
		err = t.row(`SELECT id FROM projects WHERE name = ?`, name).Scan(&id)
	}
	if err != nil {
		return uuid.Nil, fmt.Errorf("look up project %q: %w", name, err)
	}
	t.onCommit = append(t.onCommit, func() { t.e.projects.Store(name, id) })
	return id, nil
}

// nextRunNumber takes the project's next run number. The upsert holds the project's
// counter row until the transaction ends, so concurrent creations of the project's runs
// take numbers one after the other, and a transaction rolled back gives its number back.
func (t *tx) nextRunNumber(projectID uuid.UUID) (int, error) {
	var n int
	err := t.row(takeRunNumber, projectID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("take the next run number of project %s: %w", projectID, err)
	}
	return n, nil
}

// takeRunNumber is nextRunNumber's statement.
const takeRunNumber = `INSERT INTO run_numbers (project_id, last) VALUES (?, 1)
		ON CONFLICT (project_id) DO UPDATE SET last = run_numbers.last + 1 RETURNING last`

func (t *tx) ensureLabelSets(jobs []plannedJob) error {
	seen := map[string]bool{}
	for _, j := range jobs {
		if seen[j.labels] || t.e.labels.has(j.labels) {
			continue
		}
		seen[j.labels] = true
		if _, err := t.exec(`INSERT INTO label_sets (labels) VALUES (?) ON CONFLICT (labels) DO NOTHING`, j.labels); err != nil {
			return fmt.Errorf("insert label set: %w", err)
		}
		labels := j.labels
		t.onCommit = append(t.onCommit, func() { t.e.labels.add(labels) })
	}
	return nil
}

// insertSet is rows for insertMany: prefix is "INSERT INTO table (columns) VALUES ".
type insertSet struct {
	prefix string
	cols   int
	rows   [][]any
}

// insertAll inserts the sets in order. Where a WITH may hold INSERTs (Dialect.WriteCTEs),
// sets of up to insertPer rows each go in one statement, one round trip for them all:
// its foreign keys are checked when the whole statement has run, so a set may refer to
// the rows of one before it. With queued, the rows queue jobs, and that statement also
// sends the dialect's QueuedNotice.
func (t *tx) insertAll(queued bool, sets ...insertSet) error {
	_, err := t.insertSets(uuid.Nil, queued, sets)
	return err
}

type runNumberArg struct{}

// runNumber stands, in a row given to insertRun, for the run number it takes.
var runNumber runNumberArg

// insertRun is insertAll for a new run's rows, one of which holds runNumber where its
// number goes: it takes the project's next run number (nextRunNumber) and returns it.
// Where the sets go in one statement the number is taken in it too, with no round trip
// of its own: a creation on PostgreSQL is two round trips, not three.
func (t *tx) insertRun(projectID uuid.UUID, queued bool, sets ...insertSet) (int, error) {
	return t.insertSets(projectID, queued, sets)
}

func (t *tx) insertSets(numbered uuid.UUID, queued bool, sets []insertSet) (int, error) {
	var live []insertSet
	params := 0
	for _, s := range sets {
		if len(s.rows) > 0 {
			live = append(live, s)
			params += s.cols * len(s.rows)
		}
	}
	notice := queued && t.e.d.QueuedNotice != ""
	one := t.e.d.WriteCTEs && (len(live) > 1 || notice || numbered != uuid.Nil) && params <= maxParams
	for _, s := range live {
		one = one && len(s.rows) <= insertPer
	}
	if !one {
		number := 0
		if numbered != uuid.Nil {
			var err error
			if number, err = t.nextRunNumber(numbered); err != nil {
				return 0, err
			}
			live = withRunNumber(live, number)
		}
		for _, s := range live {
			if err := t.insertMany(s.prefix, s.cols, s.rows); err != nil {
				return 0, err
			}
		}
		return number, nil
	}
	// WITH i0 AS (INSERT ...), i1 AS (INSERT ...) INSERT ..., or with the notice every
	// INSERT in the WITH and the notice last: a WITH's INSERTs run whether or not the
	// statement reads them. A run's number is the WITH's first part, n, which its row
	// reads, and the statement ends by selecting it.
	var b strings.Builder
	args := make([]any, 0, params+1)
	last := len(live) - 1
	if notice || numbered != uuid.Nil {
		last = len(live)
	}
	b.WriteString("WITH ")
	if numbered != uuid.Nil {
		b.WriteString(`n AS (` + takeRunNumber + `), `)
		args = append(args, numbered)
	}
	for i, s := range live {
		if i > 0 && i < last {
			b.WriteString(", ")
		}
		if i < last {
			fmt.Fprintf(&b, "i%d AS (", i)
		} else {
			b.WriteString(" ")
		}
		b.WriteString(s.prefix)
		tuple := "(" + inList(s.cols) + ")"
		for j, row := range s.rows {
			if j > 0 {
				b.WriteString(", ")
			}
			if numbered == uuid.Nil || !slices.Contains(row, any(runNumber)) {
				b.WriteString(tuple)
				args = append(args, row...)
				continue
			}
			b.WriteString("(")
			for k, v := range row {
				if k > 0 {
					b.WriteString(", ")
				}
				if v == any(runNumber) {
					b.WriteString("(SELECT last FROM n)")
					continue
				}
				b.WriteString("?")
				args = append(args, v)
			}
			b.WriteString(")")
		}
		if i < last {
			b.WriteString(")")
		}
	}
	if numbered == uuid.Nil {
		if notice {
			b.WriteString(" ")
			b.WriteString(t.e.d.QueuedNotice)
		}
		if _, err := t.exec(b.String(), args...); err != nil {
			return 0, err
		}
		t.batch.noticed = t.batch.noticed || notice
		return 0, nil
	}
	// The notice, a SELECT of one row, is a subquery of the FROM: it runs, and the
	// statement still selects the number alone.
	b.WriteString(" SELECT last FROM n")
	if notice {
		b.WriteString(", (" + t.e.d.QueuedNotice + ") AS notice")
	}
	var number int
	if err := t.row(b.String(), args...).Scan(&number); err != nil {
		return 0, err
	}
	t.batch.noticed = t.batch.noticed || notice
	return number, nil
}

// withRunNumber is sets with number where runNumber stood, in copies of the rows that
// held it: the caller's rows stay as they were.
func withRunNumber(sets []insertSet, number int) []insertSet {
	out := slices.Clone(sets)
	for i := range out {
		cloned := false
		for j, row := range out[i].rows {
			k := slices.Index(row, any(runNumber))
			if k < 0 {
				continue
			}
			if !cloned {
				out[i].rows, cloned = slices.Clone(out[i].rows), true
			}
			r := slices.Clone(row)
			r[k] = number
			out[i].rows[j] = r
		}
	}
	return out
}

// insertPer is the most rows insertMany puts in one statement, and maxParams the most
// parameters insertAll gives one statement, well below either database's limit.
const (
	insertPer = 100
	maxParams = 10000
)

// insertMany inserts rows in multi-row statements of at most insertPer rows.
func (t *tx) insertMany(prefix string, cols int, rows [][]any) error {
	const per = insertPer
	for len(rows) > 0 {
		n := min(per, len(rows))
		var b strings.Builder
		b.WriteString(prefix)
		args := make([]any, 0, n*cols)
		tuple := "(" + inList(cols) + ")"
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(tuple)
			args = append(args, rows[i]...)
		}
		if _, err := t.exec(b.String(), args...); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

// GetRun implements store.Runs.
func (e *Engine) GetRun(ctx context.Context, id uuid.UUID) (*store.Run, error) {
	r, err := scanRun(e.readRow(ctx, `SELECT `+e.runCols+runFrom+`WHERE r.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, err)
	}
	return r, nil
}

// RunDefinition implements store.Runs.
func (e *Engine) RunDefinition(ctx context.Context, id uuid.UUID) ([]byte, error) {
	var def []byte
	err := e.readRow(ctx, `SELECT definition FROM run_definitions WHERE run_id = ?`, id).Scan(&def)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("definition of run %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read definition of run %s: %w", id, err)
	}
	return def, nil
}

// GetRunByNumber implements store.Runs.
func (e *Engine) GetRunByNumber(ctx context.Context, project string, number int) (*store.Run, error) {
	r, err := scanRun(e.readRow(ctx, `SELECT `+e.runCols+runFrom+`WHERE p.name = ? AND r.number = ?`, project, number))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %s#%d: %w", project, number, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get run %s#%d: %w", project, number, err)
	}
	return r, nil
}

// runFilter is the WHERE clause (with its arguments) of the runs p selects, without its
// page bounds; none is set when p.ProjectIDs is empty but not nil (no project is visible).
func runFilter(p store.ListRunsParams) (clause string, args []any, none bool) {
	var where []string
	if p.Project != "" {
		where, args = append(where, "p.name = ?"), append(args, p.Project)
	}
	if p.ProjectIDs != nil {
		if len(p.ProjectIDs) == 0 {
			return "", nil, true
		}
		marks := make([]string, len(p.ProjectIDs))
		for i, id := range p.ProjectIDs {
			marks[i] = "?"
			args = append(args, id)
		}
		where = append(where, "r.project_id IN ("+strings.Join(marks, ", ")+")")
	}
	for _, f := range []struct{ col, v string }{
		{"r.status", string(p.Status)}, {"r.ref", p.Ref}, {"r.branch", p.Branch}, {"r.event", p.Event}, {"r.actor", p.Actor},
	} {
		if f.v != "" {
			where, args = append(where, f.col+" = ?"), append(args, f.v)
		}
	}
	if len(where) == 0 {
		return "", args, false
	}
	return "WHERE " + strings.Join(where, " AND "), args, false
}

// ListRuns implements store.Runs.
func (e *Engine) ListRuns(ctx context.Context, p store.ListRunsParams) ([]*store.Run, error) {
	where, args, none := runFilter(p)
	if none {
		return nil, nil
	}
	if p.Before != uuid.Nil {
		if where == "" {
			where = "WHERE r.id < ?"
		} else {
			where += " AND r.id < ?"
		}
		args = append(args, p.Before)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 500)
	q := `SELECT ` + e.runCols + runFrom + where + ` ORDER BY r.id DESC LIMIT ?`
	rows, err := e.readRows(ctx, q, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var out []*store.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// CountRuns implements store.Runs.
func (e *Engine) CountRuns(ctx context.Context, p store.ListRunsParams, upTo int) (int, error) {
	where, args, none := runFilter(p)
	if none {
		return 0, nil
	}
	q := `SELECT COUNT(*)` + runFrom + where
	if upTo > 0 {
		q = `SELECT COUNT(*) FROM (SELECT 1` + runFrom + where + ` LIMIT ?) counted`
		args = append(args, upTo)
	}
	var n int
	if err := e.readRow(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count runs: %w", err)
	}
	return n, nil
}

// DigestRuns implements store.Runs.
func (e *Engine) DigestRuns(ctx context.Context, runIDs []uuid.UUID) (map[uuid.UUID]*store.RunDigest, error) {
	out := make(map[uuid.UUID]*store.RunDigest, len(runIDs))
	if len(runIDs) == 0 {
		return out, nil
	}
	marks := make([]string, len(runIDs))
	args := make([]any, len(runIDs))
	for i, id := range runIDs {
		marks[i], args[i] = "?", id
	}
	in := "(" + strings.Join(marks, ", ") + ")"
	rows, err := e.readRows(ctx, `SELECT run_id, status, COUNT(*) FROM jobs WHERE run_id IN `+in+` GROUP BY run_id, status`, args...)
	if err != nil {
		return nil, fmt.Errorf("digest runs: count jobs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id     uuid.UUID
			status string
			n      int
		)
		if err := rows.Scan(&id, &status, &n); err != nil {
			return nil, fmt.Errorf("digest runs: count jobs: %w", err)
		}
		d := out[id]
		if d == nil {
			d = &store.RunDigest{Jobs: map[store.JobStatus]int{}}
			out[id] = d
		}
		d.Jobs[store.JobStatus(status)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("digest runs: count jobs: %w", err)
	}
	rows.Close()
	// The first failed job of each run, else its first cancelled one: one row per run.
	jrows, err := e.readRows(ctx, `SELECT `+jobCols+` FROM (SELECT jobs.*, ROW_NUMBER() OVER (PARTITION BY run_id
		ORDER BY CASE status WHEN 'failed' THEN 0 ELSE 1 END, finished_at, seq) AS rn
		FROM jobs WHERE run_id IN `+in+` AND status IN ('failed', 'cancelled')) jobs WHERE rn = 1`, args...)
	if err != nil {
		return nil, fmt.Errorf("digest runs: failed jobs: %w", err)
	}
	defer jrows.Close()
	var failed []*store.Job
	for jrows.Next() {
		j, err := scanJobRow(jrows, nil)
		if err != nil {
			return nil, fmt.Errorf("digest runs: failed jobs: %w", err)
		}
		failed = append(failed, j)
	}
	if err := jrows.Err(); err != nil {
		return nil, fmt.Errorf("digest runs: failed jobs: %w", err)
	}
	jrows.Close()
	if len(failed) == 0 {
		return out, nil
	}
	byJob := make(map[uuid.UUID]*store.Job, len(failed))
	jobMarks := make([]string, len(failed))
	jobArgs := make([]any, len(failed))
	for i, j := range failed {
		if d := out[j.RunID]; d != nil {
			d.Failed = j
		}
		byJob[j.ID] = j
		jobMarks[i], jobArgs[i] = "?", j.ID
	}
	// Their failed and cancelled steps, in order: the first of each job is the one to blame.
	srows, err := e.readRows(ctx, `SELECT job_id, idx, name, attempt, status, exit_code, failure_kind, started_at, finished_at, once_succeeded
		FROM steps WHERE job_id IN (`+strings.Join(jobMarks, ", ")+`) AND status IN ('failed', 'cancelled') ORDER BY job_id, idx`, jobArgs...)
	if err != nil {
		return nil, fmt.Errorf("digest runs: failed steps: %w", err)
	}
	defer srows.Close()
	for srows.Next() {
		var (
			s            store.Step
			status, kind string
			exit         sql.NullInt64
			st, fin      int64
		)
		if err := srows.Scan(&s.JobID, &s.Index, &s.Name, &s.Attempt, &status, &exit, &kind, &st, &fin, &s.OnceSucceeded); err != nil {
			return nil, fmt.Errorf("digest runs: failed steps: %w", err)
		}
		s.Status, s.FailureKind = store.StepStatus(status), store.FailureKind(kind)
		if exit.Valid {
			v := int(exit.Int64)
			s.ExitCode = &v
		}
		s.StartedAt, s.FinishedAt = fromUS(st), fromUS(fin)
		j := byJob[s.JobID]
		d := out[j.RunID]
		if d == nil || d.FailedStep != nil || (s.Status == store.StepCancelled && j.Status != store.JobCancelled) {
			continue
		}
		d.FailedStep = &s
	}
	return out, srows.Err()
}

// GetJob implements store.Runs.
func (e *Engine) GetJob(ctx context.Context, id uuid.UUID) (*store.Job, error) {
	j, err := scanJob(e.readRow(ctx, jobWithSpec+`WHERE jobs.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("job %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get job %s: %w", id, err)
	}
	var outJSON string
	err = e.readRow(ctx, `SELECT outputs FROM job_outputs WHERE job_id = ?`, id).Scan(&outJSON)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("get outputs of job %s: %w", id, err)
	default:
		if err := jsonUnmarshal(outJSON, &j.Outputs); err != nil {
			return nil, fmt.Errorf("decode outputs of job %s: %w", id, err)
		}
	}
	return j, nil
}

// NeedsOf implements store.Runs.
func (e *Engine) NeedsOf(ctx context.Context, jobID uuid.UUID) (map[string]store.NeedResult, error) {
	query := func(q string, args ...any) (*sql.Rows, error) { return e.readRows(ctx, q, args...) }
	out, _, err := needResults(query, jobID, true)
	return out, err
}

// LeaseAttempt implements store.Queue.
func (e *Engine) LeaseAttempt(ctx context.Context, l store.LeaseRef) (int, error) {
	var (
		attempt int
		token   string
		status  string
	)
	err := e.readRow(ctx, `SELECT attempt, lease_token, status FROM jobs WHERE id = ?`, l.JobID).Scan(&attempt, &token, &status)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("job %s: %w", l.JobID, store.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("check lease of job %s: %w", l.JobID, err)
	}
	if l.Token == "" || token != l.Token || !store.JobStatus(status).Leased() {
		return 0, fmt.Errorf("job %s: %w", l.JobID, store.ErrLeaseLost)
	}
	return attempt, nil
}

// ListJobs implements store.Runs.
func (e *Engine) ListJobs(ctx context.Context, runID uuid.UUID) ([]*store.Job, error) {
	return e.listJobs(ctx, runID, jobWithSpec+`WHERE jobs.run_id = ? ORDER BY jobs.seq`, runID)
}

// ListJobsChanged implements store.Runs. The number each change takes is the migrations'
// trigger's doing (jobs_change_seq), not any statement's: the run's counter on SQLite,
// the writing transaction's id on PostgreSQL (see Dialect.RunChangeCursor).
func (e *Engine) ListJobsChanged(ctx context.Context, runID uuid.UUID, since int64) ([]*store.Job, error) {
	return e.listJobs(ctx, runID, jobWithSpec+`WHERE jobs.run_id = ? AND jobs.change_seq > ? ORDER BY jobs.seq`, runID, since)
}

func (e *Engine) listJobs(ctx context.Context, runID uuid.UUID, query string, args ...any) ([]*store.Job, error) {
	rows, err := e.readRows(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []*store.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("list jobs of run %s: %w", runID, err)
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// ListSteps implements store.Runs.
func (e *Engine) ListSteps(ctx context.Context, jobID uuid.UUID) ([]*store.Step, error) {
	rows, err := e.readRows(ctx, stepsQuery, jobID)
	if err != nil {
		return nil, fmt.Errorf("list steps of job %s: %w", jobID, err)
	}
	out, err := scanSteps(rows)
	if err != nil {
		return nil, fmt.Errorf("list steps of job %s: %w", jobID, err)
	}
	return out, nil
}

// loadSpecs reads and decodes the specs of jobs a write returned, after it committed, so
// the writer does not spend its time on them.
func (e *Engine) loadSpecs(ctx context.Context, jobs []*store.Job) error {
	if len(jobs) == 0 {
		return nil
	}
	args := make([]any, len(jobs))
	byID := make(map[uuid.UUID]*store.Job, len(jobs))
	for i, j := range jobs {
		args[i] = j.ID
		byID[j.ID] = j
	}
	args = padded(args)
	rows, err := e.readRows(ctx, `SELECT job_id, spec FROM job_specs WHERE job_id IN (`+inList(len(args))+`)`, args...)
	if err != nil {
		return fmt.Errorf("read job specs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id uuid.UUID
		var spec string
		if err := rows.Scan(&id, &spec); err != nil {
			return fmt.Errorf("read job specs: %w", err)
		}
		if err := decodeSpec(byID[id], spec); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read job specs: %w", err)
	}
	for _, j := range jobs {
		if j.Spec == nil {
			return fmt.Errorf("job %s has no spec", j.ID)
		}
	}
	return nil
}
