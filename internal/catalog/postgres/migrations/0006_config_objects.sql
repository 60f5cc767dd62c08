-- Schema version 6 (PostgreSQL): sqlite/migrations/0006_config_objects.sql
-- in native types (TIMESTAMPTZ; names in the "C" collation). spec stays
-- TEXT, not JSONB: it is read back exactly as written.

CREATE TABLE config_objects (
	kind       TEXT COLLATE "C" NOT NULL,
	name       TEXT COLLATE "C" NOT NULL,
	version    BIGINT NOT NULL,
	spec       TEXT NOT NULL,
	created_at TIMESTAMPTZ NOT NULL,
	created_by TEXT COLLATE "C" NOT NULL DEFAULT '',
	updated_at TIMESTAMPTZ NOT NULL,
	updated_by TEXT COLLATE "C" NOT NULL DEFAULT '',
	PRIMARY KEY (kind, name)
);

CREATE TABLE config_generation (
	id         INTEGER PRIMARY KEY CHECK (id = 1),
	generation BIGINT NOT NULL
);
INSERT INTO config_generation (id, generation) VALUES (1, 0);
