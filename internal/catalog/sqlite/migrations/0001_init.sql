-- Catalog schema, version 1 (SQLite). Timestamps are INTEGER microseconds
-- since the Unix epoch (UTC), NULL when unset; JSON fields are TEXT.
-- postgres/migrations/0001_init.sql is the same schema in PostgreSQL types.

CREATE TABLE jobs (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	kind        TEXT NOT NULL DEFAULT '',
	policy      TEXT NOT NULL DEFAULT '',
	repository  TEXT NOT NULL DEFAULT '',
	status      TEXT NOT NULL DEFAULT '',
	worker      TEXT NOT NULL DEFAULT '',
	created_at  INTEGER NOT NULL,
	started_at  INTEGER,
	finished_at INTEGER,
	tasks_total INTEGER NOT NULL DEFAULT 0,
	tasks_ok    INTEGER NOT NULL DEFAULT 0,
	tasks_fail  INTEGER NOT NULL DEFAULT 0,
	error       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX jobs_created ON jobs (created_at, id);
CREATE INDEX jobs_policy ON jobs (policy, created_at);
CREATE INDEX jobs_status ON jobs (status, created_at);

CREATE TABLE tasks (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	job_id          INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
	connection      TEXT NOT NULL DEFAULT '',
	vm_id           TEXT NOT NULL DEFAULT '',
	vm_name         TEXT NOT NULL DEFAULT '',
	host            TEXT NOT NULL DEFAULT '',
	datastores      TEXT,
	status          TEXT NOT NULL DEFAULT '',
	mode            TEXT NOT NULL DEFAULT '',
	snapshot_mode   TEXT NOT NULL DEFAULT '',
	attempts        INTEGER NOT NULL DEFAULT 0,
	started_at      INTEGER,
	finished_at     INTEGER,
	bytes_logical   INTEGER NOT NULL DEFAULT 0,
	bytes_read      INTEGER NOT NULL DEFAULT 0,
	bytes_stored    INTEGER NOT NULL DEFAULT 0,
	backup_point_id TEXT NOT NULL DEFAULT '',
	warnings        TEXT,
	error           TEXT NOT NULL DEFAULT ''
);
CREATE INDEX tasks_job ON tasks (job_id, id);
CREATE INDEX tasks_vm ON tasks (vm_id, id);

CREATE TABLE events (
	id          INTEGER PRIMARY KEY,
	occurred_at INTEGER NOT NULL,
	job_id      INTEGER REFERENCES jobs (id) ON DELETE CASCADE,
	task_id     INTEGER REFERENCES tasks (id) ON DELETE CASCADE,
	level       TEXT NOT NULL DEFAULT '',
	kind        TEXT NOT NULL DEFAULT '',
	message     TEXT NOT NULL DEFAULT '',
	fields      TEXT
);
CREATE INDEX events_time ON events (occurred_at, id);
CREATE INDEX events_job ON events (job_id, occurred_at);
CREATE INDEX events_task ON events (task_id, occurred_at);

CREATE TABLE backup_points (
	repository    TEXT NOT NULL,
	id            TEXT NOT NULL,
	taken_at      INTEGER NOT NULL,
	connection    TEXT NOT NULL DEFAULT '',
	vm_id         TEXT NOT NULL DEFAULT '',
	vm_name       TEXT NOT NULL DEFAULT '',
	mode          TEXT NOT NULL DEFAULT '',
	parent        TEXT NOT NULL DEFAULT '',
	disks         INTEGER NOT NULL DEFAULT 0,
	bytes_logical INTEGER NOT NULL DEFAULT 0,
	bytes_stored  INTEGER NOT NULL DEFAULT 0,
	tags          TEXT,
	protected     INTEGER NOT NULL DEFAULT 0,
	job_id        INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (repository, id)
);
CREATE INDEX points_time ON backup_points (taken_at, id);
CREATE INDEX points_vm ON backup_points (vm_id, taken_at);
CREATE INDEX points_name ON backup_points (vm_name, taken_at);

CREATE TABLE vms (
	connection TEXT NOT NULL,
	id         TEXT NOT NULL,
	name       TEXT NOT NULL DEFAULT '',
	host       TEXT NOT NULL DEFAULT '',
	datastores TEXT,
	tags       TEXT,
	bytes      INTEGER NOT NULL DEFAULT 0,
	last_seen  INTEGER,
	PRIMARY KEY (connection, id)
);
