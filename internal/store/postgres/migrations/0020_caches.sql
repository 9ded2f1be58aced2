-- Jobs' caches: each entry names the blob holding a cache archive, saved by a job of the
-- project under key in scope (a branch name, pr/N or tag/NAME). Entries are immutable:
-- (project, scope, key) is saved once. last_used_at moves on every restore; eviction
-- deletes by it. Times are microseconds since the Unix epoch.
CREATE TABLE cache_entries (
    id           UUID PRIMARY KEY,
    project_id   UUID NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    scope        TEXT NOT NULL,
    cache_key    TEXT NOT NULL,
    sha256       TEXT NOT NULL,
    size         BIGINT NOT NULL,
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT NOT NULL,
    UNIQUE (project_id, scope, cache_key)
);
CREATE INDEX cache_entries_used ON cache_entries (project_id, last_used_at);
CREATE INDEX cache_entries_sha256 ON cache_entries (sha256);
