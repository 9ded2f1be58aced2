-- The outbox says how each message fared: the error of its last failed attempt ('' when
-- none failed) and when it was dead-lettered (microseconds since the Unix epoch, 0 = not
-- dead). A dead message is never claimed again unless redelivered by hand.
ALTER TABLE outbox ADD COLUMN last_error TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN dead_at BIGINT NOT NULL DEFAULT 0;
DROP INDEX outbox_due;
CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE delivered_at = 0 AND dead_at = 0;

-- What a run reports as its status changes, decided once when it is created so that the
-- hot paths that end jobs read it from the row they update anyway: 1 = commit statuses to
-- the project's forge, 2 = run.finished webhooks, 4 = job.finished webhooks.
ALTER TABLE runs ADD COLUMN notify INTEGER NOT NULL DEFAULT 0;

-- Outbound webhook subscriptions of a project: where to POST, the HMAC-SHA256 key, and
-- which events it wants.
CREATE TABLE project_webhooks (
    id              TEXT PRIMARY KEY,
    project_id      TEXT NOT NULL REFERENCES projects (id),
    url             TEXT NOT NULL,
    secret          TEXT NOT NULL,
    on_run_finished BOOLEAN NOT NULL DEFAULT FALSE,
    on_job_finished BOOLEAN NOT NULL DEFAULT FALSE,
    created_at      BIGINT NOT NULL
);
CREATE INDEX project_webhooks_project ON project_webhooks (project_id);
