package sqlstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// Bits of runs.notify: what a run reports as its state changes. They are decided when
// the run is created, so the paths that end jobs learn them from the run row they update
// anyway and a run that reports nothing pays nothing more.
const (
	notifyStatus  = 1 // commit statuses to the project's forge
	notifyRunHook = 2 // run.finished to the project's webhook subscriptions
	notifyJobHook = 4 // job.finished to them
	// notifyJobStatus: a commit status per job beside the run's (projects.commit_statuses
	// is jobs, and the run has at most store.MaxJobStatuses jobs).
	notifyJobStatus = 8
)

const outboxCols = `id, topic, payload, attempts, next_attempt_at, created_at, delivered_at, last_error, dead_at`

func scanOutbox(s scanner) (*store.OutboxMessage, error) {
	var m store.OutboxMessage
	var next, created, delivered, dead int64
	if err := s.Scan(&m.ID, &m.Topic, &m.Payload, &m.Attempts, &next, &created, &delivered, &m.LastError, &dead); err != nil {
		return nil, err
	}
	m.NextAttempt, m.CreatedAt, m.DeliveredAt, m.DeadAt = fromUS(next), fromUS(created), fromUS(delivered), fromUS(dead)
	return &m, nil
}

// EnqueueOutbox implements store.Outbox.
func (e *Engine) EnqueueOutbox(ctx context.Context, topic string, payload []byte) error {
	return e.write(ctx, func(t *tx) error {
		return t.enqueueOutbox(topic, payload, us(e.clock.Now()))
	})
}

// enqueueOutbox adds a message in the caller's transaction, so it commits, or not, with
// the state change it reports.
func (t *tx) enqueueOutbox(topic string, payload []byte, nowUS int64) error {
	if _, err := t.exec(`INSERT INTO outbox (id, topic, payload, next_attempt_at, created_at) VALUES (?, ?, ?, ?, ?)`,
		store.NewID(), topic, payload, nowUS, nowUS); err != nil {
		return fmt.Errorf("enqueue %s message: %w", topic, err)
	}
	return nil
}

