-- The events a project's signed webhooks reported lately, one row per (event, ref, sha),
-- with the delivery that first reported it. A forge that resends an event under a new
-- delivery id (a manual redelivery, a retry after a timeout) finds the row and gets the
-- first delivery's runs instead of new ones. Rows older than the window are removed by
-- the next claim of the project.
CREATE TABLE hook_events (
    project_id  UUID NOT NULL REFERENCES projects (id),
    event       TEXT NOT NULL,
    ref         TEXT NOT NULL,
    sha         TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    claimed_at  BIGINT NOT NULL,
    PRIMARY KEY (project_id, event, ref, sha)
);
CREATE INDEX hook_events_by_age ON hook_events (project_id, claimed_at);
