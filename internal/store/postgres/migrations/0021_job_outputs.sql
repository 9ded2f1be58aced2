-- What a job leaves the jobs that need it: its outputs, name to value, as JSON. A row of
-- its own, written once when the job ends, so the jobs row every transition rewrites
-- stays small; no row is the same as no outputs.
CREATE TABLE job_outputs (
    job_id  UUID PRIMARY KEY,
    outputs TEXT NOT NULL
);
