-- What a job's definition leaves to be known while the job runs: a name: that reads what
-- its needs left, evaluated when the job is claimed, and an environment url that reads
-- what its steps left, evaluated when they are done. '' until known. The change feed
-- watches them, as it does every change of a job a reader of the run can see.
ALTER TABLE jobs ADD COLUMN evaluated_name TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN environment_url TEXT NOT NULL DEFAULT '';

DROP TRIGGER jobs_change_seq ON jobs;
CREATE TRIGGER jobs_change_seq BEFORE UPDATE ON jobs
    FOR EACH ROW
    WHEN ((NEW.status, NEW.attempt, NEW.max_attempts, NEW.failure_kind, NEW.exit_code, NEW.reason,
           NEW.lane, NEW.worker_id, NEW.queued_at, NEW.started_at, NEW.finished_at,
           NEW.cancel_requested, NEW.retry_after, NEW.evaluated_name, NEW.environment_url)
          IS DISTINCT FROM
          (OLD.status, OLD.attempt, OLD.max_attempts, OLD.failure_kind, OLD.exit_code, OLD.reason,
           OLD.lane, OLD.worker_id, OLD.queued_at, OLD.started_at, OLD.finished_at,
           OLD.cancel_requested, OLD.retry_after, OLD.evaluated_name, OLD.environment_url))
    EXECUTE FUNCTION jobs_change_seq();
