-- Configuration variables, which workflows read as vars.NAME. Not secret: the value is
-- stored as it is. environment '' is project-wide. Names are stored as the API folds them
-- (upper case). Times are microseconds since the Unix epoch.
CREATE TABLE variables (
    project_id  TEXT NOT NULL REFERENCES projects (id),
    environment TEXT NOT NULL DEFAULT '',
    name        TEXT NOT NULL,
    value       TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (project_id, environment, name)
);

-- The project secret that secrets.GITHUB_TOKEN and github.token read; '' is GITHUB_TOKEN.
ALTER TABLE projects ADD COLUMN github_token_secret TEXT NOT NULL DEFAULT '';
