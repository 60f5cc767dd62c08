-- Schema version 9 (SQLite): a repository's usage over time. The server's
-- health monitor records what each repository stores (and may hold) each
-- time it computes its statistics; the dashboard draws the trend from
-- these samples and estimates when the repository will be full.
-- postgres/migrations/0009_repository_usage.sql is the same schema in
-- PostgreSQL types.

CREATE TABLE repository_usage (
	repository     TEXT NOT NULL,
	at             INTEGER NOT NULL,
	stored_bytes   INTEGER NOT NULL,
	capacity_bytes INTEGER NOT NULL,
	PRIMARY KEY (repository, at)
);
