-- Schema version 7 (SQLite): several servers on one catalog. A lease
-- names the process that runs the scheduled jobs (policies, maintenance)
-- until it expires; its holder renews it, and another process takes it
-- over once it has expired (epoch counts the changes of holder). Each
-- scheduled run is claimed once, by schedule and slot (the time the
-- schedule named), so that no run happens twice even when two processes
-- believe they hold the lease. postgres/migrations/0007_schedules.sql is
-- the same schema in PostgreSQL types.

CREATE TABLE leases (
	name        TEXT PRIMARY KEY,
	holder      TEXT NOT NULL,
	epoch       INTEGER NOT NULL,
	acquired_at INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL
);

CREATE TABLE schedule_runs (
	schedule   TEXT NOT NULL,
	slot       INTEGER NOT NULL,
	holder     TEXT NOT NULL,
	claimed_at INTEGER NOT NULL,
	PRIMARY KEY (schedule, slot)
);
CREATE INDEX schedule_runs_claimed ON schedule_runs (claimed_at);
