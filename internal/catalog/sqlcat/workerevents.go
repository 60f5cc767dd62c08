package sqlcat

import (
	"context"
	"fmt"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// AddWorkerEvents appends events in the transaction that checks the
// worker's registration (asWorker).
func (c *Catalog) AddWorkerEvents(ctx context.Context, name string, epoch int64, events []catalog.Event) error {
	if len(events) == 0 {
		return nil
	}
	now := c.now()
	for i := range events {
		if events[i].Time.IsZero() {
			events[i].Time = now
		}
	}
	var seqs []int64
	err := c.asWorker(ctx, name, epoch, func(tx Tx) (err error) {
		seqs, err = c.appendEvents(ctx, tx, c.d.Rebind(insertEvent), events)
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: add worker %s's events: %w", name, err)
	}
	for i := range events {
		events[i].Seq = seqs[i]
	}
	return nil
}

// SetWorkerTaskProgress updates a running task's byte counts in the
// transaction that checks the worker's registration, as AddWorkerEvents.
func (c *Catalog) SetWorkerTaskProgress(ctx context.Context, name string, epoch int64, taskID int64, read, stored int64) error {
	err := c.asWorker(ctx, name, epoch, func(tx Tx) error {
		_, err := tx.Exec(ctx, c.d.Rebind(`UPDATE tasks SET bytes_read = ?, bytes_stored = ? WHERE id = ? AND status = ?`),
			read, stored, taskID, string(catalog.StatusRunning))
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: record worker %s's progress of task %d: %w", name, taskID, err)
	}
	return nil
}

// asWorker runs write in the transaction that checks the worker's
// registration: a no-op UPDATE of its row (the same statement in both
// dialects) both checks (name, epoch, not lost) and, on PostgreSQL, holds
// the row's lock until commit, so a concurrent DeclareWorkersLost or
// registration waits for the write or finds it refused. A registration
// that no longer holds is an error wrapping catalog.ErrFenced, and write
// does not run.
func (c *Catalog) asWorker(ctx context.Context, name string, epoch int64, write func(Tx) error) error {
	live := true
	err := c.b.Write(ctx, func(tx Tx) error {
		n, err := tx.Exec(ctx, c.d.Rebind(`UPDATE workers SET epoch = epoch WHERE name = ? AND epoch = ? AND state <> ?`),
			name, epoch, string(catalog.WorkerLost))
		if err != nil {
			return err
		}
		if live = n == 1; !live {
			return nil
		}
		return write(tx)
	})
	if err != nil {
		return err
	}
	if !live {
		return c.fenced(ctx, name, epoch)
	}
	return nil
}
