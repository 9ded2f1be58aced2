-- Gantry's state, PostgreSQL flavour of internal/store/sqlite's schema: the same tables and
-- columns, so the shared engine's SQL runs on both. Times are microseconds since the Unix
-- epoch (0 = none), ids are UUIDv7, JSON is text the store never queries into.

CREATE TABLE projects (
    id         UUID PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);

CREATE TABLE runs (
    id               UUID PRIMARY KEY,
    project_id       UUID NOT NULL REFERENCES projects (id),
    name             TEXT NOT NULL,
    status           TEXT NOT NULL,
    trigger          TEXT NOT NULL,
    ref              TEXT NOT NULL DEFAULT '',
    idempotency_key  TEXT,
    definition       BYTEA,
    env              TEXT NOT NULL DEFAULT '{}',
    cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
    jobs_total       BIGINT NOT NULL,
    jobs_finished    BIGINT NOT NULL DEFAULT 0,
    jobs_failed      BIGINT NOT NULL DEFAULT 0,
    jobs_cancelled   BIGINT NOT NULL DEFAULT 0,
    created_at       BIGINT NOT NULL,
    started_at       BIGINT NOT NULL DEFAULT 0,
    finished_at      BIGINT NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX runs_idempotency ON runs (project_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX runs_by_project ON runs (project_id, id);
CREATE INDEX runs_by_status ON runs (status, id);
CREATE INDEX runs_by_ref ON runs (ref, id);

-- Distinct label sets jobs ask for, as sorted comma-joined text; a claim looks only at
-- the sets that are subsets of the worker's labels.
CREATE TABLE label_sets (
    labels TEXT PRIMARY KEY
);

CREATE TABLE jobs (
    id                UUID PRIMARY KEY,
    run_id            UUID NOT NULL REFERENCES runs (id),
    project_id        UUID NOT NULL,
    seq               BIGINT NOT NULL,
    key               TEXT NOT NULL,
    name              TEXT NOT NULL,
    status            TEXT NOT NULL,
    lane              BIGINT NOT NULL,
    label_set         TEXT NOT NULL,
    milli_cpu         BIGINT NOT NULL DEFAULT 0,
    memory            BIGINT NOT NULL DEFAULT 0,
    timeout_us        BIGINT NOT NULL,
    attempt           BIGINT NOT NULL DEFAULT 0,
    max_attempts      BIGINT NOT NULL,
    retry_on          TEXT NOT NULL DEFAULT '',
    backoff_us        BIGINT NOT NULL DEFAULT 0,
    max_backoff_us    BIGINT NOT NULL DEFAULT 0,
    redeliveries      BIGINT NOT NULL DEFAULT 0,
    retry_after       BIGINT NOT NULL DEFAULT 0,
    lease_token       TEXT NOT NULL DEFAULT '',
    worker_id         TEXT NOT NULL DEFAULT '',
    lease_expires_at  BIGINT NOT NULL DEFAULT 0,
    deadline          BIGINT NOT NULL DEFAULT 0,
    concurrency_group TEXT NOT NULL DEFAULT '',
    exit_code         BIGINT,
    failure_kind      TEXT NOT NULL DEFAULT '',
    cancel_requested  BOOLEAN NOT NULL DEFAULT FALSE,
    needs_left        BIGINT NOT NULL,
    upstream_failed   BOOLEAN NOT NULL DEFAULT FALSE,
    continue_on_error BOOLEAN NOT NULL DEFAULT FALSE,
    has_dependents    BOOLEAN NOT NULL DEFAULT FALSE,
    vtime             BIGINT NOT NULL DEFAULT 0,
    created_at        BIGINT NOT NULL,
    queued_at         BIGINT NOT NULL DEFAULT 0,
    started_at        BIGINT NOT NULL DEFAULT 0,
    finished_at       BIGINT NOT NULL DEFAULT 0
);
-- The claim path: queued jobs of one label set in dispatch order.
CREATE INDEX jobs_queue ON jobs (label_set, lane, vtime, queued_at, id) WHERE status = 'queued';
-- Fair queueing: the earliest virtual start waiting in a lane, and each project's latest.
CREATE INDEX jobs_queue_vtime ON jobs (lane, vtime) WHERE status = 'queued';
CREATE INDEX jobs_queue_project ON jobs (project_id, lane, vtime) WHERE status = 'queued';
-- Leased jobs, for the reaper and the timeout revoker. Not on lease_expires_at: every
-- heartbeat changes that, and would have to update the index.
CREATE INDEX jobs_leased ON jobs (deadline) WHERE status IN ('assigned', 'running');
CREATE INDEX jobs_retries ON jobs (retry_after) WHERE status = 'retrying';
CREATE INDEX jobs_groups ON jobs (project_id, concurrency_group, status, queued_at) WHERE concurrency_group <> '';
CREATE INDEX jobs_by_run ON jobs (run_id, seq);

-- The planned job (steps, env, condition) as JSON, apart from the job row: rows are
-- rewritten whole on every status change, and this part never changes.
CREATE TABLE job_specs (
    job_id UUID PRIMARY KEY,
    spec   TEXT NOT NULL
);

CREATE TABLE job_needs (
    need_id UUID NOT NULL,
    job_id  UUID NOT NULL,
    PRIMARY KEY (need_id, job_id)
);
CREATE INDEX job_needs_by_job ON job_needs (job_id);

CREATE TABLE steps (
    job_id         UUID NOT NULL,
    idx            BIGINT NOT NULL,
    name           TEXT NOT NULL,
    once           BOOLEAN NOT NULL DEFAULT FALSE,
    attempt        BIGINT NOT NULL DEFAULT 0,
    status         TEXT NOT NULL,
    exit_code      BIGINT,
    started_at     BIGINT NOT NULL DEFAULT 0,
    finished_at    BIGINT NOT NULL DEFAULT 0,
    once_succeeded BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (job_id, idx)
);

CREATE TABLE workers (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    labels        TEXT NOT NULL,
    milli_cpu     BIGINT NOT NULL,
    memory        BIGINT NOT NULL,
    max_jobs      BIGINT NOT NULL,
    state         TEXT NOT NULL,
    version       TEXT NOT NULL DEFAULT '',
    registered_at BIGINT NOT NULL,
    last_seen_at  BIGINT NOT NULL
);

CREATE TABLE artifacts (
    id         UUID PRIMARY KEY,
    job_id     UUID NOT NULL,
    attempt    BIGINT NOT NULL,
    name       TEXT NOT NULL,
    sha256     TEXT NOT NULL,
    size       BIGINT NOT NULL,
    media_type TEXT NOT NULL DEFAULT '',
    state      TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL DEFAULT 0,
    UNIQUE (job_id, attempt, name)
);
CREATE INDEX artifacts_by_digest ON artifacts (sha256);
CREATE INDEX artifacts_by_expiry ON artifacts (expires_at) WHERE expires_at <> 0;

CREATE TABLE log_chunks (
    job_id     UUID NOT NULL,
    attempt    BIGINT NOT NULL,
    first_seq  BIGINT NOT NULL,
    last_seq   BIGINT NOT NULL,
    bytes      BIGINT NOT NULL,
    location   TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (job_id, attempt, first_seq)
);

CREATE TABLE outbox (
    id              UUID PRIMARY KEY,
    topic           TEXT NOT NULL,
    payload         BYTEA NOT NULL,
    attempts        BIGINT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    created_at      BIGINT NOT NULL,
    delivered_at    BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE delivered_at = 0;
