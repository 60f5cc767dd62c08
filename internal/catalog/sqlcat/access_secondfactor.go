package sqlcat

import (
	"context"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat/factorsql"
)

// factors is where the second factors are read and written (package
// factorsql): through query, and in a transaction through tx.
func (c *Catalog) factors(query queryFunc, tx Tx) factorsql.DB {
	db := factorsql.DB{
		Query: func(ctx context.Context, q string, args ...any) (factorsql.Rows, error) {
			return query(ctx, c.d.Rebind(q), args...)
		},
		Time:                  c.timeArg,
		ScanTime:              func(p *time.Time) any { return timeDest{p} },
		IsForeignKeyViolation: c.d.IsForeignKeyViolation,
	}
	if tx != nil {
		db.Exec = func(ctx context.Context, q string, args ...any) (int64, error) {
			return tx.Exec(ctx, c.d.Rebind(q), args...)
		}
	}
	return db
}

func (c *Catalog) GetTOTP(ctx context.Context, user string) (catalog.TOTPSecret, error) {
	return c.reader().GetTOTP(ctx, user)
}

func (c *Catalog) ListRecoveryCodes(ctx context.Context, user string) ([]catalog.RecoveryCode, error) {
	return c.reader().ListRecoveryCodes(ctx, user)
}

func (c *Catalog) ListWebAuthnCredentials(ctx context.Context, user string) ([]catalog.WebAuthnCredential, error) {
	return c.reader().ListWebAuthnCredentials(ctx, user)
}
