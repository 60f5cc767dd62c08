package sqlcat

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat/registrystate"
)

// WorkerRegistrationGone implements catalog.RegistrationStates.
func (c *Catalog) WorkerRegistrationGone(ctx context.Context, name string, epoch int64) (bool, error) {
	return registrystate.Gone(ctx, c.d.Name == "postgres", func(ctx context.Context, q string, args ...any) (registrystate.Rows, error) {
		return c.b.Query(ctx, c.d.Rebind(q), args...)
	}, name, epoch)
}

const workerColumns = `name, epoch, host, version, protocol, reach, slots, state, heartbeat_at, registered_at`

func scanWorker(r Rows) (catalog.Worker, error) {
	var w catalog.Worker
	var state string
	err := r.Scan(&w.Name, &w.Epoch, &w.Host, &w.Version, &w.Protocol, jsonDest{&w.Reach}, &w.Slots, &state,
		timeDest{&w.HeartbeatAt}, timeDest{&w.RegisteredAt})
	w.State = catalog.WorkerState(state)
	return w, err
}

// queryWorkers runs a statement returning worker rows inside tx.
func queryWorkers(ctx context.Context, tx Tx, q string, args ...any) ([]catalog.Worker, error) {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []catalog.Worker
	for rows.Next() {
		w, err := scanWorker(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// RegisterWorker upserts the worker's row: ON CONFLICT raises the epoch of
// an existing one in the same statement, so two processes registering one
// name at once get different epochs and the later is the current one.
func (c *Catalog) RegisterWorker(ctx context.Context, w catalog.Worker, now time.Time) (catalog.Worker, error) {
	if w.Name == "" || w.Slots < 1 {
		return catalog.Worker{}, errors.New("catalog: register worker: a worker needs a name and at least one slot")
	}
	reach, err := jsonArg(w.Reach, 1)
	if err != nil {
		return catalog.Worker{}, err
	}
	q := c.d.Rebind(`INSERT INTO workers (` + workerColumns + `) VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET epoch = workers.epoch + 1, host = excluded.host, version = excluded.version,
		protocol = excluded.protocol, reach = excluded.reach, slots = excluded.slots, state = excluded.state,
		heartbeat_at = excluded.heartbeat_at, registered_at = excluded.registered_at
		RETURNING ` + workerColumns)
	var got []catalog.Worker
	err = c.b.Write(ctx, func(tx Tx) error {
		got, err = queryWorkers(ctx, tx, q, w.Name, w.Host, w.Version, w.Protocol, reach, w.Slots,
			string(catalog.WorkerStarting), c.timeArg(now), c.timeArg(now))
		return err
	})
	if err == nil && len(got) != 1 {
		err = fmt.Errorf("the upsert returned %d rows", len(got))
	}
	if err != nil {
		return catalog.Worker{}, fmt.Errorf("catalog: register worker %s: %w", w.Name, err)
	}
	return got[0], nil
}

// HeartbeatWorker renews with one conditional UPDATE: of a heartbeat and
// a declaration of loss racing, PostgreSQL re-checks the loser's
// condition on the row the winner changed, so a worker declared lost
// never renews and a renewed one is not declared lost on a stale reading.
func (c *Catalog) HeartbeatWorker(ctx context.Context, name string, epoch int64, now time.Time) (catalog.Worker, error) {
	q := c.d.Rebind(`UPDATE workers SET heartbeat_at = ? WHERE name = ? AND epoch = ? AND state <> ?
		RETURNING ` + workerColumns)
	var got []catalog.Worker
	err := c.b.Write(ctx, func(tx Tx) error {
		var err error
		got, err = queryWorkers(ctx, tx, q, c.timeArg(now), name, epoch, string(catalog.WorkerLost))
		return err
	})
	if err != nil {
		return catalog.Worker{}, fmt.Errorf("catalog: heartbeat of worker %s: %w", name, err)
	}
	if len(got) == 0 {
		return catalog.Worker{}, c.fenced(ctx, name, epoch)
	}
	return got[0], nil
}

// fenced says why a worker's change found no row to change.
// Fenced is the error of a write refused by worker name's registration
// at epoch (catalog.ErrFenced), for a driver's own fenced writes.
func (c *Catalog) Fenced(ctx context.Context, name string, epoch int64) error {
	return c.fenced(ctx, name, epoch)
}

func (c *Catalog) fenced(ctx context.Context, name string, epoch int64) error {
	w, err := c.getWorker(ctx, name)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return fmt.Errorf("%w: worker %s is not registered", catalog.ErrFenced, name)
	case err != nil:
		return err
	case w.State == catalog.WorkerLost:
		return fmt.Errorf("%w: worker %s (epoch %d) was declared lost", catalog.ErrFenced, name, w.Epoch)
	default:
		return fmt.Errorf("%w: worker %s registered again (epoch %d, this process holds %d)", catalog.ErrFenced, name, w.Epoch, epoch)
	}
}

func (c *Catalog) getWorker(ctx context.Context, name string) (catalog.Worker, error) {
	var out []catalog.Worker
	err := c.query(ctx, `SELECT `+workerColumns+` FROM workers WHERE name = ?`, []any{name}, func(r Rows) error {
		w, err := scanWorker(r)
		out = append(out, w)
		return err
	})
	if err != nil {
		return catalog.Worker{}, fmt.Errorf("catalog: read worker %s: %w", name, err)
	}
	if len(out) == 0 {
		return catalog.Worker{}, fmt.Errorf("%w: no worker %s", catalog.ErrNotFound, name)
	}
	return out[0], nil
}

// earlierStates are the states a worker may move to state from: forward
// only, so that a worker's own "ready" never undoes an operator's drain.
var earlierStates = map[catalog.WorkerState][]string{
	catalog.WorkerStarting: {"starting"},
	catalog.WorkerReady:    {"starting", "ready"},
	catalog.WorkerDraining: {"starting", "ready", "draining"},
}

// SetWorkerState moves a worker forward with one conditional UPDATE; when
// it changes nothing, the row says whether the worker is fenced, missing,
// or already further on.
func (c *Catalog) SetWorkerState(ctx context.Context, name string, epoch int64, state catalog.WorkerState) (catalog.Worker, error) {
	from, ok := earlierStates[state]
	if !ok {
		return catalog.Worker{}, fmt.Errorf("catalog: a worker cannot be set %q", state)
	}
	q := `UPDATE workers SET state = ? WHERE name = ? AND state IN (?, ?, ?)`
	args := []any{string(state), name}
	for i := range 3 { // the list repeats its last state: one statement for every target
		args = append(args, from[min(i, len(from)-1)])
	}
	if epoch != 0 {
		q += ` AND epoch = ?`
		args = append(args, epoch)
	}
	q = c.d.Rebind(q + ` RETURNING ` + workerColumns)
	var got []catalog.Worker
	err := c.b.Write(ctx, func(tx Tx) error {
		var err error
		got, err = queryWorkers(ctx, tx, q, args...)
		return err
	})
	if err != nil {
		return catalog.Worker{}, fmt.Errorf("catalog: set worker %s %s: %w", name, state, err)
	}
	if len(got) == 1 {
		return got[0], nil
	}
	w, err := c.getWorker(ctx, name)
	if err != nil {
		return catalog.Worker{}, err
	}
	if w.State == catalog.WorkerLost || (epoch != 0 && w.Epoch != epoch) {
		return catalog.Worker{}, c.fenced(ctx, name, epoch)
	}
	return w, nil // already further on
}

// DeregisterWorker deletes the worker's row, fenced by its epoch.
func (c *Catalog) DeregisterWorker(ctx context.Context, name string, epoch int64) error {
	var n int64
	err := c.b.Write(ctx, func(tx Tx) error {
		var err error
		n, err = tx.Exec(ctx, c.d.Rebind(`DELETE FROM workers WHERE name = ? AND epoch = ? AND state <> ?`),
			name, epoch, string(catalog.WorkerLost))
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: deregister worker %s: %w", name, err)
	}
	if n == 0 {
		return c.fenced(ctx, name, epoch)
	}
	return nil
}

// ListWorkers lists the registry by name.
func (c *Catalog) ListWorkers(ctx context.Context) ([]catalog.Worker, error) {
	var out []catalog.Worker
	err := c.query(ctx, `SELECT `+workerColumns+` FROM workers ORDER BY name`, nil, func(r Rows) error {
		w, err := scanWorker(r)
		out = append(out, w)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list workers: %w", err)
	}
	return out, nil
}

// DeclareWorkersLost is one UPDATE ... RETURNING: a row another server
// marked lost first no longer matches "state <> lost" when PostgreSQL
// re-checks it, so it is returned to that server only.
func (c *Catalog) DeclareWorkersLost(ctx context.Context, cutoff time.Time) ([]catalog.Worker, error) {
	q := c.d.Rebind(`UPDATE workers SET state = ? WHERE state <> ? AND heartbeat_at < ? RETURNING ` + workerColumns)
	var got []catalog.Worker
	err := c.b.Write(ctx, func(tx Tx) error {
		var err error
		got, err = queryWorkers(ctx, tx, q, string(catalog.WorkerLost), string(catalog.WorkerLost), c.timeArg(cutoff))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: declare workers lost: %w", err)
	}
	return got, nil
}
