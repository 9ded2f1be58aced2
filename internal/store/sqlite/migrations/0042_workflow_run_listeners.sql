-- What the definitions of each project listen for with on: workflow_run: runs named
-- workflow (a pipeline's name) being requested, started or ending (type: requested,
-- in_progress, completed). source names the definition: file (the project's pipeline
-- file on its default branch, as the schedule loop last read it) or workflow:<id> (a
-- registered workflow, written with its definition). A run reads them when it is
-- created, to know which of its activities to put in the outbox (runs.notify); a row
-- left over costs a message that starts nothing, never a lost run.
CREATE TABLE workflow_run_listeners (
    project_id TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    workflow   TEXT NOT NULL,
    type       TEXT NOT NULL,
    source     TEXT NOT NULL,
    PRIMARY KEY (project_id, workflow, type, source)
);
