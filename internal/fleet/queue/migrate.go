package queue

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// migrationsLock is the advisory lock Migrate holds, as the catalog's
// migrations hold theirs (internal/catalog/sqlcat.Migrate): rivermigrate
// takes no lock of its own, and several servers and workers start at
// once.
const migrationsLock = "coffer.fleet.river.migrations"

// Migrate creates River's schema and brings its tables up to this build's
// version under an exclusive advisory lock: the first process to start
// migrates, the others wait for it and then find nothing to do. It
// returns the versions it applied.
//
// The lock is a session's, held on a connection of its own, not a
// transaction's as the catalog's: River's migrations cannot share one
// transaction (version 6 adds a value to an enum that a later statement
// uses, which PostgreSQL allows only once the value is committed), so
// rivermigrate commits each version separately.
func Migrate(ctx context.Context, pool *pgxpool.Pool) (applied []int, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("fleet: migrate River's schema: %w", err)
		}
	}()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended($1, 0))`, migrationsLock); err != nil {
		return nil, err
	}
	defer func() {
		if _, uerr := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, migrationsLock); uerr != nil {
			// A lock we cannot release must not go back to the pool.
			_ = conn.Hijack().Close(context.WithoutCancel(ctx))
		}
	}()
	if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+Schema); err != nil {
		return nil, err
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: Schema})
	if err != nil {
		return nil, err
	}
	res, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return nil, err
	}
	for _, v := range res.Versions {
		applied = append(applied, v.Version)
	}
	return applied, nil
}
