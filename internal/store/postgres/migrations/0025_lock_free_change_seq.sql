-- A job's change number comes from the id of the transaction that wrote it, which locks
-- nothing. 0023 took it from its run's row (UPDATE runs SET job_seq = job_seq + 1), and
-- that row lock, taken while jobs of several runs changed in one statement, deadlocked
-- claims and completions that met the same runs in different orders; each deadlock cost
-- the server's deadlock_timeout before the store could retry.
--
-- pg_current_xact_id() is the top-level transaction's id, also inside a savepoint, and a
-- reader's cursor is its snapshot's xmin less one (jobs_change_cursor, which the store
-- selects as the run's JobSeq): every transaction with an id below xmin had ended when
-- the reader looked, so any change the reader did not see is numbered above its cursor.
-- A change the reader did see may be numbered above it too and be listed again; none is
-- missed. Ids are 64-bit (xid8) and never wrap.
--
-- Both add an offset fixed here: the numbers 0023 gave count a run's changes, not
-- transactions, and may stand above the server's transaction ids. Offset so that every
-- new number is above every number and cursor given before, a follower that read the run
-- before this migration misses nothing after it.
--
-- runs.job_seq stays, unused by PostgreSQL from now on.
DO $migrate$
DECLARE
    off bigint;
BEGIN
    SELECT greatest(coalesce(max(job_seq), 0) - pg_current_xact_id()::text::bigint + 1, 0)
        INTO off FROM runs;

    EXECUTE format($f$
        CREATE FUNCTION jobs_change_number() RETURNS bigint LANGUAGE sql VOLATILE
        AS 'SELECT pg_current_xact_id()::text::bigint + %s'
    $f$, off);
    EXECUTE format($f$
        CREATE FUNCTION jobs_change_cursor() RETURNS bigint LANGUAGE sql STABLE
        AS 'SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint - 1 + %s'
    $f$, off);
    EXECUTE format($f$
        CREATE OR REPLACE FUNCTION jobs_change_seq() RETURNS trigger LANGUAGE plpgsql AS $t$
        BEGIN
            NEW.change_seq := pg_current_xact_id()::text::bigint + %s;
            RETURN NEW;
        END;
        $t$
    $f$, off);
END;
$migrate$;

-- Whether a change is one a reader of the run sees is the trigger's WHEN, so that an
-- UPDATE that changes none of it (a heartbeat) does not call the function at all.
DROP TRIGGER jobs_change_seq ON jobs;
CREATE TRIGGER jobs_change_seq BEFORE UPDATE ON jobs
    FOR EACH ROW
    WHEN ((NEW.status, NEW.attempt, NEW.max_attempts, NEW.failure_kind, NEW.exit_code, NEW.reason,
           NEW.lane, NEW.worker_id, NEW.queued_at, NEW.started_at, NEW.finished_at,
           NEW.cancel_requested, NEW.retry_after)
          IS DISTINCT FROM
          (OLD.status, OLD.attempt, OLD.max_attempts, OLD.failure_kind, OLD.exit_code, OLD.reason,
           OLD.lane, OLD.worker_id, OLD.queued_at, OLD.started_at, OLD.finished_at,
           OLD.cancel_requested, OLD.retry_after))
    EXECUTE FUNCTION jobs_change_seq();

-- A new job is numbered by the transaction that created it, like any change: since=0
-- still lists every job, and a run read after its creation has a cursor at or above it
-- once no older transaction is open.
ALTER TABLE jobs ALTER COLUMN change_seq SET DEFAULT jobs_change_number();
