-- Projects connect to a repository: its remote, the forge it lives on, the pipeline file
-- read at each event's commit, the webhook secret and the forge API settings for status
-- reports ('' = not connected; a project a run created on first use has none of them).
-- updated_at is microseconds since the Unix epoch, 0 = never updated.
ALTER TABLE projects ADD COLUMN repo_url TEXT NOT NULL DEFAULT '';
ALTER TABLE projects ADD COLUMN provider TEXT NOT NULL DEFAULT '';
ALTER TABLE projects ADD COLUMN pipeline_path TEXT NOT NULL DEFAULT '';
ALTER TABLE projects ADD COLUMN default_branch TEXT NOT NULL DEFAULT '';
ALTER TABLE projects ADD COLUMN webhook_secret TEXT NOT NULL DEFAULT '';
ALTER TABLE projects ADD COLUMN api_base_url TEXT NOT NULL DEFAULT '';
ALTER TABLE projects ADD COLUMN api_token_file TEXT NOT NULL DEFAULT '';
ALTER TABLE projects ADD COLUMN updated_at BIGINT NOT NULL DEFAULT 0;

-- A run that failed before it had jobs (an invalid pipeline file) says why: a JSON list of
-- {path, line, column, message}, '' for every other run.
ALTER TABLE runs ADD COLUMN errors TEXT NOT NULL DEFAULT '';

-- The webhook deliveries each project has seen, by the forge's delivery id, with the runs
-- they created (a JSON list of ids), so a redelivery answers the same and creates nothing.
CREATE TABLE hook_deliveries (
    project_id  TEXT NOT NULL REFERENCES projects (id),
    delivery_id TEXT NOT NULL,
    event       TEXT NOT NULL,
    run_ids     TEXT NOT NULL DEFAULT '[]',
    reason      TEXT NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (project_id, delivery_id)
);
