package sqlcat

import (
	"context"
	"fmt"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// ACL entries and login throttles.

func (r accessReader) ListACL(ctx context.Context, f catalog.ACLFilter) ([]catalog.ACLEntry, error) {
	w := &where{}
	if f.User != "" {
		w.add("user_name = ?", f.User)
	}
	if f.Path != "" {
		w.add("path = ?", f.Path)
	}
	q, args := w.finish(`SELECT path, user_name, token_id, role, propagate FROM acl`, "path, user_name, token_id, role", 0)
	var out []catalog.ACLEntry
	err := r.scan(ctx, q, args, func(rows Rows) error {
		var e catalog.ACLEntry
		err := rows.Scan(&e.Path, &e.User, &e.TokenID, &e.Role, &e.Propagate)
		out = append(out, e)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list ACL: %w", err)
	}
	return out, nil
}

func aclKey(e catalog.ACLEntry) string {
	subject := e.User
	if e.TokenID != "" {
		subject += " (API token " + e.TokenID + ")"
	}
	return fmt.Sprintf("%s on %s for %s", e.Role, e.Path, subject)
}

func (t *accessTx) PutACL(ctx context.Context, e catalog.ACLEntry) error {
	if e.Path == "" || e.User == "" || e.Role == "" {
		return fmt.Errorf("catalog: ACL entry without a path, user or role: %+v", e)
	}
	if e.TokenID != "" {
		// A token's entry names its owner, so deleting the user takes
		// it along; an entry naming someone else's token is refused.
		tok, err := t.GetAPIToken(ctx, e.TokenID)
		if err != nil {
			return err
		}
		if tok.User != e.User {
			return fmt.Errorf("%w: API token %s of user %s", catalog.ErrNotFound, e.TokenID, e.User)
		}
	}
	n, err := t.exec(ctx, `INSERT INTO acl (path, user_name, token_id, role, propagate) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (path, user_name, token_id, role) DO UPDATE SET propagate = excluded.propagate`,
		e.Path, e.User, e.TokenID, e.Role, e.Propagate)
	if err != nil && t.c.d.IsForeignKeyViolation != nil && t.c.d.IsForeignKeyViolation(err) {
		return fmt.Errorf("%w: ACL entry %s refers to a user that does not exist", catalog.ErrNotFound, aclKey(e))
	}
	return changed(n, err, "put ACL entry", aclKey(e))
}

func (t *accessTx) DeleteACL(ctx context.Context, e catalog.ACLEntry) error {
	n, err := t.exec(ctx, `DELETE FROM acl WHERE path = ? AND user_name = ? AND token_id = ? AND role = ?`,
		e.Path, e.User, e.TokenID, e.Role)
	return changed(n, err, "delete ACL entry", aclKey(e))
}

func (r accessReader) GetLoginThrottle(ctx context.Context, key string) (catalog.LoginThrottle, error) {
	var out []catalog.LoginThrottle
	err := r.scan(ctx, `SELECT key, failures, last_failure_at, locked_until FROM login_throttle WHERE key = ?`,
		[]any{key}, func(rows Rows) error {
			var l catalog.LoginThrottle
			err := rows.Scan(&l.Key, &l.Failures, timeDest{&l.LastFailureAt}, timeDest{&l.LockedUntil})
			out = append(out, l)
			return err
		})
	if err != nil {
		return catalog.LoginThrottle{}, fmt.Errorf("catalog: get login throttle: %w", err)
	}
	if len(out) == 0 {
		return catalog.LoginThrottle{}, fmt.Errorf("%w: login throttle %s", catalog.ErrNotFound, key)
	}
	return out[0], nil
}

func (t *accessTx) PutLoginThrottle(ctx context.Context, l catalog.LoginThrottle) error {
	_, err := t.exec(ctx, `INSERT INTO login_throttle (key, failures, last_failure_at, locked_until) VALUES (?, ?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET failures = excluded.failures, last_failure_at = excluded.last_failure_at,
			locked_until = excluded.locked_until`,
		l.Key, l.Failures, t.c.timeArg(l.LastFailureAt), t.c.timeArg(l.LockedUntil))
	if err != nil {
		return fmt.Errorf("catalog: put login throttle: %w", err)
	}
	return nil
}

func (t *accessTx) DeleteLoginThrottle(ctx context.Context, key string) error {
	if _, err := t.exec(ctx, `DELETE FROM login_throttle WHERE key = ?`, key); err != nil {
		return fmt.Errorf("catalog: delete login throttle: %w", err)
	}
	return nil
}

// PruneAccess removes what can no longer be used or matter: expired or
// idle sessions, expired setup tokens, throttles long quiet.
func (c *Catalog) PruneAccess(ctx context.Context, p catalog.AccessPrune) (int64, error) {
	var total int64
	err := c.b.Write(ctx, func(tx Tx) error {
		total = 0
		for _, s := range []struct {
			q    string
			args []any
		}{
			{`DELETE FROM sessions WHERE expires_at <= ? OR last_seen_at < ?`,
				[]any{c.timeArg(p.Now), c.timeArg(p.SessionIdleBefore)}},
			{`DELETE FROM setup_tokens WHERE expires_at <= ?`, []any{c.timeArg(p.Now)}},
			{`DELETE FROM login_throttle WHERE last_failure_at < ? AND (locked_until IS NULL OR locked_until < ?)`,
				[]any{c.timeArg(p.ThrottleBefore), c.timeArg(p.ThrottleBefore)}},
		} {
			n, err := tx.Exec(ctx, c.d.Rebind(s.q), s.args...)
			if err != nil {
				return err
			}
			total += n
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("catalog: prune access records: %w", err)
	}
	return total, nil
}
