-- Schema version 15 (PostgreSQL): sqlite/migrations/0015_workers.sql in
-- native types (TIMESTAMPTZ; names in the "C" collation).

CREATE TABLE workers (
	name          TEXT COLLATE "C" PRIMARY KEY,
	epoch         BIGINT NOT NULL,
	host          TEXT NOT NULL DEFAULT '',
	version       TEXT NOT NULL DEFAULT '',
	protocol      INTEGER NOT NULL,
	reach         TEXT,
	slots         INTEGER NOT NULL,
	state         TEXT NOT NULL CHECK (state IN ('starting', 'ready', 'draining', 'lost')),
	heartbeat_at  TIMESTAMPTZ NOT NULL,
	registered_at TIMESTAMPTZ NOT NULL
);
