-- Access control per project. A token acts for a user (user_name, '' = the token's name);
-- project_members gives users a role in a project: viewer, developer or maintainer. Times
-- are microseconds since the Unix epoch. A token whose projects are '[]' and whose role
-- is viewer, developer or maintainer reaches only the projects its user is a member of.
ALTER TABLE tokens ADD COLUMN user_name TEXT NOT NULL DEFAULT '';

CREATE TABLE project_members (
    project_id TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    principal  TEXT NOT NULL,
    role       TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (project_id, principal)
);

CREATE INDEX project_members_by_principal ON project_members (principal);
