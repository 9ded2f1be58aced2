-- Which projects have shown they hold a blob's content: a project owns a digest once the
-- blob store verified an upload of it by one of the project's jobs. An artifact of the
-- project becomes stored, and a cache entry is saved, only for a digest the project owns:
-- the blob store keeps one copy of each content, but one project's upload never lets
-- another use it. No row is made for what was stored before this migration: each project
-- uploads such content once more. created_at is microseconds since the Unix epoch.
CREATE TABLE blob_owners (
    project_id UUID NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    sha256     TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (project_id, sha256)
);
CREATE INDEX blob_owners_sha256 ON blob_owners (sha256);
