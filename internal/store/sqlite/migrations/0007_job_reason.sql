-- Why a job ended without running, in words a user reads: the if: condition that was false
-- or the need that failed. Empty for jobs that ran.
ALTER TABLE jobs ADD COLUMN reason TEXT NOT NULL DEFAULT '';
