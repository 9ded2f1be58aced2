-- API tokens and worker credentials, stored as SHA-256 hashes of the secret.
CREATE TABLE tokens (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    role       TEXT NOT NULL,
    hash       TEXT NOT NULL UNIQUE,
    worker_id  TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
);
