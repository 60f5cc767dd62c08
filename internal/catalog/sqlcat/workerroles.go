package sqlcat

import (
	"context"
	"errors"
	"fmt"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat/sqlq"
	"regexp"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/scram"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat/workergrants"
)

var _ catalog.WorkerCredentials = (*Catalog)(nil)

// workerRolesLock serialises the changes of the workers' roles: CREATE
// ROLE of two servers at once would otherwise fail on the second.
const workerRolesLock = "coffer.fleet.worker-roles"

// queueMigrationsLock is the lock internal/fleet/queue.Migrate holds
// while it changes River's tables (a session's; a transaction's lock of
// the same key waits for it): a GRANT on tables being altered fails
// ("tuple concurrently updated").
const queueMigrationsLock = "coffer.fleet.river.migrations"

// secretChars are those of a worker's secret (base64url): the password
// goes into a statement as a literal (a utility statement takes no
// parameters), so nothing that could end the literal is accepted.
var secretChars = regexp.MustCompile(`^[A-Za-z0-9_-]{16,}$`)

// ProtectWorkerQueue states the workers' group grants again and the row
// policies of River's job table (workergrants.QueuePolicies), once the group exists:
// by a server once it has migrated River's schema (a credential may have
// been made before River's tables were, or by an older coffer).
func (c *Catalog) ProtectWorkerQueue(ctx context.Context) error {
	if err := c.needsPostgres(); err != nil {
		return err
	}
	return c.b.Write(ctx, func(tx Tx) error {
		for _, key := range []string{workerRolesLock, queueMigrationsLock} {
			if err := c.d.lock(ctx, tx, key, true); err != nil {
				return err
			}
		}
		// A newer coffer may grant its workers more (a column a unit now
		// writes): the group's grants are stated again at every start, so
		// that the tokens made before an upgrade keep working.
		group, _, err := workergrants.RoleExists(ctx, tx, catalog.WorkerGroupRole)
		if err != nil || !group {
			return err
		}
		return workergrants.EnsureGroup(ctx, tx)
	})
}

func (c *Catalog) needsPostgres() error {
	if c.d.Name != "postgres" {
		return catalog.ErrNeedsPostgres
	}
	return nil
}

// SetWorkerCredential creates or re-keys the worker's role (one
// transaction, under an advisory lock).
func (c *Catalog) SetWorkerCredential(ctx context.Context, worker, secret string) error {
	if err := c.needsPostgres(); err != nil {
		return err
	}
	if !secretChars.MatchString(secret) {
		return errors.New("catalog: a worker's secret is base64url, at least 16 characters")
	}
	verifier, err := scram.Verifier(secret)
	if err != nil {
		return err
	}
	role := catalog.WorkerRole(worker)
	err = c.b.Write(ctx, func(tx Tx) error {
		for _, key := range []string{workerRolesLock, migrationsLock, queueMigrationsLock} {
			if err := c.d.lock(ctx, tx, key, true); err != nil {
				return err
			}
		}
		if err := workergrants.EnsureGroup(ctx, tx); err != nil {
			return err
		}
		exists, super, err := workergrants.RoleExists(ctx, tx, role)
		if err != nil {
			return err
		}
		if super {
			return fmt.Errorf("role %s is a superuser: coffer does not change it", role)
		}
		// The attributes are stated in full: a role of that name made by
		// someone else gets nothing more than a worker's.
		attrs := ` LOGIN PASSWORD '` + verifier + `' NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT`
		stmt := `CREATE ROLE ` + workergrants.Ident(role) + attrs
		if exists {
			stmt = `ALTER ROLE ` + workergrants.Ident(role) + attrs
		}
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `GRANT coffer_worker TO `+workergrants.Ident(role))
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: set the credential of worker %s: %w", worker, err)
	}
	return nil
}

