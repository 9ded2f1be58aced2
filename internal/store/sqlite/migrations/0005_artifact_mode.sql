-- An artifact keeps its file's permission bits, so that a binary one job builds is still
-- executable in the jobs that fetch it.
ALTER TABLE artifacts ADD COLUMN mode INTEGER NOT NULL DEFAULT 420;
