package sqlcat

import (
	"context"
	"fmt"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat/factorsql"
)

// accessLock orders every UpdateAccess across processes and servers: an
// access change reads (is there a user yet? is this the last
// administrator? how many failed logins?), decides and writes, and at READ
// COMMITTED two such changes could otherwise both decide on the same
// state. SQLite has a single writer and needs no lock.
const accessLock = "coffer.catalog.access"

// queryFunc runs a read: the backend's outside a transaction, the
// transaction's inside one.
type queryFunc func(ctx context.Context, q string, args ...any) (Rows, error)

// accessReader reads the access-control tables through query.
type accessReader struct {
	c            *Catalog
	query        queryFunc
	factorsql.DB // the second factors
}

// accessTx is an access-control write transaction.
type accessTx struct {
	accessReader
	tx Tx
}

var (
	_ catalog.AccessStore = (*Catalog)(nil)
	_ catalog.AccessTx    = (*accessTx)(nil)
)

func (c *Catalog) reader() accessReader {
	return accessReader{c: c, query: c.b.Query, DB: c.factors(c.b.Query, nil)}
}

// UpdateAccess runs fn in one write transaction under the access lock.
func (c *Catalog) UpdateAccess(ctx context.Context, fn func(catalog.AccessTx) error) error {
	return c.b.Write(ctx, func(tx Tx) error {
		if err := c.d.lock(ctx, tx, accessLock, true); err != nil {
			return err
		}
		return fn(&accessTx{accessReader: accessReader{c: c, query: tx.Query, DB: c.factors(tx.Query, tx)}, tx: tx})
	})
}

// scan runs a read and calls scan for every row.
func (r accessReader) scan(ctx context.Context, q string, args []any, scan func(Rows) error) error {
	rows, err := r.query(ctx, r.c.d.Rebind(q), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// exec runs one statement in the transaction.
func (t *accessTx) exec(ctx context.Context, q string, args ...any) (int64, error) {
	return t.tx.Exec(ctx, t.c.d.Rebind(q), args...)
}

// insert runs an INSERT ... ON CONFLICT DO NOTHING: no row written means
// the key exists. A reference to a missing user is ErrNotFound.
func (t *accessTx) insert(ctx context.Context, what, key, q string, args ...any) error {
	n, err := t.exec(ctx, q+" ON CONFLICT DO NOTHING", args...)
	if err != nil {
		if t.c.d.IsForeignKeyViolation != nil && t.c.d.IsForeignKeyViolation(err) {
			return fmt.Errorf("%w: %s %s refers to a user that does not exist", catalog.ErrNotFound, what, key)
		}
		return fmt.Errorf("catalog: insert %s: %w", what, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %s %s", catalog.ErrConflict, what, key)
	}
	return nil
}

// changed turns "no row changed" into ErrNotFound.
func changed(n int64, err error, what, key string) error {
	if err != nil {
		return fmt.Errorf("catalog: %s: %w", what, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %s %s", catalog.ErrNotFound, what, key)
	}
	return nil
}

const userColumns = `name, password_hash, enabled, created_at, password_changed_at, last_login_at, realm`

func scanUser(r Rows) (catalog.User, error) {
	var u catalog.User
	err := r.Scan(&u.Name, &u.PasswordHash, &u.Enabled, timeDest{&u.CreatedAt}, timeDest{&u.PasswordChangedAt},
		timeDest{&u.LastLoginAt}, &u.Realm)
	return u, err
}

func (r accessReader) listUsers(ctx context.Context, w *where) ([]catalog.User, error) {
	q, args := w.finish("SELECT "+userColumns+" FROM users", "name", 0)
	var out []catalog.User
	err := r.scan(ctx, q, args, func(rows Rows) error {
		u, err := scanUser(rows)
		out = append(out, u)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list users: %w", err)
	}
	return out, nil
}

func (r accessReader) GetUser(ctx context.Context, name string) (catalog.User, error) {
	us, err := r.listUsers(ctx, &where{conds: []string{"name = ?"}, args: []any{name}})
	if err != nil {
		return catalog.User{}, err
	}
	if len(us) == 0 {
		return catalog.User{}, fmt.Errorf("%w: user %s", catalog.ErrNotFound, name)
	}
	return us[0], nil
}

func (r accessReader) ListUsers(ctx context.Context) ([]catalog.User, error) {
	return r.listUsers(ctx, &where{})
}

func (t *accessTx) InsertUser(ctx context.Context, u catalog.User) error {
	return t.insert(ctx, "user", u.Name, `INSERT INTO users (`+userColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		u.Name, u.PasswordHash, u.Enabled, t.c.timeArg(u.CreatedAt), t.c.timeArg(u.PasswordChangedAt),
		t.c.timeArg(u.LastLoginAt), u.Realm)
}

func (t *accessTx) UpdateUser(ctx context.Context, u catalog.User) error {
	n, err := t.exec(ctx, `UPDATE users SET password_hash = ?, enabled = ?, created_at = ?, password_changed_at = ?,
		last_login_at = ?, realm = ? WHERE name = ?`, u.PasswordHash, u.Enabled, t.c.timeArg(u.CreatedAt),
		t.c.timeArg(u.PasswordChangedAt), t.c.timeArg(u.LastLoginAt), u.Realm, u.Name)
	return changed(n, err, "update user", u.Name)
}

func (t *accessTx) DeleteUser(ctx context.Context, name string) error {
	// Tokens, sessions, setup tokens and ACL entries go with the user
	// (ON DELETE CASCADE); the audit log keeps naming it.
	n, err := t.exec(ctx, `DELETE FROM users WHERE name = ?`, name)
	return changed(n, err, "delete user", name)
}

// The methods of AccessReader on the catalog itself read outside any
// write transaction.

func (c *Catalog) GetUser(ctx context.Context, name string) (catalog.User, error) {
	return c.reader().GetUser(ctx, name)
}

func (c *Catalog) ListUsers(ctx context.Context) ([]catalog.User, error) {
	return c.reader().ListUsers(ctx)
}

func (c *Catalog) GetAPIToken(ctx context.Context, id string) (catalog.APIToken, error) {
	return c.reader().GetAPIToken(ctx, id)
}

func (c *Catalog) ListAPITokens(ctx context.Context, user string) ([]catalog.APIToken, error) {
	return c.reader().ListAPITokens(ctx, user)
}

func (c *Catalog) GetSession(ctx context.Context, idSHA256 string) (catalog.Session, error) {
	return c.reader().GetSession(ctx, idSHA256)
}

func (c *Catalog) ListSessions(ctx context.Context, user string) ([]catalog.Session, error) {
	return c.reader().ListSessions(ctx, user)
}

func (c *Catalog) ListACL(ctx context.Context, f catalog.ACLFilter) ([]catalog.ACLEntry, error) {
	return c.reader().ListACL(ctx, f)
}

func (c *Catalog) GetSetupToken(ctx context.Context, secretSHA256 string) (catalog.SetupToken, error) {
	return c.reader().GetSetupToken(ctx, secretSHA256)
}

func (c *Catalog) GetLoginThrottle(ctx context.Context, key string) (catalog.LoginThrottle, error) {
	return c.reader().GetLoginThrottle(ctx, key)
}
