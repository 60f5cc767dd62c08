// Package factorsql stores the second factors of local users (TOTP seeds,
// recovery codes, WebAuthn credentials) and the state of a session's
// second step, in SQL that SQLite and PostgreSQL both accept. It is
// sqlcat's, apart so that sqlcat stays a size one can hold in one's head:
// sqlcat's access readers and transactions embed a DB.
package factorsql

import (
	"context"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat/sqlq"
)

// Rows is a result set (sqlcat.Rows).
type Rows = sqlq.Rows

// DB is where the statements run: a catalog's reads, or an access
// transaction (Exec set), with the dialect's bindings.
type DB struct {
	// Query and Exec run a statement with ? placeholders, rebound for the
	// database.
	Query func(ctx context.Context, q string, args ...any) (Rows, error)
	Exec  func(ctx context.Context, q string, args ...any) (int64, error)
	// Time binds a timestamp (the zero time as NULL); ScanTime is a
	// destination that scans one into p (NULL as the zero time).
	Time     func(time.Time) any
	ScanTime func(p *time.Time) any
	// IsForeignKeyViolation recognises a reference to a missing user.
	IsForeignKeyViolation func(error) bool
}

func (r DB) scan(ctx context.Context, q string, args []any, scan func(Rows) error) error {
	return sqlq.Each(ctx, sqlq.QueryFunc(r.Query), q, args, scan)
}

// insert runs an INSERT ... ON CONFLICT DO NOTHING: no row written means
// the key exists. A reference to a missing user is ErrNotFound.
func (t DB) insert(ctx context.Context, what, key, q string, args ...any) error {
	n, err := t.Exec(ctx, q+" ON CONFLICT DO NOTHING", args...)
	switch {
	case err != nil && t.fkViolation(err):
		return fmt.Errorf("%w: %s %s refers to a user that does not exist", catalog.ErrNotFound, what, key)
	case err != nil:
		return fmt.Errorf("catalog: insert %s: %w", what, err)
	case n == 0:
		return fmt.Errorf("%w: %s %s", catalog.ErrConflict, what, key)
	}
	return nil
}

func (t DB) fkViolation(err error) bool {
	return t.IsForeignKeyViolation != nil && t.IsForeignKeyViolation(err)
}

func (r DB) GetTOTP(ctx context.Context, user string) (catalog.TOTPSecret, error) {
	var out []catalog.TOTPSecret
	err := r.scan(ctx, `SELECT user_name, sealed_secret, created_at, confirmed_at, last_step FROM second_factors WHERE user_name = ?`,
		[]any{user}, func(rows Rows) error {
			var s catalog.TOTPSecret
			err := rows.Scan(&s.User, &s.Sealed, r.ScanTime(&s.CreatedAt), r.ScanTime(&s.ConfirmedAt), &s.LastStep)
			out = append(out, s)
			return err
		})
	if err != nil {
		return catalog.TOTPSecret{}, fmt.Errorf("catalog: get TOTP of %s: %w", user, err)
	}
	if len(out) == 0 {
		return catalog.TOTPSecret{}, fmt.Errorf("%w: TOTP of %s", catalog.ErrNotFound, user)
	}
	return out[0], nil
}

