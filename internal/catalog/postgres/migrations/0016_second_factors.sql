-- Schema version 16 (PostgreSQL): sqlite/migrations/0016_second_factors.sql
-- in native types (TIMESTAMPTZ; names in the "C" collation). No column
-- holds a usable secret: TOTP seeds are sealed with the server's key,
-- recovery codes stored as their SHA-256, WebAuthn credentials are public
-- keys.

CREATE TABLE second_factors (
	user_name     TEXT COLLATE "C" PRIMARY KEY REFERENCES users (name) ON DELETE CASCADE,
	sealed_secret TEXT NOT NULL,
	created_at    TIMESTAMPTZ NOT NULL,
	confirmed_at  TIMESTAMPTZ,
	last_step     BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE recovery_codes (
	user_name   TEXT COLLATE "C" NOT NULL REFERENCES users (name) ON DELETE CASCADE,
	code_sha256 TEXT COLLATE "C" NOT NULL,
	created_at  TIMESTAMPTZ NOT NULL,
	used_at     TIMESTAMPTZ,
	PRIMARY KEY (user_name, code_sha256)
);

CREATE TABLE webauthn_credentials (
	id           TEXT COLLATE "C" PRIMARY KEY,
	user_name    TEXT COLLATE "C" NOT NULL REFERENCES users (name) ON DELETE CASCADE,
	name         TEXT NOT NULL DEFAULT '',
	credential   TEXT NOT NULL,
	created_at   TIMESTAMPTZ NOT NULL,
	last_used_at TIMESTAMPTZ
);
CREATE INDEX webauthn_credentials_user ON webauthn_credentials (user_name, created_at);

ALTER TABLE sessions ADD COLUMN pending TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN challenge TEXT NOT NULL DEFAULT '';