// ClaimOutbox implements store.Outbox.
func (e *Engine) ClaimOutbox(ctx context.Context, max int, retryIn time.Duration) ([]*store.OutboxMessage, error) {
	if max <= 0 {
		max = 1
	}
	var out []*store.OutboxMessage
	err := e.write(ctx, func(t *tx) error {
		out = nil
		now := e.clock.Now()
		rows, err := t.query(`SELECT `+outboxCols+` FROM outbox
			WHERE delivered_at = 0 AND dead_at = 0 AND next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT ?`+e.d.SkipLocked, us(now), max)
		if err != nil {
			return fmt.Errorf("find due messages: %w", err)
		}
		for rows.Next() {
			m, err := scanOutbox(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("find due messages: %w", err)
			}
			m.Attempts++
			m.NextAttempt = now.Add(retryIn)
			out = append(out, m)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("find due messages: %w", err)
		}
		for _, m := range out {
			if _, err := t.exec(`UPDATE outbox SET attempts = ?, next_attempt_at = ? WHERE id = ?`, m.Attempts, us(m.NextAttempt), m.ID); err != nil {
				return fmt.Errorf("hold message %s: %w", m.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim outbox: %w", err)
	}
	return out, nil
}

// MarkDelivered implements store.Outbox.
func (e *Engine) MarkDelivered(ctx context.Context, id uuid.UUID) error {
	return e.write(ctx, func(t *tx) error {
		res, err := t.exec(`UPDATE outbox SET delivered_at = ? WHERE id = ?`, us(e.clock.Now()), id)
		if err != nil {
			return fmt.Errorf("mark message %s delivered: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("message %s: %w", id, store.ErrNotFound)
		}
		return nil
	})
}

// SupersedeOutbox implements store.Outbox.
func (e *Engine) SupersedeOutbox(ctx context.Context, id uuid.UUID) error {
	return e.write(ctx, func(t *tx) error {
		res, err := t.exec(`UPDATE outbox SET delivered_at = ?, last_error = ? WHERE id = ?`, us(e.clock.Now()), store.OutboxSupersededNote, id)
		if err != nil {
			return fmt.Errorf("mark message %s superseded: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("message %s: %w", id, store.ErrNotFound)
		}
		return nil
	})
}

// FailOutbox implements store.Outbox.
func (e *Engine) FailOutbox(ctx context.Context, p store.FailOutboxParams) error {
	return e.write(ctx, func(t *tx) error {
		next, dead := us(p.NextAttempt), int64(0)
		if p.Dead {
			dead = us(e.clock.Now())
		}
		// A message delivered meanwhile (by a replica that claimed it after this one's
		// hold ran out) stays delivered.
		res, err := t.exec(`UPDATE outbox SET last_error = ?, next_attempt_at = ?, dead_at = ? WHERE id = ? AND delivered_at = 0`,
			p.Error, next, dead, p.ID)
		if err != nil {
			return fmt.Errorf("record failed delivery of message %s: %w", p.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			var one int
			if err := t.row(`SELECT 1 FROM outbox WHERE id = ?`, p.ID).Scan(&one); isNoRows(err) {
				return fmt.Errorf("message %s: %w", p.ID, store.ErrNotFound)
			}
		}
		return nil
	})
}

// GetOutbox implements store.Outbox.
func (e *Engine) GetOutbox(ctx context.Context, id uuid.UUID) (*store.OutboxMessage, error) {
	m, err := scanOutbox(e.readRow(ctx, `SELECT `+outboxCols+` FROM outbox WHERE id = ?`, id))
	if isNoRows(err) {
		return nil, fmt.Errorf("message %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get message %s: %w", id, err)
	}
	return m, nil
}

// ListOutbox implements store.Outbox.
func (e *Engine) ListOutbox(ctx context.Context, p store.ListOutboxParams) ([]*store.OutboxMessage, error) {
	var where []string
	var args []any
	switch p.State {
	case "":
	case store.OutboxPending:
		where = append(where, `delivered_at = 0 AND dead_at = 0`)
	case store.OutboxFailed:
		where = append(where, `delivered_at = 0 AND dead_at = 0 AND last_error <> ''`)
	case store.OutboxDead:
		where = append(where, `dead_at <> 0`)
	case store.OutboxDelivered:
		where = append(where, `delivered_at <> 0 AND last_error <> ?`)
		args = append(args, store.OutboxSupersededNote)
	case store.OutboxSuperseded:
		where = append(where, `delivered_at <> 0 AND last_error = ?`)
		args = append(args, store.OutboxSupersededNote)
	default:
		return nil, fmt.Errorf("list outbox: state %q is not pending, failed, dead, delivered or superseded: %w", p.State, store.ErrInvalid)
	}
	if p.Topic != "" {
		where = append(where, `topic = ?`)
		args = append(args, p.Topic)
	}
	q := `SELECT ` + outboxCols + ` FROM outbox`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 500)
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, limit)
	rows, err := e.readRows(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list outbox: %w", err)
	}
	defer rows.Close()
	var out []*store.OutboxMessage
	for rows.Next() {
		m, err := scanOutbox(rows)
		if err != nil {
			return nil, fmt.Errorf("list outbox: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list outbox: %w", err)
	}
	return out, nil
}

// RedeliverOutbox implements store.Outbox.
func (e *Engine) RedeliverOutbox(ctx context.Context, id uuid.UUID) error {
	return e.write(ctx, func(t *tx) error {
		res, err := t.exec(`UPDATE outbox SET attempts = 0, next_attempt_at = ?, delivered_at = 0, dead_at = 0, last_error = ''
			WHERE id = ?`, us(e.clock.Now()), id)
		if err != nil {
			return fmt.Errorf("redeliver message %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("redeliver message %s: %w", id, store.ErrNotFound)
		}
		return nil
	})
}

const webhookCols = `id, project_id, url, secret, on_run_finished, on_job_finished, created_at,
	secret_key_id, secret_wrapped_key, secret_ciphertext`

var webhookSecretCols = sealedCols{table: "project_webhooks", key: "id", plain: "secret",
	keyID: "secret_key_id", wrapped: "secret_wrapped_key", ciphertext: "secret_ciphertext"}

func scanWebhook(s scanner) (*store.Webhook, error) {
	var w store.Webhook
	var onRun, onJob bool
	var created int64
	var wrapped, ct string
	if err := s.Scan(&w.ID, &w.ProjectID, &w.URL, &w.Secret, &onRun, &onJob, &created,
		&w.SecretSealed.KeyID, &wrapped, &ct); err != nil {
		return nil, err
	}
	var err error
	if w.SecretSealed.WrappedKey, err = decodeSealed(wrapped); err != nil {
		return nil, fmt.Errorf("decode the secret of webhook %s: %w", w.ID, err)
	}
	if w.SecretSealed.Ciphertext, err = decodeSealed(ct); err != nil {
		return nil, fmt.Errorf("decode the secret of webhook %s: %w", w.ID, err)
	}
	if onRun {
		w.Events = append(w.Events, store.WebhookRunFinished)
	}
	if onJob {
		w.Events = append(w.Events, store.WebhookJobFinished)
	}
	w.CreatedAt = fromUS(created)
	return &w, nil
}

// CreateWebhook implements store.Webhooks.
func (e *Engine) CreateWebhook(ctx context.Context, w *store.Webhook) error {
	if w.URL == "" || len(w.Events) == 0 {
		return fmt.Errorf("create webhook: a URL and at least one event are required: %w", store.ErrInvalid)
	}
	for _, ev := range w.Events {
		if ev != store.WebhookRunFinished && ev != store.WebhookJobFinished {
			return fmt.Errorf("create webhook: event %q is not %s or %s: %w", ev, store.WebhookRunFinished, store.WebhookJobFinished, store.ErrInvalid)
		}
	}
	if w.Secret != "" && !w.SecretSealed.IsZero() {
		return fmt.Errorf("create webhook: a secret in plain text or sealed, not both: %w", store.ErrInvalid)
	}
	id, now := store.NewID(), e.clock.Now()
	err := e.write(ctx, func(t *tx) error {
		var one int
		if err := t.row(`SELECT 1 FROM projects WHERE id = ?`, w.ProjectID).Scan(&one); isNoRows(err) {
			return fmt.Errorf("create webhook: project %s: %w", w.ProjectID, store.ErrNotFound)
		} else if err != nil {
			return fmt.Errorf("create webhook: %w", err)
		}
		if _, err := t.exec(`INSERT INTO project_webhooks (`+webhookCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			id, w.ProjectID, w.URL, w.Secret, slices.Contains(w.Events, store.WebhookRunFinished),
			slices.Contains(w.Events, store.WebhookJobFinished), us(now), w.SecretSealed.KeyID,
			encodeSealed(w.SecretSealed.WrappedKey), encodeSealed(w.SecretSealed.Ciphertext)); err != nil {
			return fmt.Errorf("create webhook: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	w.ID, w.CreatedAt = id, fromUS(us(now))
	return nil
}

// GetWebhook implements store.Webhooks.
func (e *Engine) GetWebhook(ctx context.Context, id uuid.UUID) (*store.Webhook, error) {
	w, err := scanWebhook(e.readRow(ctx, `SELECT `+webhookCols+` FROM project_webhooks WHERE id = ?`, id))
	if isNoRows(err) {
		return nil, fmt.Errorf("webhook %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get webhook %s: %w", id, err)
	}
	return w, nil
}

// ListWebhooks implements store.Webhooks.
func (e *Engine) ListWebhooks(ctx context.Context, projectID uuid.UUID) ([]*store.Webhook, error) {
	rows, err := e.readRows(ctx, `SELECT `+webhookCols+` FROM project_webhooks WHERE project_id = ? ORDER BY created_at, id`, projectID)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	defer rows.Close()
	var out []*store.Webhook
	for rows.Next() {
		w, err := scanWebhook(rows)
		if err != nil {
			return nil, fmt.Errorf("list webhooks: %w", err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return out, nil
}

// DeleteWebhook implements store.Webhooks.
func (e *Engine) DeleteWebhook(ctx context.Context, projectID, id uuid.UUID) error {
	return e.write(ctx, func(t *tx) error {
		res, err := t.exec(`DELETE FROM project_webhooks WHERE id = ? AND project_id = ?`, id, projectID)
		if err != nil {
			return fmt.Errorf("delete webhook %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("delete webhook %s: %w", id, store.ErrNotFound)
		}
		return nil
	})
}

// SealWebhookSubscriptionSecret implements store.Webhooks.
func (e *Engine) SealWebhookSubscriptionSecret(ctx context.Context, p store.SealWebhookSubscriptionSecretParams) error {
	return e.sealInPlace(ctx, "the secret of webhook "+p.ID.String(), webhookSecretCols, p.ID, p.OldPlain, p.OldSealed, p.Sealed)
}

// notifyFlags decides what a new run of the project reports: statuses when the project
// is connected to a forge and the run has a commit, webhooks when it has subscriptions,
// its activities when a definition listens for runs of its name with on: workflow_run.
// One read by primary key, once per run.
func (t *tx) notifyFlags(projectID uuid.UUID, name string, tr store.Trigger, jobs int) (int, error) {
	var r projectReports
	err := t.row(`SELECT `+projectReportsCols+` FROM projects p WHERE p.id = ?`, name, projectID).Scan(r.dest()...)
	if err != nil {
		return 0, fmt.Errorf("read what project %s reports: %w", projectID, err)
	}
	return r.flags(tr, jobs), nil
}

// projectReportsCols is what notifyFlags reads of a project p. Its one parameter is the
// new run's name.
const projectReportsCols = `p.provider, p.commit_statuses,
	EXISTS (SELECT 1 FROM project_webhooks w WHERE w.project_id = p.id AND w.on_run_finished),
	EXISTS (SELECT 1 FROM project_webhooks w WHERE w.project_id = p.id AND w.on_job_finished),
	` + workflowRunBits

// projectReports is what a project's runs report, as projectReportsCols reads it.
type projectReports struct {
	provider, statuses string
	onRun, onJob       bool
	workflowRuns       int // the notify bits of what its definitions listen for
}

func (r *projectReports) dest() []any {
	return []any{&r.provider, &r.statuses, &r.onRun, &r.onJob, &r.workflowRuns}
}

// flags are the notify flags of a new run of jobs jobs with trigger tr.
func (r *projectReports) flags(tr store.Trigger, jobs int) int {
	sha := tr.StatusSHA()
	flags := workflowRunNotify(r.workflowRuns, tr)
	if r.provider != "" && sha != "" {
		flags |= notifyStatus
		if r.statuses != store.CommitStatusesRun && jobs > 0 && jobs <= store.MaxJobStatuses {
			flags |= notifyJobStatus
		}
	}
	if r.onRun {
		flags |= notifyRunHook
	}
	if r.onJob {
		flags |= notifyJobHook
	}
	return flags
}

// runReport is what the outbox messages of a run say about it.
type runReport struct {
	id, projectID         uuid.UUID
	project, name         string
	number                int
	status                store.RunStatus
	trigger               store.Trigger
	createdAt, finishedAt int64
}

func (t *tx) readRunReport(runID uuid.UUID) (*runReport, error) {
	r := &runReport{id: runID}
	var trigger, status string
	err := t.row(`SELECT r.project_id, p.name, r.name, r.number, r.status, r.trigger, r.created_at, r.finished_at
		FROM runs r JOIN projects p ON p.id = r.project_id WHERE r.id = ?`, runID).
		Scan(&r.projectID, &r.project, &r.name, &r.number, &status, &trigger, &r.createdAt, &r.finishedAt)
	if err != nil {
		return nil, fmt.Errorf("read run %s to report it: %w", runID, err)
	}
	r.status = store.RunStatus(status)
	if err := jsonUnmarshal(trigger, &r.trigger); err != nil {
		return nil, fmt.Errorf("decode trigger of run %s: %w", runID, err)
	}
	return r, nil
}

// describe is a commit status's description of the run: its number, as a forge's checks
// list shows builds ("Run #42: Passed"), then what the state says.
func (r *runReport) describe(desc string) string {
	if r.number <= 0 {
		return desc
	}
	return "Run #" + strconv.Itoa(r.number) + ": " + desc
}

func runPath(id uuid.UUID) string { return "/runs/" + id.String() }

// statusWords maps a run status onto the forge package's state and a description.
func statusWords(s store.RunStatus) (state, description string) {
	switch s {
	case store.RunPending:
		return "pending", "Waiting for a worker"
	case store.RunRunning:
		return "running", "Running"
	case store.RunSuccess:
		return "success", "Passed"
	case store.RunFailed:
		return "failure", "Failed"
	case store.RunCancelled:
		return "cancelled", "Cancelled"
	}
	return "error", string(s)
}

// reportRun enqueues what the run's new status calls for: a commit status (notify bit
// 1) and, once it finished, run.finished to each subscription (bit 2) and its completion
// to the definitions listening for it (notifyWorkflowRunCompleted).
func (t *tx) reportRun(runID uuid.UUID, notify int, nowUS int64) error {
	if notify&(notifyStatus|notifyRunHook|notifyWorkflowRunCompleted) == 0 {
		return nil
	}
	r, err := t.readRunReport(runID)
	if err != nil {
		return err
	}
	if notify&notifyStatus != 0 && r.trigger.SHA != "" {
		state, desc := statusWords(r.status)
		ctxName := "gantry"
		if r.name != "" {
			ctxName += "/" + r.name
		}
		payload, err := json.Marshal(store.StatusMessage{
			RunID: r.id, RunNumber: r.number, Project: r.project, ProjectID: r.projectID, Repository: r.trigger.Repository,
			SHA: r.trigger.SHA, State: state, Context: ctxName, Description: r.describe(desc), Path: runPath(r.id),
		})
		if err != nil {
			return fmt.Errorf("encode status of run %s: %w", runID, err)
		}
		if err := t.enqueueOutbox(store.TopicStatus, payload, nowUS); err != nil {
			return err
		}
	}
	if notify&notifyRunHook != 0 && r.status.Terminal() {
		if err := t.enqueueHooks(r, store.WebhookRunFinished, nil, nowUS); err != nil {
			return err
		}
	}
	if notify&notifyWorkflowRunCompleted != 0 && r.status.Terminal() {
		if err := t.reportWorkflowRun(runID, pipeline.WorkflowRunCompleted, nowUS); err != nil {
			return err
		}
	}
	return nil
}

// enqueueHooks enqueues one message per subscription of the run's project that wants
// event, in the caller's transaction.
func (t *tx) enqueueHooks(r *runReport, event string, job *store.WebhookJob, nowUS int64) error {
	col := "on_run_finished"
	if event == store.WebhookJobFinished {
		col = "on_job_finished"
	}
	ids, err := t.ids(`SELECT id FROM project_webhooks WHERE project_id = ? AND `+col+` ORDER BY id`, r.projectID)
	if err != nil {
		return fmt.Errorf("read webhooks of project %s: %w", r.project, err)
	}
	for _, id := range ids {
		payload, err := json.Marshal(store.WebhookMessage{
			WebhookID: id, Event: event, Project: r.project, Job: job,
			Run: store.WebhookRun{ID: r.id, Number: r.number, Name: r.name, Status: r.status, Ref: r.trigger.Ref, SHA: r.trigger.SHA,
				Event: r.trigger.Event, CreatedAt: fromUS(r.createdAt), FinishedAt: fromUS(r.finishedAt), Path: runPath(r.id)},
		})
		if err != nil {
			return fmt.Errorf("encode %s webhook: %w", event, err)
		}
		if err := t.enqueueOutbox(store.TopicWebhook, payload, nowUS); err != nil {
			return err
		}
	}
	return nil
}

// reportJobs enqueues job.finished for jobs of one run that just ended.
func (t *tx) reportJobs(runID uuid.UUID, jobs []uuid.UUID, nowUS int64) error {
	r, err := t.readRunReport(runID)
	if err != nil {
		return err
	}
	for _, id := range jobs {
		var j store.WebhookJob
		var status string
		if err := t.row(`SELECT id, key, name, status FROM jobs WHERE id = ?`, id).Scan(&j.ID, &j.Key, &j.Name, &status); err != nil {
			return fmt.Errorf("read job %s to report it: %w", id, err)
		}
		j.Status = store.JobStatus(status)
		if err := t.enqueueHooks(r, store.WebhookJobFinished, &j, nowUS); err != nil {
			return err
		}
	}
	return nil
}

// reportJobStatuses enqueues a commit status for each of the run's jobs in its state
// now, under the context gantry/<pipeline>/<job display name>, linking to the job's page.
func (t *tx) reportJobStatuses(runID uuid.UUID, jobs []uuid.UUID, nowUS int64) error {
	r, err := t.readRunReport(runID)
	if err != nil {
		return err
	}
	if r.trigger.SHA == "" {
		return nil
	}
	prefix := "gantry"
	if r.name != "" {
		prefix += "/" + r.name
	}
	for _, id := range jobs {
		var key, name, status string
		if err := t.row(`SELECT key, name, status FROM jobs WHERE id = ?`, id).Scan(&key, &name, &status); err != nil {
			return fmt.Errorf("read job %s to report its status: %w", id, err)
		}
		state, desc := store.JobStatus(status).CommitState()
		payload, err := json.Marshal(store.StatusMessage{
			RunID: r.id, RunNumber: r.number, JobID: id, Project: r.project, ProjectID: r.projectID, Repository: r.trigger.Repository,
			SHA: r.trigger.SHA, State: state, Context: prefix + "/" + cmp.Or(name, key), Description: r.describe(desc), Path: "/jobs/" + id.String(),
		})
		if err != nil {
			return fmt.Errorf("encode status of job %s: %w", id, err)
		}
		if err := t.enqueueOutbox(store.TopicStatus, payload, nowUS); err != nil {
			return err
		}
	}
	return nil
}

// reportJobsChanged enqueues the status of jobs of one run whose state just changed
// (started, queued, waiting for approval), when the run reports per job.
func (t *tx) reportJobsChanged(runID uuid.UUID, jobs []uuid.UUID, nowUS int64) error {
	var notify int
	if err := t.row(`SELECT notify FROM runs WHERE id = ?`, runID).Scan(&notify); err != nil {
		return fmt.Errorf("read what run %s reports: %w", runID, err)
	}
	if notify&notifyJobStatus == 0 {
		return nil
	}
	return t.reportJobStatuses(runID, jobs, nowUS)
}
