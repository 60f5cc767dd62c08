-- Schema version 18 (SQLite): the standbys replications keep on DR hosts
-- (issue 40). One row per replication and VM: the standby's record as its
-- last run left it (its restore points, as JSON), and the newest point's
-- source instant, from which the lag metric and the console's RPO column
-- are computed (NULL: no point yet). postgres/migrations/0018_replicas.sql is the same schema
-- in PostgreSQL types.

CREATE TABLE replicas (
	replication   TEXT NOT NULL,
	vm            TEXT NOT NULL,
	host          TEXT NOT NULL,
	directory     TEXT NOT NULL,
	source_time   INTEGER,
	replicated_at INTEGER,
	points        TEXT NOT NULL,
	last_error    TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (replication, vm)
);
