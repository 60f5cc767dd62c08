-- Schema version 18 (PostgreSQL): sqlite/migrations/0018_replicas.sql in
-- native types (TIMESTAMPTZ; names in the "C" collation).

CREATE TABLE replicas (
	replication   TEXT COLLATE "C" NOT NULL,
	vm            TEXT COLLATE "C" NOT NULL,
	host          TEXT NOT NULL,
	directory     TEXT NOT NULL,
	source_time   TIMESTAMPTZ,
	replicated_at TIMESTAMPTZ,
	points        TEXT NOT NULL,
	last_error    TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (replication, vm)
);
