-- Environments: a project's deployment targets. branches and tags are JSON lists of glob
-- patterns (both empty: any ref may deploy); approvers a JSON list of token names and
-- "role:NAME" entries; approval_timeout_us 0 means the default (24h). Times are
-- microseconds since the Unix epoch.
CREATE TABLE environments (
    project_id          TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name                TEXT NOT NULL,
    branches            TEXT NOT NULL DEFAULT '[]',
    tags                TEXT NOT NULL DEFAULT '[]',
    required_approvals  BIGINT NOT NULL DEFAULT 0,
    approvers           TEXT NOT NULL DEFAULT '[]',
    approval_timeout_us BIGINT NOT NULL DEFAULT 0,
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    PRIMARY KEY (project_id, name)
);

-- Approvers' decisions on jobs waiting for approval, one per approver and wait, so the
-- same approver deciding twice counts once. round names the wait: the job's
-- approval_deadline when it started waiting (a retried job waits, and is decided, anew);
-- attempt is the job's attempt count then. decision is approved or rejected.
CREATE TABLE approvals (
    job_id     TEXT NOT NULL,
    round      BIGINT NOT NULL,
    attempt    BIGINT NOT NULL,
    approver   TEXT NOT NULL,
    decision   TEXT NOT NULL,
    comment    TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    PRIMARY KEY (job_id, round, approver)
);

-- When a job waiting for approval is rejected for want of one (0 when not waiting).
ALTER TABLE jobs ADD COLUMN approval_deadline BIGINT NOT NULL DEFAULT 0;
CREATE INDEX jobs_approvals ON jobs (approval_deadline) WHERE status = 'waiting_approval';
