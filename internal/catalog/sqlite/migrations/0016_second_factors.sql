-- Schema version 16 (SQLite): second factors of local users (internal/auth,
-- docs/access.md "A second factor"). No column holds a usable secret:
-- a TOTP seed is sealed (AES-256-GCM) with the server's key, kept in its
-- state directory and never in the catalog; a recovery code is stored as
-- the hex SHA-256 of the code; a WebAuthn credential holds a public key.
-- Deleting a user deletes its factors.
--
-- second_factors holds a user's TOTP seed; confirmed_at is NULL while the
-- enrolment waits for its first code, and last_step is the last time step
-- whose code was accepted, so that a code is never accepted twice.

CREATE TABLE second_factors (
	user_name     TEXT PRIMARY KEY REFERENCES users (name) ON DELETE CASCADE,
	sealed_secret TEXT NOT NULL,
	created_at    INTEGER NOT NULL,
	confirmed_at  INTEGER,
	last_step     INTEGER NOT NULL DEFAULT 0
);

-- A recovery code is used at most once: used_at is set when it is.
CREATE TABLE recovery_codes (
	user_name   TEXT NOT NULL REFERENCES users (name) ON DELETE CASCADE,
	code_sha256 TEXT NOT NULL,
	created_at  INTEGER NOT NULL,
	used_at     INTEGER,
	PRIMARY KEY (user_name, code_sha256)
);

-- id is the credential ID (base64url); credential the JSON of the
-- go-webauthn credential (public key, signature count, flags).
CREATE TABLE webauthn_credentials (
	id           TEXT PRIMARY KEY,
	user_name    TEXT NOT NULL REFERENCES users (name) ON DELETE CASCADE,
	name         TEXT NOT NULL DEFAULT '',
	credential   TEXT NOT NULL,
	created_at   INTEGER NOT NULL,
	last_used_at INTEGER
);
CREATE INDEX webauthn_credentials_user ON webauthn_credentials (user_name, created_at);

-- pending is what a session still lacks before it is a full one: '' (it
-- is), 'second-factor' (the password was right, the second step is to
-- come) or 'enrolment' (a role that must use a second factor, and none
-- yet). challenge is the WebAuthn ceremony under way in the session.
ALTER TABLE sessions ADD COLUMN pending TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN challenge TEXT NOT NULL DEFAULT '';
