-- Register tokens are scoped and revocable. labels and projects are JSON arrays ('[]': any);
-- times are microseconds since the Unix epoch, 0 = never. parent_id names the register
-- token a worker credential was issued under ('' for tokens made by an admin), so that
-- revoking a register token revokes the credentials of the workers it registered.
ALTER TABLE tokens ADD COLUMN labels TEXT NOT NULL DEFAULT '[]';
ALTER TABLE tokens ADD COLUMN projects TEXT NOT NULL DEFAULT '[]';
ALTER TABLE tokens ADD COLUMN expires_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tokens ADD COLUMN revoked_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tokens ADD COLUMN last_used_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tokens ADD COLUMN parent_id TEXT NOT NULL DEFAULT '';
CREATE INDEX tokens_by_parent ON tokens (parent_id) WHERE parent_id <> '';
