-- Each project numbers its runs #1, #2, ... in the order they were created: the number a
-- user tells runs apart by. run_numbers holds the last number each project gave; the
-- transaction that creates a run takes the next one from it (an upsert that locks the
-- project's row until commit), so two runs created at once never share a number. Runs
-- made before numbering are numbered by creation order.
ALTER TABLE runs ADD COLUMN number BIGINT NOT NULL DEFAULT 0;
UPDATE runs SET number = n.number
    FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY project_id ORDER BY created_at, id) AS number FROM runs) AS n
    WHERE runs.id = n.id;
CREATE UNIQUE INDEX runs_by_number ON runs (project_id, number);

CREATE TABLE run_numbers (
    project_id UUID PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,
    last       BIGINT NOT NULL
);
INSERT INTO run_numbers (project_id, last) SELECT project_id, MAX(number) FROM runs GROUP BY project_id;
