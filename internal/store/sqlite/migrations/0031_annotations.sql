-- The errors, warnings and notices a job's steps raised with ::error:: and kin, one row
-- per log line that raised one (seq), so a re-sent log batch adds none twice. run_id is
-- the job's, kept here so that a run's annotations are one index range.
CREATE TABLE annotations (
    job_id     TEXT NOT NULL,
    attempt    INTEGER NOT NULL,
    seq        BIGINT NOT NULL,
    run_id     TEXT NOT NULL,
    step       INTEGER NOT NULL,
    level      TEXT NOT NULL,
    message    TEXT NOT NULL,
    title      TEXT NOT NULL DEFAULT '',
    file       TEXT NOT NULL DEFAULT '',
    line       INTEGER NOT NULL DEFAULT 0,
    col        INTEGER NOT NULL DEFAULT 0,
    end_line   INTEGER NOT NULL DEFAULT 0,
    end_column INTEGER NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (job_id, attempt, seq)
);
CREATE INDEX annotations_by_run ON annotations (run_id);
