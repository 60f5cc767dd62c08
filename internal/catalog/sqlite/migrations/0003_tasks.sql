-- Schema version 3 (SQLite): jobs become the control plane's tasks. A job
-- records what it acts on (object, vm), who started it (user_name,
-- token), its progress, the process that runs it (owner_*, heartbeat_at)
-- and a cancel request any process can set (cancel_requested_at). Its
-- events are its log: seq numbers them 1, 2, 3... within the job, and
-- jobs.log_lines holds the last number, so appending takes the job's row
-- lock and a page of a log of millions of lines is one index range.
-- postgres/migrations/0003_tasks.sql is the same change in PostgreSQL types.
ALTER TABLE jobs ADD COLUMN object TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN vm TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN user_name TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN token TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN bytes_done INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN bytes_total INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN bytes_per_second REAL NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN eta_seconds INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN items_done INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN items_total INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN owner_host TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN owner_pid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN owner_start INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN heartbeat_at INTEGER;
ALTER TABLE jobs ADD COLUMN cancel_requested_at INTEGER;
ALTER TABLE jobs ADD COLUMN log_lines INTEGER NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN seq INTEGER;

-- One history: runs of policies were recorded as kind "backup".
UPDATE jobs SET kind = 'backup-policy' WHERE kind = 'backup';

-- Number the existing events of each job in the order they were recorded.
UPDATE events SET seq = numbered.n
	FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY job_id ORDER BY id) AS n
		FROM events WHERE job_id IS NOT NULL) AS numbered
	WHERE events.id = numbered.id;
UPDATE jobs SET log_lines = (SELECT COUNT(*) FROM events WHERE events.job_id = jobs.id);

CREATE UNIQUE INDEX events_log ON events (job_id, seq);
CREATE INDEX jobs_kind ON jobs (kind, created_at);
CREATE INDEX jobs_user ON jobs (user_name, created_at);
CREATE INDEX jobs_object ON jobs (object, created_at);
CREATE INDEX jobs_vm ON jobs (vm, created_at);
CREATE INDEX jobs_finished ON jobs (finished_at);
CREATE INDEX tasks_vm_name ON tasks (vm_name, job_id);
