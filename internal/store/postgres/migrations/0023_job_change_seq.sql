-- A run's change feed: every change of a job that a reader of the run can see (status,
-- attempt, exit code, reason, worker, times, cancel flag) takes the next number of its
-- run's job_seq into the job's change_seq, so "the jobs changed since N" is an index range
-- rather than a re-read of every job. The trigger does it, so no statement can forget to:
-- a job UPDATE need do nothing itself. Jobs start at 1, so since=0 is every job.
--
-- The number comes from the run's row, not a global sequence: taking it locks that row
-- until commit, so a run's numbers are given in commit order and a reader that saw N has
-- seen every change numbered N or less.
ALTER TABLE runs ADD COLUMN job_seq BIGINT NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN change_seq BIGINT NOT NULL DEFAULT 1;

CREATE INDEX jobs_run_change ON jobs (run_id, change_seq);

CREATE FUNCTION jobs_change_seq() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.status, NEW.attempt, NEW.max_attempts, NEW.failure_kind, NEW.exit_code, NEW.reason,
        NEW.lane, NEW.worker_id, NEW.queued_at, NEW.started_at, NEW.finished_at,
        NEW.cancel_requested, NEW.retry_after)
       IS DISTINCT FROM
       (OLD.status, OLD.attempt, OLD.max_attempts, OLD.failure_kind, OLD.exit_code, OLD.reason,
        OLD.lane, OLD.worker_id, OLD.queued_at, OLD.started_at, OLD.finished_at,
        OLD.cancel_requested, OLD.retry_after) THEN
        UPDATE runs SET job_seq = job_seq + 1 WHERE id = NEW.run_id RETURNING job_seq INTO NEW.change_seq;
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER jobs_change_seq BEFORE UPDATE ON jobs
    FOR EACH ROW EXECUTE FUNCTION jobs_change_seq();
