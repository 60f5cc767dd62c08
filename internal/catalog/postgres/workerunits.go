package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coffer-backup/coffer/internal/catalog/sqlcat"
)

// StartTaskTx records within tx, the transaction of a grant that also
// inserts its River job, that attempt of task starts (sqlcat.StartTaskTx).
func StartTaskTx(ctx context.Context, tx pgx.Tx, jobID, taskID int64, attempt int, started time.Time) error {
	return sqlcat.StartTaskTx(ctx, (&backend{}).Dialect(), pgTx{tx}, jobID, taskID, attempt, started)
}

// EndWorkerUnitTx records within tx, a worker's transaction that also
// completes the unit's River job, the task's end and its point, fenced by
// the worker's epoch (sqlcat.EndWorkerUnitTx).
func EndWorkerUnitTx(ctx context.Context, tx pgx.Tx, e sqlcat.UnitEnd) error {
	return sqlcat.EndWorkerUnitTx(ctx, (&backend{}).Dialect(), pgTx{tx}, e)
}
