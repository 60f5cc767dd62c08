-- Schema version 7 (PostgreSQL): sqlite/migrations/0007_schedules.sql in
-- native types (TIMESTAMPTZ; names in the "C" collation).

CREATE TABLE leases (
	name        TEXT COLLATE "C" PRIMARY KEY,
	holder      TEXT NOT NULL,
	epoch       BIGINT NOT NULL,
	acquired_at TIMESTAMPTZ NOT NULL,
	expires_at  TIMESTAMPTZ NOT NULL
);

CREATE TABLE schedule_runs (
	schedule   TEXT COLLATE "C" NOT NULL,
	slot       TIMESTAMPTZ NOT NULL,
	holder     TEXT NOT NULL,
	claimed_at TIMESTAMPTZ NOT NULL,
	PRIMARY KEY (schedule, slot)
);
CREATE INDEX schedule_runs_claimed ON schedule_runs (claimed_at);
