package sqlcat

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat/sqlq"
)

// Catalog is catalog.Catalog over a Backend.
type Catalog struct {
	b   Backend
	d   Dialect
	now func() time.Time
}

var _ catalog.Catalog = (*Catalog)(nil)

// New wraps a backend whose schema is migrated.
func New(b Backend) *Catalog {
	return &Catalog{b: b, d: b.Dialect(), now: time.Now}
}

// Backend returns the driver underneath (for driver-specific tests).
func (c *Catalog) Backend() Backend { return c.b }

// Close closes the backend.
func (c *Catalog) Close() error { return c.b.Close() }

// query runs a read and calls scan for every row.
func (c *Catalog) query(ctx context.Context, q string, args []any, scan func(Rows) error) error {
	return sqlq.Each(ctx, c.b, c.d.Rebind(q), args, scan)
}

// missingRef turns a foreign-key violation into catalog.ErrNotFound.
func (c *Catalog) missingRef(err error, what string) error {
	if err != nil && c.d.IsForeignKeyViolation != nil && c.d.IsForeignKeyViolation(err) {
		return fmt.Errorf("%w: %s refers to a job or task that does not exist", catalog.ErrNotFound, what)
	}
	return err
}

// where collects the conditions of a filter.
type where struct {
	conds []string
	args  []any
}

func (w *where) add(cond string, args ...any) {
	w.conds = append(w.conds, cond)
	w.args = append(w.args, args...)
}

// finish appends the conditions, the ordering and the limit to q.
func (w *where) finish(q, order string, limit int) (string, []any) {
	if len(w.conds) > 0 {
		q += " WHERE " + strings.Join(w.conds, " AND ")
	}
	q += " ORDER BY " + order
	if limit > 0 {
		q += " LIMIT ?"
		w.args = append(w.args, limit)
	}
	return q, w.args
}
