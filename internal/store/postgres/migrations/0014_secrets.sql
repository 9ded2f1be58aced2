-- Encrypted secrets. A row holds only what package secret sealed: the id of the
-- key-encryption key, the data key it wrapped and the value's ciphertext, both base64.
-- environment '' is project-wide; scope '' is a named project secret, anything else a
-- run's own secret env value (gantry submit --secret-env), named by the run's env.
-- Times are microseconds since the Unix epoch.
CREATE TABLE secrets (
    project_id  UUID NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    environment TEXT NOT NULL DEFAULT '',
    scope       TEXT NOT NULL DEFAULT '',
    name        TEXT NOT NULL,
    key_id      TEXT NOT NULL,
    wrapped_key TEXT NOT NULL,
    ciphertext  TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (project_id, scope, environment, name)
);
CREATE INDEX secrets_by_key ON secrets (key_id);

-- Whether runs of pull requests from forks get the project's secrets (0/1; default no).
ALTER TABLE projects ADD COLUMN secrets_for_forks INTEGER NOT NULL DEFAULT 0;
