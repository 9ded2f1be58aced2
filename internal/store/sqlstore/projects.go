package sqlstore

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

const projectCols = `id, name, repo_url, provider, pipeline_path, default_branch, webhook_secret,
	api_base_url, api_token_file, repo_token_secret, repo_token_user, repo_ssh_key_secret,
	repo_known_hosts_secret, max_concurrent_jobs, fair_weight, created_at, updated_at,
	webhook_key_id, webhook_wrapped_key, webhook_ciphertext, commit_statuses, github_token_secret`

func scanProject(s scanner) (*store.Project, error) {
	var p store.Project
	var created, updated int64
	var wrapped, ct string
	if err := s.Scan(&p.ID, &p.Name, &p.RepoURL, &p.Provider, &p.PipelinePath, &p.DefaultBranch,
		&p.WebhookSecret, &p.APIBaseURL, &p.APITokenFile, &p.RepoTokenSecret, &p.RepoTokenUser,
		&p.RepoSSHKeySecret, &p.RepoKnownHostsSecret, &p.MaxConcurrentJobs, &p.FairWeight, &created, &updated,
		&p.WebhookSecretSealed.KeyID, &wrapped, &ct, &p.CommitStatuses, &p.GitHubTokenSecret); err != nil {
		return nil, err
	}
	var err error
	if p.WebhookSecretSealed.WrappedKey, err = decodeSealed(wrapped); err != nil {
		return nil, fmt.Errorf("decode webhook secret of project %q: %w", p.Name, err)
	}
	if p.WebhookSecretSealed.Ciphertext, err = decodeSealed(ct); err != nil {
		return nil, fmt.Errorf("decode webhook secret of project %q: %w", p.Name, err)
	}
	p.CreatedAt, p.UpdatedAt = fromUS(created), fromUS(updated)
	if p.UpdatedAt.IsZero() {
		// Projects made before 0011, or on first use by a run, were never updated.
		p.UpdatedAt = p.CreatedAt
	}
	return &p, nil
}

func checkProject(action string, p *store.Project) error {
	if p == nil || p.Name == "" {
		return fmt.Errorf("%s: a project name is required: %w", action, store.ErrInvalid)
	}
	if p.FairWeight == 0 {
		p.FairWeight = store.DefaultFairWeight
	}
	if p.FairWeight < 1 || p.FairWeight > store.MaxFairWeight {
		return fmt.Errorf("%s %q: fair weight %d is not between 1 and %d: %w", action, p.Name, p.FairWeight, store.MaxFairWeight, store.ErrInvalid)
	}
	if p.CommitStatuses != "" && p.CommitStatuses != store.CommitStatusesJobs && p.CommitStatuses != store.CommitStatusesRun {
		return fmt.Errorf("%s %q: commit statuses %q is not %s or %s: %w", action, p.Name, p.CommitStatuses,
			store.CommitStatusesJobs, store.CommitStatusesRun, store.ErrInvalid)
	}
	if p.MaxConcurrentJobs < 0 || p.MaxConcurrentJobs > store.MaxConcurrentJobsLimit {
		return fmt.Errorf("%s %q: max concurrent jobs %d is not between 0 (no limit) and %d: %w", action, p.Name,
			p.MaxConcurrentJobs, store.MaxConcurrentJobsLimit, store.ErrInvalid)
	}
	return nil
}

