-- The attempts of jobs, one row per attempt that ended before the job's current one (its
-- status set) or that is about to start (status ''; it says who started it). The job's
-- row is its current attempt; steps, logs and artifacts of earlier attempts stay readable
-- from here (steps) and by attempt number (logs, artifacts). cause is '' (the run
-- started it), 'retry' (the job's retry policy or a lost attempt's redelivery) or
-- 'rerun' (started_by re-ran it).
CREATE TABLE job_attempts (
    job_id       UUID NOT NULL,
    attempt      INTEGER NOT NULL,
    status       TEXT NOT NULL DEFAULT '',
    failure_kind TEXT NOT NULL DEFAULT '',
    exit_code    INTEGER,
    reason       TEXT NOT NULL DEFAULT '',
    worker_id    TEXT NOT NULL DEFAULT '',
    cause        TEXT NOT NULL DEFAULT '',
    started_by   TEXT NOT NULL DEFAULT '',
    queued_at    BIGINT NOT NULL DEFAULT 0,
    started_at   BIGINT NOT NULL DEFAULT 0,
    finished_at  BIGINT NOT NULL DEFAULT 0,
    steps        TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (job_id, attempt)
);
