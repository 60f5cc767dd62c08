package workergrants

import (
	"context"
	"fmt"
	"strings"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat/registrystate"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat/sqlq"
)

// ProtectQueue states the row policies of River's job table and
// enables them, once the group role and the table exist.
func ProtectQueue(ctx context.Context, tx sqlq.Execer) error {
	group, _, err := RoleExists(ctx, tx, catalog.WorkerGroupRole)
	if err != nil || !group {
		return err
	}
	table := catalog.WorkerQueueSchema + ".river_job"
	present, err := sqlq.Int(ctx, tx, `SELECT count(*) FROM pg_class WHERE oid = to_regclass($1)`, table)
	if err != nil || present == 0 {
		return err
	}
	for name, create := range QueuePolicies {
		n, err := sqlq.Int(ctx, tx, `SELECT count(*) FROM pg_policies WHERE schemaname = $1 AND tablename = 'river_job' AND policyname = $2`,
			catalog.WorkerQueueSchema, name)
		if err != nil {
			return err
		}
		if n == 0 {
			if _, err := tx.Exec(ctx, fmt.Sprintf(create, catalog.WorkerQueueSchema)); err != nil {
				return fmt.Errorf("the workers' policy on River's jobs: %w", err)
			}
		}
	}
	_, err = tx.Exec(ctx, `ALTER TABLE `+table+` ENABLE ROW LEVEL SECURITY`)
	return err
}

// Ident quotes a role name for a statement.
func Ident(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// EnsureGroup creates the group role if missing and states its
// grants and the registry's policies.
func EnsureGroup(ctx context.Context, tx sqlq.Execer) error {
	exists, _, err := RoleExists(ctx, tx, catalog.WorkerGroupRole)
	if err != nil {
		return err
	}
	if !exists {
		if _, err := tx.Exec(ctx, `CREATE ROLE coffer_worker NOLOGIN`); err != nil {
			return err
		}
	}
	schema, err := sqlq.String(ctx, tx, `SELECT quote_ident(current_schema())`)
	if err != nil {
		return err
	}
	for _, g := range append(Grants, registrystate.Statements...) { // and whether another registration is dead
		stmt := g
		if strings.Contains(g, "%[") {
			stmt = fmt.Sprintf(g, schema, catalog.WorkerQueueSchema)
		}
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", strings.Fields(g)[0]+" "+strings.Fields(g)[1], err)
		}
	}
	for name, create := range RegistryPolicies {
		n, err := sqlq.Int(ctx, tx, `SELECT count(*) FROM pg_policies WHERE schemaname = current_schema() AND tablename = 'workers' AND policyname = $1`, name)
		if err != nil {
			return err
		}
		if n == 0 {
			if _, err := tx.Exec(ctx, create); err != nil {
				return err
			}
		}
	}
	return ProtectQueue(ctx, tx)
}

// RoleExists says whether the role exists, and whether it is a superuser.
func RoleExists(ctx context.Context, tx sqlq.Querier, role string) (exists, super bool, err error) {
	rows, err := tx.Query(ctx, `SELECT rolsuper FROM pg_roles WHERE rolname = $1`, role)
	if err != nil {
		return false, false, err
	}
	defer rows.Close()
	if rows.Next() {
		exists = true
		err = rows.Scan(&super)
	}
	if err == nil {
		err = rows.Err()
	}
	return exists, super, err
}
