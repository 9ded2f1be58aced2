-- A run's definition (its pipeline file as submitted, as large as the file: hundreds of
-- KiB for a run of thousands of jobs) gets a table of its own. In the runs row it lay
-- before env, the job counters and the run number, so SQLite walked its overflow pages
-- to read any of those (every claim reads env) and rewrote the row with them whenever
-- a counter moved (every job's end): what a job cost grew with its run's size. It is
-- read only to expand a computed matrix and to judge a run's failing tests.
CREATE TABLE run_definitions (
    run_id     TEXT PRIMARY KEY REFERENCES runs (id),
    definition BLOB
);
INSERT INTO run_definitions (run_id, definition) SELECT id, definition FROM runs;
ALTER TABLE runs DROP COLUMN definition;
