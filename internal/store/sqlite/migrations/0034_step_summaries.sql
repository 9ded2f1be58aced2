-- What a job attempt's steps wrote to $GANTRY_STEP_SUMMARY ($GITHUB_STEP_SUMMARY), one
-- row per step: read in step order they are the attempt's summary. A step's row is put
-- again by a re-sent report, never added twice. run_id is the job's, kept here so that a
-- run's summaries are one index range; created_at is what retention deletes by.
CREATE TABLE step_summaries (
    job_id     TEXT NOT NULL,
    attempt    INTEGER NOT NULL,
    step       INTEGER NOT NULL,
    run_id     TEXT NOT NULL,
    bytes      INTEGER NOT NULL,
    markdown   TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (job_id, attempt, step)
);
CREATE INDEX step_summaries_by_run ON step_summaries (run_id);
CREATE INDEX step_summaries_by_created ON step_summaries (created_at);
