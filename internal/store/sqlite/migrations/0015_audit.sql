-- The audit log of security-relevant actions. Append-only: the triggers below refuse
-- every UPDATE and DELETE, so history cannot be rewritten through Gantry or by a bug in
-- it. id is time-ordered (UUIDv7); time is microseconds since the Unix epoch. project is
-- a name, not a reference: an entry outlives the project it speaks of.
CREATE TABLE audit (
    id          TEXT PRIMARY KEY,
    time        INTEGER NOT NULL,
    actor_id    TEXT NOT NULL,
    actor       TEXT NOT NULL,
    action      TEXT NOT NULL,
    project     TEXT NOT NULL,
    target      TEXT NOT NULL,
    details     TEXT NOT NULL,
    remote_addr TEXT NOT NULL
);

CREATE INDEX audit_project ON audit (project, id);

CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only: entries cannot be updated');
END;

CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only: entries cannot be deleted');
END;