// RevokeWorkerCredential cuts the worker off in three steps: its role
// loses LOGIN and its membership of the group (committed first, so that a
// session ended next cannot log in again and one still open can do
// nothing), then its sessions are ended, then its heartbeat expired.
func (c *Catalog) RevokeWorkerCredential(ctx context.Context, worker string) (catalog.Revoked, error) {
	var out catalog.Revoked
	if err := c.needsPostgres(); err != nil {
		return out, err
	}
	role := catalog.WorkerRole(worker)
	err := c.b.Write(ctx, func(tx Tx) error {
		if err := c.d.lock(ctx, tx, workerRolesLock, true); err != nil {
			return err
		}
		exists, super, err := workergrants.RoleExists(ctx, tx, role)
		switch {
		case err != nil:
			return err
		case !exists:
			return fmt.Errorf("%w: worker %s has no credential", catalog.ErrNotFound, worker)
		case super:
			return fmt.Errorf("role %s is a superuser: coffer does not change it", role)
		}
		if _, err := tx.Exec(ctx, `ALTER ROLE `+workergrants.Ident(role)+` NOLOGIN`); err != nil {
			return err
		}
		if member, err := sqlq.Int(ctx, tx, memberOfGroup, role); err != nil || member == 0 {
			return err
		}
		_, err = tx.Exec(ctx, `REVOKE coffer_worker FROM `+workergrants.Ident(role))
		return err
	})
	if err != nil {
		return out, fmt.Errorf("catalog: revoke the credential of worker %s: %w", worker, err)
	}
	out.Sessions, err = c.endSessions(ctx, role)
	if err != nil {
		return out, fmt.Errorf("catalog: end the sessions of worker %s: %w", worker, err)
	}
	err = c.b.Write(ctx, func(tx Tx) error {
		n, err := tx.Exec(ctx, `UPDATE workers SET heartbeat_at = $1 WHERE name = $2 AND state <> $3`,
			c.timeArg(catalog.RevokedHeartbeat), worker, string(catalog.WorkerLost))
		out.Expired = n == 1
		return err
	})
	if err != nil {
		return out, fmt.Errorf("catalog: expire worker %s: %w", worker, err)
	}
	return out, nil
}

// memberOfGroup counts a role's memberships of the group role ($1: the
// role's name).
const memberOfGroup = `SELECT count(*) FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
	JOIN pg_roles r ON r.oid = m.member WHERE g.rolname = 'coffer_worker' AND r.rolname = $1`

// endSessions ends the role's sessions. Their grants are gone already:
// ending them is for the worker to notice at once, not what cuts it off,
// so a server role that may not signal them (no pg_signal_backend)
// leaves them to fail at their next statement.
func (c *Catalog) endSessions(ctx context.Context, role string) (int, error) {
	rows, err := c.b.Query(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = $1`, role)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	if rows.Next() {
		err = rows.Scan(&n)
	}
	if err == nil {
		err = rows.Err()
	}
	if isInsufficientPrivilege(err) {
		return 0, nil
	}
	return n, err
}

// isInsufficientPrivilege recognises PostgreSQL's SQLSTATE 42501.
func isInsufficientPrivilege(err error) bool {
	var coded interface{ SQLState() string }
	return errors.As(err, &coded) && coded.SQLState() == "42501"
}

// WorkerCredentials lists the workers' roles: active when the role may
// log in and is a member of the group.
func (c *Catalog) WorkerCredentials(ctx context.Context) (map[string]catalog.CredentialState, error) {
	if err := c.needsPostgres(); err != nil {
		return nil, err
	}
	out := map[string]catalog.CredentialState{}
	err := c.query(ctx, `SELECT substr(r.rolname, `+fmt.Sprint(len(catalog.WorkerGroupRole)+2)+`), r.rolcanlogin AND EXISTS (
			SELECT 1 FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid WHERE g.rolname = 'coffer_worker' AND m.member = r.oid)
		FROM pg_roles r WHERE r.rolname LIKE 'coffer\_worker\_%' AND NOT r.rolsuper`, nil, func(r Rows) error {
		var name string
		var active bool
		if err := r.Scan(&name, &active); err != nil {
			return err
		}
		out[name] = catalog.CredentialRevoked
		if active {
			out[name] = catalog.CredentialActive
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list the workers' credentials: %w", err)
	}
	return out, nil
}