func (r DB) ListRecoveryCodes(ctx context.Context, user string) ([]catalog.RecoveryCode, error) {
	var out []catalog.RecoveryCode
	err := r.scan(ctx, `SELECT user_name, code_sha256, created_at, used_at FROM recovery_codes WHERE user_name = ?
		ORDER BY code_sha256`, []any{user}, func(rows Rows) error {
		var c catalog.RecoveryCode
		err := rows.Scan(&c.User, &c.CodeSHA256, r.ScanTime(&c.CreatedAt), r.ScanTime(&c.UsedAt))
		out = append(out, c)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list recovery codes of %s: %w", user, err)
	}
	return out, nil
}

func (r DB) ListWebAuthnCredentials(ctx context.Context, user string) ([]catalog.WebAuthnCredential, error) {
	var out []catalog.WebAuthnCredential
	err := r.scan(ctx, `SELECT id, user_name, name, credential, created_at, last_used_at FROM webauthn_credentials
		WHERE user_name = ? ORDER BY created_at, id`, []any{user}, func(rows Rows) error {
		var c catalog.WebAuthnCredential
		var cred string
		err := rows.Scan(&c.ID, &c.User, &c.Name, &cred, r.ScanTime(&c.CreatedAt), r.ScanTime(&c.LastUsedAt))
		c.Credential = []byte(cred)
		out = append(out, c)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list WebAuthn credentials of %s: %w", user, err)
	}
	return out, nil
}

func (t DB) PutTOTP(ctx context.Context, s catalog.TOTPSecret) error {
	_, err := t.Exec(ctx, `INSERT INTO second_factors (user_name, sealed_secret, created_at, confirmed_at, last_step)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (user_name) DO UPDATE SET sealed_secret = excluded.sealed_secret,
		created_at = excluded.created_at, confirmed_at = excluded.confirmed_at, last_step = excluded.last_step`,
		s.User, s.Sealed, t.Time(s.CreatedAt), t.Time(s.ConfirmedAt), s.LastStep)
	if err != nil {
		if t.fkViolation(err) {
			return fmt.Errorf("%w: TOTP of %s refers to a user that does not exist", catalog.ErrNotFound, s.User)
		}
		return fmt.Errorf("catalog: put TOTP of %s: %w", s.User, err)
	}
	return nil
}

func (t DB) DeleteTOTP(ctx context.Context, user string) (bool, error) {
	n, err := t.Exec(ctx, `DELETE FROM second_factors WHERE user_name = ?`, user)
	if err != nil {
		return false, fmt.Errorf("catalog: delete TOTP of %s: %w", user, err)
	}
	return n > 0, nil
}

func (t DB) ReplaceRecoveryCodes(ctx context.Context, user string, codes []catalog.RecoveryCode) error {
	if _, err := t.Exec(ctx, `DELETE FROM recovery_codes WHERE user_name = ?`, user); err != nil {
		return fmt.Errorf("catalog: replace recovery codes of %s: %w", user, err)
	}
	for _, c := range codes {
		if c.User != user {
			return fmt.Errorf("catalog: a recovery code of %s among those of %s", c.User, user)
		}
		err := t.insert(ctx, "recovery code of", user, `INSERT INTO recovery_codes (user_name, code_sha256, created_at, used_at)
			VALUES (?, ?, ?, ?)`, c.User, c.CodeSHA256, t.Time(c.CreatedAt), t.Time(c.UsedAt))
		if err != nil {
			return err
		}
	}
	return nil
}

func (t DB) UseRecoveryCode(ctx context.Context, user, codeSHA256 string, at time.Time) (bool, error) {
	n, err := t.Exec(ctx, `UPDATE recovery_codes SET used_at = ? WHERE user_name = ? AND code_sha256 = ? AND used_at IS NULL`,
		t.Time(at), user, codeSHA256)
	if err != nil {
		return false, fmt.Errorf("catalog: use a recovery code of %s: %w", user, err)
	}
	return n > 0, nil
}

func (t DB) InsertWebAuthnCredential(ctx context.Context, c catalog.WebAuthnCredential) error {
	return t.insert(ctx, "WebAuthn credential", c.ID, `INSERT INTO webauthn_credentials (id, user_name, name, credential,
		created_at, last_used_at) VALUES (?, ?, ?, ?, ?, ?)`, c.ID, c.User, c.Name, string(c.Credential),
		t.Time(c.CreatedAt), t.Time(c.LastUsedAt))
}

func (t DB) UpdateWebAuthnCredential(ctx context.Context, c catalog.WebAuthnCredential) error {
	n, err := t.Exec(ctx, `UPDATE webauthn_credentials SET credential = ?, last_used_at = ? WHERE id = ? AND user_name = ?`,
		string(c.Credential), t.Time(c.LastUsedAt), c.ID, c.User)
	return changed(n, err, "update WebAuthn credential "+c.ID)
}

func (t DB) DeleteWebAuthnCredential(ctx context.Context, user, id string) (bool, error) {
	n, err := t.Exec(ctx, `DELETE FROM webauthn_credentials WHERE user_name = ? AND id = ?`, user, id)
	if err != nil {
		return false, fmt.Errorf("catalog: delete WebAuthn credential %s: %w", id, err)
	}
	return n > 0, nil
}

func (t DB) SetSessionState(ctx context.Context, idSHA256, pending, challenge string) error {
	n, err := t.Exec(ctx, `UPDATE sessions SET pending = ?, challenge = ? WHERE id_sha256 = ?`, pending, challenge, idSHA256)
	return changed(n, err, "update session")
}

// changed turns "no row changed" into ErrNotFound.
func changed(n int64, err error, what string) error {
	if err != nil {
		return fmt.Errorf("catalog: %s: %w", what, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %s", catalog.ErrNotFound, what)
	}
	return nil
}
