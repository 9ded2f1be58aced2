-- Per-project quotas. max_concurrent_jobs bounds the project's leased (assigned or running)
-- jobs, 0 = no limit; fair_weight is its share in fair queueing (1 to 100).
ALTER TABLE projects ADD COLUMN max_concurrent_jobs INTEGER NOT NULL DEFAULT 0;
ALTER TABLE projects ADD COLUMN fair_weight INTEGER NOT NULL DEFAULT 1;
-- Virtual start times now advance by 1,000,000 / weight per job instead of by 1: the jobs
-- already waiting keep their order among the new ones.
UPDATE jobs SET vtime = vtime * 1000000 WHERE status IN ('queued', 'assigned', 'running');
-- A claim counts a limited project's leased jobs.
CREATE INDEX jobs_leased_by_project ON jobs (project_id) WHERE status IN ('assigned', 'running');
