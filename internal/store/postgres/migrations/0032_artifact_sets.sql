-- An artifact belongs to a named set, as a workflow's upload-artifact names what it keeps
-- (set_name; '' for a job's artifacts: of Gantry's own language), at a path within it
-- (set_path, relative to where the upload's paths meet; '' when not in a set). One file
-- may be in two sets of one attempt, so the set is part of the row's key.
ALTER TABLE artifacts ADD COLUMN set_name TEXT NOT NULL DEFAULT '';
ALTER TABLE artifacts ADD COLUMN set_path TEXT NOT NULL DEFAULT '';
ALTER TABLE artifacts DROP CONSTRAINT artifacts_job_id_attempt_name_key;
ALTER TABLE artifacts ADD CONSTRAINT artifacts_job_id_attempt_set_name_name_key UNIQUE (job_id, attempt, set_name, name);
