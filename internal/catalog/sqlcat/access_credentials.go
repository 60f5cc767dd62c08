package sqlcat

import (
	"context"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// API tokens, sessions and setup tokens: the credentials other than
// passwords, each stored as the SHA-256 of its secret.

const tokenColumns = `id, user_name, secret_sha256, comment, created_at, expires_at, last_used_at`

func (r accessReader) listTokens(ctx context.Context, w *where) ([]catalog.APIToken, error) {
	q, args := w.finish("SELECT "+tokenColumns+" FROM api_tokens", "user_name, id", 0)
	var out []catalog.APIToken
	err := r.scan(ctx, q, args, func(rows Rows) error {
		var t catalog.APIToken
		err := rows.Scan(&t.ID, &t.User, &t.SecretSHA256, &t.Comment, timeDest{&t.CreatedAt}, timeDest{&t.ExpiresAt},
			timeDest{&t.LastUsedAt})
		out = append(out, t)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list API tokens: %w", err)
	}
	return out, nil
}

func (r accessReader) GetAPIToken(ctx context.Context, id string) (catalog.APIToken, error) {
	ts, err := r.listTokens(ctx, &where{conds: []string{"id = ?"}, args: []any{id}})
	if err != nil {
		return catalog.APIToken{}, err
	}
	if len(ts) == 0 {
		return catalog.APIToken{}, fmt.Errorf("%w: API token %s", catalog.ErrNotFound, id)
	}
	return ts[0], nil
}

func (r accessReader) ListAPITokens(ctx context.Context, user string) ([]catalog.APIToken, error) {
	w := &where{}
	if user != "" {
		w.add("user_name = ?", user)
	}
	return r.listTokens(ctx, w)
}

func (t *accessTx) InsertAPIToken(ctx context.Context, tok catalog.APIToken) error {
	if tok.ExpiresAt.IsZero() {
		return fmt.Errorf("catalog: API token %s has no expiry", tok.ID)
	}
	return t.insert(ctx, "API token", tok.ID, `INSERT INTO api_tokens (`+tokenColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		tok.ID, tok.User, tok.SecretSHA256, tok.Comment, t.c.timeArg(tok.CreatedAt), t.c.timeArg(tok.ExpiresAt),
		t.c.timeArg(tok.LastUsedAt))
}

func (t *accessTx) DeleteAPIToken(ctx context.Context, id string) error {
	if _, err := t.exec(ctx, `DELETE FROM acl WHERE token_id = ?`, id); err != nil {
		return fmt.Errorf("catalog: delete API token: %w", err)
	}
	n, err := t.exec(ctx, `DELETE FROM api_tokens WHERE id = ?`, id)
	return changed(n, err, "delete API token", id)
}

// TouchAPIToken records a use of the token.
func (c *Catalog) TouchAPIToken(ctx context.Context, id string, at time.Time) error {
	return c.touch(ctx, `UPDATE api_tokens SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)`,
		id, at)
}

// touch moves a last-seen time forward; it is not an access change (no
// decision depends on it), so it takes no lock.
func (c *Catalog) touch(ctx context.Context, q, key string, at time.Time) error {
	q = c.d.Rebind(q)
	err := c.b.Write(ctx, func(tx Tx) error {
		_, err := tx.Exec(ctx, q, c.timeArg(at), key, c.timeArg(at))
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: record use of %s: %w", key, err)
	}
	return nil
}

const sessionColumns = `id_sha256, user_name, created_at, last_seen_at, expires_at, remote_addr, pending, challenge`

func (r accessReader) listSessions(ctx context.Context, w *where) ([]catalog.Session, error) {
	q, args := w.finish("SELECT "+sessionColumns+" FROM sessions", "user_name, created_at, id_sha256", 0)
	var out []catalog.Session
	err := r.scan(ctx, q, args, func(rows Rows) error {
		var s catalog.Session
		err := rows.Scan(&s.IDSHA256, &s.User, timeDest{&s.CreatedAt}, timeDest{&s.LastSeenAt}, timeDest{&s.ExpiresAt},
			&s.RemoteAddr, &s.Pending, &s.Challenge)
		out = append(out, s)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list sessions: %w", err)
	}
	return out, nil
}

func (r accessReader) GetSession(ctx context.Context, idSHA256 string) (catalog.Session, error) {
	ss, err := r.listSessions(ctx, &where{conds: []string{"id_sha256 = ?"}, args: []any{idSHA256}})
	if err != nil {
		return catalog.Session{}, err
	}
	if len(ss) == 0 {
		// The key is a hash, not a secret, but it names nothing useful
		// to a person either: say what it is.
		return catalog.Session{}, fmt.Errorf("%w: session", catalog.ErrNotFound)
	}
	return ss[0], nil
}

func (r accessReader) ListSessions(ctx context.Context, user string) ([]catalog.Session, error) {
	w := &where{}
	if user != "" {
		w.add("user_name = ?", user)
	}
	return r.listSessions(ctx, w)
}

func (t *accessTx) InsertSession(ctx context.Context, s catalog.Session) error {
	return t.insert(ctx, "session of", s.User, `INSERT INTO sessions (`+sessionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		s.IDSHA256, s.User, t.c.timeArg(s.CreatedAt), t.c.timeArg(s.LastSeenAt), t.c.timeArg(s.ExpiresAt), s.RemoteAddr,
		s.Pending, s.Challenge)
}

func (t *accessTx) DeleteSession(ctx context.Context, idSHA256 string) (bool, error) {
	n, err := t.exec(ctx, `DELETE FROM sessions WHERE id_sha256 = ?`, idSHA256)
	if err != nil {
		return false, fmt.Errorf("catalog: delete session: %w", err)
	}
	return n > 0, nil
}

func (t *accessTx) DeleteSessions(ctx context.Context, user, keep string) (int64, error) {
	n, err := t.exec(ctx, `DELETE FROM sessions WHERE user_name = ? AND id_sha256 <> ?`, user, keep)
	if err != nil {
		return 0, fmt.Errorf("catalog: delete sessions of %s: %w", user, err)
	}
	return n, nil
}

// TouchSession records activity in the session.
func (c *Catalog) TouchSession(ctx context.Context, idSHA256 string, at time.Time) error {
	return c.touch(ctx, `UPDATE sessions SET last_seen_at = ? WHERE id_sha256 = ? AND last_seen_at < ?`, idSHA256, at)
}

func (r accessReader) GetSetupToken(ctx context.Context, secretSHA256 string) (catalog.SetupToken, error) {
	var out []catalog.SetupToken
	err := r.scan(ctx, `SELECT secret_sha256, user_name, created_at, expires_at FROM setup_tokens WHERE secret_sha256 = ?`,
		[]any{secretSHA256}, func(rows Rows) error {
			var s catalog.SetupToken
			err := rows.Scan(&s.SecretSHA256, &s.User, timeDest{&s.CreatedAt}, timeDest{&s.ExpiresAt})
			out = append(out, s)
			return err
		})
	if err != nil {
		return catalog.SetupToken{}, fmt.Errorf("catalog: get setup token: %w", err)
	}
	if len(out) == 0 {
		return catalog.SetupToken{}, fmt.Errorf("%w: setup token", catalog.ErrNotFound)
	}
	return out[0], nil
}

func (t *accessTx) InsertSetupToken(ctx context.Context, s catalog.SetupToken) error {
	return t.insert(ctx, "setup token for", s.User, `INSERT INTO setup_tokens (secret_sha256, user_name, created_at, expires_at)
		VALUES (?, ?, ?, ?)`, s.SecretSHA256, s.User, t.c.timeArg(s.CreatedAt), t.c.timeArg(s.ExpiresAt))
}

func (t *accessTx) DeleteSetupToken(ctx context.Context, secretSHA256 string) error {
	n, err := t.exec(ctx, `DELETE FROM setup_tokens WHERE secret_sha256 = ?`, secretSHA256)
	return changed(n, err, "delete", "setup token")
}

func (t *accessTx) DeleteSetupTokens(ctx context.Context, user string) error {
	if _, err := t.exec(ctx, `DELETE FROM setup_tokens WHERE user_name = ?`, user); err != nil {
		return fmt.Errorf("catalog: delete setup tokens of %s: %w", user, err)
	}
	return nil
}
