-- Schema version 15 (SQLite): the fleet's workers, the processes that move
-- data on a hypervisor host or a proxy (internal/fleet). A worker
-- registers under its name (lower-case, at most 56 characters, so that
-- its River queue "w-<name>" fits River's 64), which raises its epoch:
-- every heartbeat and every write of the worker carries that epoch, and
-- one from an older registration is refused (fencing). reach is JSON text
-- (the connections, hosts, datastores, libraries and repositories it
-- reaches, and whether it can boot a VM), slots its task capacity. state
-- is starting, ready, draining or lost; the server leader declares lost,
-- in one statement, the workers whose heartbeat_at is older than the dead
-- interval. SQLite catalogs keep the table for symmetry: a single host
-- runs its work in the server's process. postgres/migrations/0015_workers.sql
-- is the same schema in PostgreSQL types.

CREATE TABLE workers (
	name          TEXT PRIMARY KEY,
	epoch         INTEGER NOT NULL,
	host          TEXT NOT NULL DEFAULT '',
	version       TEXT NOT NULL DEFAULT '',
	protocol      INTEGER NOT NULL,
	reach         TEXT,
	slots         INTEGER NOT NULL,
	state         TEXT NOT NULL CHECK (state IN ('starting', 'ready', 'draining', 'lost')),
	heartbeat_at  INTEGER NOT NULL,
	registered_at INTEGER NOT NULL
);
