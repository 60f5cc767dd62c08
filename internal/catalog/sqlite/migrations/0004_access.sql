-- Schema version 4 (SQLite): access control of the server (internal/auth;
-- docs/design/server.md, "Access control"). No column holds a usable
-- secret: passwords are argon2id PHC strings, API token secrets, session
-- IDs and setup links the hex SHA-256 of the secret. Deleting a user
-- deletes its tokens, sessions, setup links and ACL entries, never its
-- audit records.

CREATE TABLE users (
	name                TEXT PRIMARY KEY,
	password_hash       TEXT NOT NULL DEFAULT '',
	enabled             INTEGER NOT NULL DEFAULT 1,
	created_at          INTEGER NOT NULL,
	password_changed_at INTEGER,
	last_login_at       INTEGER
);

CREATE TABLE api_tokens (
	id            TEXT PRIMARY KEY,
	user_name     TEXT NOT NULL REFERENCES users (name) ON DELETE CASCADE,
	secret_sha256 TEXT NOT NULL,
	comment       TEXT NOT NULL DEFAULT '',
	created_at    INTEGER NOT NULL,
	expires_at    INTEGER NOT NULL,
	last_used_at  INTEGER
);
CREATE INDEX api_tokens_user ON api_tokens (user_name, id);

CREATE TABLE sessions (
	id_sha256    TEXT PRIMARY KEY,
	user_name    TEXT NOT NULL REFERENCES users (name) ON DELETE CASCADE,
	created_at   INTEGER NOT NULL,
	last_seen_at INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL,
	remote_addr  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX sessions_user ON sessions (user_name, created_at);
CREATE INDEX sessions_expiry ON sessions (expires_at);
CREATE INDEX sessions_seen ON sessions (last_seen_at);

-- token_id is '' for the user's own entries.
CREATE TABLE acl (
	path      TEXT NOT NULL,
	user_name TEXT NOT NULL REFERENCES users (name) ON DELETE CASCADE,
	token_id  TEXT NOT NULL DEFAULT '',
	role      TEXT NOT NULL,
	propagate INTEGER NOT NULL DEFAULT 1,
	PRIMARY KEY (path, user_name, token_id, role)
);
CREATE INDEX acl_user ON acl (user_name, token_id);

CREATE TABLE setup_tokens (
	secret_sha256 TEXT PRIMARY KEY,
	user_name     TEXT NOT NULL REFERENCES users (name) ON DELETE CASCADE,
	created_at    INTEGER NOT NULL,
	expires_at    INTEGER NOT NULL
);
CREATE INDEX setup_tokens_user ON setup_tokens (user_name);

-- key is "user:<hex SHA-256 of the name typed>" or "addr:<address>".
CREATE TABLE login_throttle (
	key             TEXT PRIMARY KEY,
	failures        INTEGER NOT NULL,
	last_failure_at INTEGER NOT NULL,
	locked_until    INTEGER
);

CREATE TABLE audit_log (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	occurred_at INTEGER NOT NULL,
	user_name   TEXT NOT NULL DEFAULT '',
	token_id    TEXT NOT NULL DEFAULT '',
	operation   TEXT NOT NULL,
	object_path TEXT NOT NULL DEFAULT '',
	result      TEXT NOT NULL,
	error_class TEXT NOT NULL DEFAULT '',
	remote_addr TEXT NOT NULL DEFAULT '',
	detail      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX audit_time ON audit_log (occurred_at, id);
CREATE INDEX audit_user ON audit_log (user_name, id);
CREATE INDEX audit_object ON audit_log (object_path, id);
