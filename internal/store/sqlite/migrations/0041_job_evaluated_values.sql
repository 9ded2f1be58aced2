-- What a job's definition leaves to be known while the job runs: a name: that reads what
-- its needs left, evaluated when the job is claimed, and an environment url that reads
-- what its steps left, evaluated when they are done. '' until known. The change feed
-- watches them, as it does every change of a job a reader of the run can see.
ALTER TABLE jobs ADD COLUMN evaluated_name TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN environment_url TEXT NOT NULL DEFAULT '';

DROP TRIGGER jobs_change_seq;
CREATE TRIGGER jobs_change_seq AFTER UPDATE ON jobs
WHEN NEW.change_seq IS OLD.change_seq AND (
    NEW.status IS NOT OLD.status OR NEW.attempt IS NOT OLD.attempt
    OR NEW.max_attempts IS NOT OLD.max_attempts OR NEW.failure_kind IS NOT OLD.failure_kind
    OR NEW.exit_code IS NOT OLD.exit_code OR NEW.reason IS NOT OLD.reason
    OR NEW.lane IS NOT OLD.lane OR NEW.worker_id IS NOT OLD.worker_id
    OR NEW.queued_at IS NOT OLD.queued_at OR NEW.started_at IS NOT OLD.started_at
    OR NEW.finished_at IS NOT OLD.finished_at OR NEW.cancel_requested IS NOT OLD.cancel_requested
    OR NEW.retry_after IS NOT OLD.retry_after
    OR NEW.evaluated_name IS NOT OLD.evaluated_name OR NEW.environment_url IS NOT OLD.environment_url)
BEGIN
    UPDATE runs SET job_seq = job_seq + 1 WHERE id = NEW.run_id;
    UPDATE jobs SET change_seq = (SELECT job_seq FROM runs WHERE id = NEW.run_id) WHERE id = NEW.id;
END;
