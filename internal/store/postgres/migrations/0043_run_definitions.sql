-- A run's definition (its pipeline file as submitted) gets a table of its own, as on
-- SQLite (see its 0043): every read of a run selected it, large as the file, when only
-- expanding a computed matrix and judging a run's failing tests read it.
CREATE TABLE run_definitions (
    run_id     UUID PRIMARY KEY REFERENCES runs (id),
    definition BYTEA
);
INSERT INTO run_definitions (run_id, definition) SELECT id, definition FROM runs;
ALTER TABLE runs DROP COLUMN definition;
