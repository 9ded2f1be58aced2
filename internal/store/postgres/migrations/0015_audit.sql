-- The audit log of security-relevant actions. Append-only: the triggers below refuse
-- every UPDATE, DELETE and TRUNCATE, so history cannot be rewritten through Gantry or by
-- a bug in it. id is time-ordered (UUIDv7); time is microseconds since the Unix epoch.
-- project is a name, not a reference: an entry outlives the project it speaks of.
CREATE TABLE audit (
    id          UUID PRIMARY KEY,
    time        BIGINT NOT NULL,
    actor_id    TEXT NOT NULL,
    actor       TEXT NOT NULL,
    action      TEXT NOT NULL,
    project     TEXT NOT NULL,
    target      TEXT NOT NULL,
    details     TEXT NOT NULL,
    remote_addr TEXT NOT NULL
);

CREATE INDEX audit_project ON audit (project, id);

CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER audit_no_change BEFORE UPDATE OR DELETE ON audit
    FOR EACH ROW EXECUTE FUNCTION audit_append_only();

CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
    FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
