package sqlcat

import (
	"context"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

var _ catalog.Usage = (*Catalog)(nil)

// usageMemory is how long samples are kept: a year draws the trend of
// any repository, and a sample every 15 minutes is 35,000 rows.
const usageMemory = 366 * 24 * time.Hour

// AddUsageSample records a sample and forgets those older than a year.
func (c *Catalog) AddUsageSample(ctx context.Context, s catalog.UsageSample) error {
	if s.Repository == "" || s.At.IsZero() {
		return fmt.Errorf("catalog: a usage sample needs a repository and a time")
	}
	err := c.b.Write(ctx, func(tx Tx) error {
		if _, err := tx.Exec(ctx, c.d.Rebind(`INSERT INTO repository_usage (repository, at, stored_bytes, capacity_bytes)
			VALUES (?, ?, ?, ?) ON CONFLICT (repository, at) DO UPDATE SET stored_bytes = excluded.stored_bytes,
			capacity_bytes = excluded.capacity_bytes`), s.Repository, c.timeArg(s.At), s.StoredBytes, s.CapacityBytes); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, c.d.Rebind(`DELETE FROM repository_usage WHERE repository = ? AND at < ?`),
			s.Repository, c.timeArg(s.At.Add(-usageMemory)))
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: record usage of %s: %w", s.Repository, err)
	}
	return nil
}

// ListUsageSamples lists a repository's samples since a time, oldest
// first.
func (c *Catalog) ListUsageSamples(ctx context.Context, repository string, since time.Time) ([]catalog.UsageSample, error) {
	rows, err := c.b.Query(ctx, c.d.Rebind(`SELECT repository, at, stored_bytes, capacity_bytes FROM repository_usage
		WHERE repository = ? AND at >= ? ORDER BY at`), repository, c.d.BindTime(normTime(since)))
	if err != nil {
		return nil, fmt.Errorf("catalog: read usage of %s: %w", repository, err)
	}
	defer rows.Close()
	var out []catalog.UsageSample
	for rows.Next() {
		var s catalog.UsageSample
		if err := rows.Scan(&s.Repository, timeDest{&s.At}, &s.StoredBytes, &s.CapacityBytes); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
