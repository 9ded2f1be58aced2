-- Per-test results of job attempts, read by the worker from the reports the job's steps
-- left, one row per test per attempt, numbered by the worker (idx) so that a re-sent
-- batch adds none twice. The run's project, branch and commit are copied in, so that a
-- test's history, its results on one commit and a project's flaky tests are each one
-- index range; created_at is what retention deletes by. Passed tests keep no message or
-- output: they are most of the rows. failed_attempts counts the reruns a test tool made
-- within its own report before the test passed (a flaky test seen in one attempt).
CREATE TABLE test_results (
    job_id      UUID NOT NULL,
    attempt     INTEGER NOT NULL,
    idx         INTEGER NOT NULL,
    run_id      UUID NOT NULL,
    project_id  UUID NOT NULL,
    branch      TEXT NOT NULL DEFAULT '',
    sha         TEXT NOT NULL DEFAULT '',
    suite       TEXT NOT NULL,
    name        TEXT NOT NULL,
    file        TEXT NOT NULL DEFAULT '',
    line        INTEGER NOT NULL DEFAULT 0,
    status      TEXT NOT NULL,
    duration_us BIGINT NOT NULL DEFAULT 0,
    failed_attempts INTEGER NOT NULL DEFAULT 0,
    message     TEXT NOT NULL DEFAULT '',
    output      TEXT NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (job_id, attempt, idx)
);
CREATE INDEX test_results_by_run ON test_results (run_id, attempt);
CREATE INDEX test_results_history ON test_results (project_id, name, suite, created_at);
CREATE INDEX test_results_by_commit ON test_results (project_id, sha, name, suite);
CREATE INDEX test_results_failing ON test_results (project_id, created_at)
    WHERE status IN ('failed', 'errored') OR failed_attempts > 0;
CREATE INDEX test_results_by_created ON test_results (created_at);
