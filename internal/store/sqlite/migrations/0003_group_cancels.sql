-- Jobs whose concurrency group cancels the job holding it when they are queued.
ALTER TABLE jobs ADD COLUMN group_cancels INTEGER NOT NULL DEFAULT 0;
