-- Registered workflows: named pipeline definitions kept in a project, started by dispatch
-- or by their own on: schedule. version counts definitions from 1; enabled is a boolean.
-- Times are microseconds since the Unix epoch.
CREATE TABLE workflows (
    id         UUID PRIMARY KEY,
    project_id UUID NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    version    BIGINT NOT NULL,
    definition BYTEA NOT NULL,
    enabled    BOOLEAN NOT NULL DEFAULT TRUE,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (project_id, name)
);

-- The last tick each schedule handled: fired (run_id is its run) or given up under
-- missed: skip (run_id NULL). A replica takes a tick only by moving last_tick forward, in
-- the transaction that creates the tick's run, so a tick fires once across replicas.
CREATE TABLE schedule_ticks (
    project_id   UUID NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    schedule_key TEXT NOT NULL,
    last_tick    BIGINT NOT NULL,
    run_id       UUID,
    updated_at   BIGINT NOT NULL,
    PRIMARY KEY (project_id, schedule_key)
);
