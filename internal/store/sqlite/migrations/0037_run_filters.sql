-- A run's branch, event and actor, copied out of its trigger so that the runs list filters
-- on them with an index, as it does on ref and status. actor is who started the run: the
-- Gantry user who submitted or dispatched it, else the forge account of its webhook.
ALTER TABLE runs ADD COLUMN branch TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN event TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN actor TEXT NOT NULL DEFAULT '';
UPDATE runs SET
    branch = COALESCE(json_extract(trigger, '$.branch'), ''),
    event = COALESCE(json_extract(trigger, '$.event'), ''),
    actor = COALESCE(NULLIF(json_extract(trigger, '$.user'), ''), json_extract(trigger, '$.actor'), '');
CREATE INDEX runs_by_branch ON runs (branch, id);
CREATE INDEX runs_by_event ON runs (event, id);
CREATE INDEX runs_by_actor ON runs (actor, id);
-- Who cancelled a run is the audit entry whose target is the run's id: found by target,
-- not by walking every entry of the project (a claim of a job with secrets adds one).
CREATE INDEX audit_target ON audit (target, id);
