-- Schema version 6 (SQLite): the configuration objects created through the
-- API (internal/configobj merges them with the configuration file). spec
-- is the object in the file's schema, as JSON; it never holds a secret
-- (secrets are named by the files that hold them). Every change takes the
-- next generation of config_generation, its one row, and the object's
-- version is the generation of its last change: versions only grow, and
-- servers poll that one number to notice changes.
-- postgres/migrations/0006_config_objects.sql is the same schema in
-- PostgreSQL types.

CREATE TABLE config_objects (
	kind       TEXT NOT NULL,
	name       TEXT NOT NULL,
	version    INTEGER NOT NULL,
	spec       TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	created_by TEXT NOT NULL DEFAULT '',
	updated_at INTEGER NOT NULL,
	updated_by TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (kind, name)
);

CREATE TABLE config_generation (
	id         INTEGER PRIMARY KEY CHECK (id = 1),
	generation INTEGER NOT NULL
);
INSERT INTO config_generation (id, generation) VALUES (1, 0);
