-- A run's change feed: every change of a job that a reader of the run can see (status,
-- attempt, exit code, reason, worker, times, cancel flag) takes the next number of its
-- run's job_seq into the job's change_seq, so "the jobs changed since N" is an index range
-- rather than a re-read of every job. The trigger does it, so no statement can forget to:
-- a job UPDATE need do nothing itself. Jobs start at 1, so since=0 is every job.
ALTER TABLE runs ADD COLUMN job_seq INTEGER NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 1;

CREATE INDEX jobs_run_change ON jobs (run_id, change_seq);

CREATE TRIGGER jobs_change_seq AFTER UPDATE ON jobs
WHEN NEW.change_seq IS OLD.change_seq AND (
    NEW.status IS NOT OLD.status OR NEW.attempt IS NOT OLD.attempt
    OR NEW.max_attempts IS NOT OLD.max_attempts OR NEW.failure_kind IS NOT OLD.failure_kind
    OR NEW.exit_code IS NOT OLD.exit_code OR NEW.reason IS NOT OLD.reason
    OR NEW.lane IS NOT OLD.lane OR NEW.worker_id IS NOT OLD.worker_id
    OR NEW.queued_at IS NOT OLD.queued_at OR NEW.started_at IS NOT OLD.started_at
    OR NEW.finished_at IS NOT OLD.finished_at OR NEW.cancel_requested IS NOT OLD.cancel_requested
    OR NEW.retry_after IS NOT OLD.retry_after)
BEGIN
    UPDATE runs SET job_seq = job_seq + 1 WHERE id = NEW.run_id;
    UPDATE jobs SET change_seq = (SELECT job_seq FROM runs WHERE id = NEW.run_id) WHERE id = NEW.id;
END;
