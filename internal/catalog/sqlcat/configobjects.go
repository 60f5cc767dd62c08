package sqlcat

import (
	"context"
	"fmt"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// configLock orders every UpdateConfig across processes and servers: a
// change reads every object, checks the whole configuration they make
// with the change and writes it, and at READ COMMITTED two changes (one
// deleting a connection, one creating a policy that uses it) could
// otherwise both pass their checks. SQLite has a single writer.
const configLock = "coffer.catalog.config"

const configColumns = `kind, name, version, spec, created_at, created_by, updated_at, updated_by`

var (
	_ catalog.ConfigObjects = (*Catalog)(nil)
	_ catalog.ConfigTx      = (*configTx)(nil)
)

// configTx is a configuration write transaction.
type configTx struct {
	c  *Catalog
	tx Tx
}

// ConfigGeneration reads the generation of the newest change.
func (c *Catalog) ConfigGeneration(ctx context.Context) (int64, error) {
	gen, err := readGeneration(ctx, c.d, c.b.Query)
	if err != nil {
		return 0, fmt.Errorf("catalog: config generation: %w", err)
	}
	return gen, nil
}

// ListConfigObjects reads the generation, then the objects.
func (c *Catalog) ListConfigObjects(ctx context.Context) ([]catalog.ConfigObject, int64, error) {
	return listConfig(ctx, c.d, c.b.Query)
}

// UpdateConfig runs fn in one write transaction under the config lock.
func (c *Catalog) UpdateConfig(ctx context.Context, fn func(catalog.ConfigTx) error) error {
	return c.b.Write(ctx, func(tx Tx) error {
		if err := c.d.lock(ctx, tx, configLock, true); err != nil {
			return err
		}
		return fn(&configTx{c: c, tx: tx})
	})
}

func readGeneration(ctx context.Context, d Dialect, query queryFunc) (int64, error) {
	rows, err := query(ctx, d.Rebind(`SELECT generation FROM config_generation WHERE id = 1`))
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var gen int64
	if rows.Next() {
		if err := rows.Scan(&gen); err != nil {
			return 0, err
		}
	}
	return gen, rows.Err()
}

// listConfig reads the generation first: objects read after it are at
// least as new, so a reader never takes an older state for a newer one.
func listConfig(ctx context.Context, d Dialect, query queryFunc) ([]catalog.ConfigObject, int64, error) {
	gen, err := readGeneration(ctx, d, query)
	if err != nil {
		return nil, 0, fmt.Errorf("catalog: list config objects: %w", err)
	}
	rows, err := query(ctx, d.Rebind(`SELECT `+configColumns+` FROM config_objects ORDER BY kind, name`))
	if err != nil {
		return nil, 0, fmt.Errorf("catalog: list config objects: %w", err)
	}
	defer rows.Close()
	var out []catalog.ConfigObject
	for rows.Next() {
		o, err := scanConfigObject(rows)
		if err != nil {
			return nil, 0, fmt.Errorf("catalog: list config objects: %w", err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("catalog: list config objects: %w", err)
	}
	return out, gen, nil
}

func scanConfigObject(r Rows) (catalog.ConfigObject, error) {
	var o catalog.ConfigObject
	var spec string
	err := r.Scan(&o.Kind, &o.Name, &o.Version, &spec, timeDest{&o.CreatedAt}, &o.CreatedBy, timeDest{&o.UpdatedAt}, &o.UpdatedBy)
	o.Spec = []byte(spec)
	return o, err
}

func (t *configTx) ListConfigObjects(ctx context.Context) ([]catalog.ConfigObject, int64, error) {
	return listConfig(ctx, t.c.d, t.tx.Query)
}

func (t *configTx) exec(ctx context.Context, q string, args ...any) (int64, error) {
	return t.tx.Exec(ctx, t.c.d.Rebind(q), args...)
}

// next takes the next generation.
func (t *configTx) next(ctx context.Context) (int64, error) {
	if _, err := t.exec(ctx, `UPDATE config_generation SET generation = generation + 1 WHERE id = 1`); err != nil {
		return 0, err
	}
	return readGeneration(ctx, t.c.d, t.tx.Query)
}

// get reads one object in the transaction.
func (t *configTx) get(ctx context.Context, kind, name string) (catalog.ConfigObject, error) {
	rows, err := t.tx.Query(ctx, t.c.d.Rebind(`SELECT `+configColumns+` FROM config_objects WHERE kind = ? AND name = ?`), kind, name)
	if err != nil {
		return catalog.ConfigObject{}, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return catalog.ConfigObject{}, err
		}
		return catalog.ConfigObject{}, fmt.Errorf("%w: %s %s", catalog.ErrNotFound, kind, name)
	}
	return scanConfigObject(rows)
}

// current reads an object that a change is about to replace or delete
// and checks the version the change was made against.
func (t *configTx) current(ctx context.Context, kind, name string, ifVersion int64) (catalog.ConfigObject, error) {
	o, err := t.get(ctx, kind, name)
	if err != nil {
		return o, err
	}
	if ifVersion != 0 && ifVersion != o.Version {
		return o, fmt.Errorf("%w: %s %s is at version %d, not %d", catalog.ErrStale, kind, name, o.Version, ifVersion)
	}
	return o, nil
}

func (t *configTx) CreateConfigObject(ctx context.Context, o catalog.ConfigObject) (catalog.ConfigObject, error) {
	if o.Kind == "" || o.Name == "" || len(o.Spec) == 0 {
		return o, fmt.Errorf("catalog: create config object: kind, name and spec are required")
	}
	gen, err := t.next(ctx)
	if err != nil {
		return o, fmt.Errorf("catalog: create config object: %w", err)
	}
	now := normTime(t.c.now())
	o.Version, o.CreatedAt, o.UpdatedAt, o.UpdatedBy = gen, now, now, o.CreatedBy
	n, err := t.exec(ctx, `INSERT INTO config_objects (`+configColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		o.Kind, o.Name, o.Version, string(o.Spec), t.c.timeArg(now), o.CreatedBy, t.c.timeArg(now), o.UpdatedBy)
	if err != nil {
		return o, fmt.Errorf("catalog: create config object: %w", err)
	}
	if n == 0 {
		return o, fmt.Errorf("%w: %s %s", catalog.ErrConflict, o.Kind, o.Name)
	}
	return o, nil
}

func (t *configTx) UpdateConfigObject(ctx context.Context, o catalog.ConfigObject, ifVersion int64) (catalog.ConfigObject, error) {
	if len(o.Spec) == 0 {
		return o, fmt.Errorf("catalog: update config object: spec is required")
	}
	old, err := t.current(ctx, o.Kind, o.Name, ifVersion)
	if err != nil {
		return o, err
	}
	gen, err := t.next(ctx)
	if err != nil {
		return o, fmt.Errorf("catalog: update config object: %w", err)
	}
	now := normTime(t.c.now())
	o.Version, o.CreatedAt, o.CreatedBy, o.UpdatedAt = gen, old.CreatedAt, old.CreatedBy, now
	if _, err := t.exec(ctx, `UPDATE config_objects SET version = ?, spec = ?, updated_at = ?, updated_by = ? WHERE kind = ? AND name = ?`,
		o.Version, string(o.Spec), t.c.timeArg(now), o.UpdatedBy, o.Kind, o.Name); err != nil {
		return o, fmt.Errorf("catalog: update config object: %w", err)
	}
	return o, nil
}

func (t *configTx) DeleteConfigObject(ctx context.Context, kind, name string, ifVersion int64) (catalog.ConfigObject, error) {
	old, err := t.current(ctx, kind, name, ifVersion)
	if err != nil {
		return old, err
	}
	if _, err := t.next(ctx); err != nil {
		return old, fmt.Errorf("catalog: delete config object: %w", err)
	}
	if _, err := t.exec(ctx, `DELETE FROM config_objects WHERE kind = ? AND name = ?`, kind, name); err != nil {
		return old, fmt.Errorf("catalog: delete config object: %w", err)
	}
	return old, nil
}

func (t *configTx) AppendAudit(ctx context.Context, records []catalog.AuditRecord) error {
	if len(records) == 0 {
		return nil
	}
	rows, err := t.c.auditRows(records)
	if err != nil {
		return fmt.Errorf("catalog: append audit: %w", err)
	}
	if _, err := t.tx.ExecBatch(ctx, t.c.d.Rebind(insertAudit), rows); err != nil {
		return fmt.Errorf("catalog: append audit: %w", err)
	}
	return nil
}
