-- Why a step failed: "timeout" when it ran past its own timeout (or its job's), else
-- "failure"; empty for a step that did not fail.
ALTER TABLE steps ADD COLUMN failure_kind TEXT NOT NULL DEFAULT '';
