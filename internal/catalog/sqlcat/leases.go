package sqlcat

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// claimMemory is how long claims of scheduled runs are kept: far longer
// than any clock skew or takeover, far shorter than the history.
const claimMemory = 7 * 24 * time.Hour

// AcquireLease takes or renews a lease with two conditional statements,
// each atomic on its own: an UPDATE that succeeds only for the holder or
// on an expired lease (PostgreSQL re-checks the condition on a row
// another transaction just changed, so of two takers of an expired lease
// one updates it), then, for a lease nobody has written yet, an INSERT
// that ON CONFLICT leaves an existing row alone.
func (c *Catalog) AcquireLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (catalog.Lease, bool, error) {
	if name == "" || holder == "" || ttl <= 0 {
		return catalog.Lease{}, false, errors.New("catalog: acquire lease: a lease needs a name, a holder and a positive duration")
	}
	now = normTime(now)
	until := normTime(now.Add(ttl))
	var held bool
	err := c.b.Write(ctx, func(tx Tx) error {
		n, err := tx.Exec(ctx, c.d.Rebind(`UPDATE leases SET
			epoch = CASE WHEN holder = ? THEN epoch ELSE epoch + 1 END,
			acquired_at = CASE WHEN holder = ? THEN acquired_at ELSE ? END,
			holder = ?, expires_at = ?
			WHERE name = ? AND (holder = ? OR expires_at <= ?)`),
			holder, holder, c.timeArg(now), holder, c.timeArg(until), name, holder, c.timeArg(now))
		if err != nil {
			return err
		}
		if n == 0 {
			n, err = tx.Exec(ctx, c.d.Rebind(`INSERT INTO leases (name, holder, epoch, acquired_at, expires_at)
				VALUES (?, ?, 1, ?, ?) ON CONFLICT (name) DO NOTHING`), name, holder, c.timeArg(now), c.timeArg(until))
			if err != nil {
				return err
			}
		}
		held = n == 1
		return nil
	})
	if err != nil {
		return catalog.Lease{}, false, fmt.Errorf("catalog: acquire lease %s: %w", name, err)
	}
	l, err := c.GetLease(ctx, name)
	if err != nil {
		return catalog.Lease{}, false, err
	}
	return l, held && l.Holder == holder, nil
}

// GetLease reads the lease name.
func (c *Catalog) GetLease(ctx context.Context, name string) (catalog.Lease, error) {
	rows, err := c.b.Query(ctx, c.d.Rebind(`SELECT name, holder, epoch, acquired_at, expires_at FROM leases WHERE name = ?`), name)
	if err != nil {
		return catalog.Lease{}, fmt.Errorf("catalog: read lease %s: %w", name, err)
	}
	defer rows.Close()
	var l catalog.Lease
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return l, err
		}
		return l, fmt.Errorf("catalog: lease %s: %w", name, catalog.ErrNotFound)
	}
	if err := rows.Scan(&l.Name, &l.Holder, &l.Epoch, timeDest{&l.AcquiredAt}, timeDest{&l.ExpiresAt}); err != nil {
		return l, err
	}
	return l, rows.Err()
}

// ReleaseLease ends holder's lease at once: no holder, expired since
// forever, its epoch kept (a deleted row would start again at 1, and a
// grant of the first holding would pass for one of a later one).
func (c *Catalog) ReleaseLease(ctx context.Context, name, holder string) error {
	err := c.b.Write(ctx, func(tx Tx) error {
		_, err := tx.Exec(ctx, c.d.Rebind(`UPDATE leases SET holder = '', expires_at = ? WHERE name = ? AND holder = ?`),
			c.timeArg(time.Unix(0, 0).UTC()), name, holder)
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: release lease %s: %w", name, err)
	}
	return nil
}

// ClaimRun inserts the run's claim unless one exists: the primary key (schedule, slot) decides.
func (c *Catalog) ClaimRun(ctx context.Context, schedule string, slot time.Time, holder string, now time.Time) (bool, error) {
	var claimed bool
	err := c.b.Write(ctx, func(tx Tx) error {
		n, err := tx.Exec(ctx, c.d.Rebind(`INSERT INTO schedule_runs (schedule, slot, holder, claimed_at)
			VALUES (?, ?, ?, ?) ON CONFLICT (schedule, slot) DO NOTHING`),
			schedule, c.timeArg(slot), holder, c.timeArg(now))
		if err != nil {
			return err
		}
		claimed = n == 1
		if claimed { // each schedule's newest claim stays: LastRun reads it
			_, err = tx.Exec(ctx, c.d.Rebind(`DELETE FROM schedule_runs WHERE claimed_at < ? AND slot < (SELECT MAX(n.slot) FROM schedule_runs n WHERE n.schedule = schedule_runs.schedule)`), c.timeArg(now.Add(-claimMemory)))
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("catalog: claim run of %s at %s: %w", schedule, slot.UTC().Format(time.RFC3339), err)
	}
	return claimed, nil
}

// LastRun reads the newest claimed slot of schedule.
func (c *Catalog) LastRun(ctx context.Context, schedule string) (slot time.Time, found bool, err error) {
	q := `SELECT slot FROM schedule_runs WHERE schedule = ? ORDER BY slot DESC LIMIT 1`
	err = c.query(ctx, q, []any{schedule}, func(r Rows) error { found = true; return r.Scan(timeDest{&slot}) })
	return slot, found, err
}
