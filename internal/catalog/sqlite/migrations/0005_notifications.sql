-- Schema version 5 (SQLite): internal/notify's records. An event routed to
-- at least one target (data: the whole event as JSON) and one delivery per
-- target, pending until delivered or given up; a pending delivery is sent
-- at next_attempt_at (a claim moves it past a lease), so deliveries
-- survive a restart. postgres/migrations/0005_notifications.sql is the same
-- schema in PostgreSQL types.

CREATE TABLE notification_events (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	occurred_at INTEGER NOT NULL,
	type        TEXT NOT NULL DEFAULT '',
	severity    TEXT NOT NULL DEFAULT '',
	object      TEXT NOT NULL DEFAULT '',
	title       TEXT NOT NULL DEFAULT '',
	data        TEXT NOT NULL
);
CREATE INDEX notification_events_time ON notification_events (occurred_at, id);

CREATE TABLE notification_deliveries (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	event_id        INTEGER NOT NULL REFERENCES notification_events (id) ON DELETE CASCADE,
	target          TEXT NOT NULL,
	status          TEXT NOT NULL,
	attempts        INTEGER NOT NULL DEFAULT 0,
	last_error      TEXT NOT NULL DEFAULT '',
	created_at      INTEGER NOT NULL,
	last_attempt_at INTEGER,
	next_attempt_at INTEGER,
	delivered_at    INTEGER
);
CREATE INDEX notification_deliveries_due ON notification_deliveries (status, next_attempt_at, id);
CREATE INDEX notification_deliveries_created ON notification_deliveries (created_at, id);
CREATE INDEX notification_deliveries_event ON notification_deliveries (event_id);
CREATE INDEX notification_deliveries_target ON notification_deliveries (target, created_at);
