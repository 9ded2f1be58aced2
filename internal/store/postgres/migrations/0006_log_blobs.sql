-- Finished logs may live in the blob store, a chunk's location naming its blob; blob
-- garbage collection asks whether any chunk names a blob.
CREATE INDEX log_chunks_location ON log_chunks (location) WHERE location <> '';
