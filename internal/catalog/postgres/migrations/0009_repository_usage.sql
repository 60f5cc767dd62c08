-- Schema version 9 (PostgreSQL): sqlite/migrations/0009_repository_usage.sql
-- in native types (TIMESTAMPTZ; names in the "C" collation).

CREATE TABLE repository_usage (
	repository     TEXT COLLATE "C" NOT NULL,
	at             TIMESTAMPTZ NOT NULL,
	stored_bytes   BIGINT NOT NULL,
	capacity_bytes BIGINT NOT NULL,
	PRIMARY KEY (repository, at)
);
