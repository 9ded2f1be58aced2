-- The jobs a worker holds: a claim adds up what they ask for to keep the worker within
-- the capacity it registered, and the control channel looks for those asked to cancel.
CREATE INDEX jobs_by_worker ON jobs (worker_id) WHERE status IN ('assigned', 'running');
