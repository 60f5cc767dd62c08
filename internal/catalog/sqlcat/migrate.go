package sqlcat

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Migration is one schema change. Migrations are numbered from 1 without
// gaps, never edited once released, and applied in order, each exactly
// once per database; the schema_migrations table records which ran.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

var migrationFile = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.sql$`)

// LoadMigrations reads dir of fsys: files named NNNN_name.sql.
func LoadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		m := migrationFile.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration file %q is not named NNNN_name.sql", e.Name())
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		v, _ := strconv.Atoi(m[1])
		out = append(out, Migration{Version: v, Name: m[2], SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migrations must be numbered 1, 2, 3... without gaps or duplicates; found %04d_%s at position %d", m.Version, m.Name, i+1)
		}
	}
	return out, nil
}

// ErrSchemaTooNew means the database was migrated by a newer coffer.
type ErrSchemaTooNew struct{ Database, Known int }

func (e ErrSchemaTooNew) Error() string {
	return fmt.Sprintf("catalog schema version %d is newer than this coffer knows (%d): upgrade coffer", e.Database, e.Known)
}

// Is makes it a catalog.ErrNewerSchema (its class: unsupported-version).
func (e ErrSchemaTooNew) Is(target error) bool { return target == catalog.ErrNewerSchema }

// Pending compares the applied versions with the known migrations: those
// still to apply, or ErrSchemaTooNew.
func Pending(all []Migration, applied map[int]string) ([]Migration, error) {
	for v, name := range applied {
		if v > len(all) {
			return nil, ErrSchemaTooNew{Database: maxKey(applied), Known: len(all)}
		}
		if v < 1 {
			return nil, fmt.Errorf("catalog migration table holds an invalid version %d", v)
		}
		if all[v-1].Name != name {
			return nil, fmt.Errorf("catalog migration %d is recorded as %q but this coffer calls it %q: the database was migrated by a different build", v, name, all[v-1].Name)
		}
	}
	var out []Migration
	for _, m := range all {
		if _, ok := applied[m.Version]; !ok {
			out = append(out, m)
		}
	}
	return out, nil
}

func maxKey(m map[int]string) int {
	n := 0
	for k := range m {
		n = max(n, k)
	}
	return n
}

const migrationsLock = "coffer.catalog.migrations"

// Migrate applies pending migrations in one write transaction, under an
// exclusive lock so that several processes opening a new database at once
// apply each migration once. It returns the schema version.
func Migrate(ctx context.Context, b Backend, all []Migration) (int, error) {
	return MigrateAfter(ctx, b, all, nil)
}

// BeforeMigrate runs when a database that already holds a schema is to
// be migrated, from its version to the newest: inside the migration's
// transaction and under its lock (so once, by the process that migrates),
// before any change. An error leaves the database as it was.
type BeforeMigrate func(ctx context.Context, from, to int) error

// MigrateAfter is Migrate, with before run ahead of the migrations (the
// server's export of its state before an upgrade changes the catalog).
func MigrateAfter(ctx context.Context, b Backend, all []Migration, before BeforeMigrate) (int, error) {
	d := b.Dialect()
	err := b.Write(ctx, func(tx Tx) error {
		if err := d.lock(ctx, tx, migrationsLock, true); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT version, name FROM schema_migrations`)
		if err != nil {
			return err
		}
		applied := map[int]string{}
		for rows.Next() {
			var v int
			var name string
			if err := rows.Scan(&v, &name); err != nil {
				rows.Close()
				return err
			}
			applied[v] = name
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		todo, err := Pending(all, applied)
		if err != nil {
			return err
		}
		if len(todo) > 0 && len(applied) > 0 && before != nil {
			if err := before(ctx, maxKey(applied), len(all)); err != nil {
				return fmt.Errorf("before migrating from schema version %d to %d: %w", maxKey(applied), len(all), err)
			}
		}
		for _, m := range todo {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
			}
			if _, err := tx.Exec(ctx, d.Rebind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`),
				m.Version, m.Name, time.Now().UTC().Format(time.RFC3339)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("catalog: migrate: %w", err)
	}
	return len(all), nil
}

// SchemaVersion reads the highest applied migration.
func SchemaVersion(ctx context.Context, b Backend) (int, error) {
	rows, err := b.Query(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	v := 0
	if rows.Next() {
		if err := rows.Scan(&v); err != nil {
			return 0, err
		}
	}
	return v, rows.Err()
}
