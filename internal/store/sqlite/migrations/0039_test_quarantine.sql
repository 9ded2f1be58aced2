-- Tests a project has quarantined: while a quarantine lasts (until expires_at), the
-- test's failures are kept and shown but do not fail its job. One row per test; putting
-- it again replaces the owner, reason and expiry.
CREATE TABLE test_quarantine (
    project_id TEXT NOT NULL,
    suite      TEXT NOT NULL,
    name       TEXT NOT NULL,
    owner      TEXT NOT NULL,
    reason     TEXT NOT NULL DEFAULT '',
    created_by TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (project_id, suite, name)
);
