package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Inspect reads which schema migrations the catalog file at path has
// had, and its leases, changing nothing: no migration, no file created
// (a missing file has had none). `coffer upgrade check` reads it before
// an upgrade.
func Inspect(ctx context.Context, path string) (catalog.Inspection, error) {
	in := catalog.Inspection{Applied: map[int]string{}}
	abs, err := filepath.Abs(path)
	if err != nil {
		return in, err
	}
	if _, err := os.Stat(abs); errors.Is(err, os.ErrNotExist) {
		return in, nil
	}
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: abs}).EscapedPath()+"?mode=ro&_query_only=1&_busy_timeout=5000")
	if err != nil {
		return in, err
	}
	defer func() { _ = db.Close() }()
	rows, err := db.QueryContext(ctx, `SELECT version, name FROM schema_migrations`)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return in, nil
		}
		return in, fmt.Errorf("catalog %s: read the schema version: %w", abs, err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var v int
		var name string
		if err := rows.Scan(&v, &name); err != nil {
			return in, err
		}
		in.Applied[v] = name
	}
	if err := rows.Err(); err != nil {
		return in, err
	}
	leases, err := db.QueryContext(ctx, `SELECT name, holder, epoch, expires_at FROM leases`)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return in, nil // before the schedules' migration
		}
		return in, fmt.Errorf("catalog %s: read the leases: %w", abs, err)
	}
	defer func() { _ = leases.Close() }()
	for leases.Next() {
		var l catalog.Lease
		var until int64
		if err := leases.Scan(&l.Name, &l.Holder, &l.Epoch, &until); err != nil {
			return in, err
		}
		l.ExpiresAt = time.UnixMicro(until).UTC()
		in.Leases = append(in.Leases, l)
	}
	return in, leases.Err()
}
