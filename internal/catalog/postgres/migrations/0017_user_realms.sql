-- Schema version 17, the same in both dialects: the sign-in realm a user
-- belongs to (internal/auth, docs/guide-realms.md). '' is coffer's own
-- users, who sign in with a password stored here; any other value names a
-- realm of the configuration file (LDAP, Active Directory or OpenID
-- Connect) that checks the user's credentials, and such a user has no
-- password here. A user belongs to one realm: the name stays unique.
ALTER TABLE users ADD COLUMN realm TEXT NOT NULL DEFAULT '';
