-- Each project's quarantine rule, at most one: a test flaky (failed and passed on one
-- commit) on at least flaky_commits commits within within_s seconds is quarantined for
-- for_s seconds by the coordinator, owned by owner. A project without a row has none.
CREATE TABLE test_quarantine_rules (
    project_id    TEXT PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,
    flaky_commits INTEGER NOT NULL,
    within_s      BIGINT NOT NULL,
    for_s         BIGINT NOT NULL,
    owner         TEXT NOT NULL,
    updated_by    TEXT NOT NULL DEFAULT '',
    updated_at    BIGINT NOT NULL
);