// CreateProject implements store.Projects.
func (e *Engine) CreateProject(ctx context.Context, p *store.Project) error {
	if err := checkProject("create project", p); err != nil {
		return err
	}
	audit, err := auditOf(ctx)
	if err != nil {
		return fmt.Errorf("create project %q: %w", p.Name, err)
	}
	return e.write(ctx, func(t *tx) error {
		now := us(e.clock.Now())
		var id uuid.UUID
		var repo string
		created := now
		err := t.row(`SELECT id, repo_url, created_at FROM projects WHERE name = ?`, p.Name).Scan(&id, &repo, &created)
		switch {
		case isNoRows(err):
			id = store.NewID()
			if _, err := t.exec(`INSERT INTO projects (`+projectCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				id, p.Name, p.RepoURL, p.Provider, p.PipelinePath, p.DefaultBranch, p.WebhookSecret,
				p.APIBaseURL, p.APITokenFile, p.RepoTokenSecret, p.RepoTokenUser, p.RepoSSHKeySecret,
				p.RepoKnownHostsSecret, p.MaxConcurrentJobs, p.FairWeight, now, now,
				p.WebhookSecretSealed.KeyID, encodeSealed(p.WebhookSecretSealed.WrappedKey), encodeSealed(p.WebhookSecretSealed.Ciphertext),
				p.CommitStatuses, p.GitHubTokenSecret); err != nil {
				return fmt.Errorf("create project %q: %w", p.Name, err)
			}
		case err != nil:
			return fmt.Errorf("create project %q: look up name: %w", p.Name, err)
		case repo != "":
			return fmt.Errorf("create project %q: a project of that name is already connected to %s: %w", p.Name, repo, store.ErrConflict)
		default:
			// Made on first use by a run: connecting it keeps its runs under it. The
			// repo_url = '' condition makes two concurrent connects a conflict, not a
			// silent overwrite.
			res, err := t.exec(`UPDATE projects SET repo_url = ?, provider = ?, pipeline_path = ?, default_branch = ?,
				webhook_secret = ?, api_base_url = ?, api_token_file = ?, repo_token_secret = ?,
				repo_token_user = ?, repo_ssh_key_secret = ?, repo_known_hosts_secret = ?, max_concurrent_jobs = ?,
				fair_weight = ?, updated_at = ?, webhook_key_id = ?, webhook_wrapped_key = ?, webhook_ciphertext = ?,
				commit_statuses = ?, github_token_secret = ?
				WHERE id = ? AND repo_url = ''`,
				p.RepoURL, p.Provider, p.PipelinePath, p.DefaultBranch, p.WebhookSecret, p.APIBaseURL,
				p.APITokenFile, p.RepoTokenSecret, p.RepoTokenUser, p.RepoSSHKeySecret, p.RepoKnownHostsSecret,
				p.MaxConcurrentJobs, p.FairWeight, now, p.WebhookSecretSealed.KeyID,
				encodeSealed(p.WebhookSecretSealed.WrappedKey), encodeSealed(p.WebhookSecretSealed.Ciphertext), p.CommitStatuses,
				p.GitHubTokenSecret, id)
			if err != nil {
				return fmt.Errorf("create project %q: %w", p.Name, err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return fmt.Errorf("create project %q: connected meanwhile: %w", p.Name, store.ErrConflict)
			}
		}
		p.ID, p.CreatedAt, p.UpdatedAt = id, fromUS(created), fromUS(now)
		t.quotaChanged(id, p.MaxConcurrentJobs)
		return t.appendAudit(audit)
	})
}

// GetProjectByName implements store.Projects.
func (e *Engine) GetProjectByName(ctx context.Context, name string) (*store.Project, error) {
	p, err := scanProject(e.readRow(ctx, `SELECT `+projectCols+` FROM projects WHERE name = ?`, name))
	if isNoRows(err) {
		return nil, fmt.Errorf("project %q: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get project %q: %w", name, err)
	}
	return p, nil
}

// ListProjects implements store.Projects.
func (e *Engine) ListProjects(ctx context.Context) ([]*store.Project, error) {
	rows, err := e.readRows(ctx, `SELECT `+projectCols+` FROM projects ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	defer rows.Close()
	var out []*store.Project
	for rows.Next() {
		p, err := scanProject(rows)
		if err != nil {
			return nil, fmt.Errorf("list projects: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	return out, nil
}

// UpdateProject implements store.Projects.
func (e *Engine) UpdateProject(ctx context.Context, p *store.Project) error {
	if err := checkProject("update project", p); err != nil {
		return err
	}
	audit, err := auditOf(ctx)
	if err != nil {
		return fmt.Errorf("update project %q: %w", p.Name, err)
	}
	return e.write(ctx, func(t *tx) error {
		now := us(e.clock.Now())
		res, err := t.exec(`UPDATE projects SET repo_url = ?, provider = ?, pipeline_path = ?, default_branch = ?,
			webhook_secret = ?, api_base_url = ?, api_token_file = ?, repo_token_secret = ?, repo_token_user = ?,
			repo_ssh_key_secret = ?, repo_known_hosts_secret = ?, max_concurrent_jobs = ?, fair_weight = ?, updated_at = ?,
			webhook_key_id = ?, webhook_wrapped_key = ?, webhook_ciphertext = ?, commit_statuses = ?, github_token_secret = ?
			WHERE name = ?`,
			p.RepoURL, p.Provider, p.PipelinePath, p.DefaultBranch, p.WebhookSecret, p.APIBaseURL,
			p.APITokenFile, p.RepoTokenSecret, p.RepoTokenUser, p.RepoSSHKeySecret, p.RepoKnownHostsSecret,
			p.MaxConcurrentJobs, p.FairWeight, now, p.WebhookSecretSealed.KeyID,
			encodeSealed(p.WebhookSecretSealed.WrappedKey), encodeSealed(p.WebhookSecretSealed.Ciphertext), p.CommitStatuses,
			p.GitHubTokenSecret, p.Name)
		if err != nil {
			return fmt.Errorf("update project %q: %w", p.Name, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("update project %q: %w", p.Name, store.ErrNotFound)
		}
		var created int64
		if err := t.row(`SELECT id, created_at FROM projects WHERE name = ?`, p.Name).Scan(&p.ID, &created); err != nil {
			return fmt.Errorf("update project %q: read back: %w", p.Name, err)
		}
		p.CreatedAt, p.UpdatedAt = fromUS(created), fromUS(now)
		t.quotaChanged(p.ID, p.MaxConcurrentJobs)
		return t.appendAudit(audit)
	})
}

// SealWebhookSecret implements store.Projects.
func (e *Engine) SealWebhookSecret(ctx context.Context, p store.SealWebhookSecretParams) error {
	return e.sealInPlace(ctx, "webhook secret of project "+strconv.Quote(p.Project), projectWebhookSecretCols,
		p.Project, p.OldPlain, p.OldSealed, p.Sealed)
}

// sealedCols name where a table keeps a secret that may be sealed: the column that picks
// the row, the plain-text column, and the three of the sealed value.
type sealedCols struct{ table, key, plain, keyID, wrapped, ciphertext string }

var projectWebhookSecretCols = sealedCols{table: "projects", key: "name", plain: "webhook_secret",
	keyID: "webhook_key_id", wrapped: "webhook_wrapped_key", ciphertext: "webhook_ciphertext"}

// sealInPlace stores next as the secret of c's row whose key column holds key, in place of
// what is there, only while that is still oldPlain or old: ErrConflict when it changed
// meanwhile, ErrNotFound when there is no such row. what names the secret in errors.
func (e *Engine) sealInPlace(ctx context.Context, what string, c sealedCols, key any, oldPlain string, old, next store.SealedValue) error {
	if next.KeyID == "" || len(next.WrappedKey) == 0 || len(next.Ciphertext) == 0 {
		return fmt.Errorf("seal %s: a key id, a wrapped key and a ciphertext are required: %w", what, store.ErrInvalid)
	}
	return e.write(ctx, func(t *tx) error {
		res, err := t.exec(`UPDATE `+c.table+` SET `+c.plain+` = '', `+c.keyID+` = ?, `+c.wrapped+` = ?, `+c.ciphertext+` = ?
			WHERE `+c.key+` = ? AND `+c.plain+` = ? AND `+c.keyID+` = ? AND `+c.wrapped+` = ? AND `+c.ciphertext+` = ?`,
			next.KeyID, encodeSealed(next.WrappedKey), encodeSealed(next.Ciphertext),
			key, oldPlain, old.KeyID, encodeSealed(old.WrappedKey), encodeSealed(old.Ciphertext))
		if err != nil {
			return fmt.Errorf("seal %s: %w", what, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return nil
		}
		var one int
		if err := t.row(`SELECT 1 FROM `+c.table+` WHERE `+c.key+` = ?`, key).Scan(&one); isNoRows(err) {
			return fmt.Errorf("seal %s: %w", what, store.ErrNotFound)
		}
		return fmt.Errorf("seal %s: changed meanwhile: %w", what, store.ErrConflict)
	})
}

func encodeSealed(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func decodeSealed(s string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	return base64.StdEncoding.DecodeString(s)
}

// DeleteProject implements store.Projects.
func (e *Engine) DeleteProject(ctx context.Context, name string) error {
	audit, err := auditOf(ctx)
	if err != nil {
		return fmt.Errorf("delete project %q: %w", name, err)
	}
	return e.write(ctx, func(t *tx) error {
		var id uuid.UUID
		err := t.row(`SELECT id FROM projects WHERE name = ?`, name).Scan(&id)
		if isNoRows(err) {
			return fmt.Errorf("delete project %q: %w", name, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("delete project %q: %w", name, err)
		}
		var runs int64
		if err := t.row(`SELECT COUNT(*) FROM runs WHERE project_id = ?`, id).Scan(&runs); err != nil {
			return fmt.Errorf("delete project %q: count runs: %w", name, err)
		}
		if runs > 0 {
			return fmt.Errorf("delete project %q: %d runs belong to it: %w", name, runs, store.ErrConflict)
		}
		// Its deliveries and outbound webhook subscriptions are its settings, not history:
		// they go with it.
		if _, err := t.exec(`DELETE FROM hook_events WHERE project_id = ?`, id); err != nil {
			return fmt.Errorf("delete project %q: hook events: %w", name, err)
		}
		if _, err := t.exec(`DELETE FROM hook_deliveries WHERE project_id = ?`, id); err != nil {
			return fmt.Errorf("delete project %q: deliveries: %w", name, err)
		}
		if _, err := t.exec(`DELETE FROM project_webhooks WHERE project_id = ?`, id); err != nil {
			return fmt.Errorf("delete project %q: webhooks: %w", name, err)
		}
		// PostgreSQL cascades these; SQLite, without foreign keys on, would keep them.
		if _, err := t.exec(`DELETE FROM schedule_ticks WHERE project_id = ?`, id); err != nil {
			return fmt.Errorf("delete project %q: schedule ticks: %w", name, err)
		}
		if _, err := t.exec(`DELETE FROM workflow_run_listeners WHERE project_id = ?`, id); err != nil {
			return fmt.Errorf("delete project %q: workflow_run listeners: %w", name, err)
		}
		if _, err := t.exec(`DELETE FROM workflows WHERE project_id = ?`, id); err != nil {
			return fmt.Errorf("delete project %q: workflows: %w", name, err)
		}
		if _, err := t.exec(`DELETE FROM project_members WHERE project_id = ?`, id); err != nil {
			return fmt.Errorf("delete project %q: members: %w", name, err)
		}
		if _, err := t.exec(`DELETE FROM secrets WHERE project_id = ?`, id); err != nil {
			return fmt.Errorf("delete project %q: secrets: %w", name, err)
		}
		if _, err := t.exec(`DELETE FROM variables WHERE project_id = ?`, id); err != nil {
			return fmt.Errorf("delete project %q: variables: %w", name, err)
		}
		if _, err := t.exec(`DELETE FROM cache_entries WHERE project_id = ?`, id); err != nil {
			return fmt.Errorf("delete project %q: caches: %w", name, err)
		}
		if _, err := t.exec(`DELETE FROM blob_owners WHERE project_id = ?`, id); err != nil {
			return fmt.Errorf("delete project %q: blob owners: %w", name, err)
		}
		if _, err := t.exec(`DELETE FROM run_numbers WHERE project_id = ?`, id); err != nil {
			return fmt.Errorf("delete project %q: run numbers: %w", name, err)
		}
		if _, err := t.exec(`DELETE FROM test_quarantine_rules WHERE project_id = ?`, id); err != nil {
			return fmt.Errorf("delete project %q: quarantine rule: %w", name, err)
		}
		if _, err := t.exec(`DELETE FROM test_quarantine WHERE project_id = ?`, id); err != nil {
			return fmt.Errorf("delete project %q: quarantines: %w", name, err)
		}
		if _, err := t.exec(`DELETE FROM projects WHERE id = ?`, id); err != nil {
			return fmt.Errorf("delete project %q: %w", name, err)
		}
		// The next run under this name makes a new project rather than naming the old id.
		t.onCommit = append(t.onCommit, func() { e.projects.Delete(name) })
		t.quotaChanged(id, 0)
		return t.appendAudit(audit)
	})
}

const deliveryCols = `project_id, delivery_id, event, run_ids, reason, created_at`

func scanDelivery(s scanner) (*store.Delivery, error) {
	var d store.Delivery
	var runs string
	var created int64
	if err := s.Scan(&d.ProjectID, &d.DeliveryID, &d.Event, &runs, &d.Reason, &created); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(runs), &d.RunIDs); err != nil {
		return nil, fmt.Errorf("decode run ids of delivery %s: %w", d.DeliveryID, err)
	}
	d.CreatedAt = fromUS(created)
	return &d, nil
}

// GetDelivery implements store.Projects.
func (e *Engine) GetDelivery(ctx context.Context, projectID uuid.UUID, deliveryID string) (*store.Delivery, error) {
	d, err := scanDelivery(e.readRow(ctx, `SELECT `+deliveryCols+` FROM hook_deliveries
		WHERE project_id = ? AND delivery_id = ?`, projectID, deliveryID))
	if isNoRows(err) {
		return nil, fmt.Errorf("delivery %q: %w", deliveryID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get delivery %q: %w", deliveryID, err)
	}
	return d, nil
}

// RecordDelivery implements store.Projects.
func (e *Engine) RecordDelivery(ctx context.Context, d *store.Delivery) (*store.Delivery, bool, error) {
	if d == nil || d.DeliveryID == "" || d.ProjectID == uuid.Nil {
		return nil, false, fmt.Errorf("record delivery: a project and a delivery id are required: %w", store.ErrInvalid)
	}
	ids := d.RunIDs
	if ids == nil {
		ids = []uuid.UUID{}
	}
	var first *store.Delivery
	created := false
	err := e.write(ctx, func(t *tx) error {
		now := us(e.clock.Now())
		res, err := t.exec(`INSERT INTO hook_deliveries (`+deliveryCols+`) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (project_id, delivery_id) DO NOTHING`,
			d.ProjectID, d.DeliveryID, d.Event, mustJSON(ids), d.Reason, now)
		if err != nil {
			return fmt.Errorf("record delivery %q: %w", d.DeliveryID, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			created = true
			cp := *d
			cp.RunIDs, cp.CreatedAt = ids, fromUS(now)
			first = &cp
			return nil
		}
		first, err = scanDelivery(t.row(`SELECT `+deliveryCols+` FROM hook_deliveries
			WHERE project_id = ? AND delivery_id = ?`, d.ProjectID, d.DeliveryID))
		if err != nil {
			return fmt.Errorf("record delivery %q: read the first record: %w", d.DeliveryID, err)
		}
		created = false
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return first, created, nil
}

// ClaimHookEvent implements store.Projects.
func (e *Engine) ClaimHookEvent(ctx context.Context, p store.ClaimHookEventParams) (*store.HookEventClaim, error) {
	if p.ProjectID == uuid.Nil || p.Event == "" || p.SHA == "" || p.DeliveryID == "" || p.Window <= 0 {
		return nil, fmt.Errorf("claim hook event: a project, an event, a sha, a delivery id and a positive window are required: %w", store.ErrInvalid)
	}
	var claim store.HookEventClaim
	err := e.write(ctx, func(t *tx) error {
		now := e.clock.Now()
		// Expired claims go first, so the insert below takes the event's place when its
		// last claim is older than the window. On PostgreSQL a concurrent claim of the same
		// event waits on this one's row and then finds it: the first insert wins.
		if _, err := t.exec(`DELETE FROM hook_events WHERE project_id = ? AND claimed_at <= ?`,
			p.ProjectID, us(now.Add(-p.Window))); err != nil {
			return fmt.Errorf("claim hook event %s %s: remove expired claims: %w", p.Event, p.SHA, err)
		}
		if _, err := t.exec(`INSERT INTO hook_events (project_id, event, ref, sha, delivery_id, claimed_at)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (project_id, event, ref, sha) DO NOTHING`,
			p.ProjectID, p.Event, p.Ref, p.SHA, p.DeliveryID, us(now)); err != nil {
			return fmt.Errorf("claim hook event %s %s: %w", p.Event, p.SHA, err)
		}
		var at int64
		if err := t.row(`SELECT delivery_id, claimed_at FROM hook_events
			WHERE project_id = ? AND event = ? AND ref = ? AND sha = ?`, p.ProjectID, p.Event, p.Ref, p.SHA).Scan(&claim.DeliveryID, &at); err != nil {
			return fmt.Errorf("claim hook event %s %s: read the claim: %w", p.Event, p.SHA, err)
		}
		claim.ClaimedAt = fromUS(at)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &claim, nil
}

// CreateFailedRun implements store.Projects.
func (e *Engine) CreateFailedRun(ctx context.Context, p store.CreateFailedRunParams) (*store.Run, bool, error) {
	if len(p.Errors) == 0 {
		return nil, false, fmt.Errorf("create failed run: at least one error is required: %w", store.ErrInvalid)
	}
	if p.Project == "" {
		p.Project = "default"
	}
	runID := store.NewID()
	trigger, errs := mustJSON(p.Trigger), mustJSON(p.Errors)
	var idem any
	if p.IdempotencyKey != "" {
		idem = p.IdempotencyKey
	}
	existing := uuid.Nil
	err := e.writeNumbered(ctx, func(t *tx) error {
		existing = uuid.Nil
		now := us(e.clock.Now())
		projectID, err := t.project(p.Project, now)
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
		number, err := t.nextRunNumber(projectID)
		if err != nil {
			return err
		}
		// Failed and finished at once, with no jobs: nothing will ever claim or advance it.
		if _, err := t.exec(`INSERT INTO runs (id, project_id, name, status, trigger, ref, idempotency_key, env,
			jobs_total, created_at, finished_at, errors, branch, event, actor, number)
			VALUES (?, ?, ?, ?, ?, ?, ?, '{}', 0, ?, ?, ?, ?, ?, ?, ?)`,
			runID, projectID, p.Name, string(store.RunFailed), trigger, p.Trigger.Ref, idem, now, now, errs,
			p.Trigger.Branch, p.Trigger.Event, p.Trigger.RunActor(), number); err != nil {
			return fmt.Errorf("insert run: %w", err)
		}
		if _, err := t.exec(`INSERT INTO run_definitions (run_id, definition) VALUES (?, ?)`, runID, p.Definition); err != nil {
			return fmt.Errorf("insert run: %w", err)
		}
		// The forge and the subscriptions hear of it like of any run that failed.
		notify, err := t.notifyFlags(projectID, p.Name, p.Trigger, 0)
		if err != nil {
			return err
		}
		if notify&notifyWorkflowRunRequested != 0 {
			if err := t.reportWorkflowRun(runID, pipeline.WorkflowRunRequested, now); err != nil {
				return err
			}
		}
		if err := t.reportRun(runID, notify, now); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("create failed run: %w", err)
	}
	id, created := runID, true
	if existing != uuid.Nil {
		id, created = existing, false
	}
	run, err := e.GetRun(ctx, id)
	if err != nil {
		return nil, false, fmt.Errorf("create failed run: read back: %w", err)
	}
	return run, created, nil
}
