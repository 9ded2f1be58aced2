-- Log chunks may carry their lines inline (the chunk storage used with PostgreSQL), and
-- the retention pass finds old chunks by their creation time.
ALTER TABLE log_chunks ADD COLUMN data BLOB;
CREATE INDEX log_chunks_created ON log_chunks (created_at);
