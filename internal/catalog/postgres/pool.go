package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// idleInTransactionTimeout is how long PostgreSQL lets one of coffer's
// sessions sit idle inside a transaction before it ends the session,
// rolling the transaction back. coffer's transactions do no work between
// their statements beyond a little CPU, so only a process that stopped
// (frozen by SIGSTOP, a paused VM, a swap storm) ever reaches it. Without
// it such a process keeps its row locks for as long as it stays stopped:
// a leader frozen while appending its job's events holds the job's row,
// every worker recording an event of that job waits on it, their units
// never end, and the next leader, which holds their slots until they end,
// admits nothing.
const idleInTransactionTimeout = "10s"

// PoolConfig is the configuration of a pool of connections to the
// database named by dsn, with coffer's session settings. A setting the
// DSN names itself (idle_in_transaction_session_timeout=...) is kept.
func PoolConfig(dsn string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	params := cfg.ConnConfig.RuntimeParams
	if _, set := params["idle_in_transaction_session_timeout"]; !set {
		params["idle_in_transaction_session_timeout"] = idleInTransactionTimeout
	}
	return cfg, nil
}

// NewPool opens a pool of connections to the database named by dsn, with
// coffer's session settings (PoolConfig).
func NewPool(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, err := PoolConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}
