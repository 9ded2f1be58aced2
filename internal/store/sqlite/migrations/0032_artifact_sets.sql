-- An artifact belongs to a named set, as a workflow's upload-artifact names what it keeps
-- (set_name; '' for a job's artifacts: of Gantry's own language), at a path within it
-- (set_path, relative to where the upload's paths meet; '' when not in a set). One file
-- may be in two sets of one attempt, so the set is part of the row's key: SQLite changes
-- a table's constraints only by copying it.
CREATE TABLE artifacts_next (
    id         TEXT PRIMARY KEY,
    job_id     TEXT NOT NULL,
    attempt    INTEGER NOT NULL,
    name       TEXT NOT NULL,
    sha256     TEXT NOT NULL,
    size       INTEGER NOT NULL,
    media_type TEXT NOT NULL DEFAULT '',
    state      TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL DEFAULT 0,
    mode       INTEGER NOT NULL DEFAULT 420,
    set_name   TEXT NOT NULL DEFAULT '',
    set_path   TEXT NOT NULL DEFAULT '',
    UNIQUE (job_id, attempt, set_name, name)
);
INSERT INTO artifacts_next (id, job_id, attempt, name, sha256, size, media_type, state, created_at, expires_at, mode)
    SELECT id, job_id, attempt, name, sha256, size, media_type, state, created_at, expires_at, mode FROM artifacts;
DROP TABLE artifacts;
ALTER TABLE artifacts_next RENAME TO artifacts;
CREATE INDEX artifacts_by_digest ON artifacts (sha256);
CREATE INDEX artifacts_by_expiry ON artifacts (expires_at) WHERE expires_at <> 0;
