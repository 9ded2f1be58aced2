-- What a project reports to its forge as commit statuses: '' or 'jobs' (the default), a
-- status for the run and one per job; 'run', the run's only.
ALTER TABLE projects ADD COLUMN commit_statuses TEXT NOT NULL DEFAULT '';
