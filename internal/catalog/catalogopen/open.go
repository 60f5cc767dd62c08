// Package catalogopen maps a catalog location to its driver. It is the one
// place that knows every driver (an explicit registry), kept out of
// package catalog so that the drivers can import catalog.
package catalogopen

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
)

// Open opens the catalog at location and migrates its schema:
//   - postgres://... or postgresql://... : a PostgreSQL database;
//   - ":memory:" : a private in-memory SQLite catalog;
//   - anything else without "://" : a SQLite file, created if missing.
func Open(ctx context.Context, location string) (catalog.Catalog, error) {
	return OpenWith(ctx, location, nil)
}

// OpenWith is Open, with before run ahead of a migration of a catalog
// that holds a schema.
func OpenWith(ctx context.Context, location string, before catalog.BeforeMigrate) (catalog.Catalog, error) {
	switch {
	case location == "":
		return nil, fmt.Errorf("catalog: no location given")
	case strings.HasPrefix(location, "postgres://"), strings.HasPrefix(location, "postgresql://"):
		return postgres.Open(ctx, location, postgres.Options{BeforeMigrate: before})
	case strings.Contains(location, "://"):
		return nil, fmt.Errorf("catalog: unsupported location %q (a SQLite file path or a postgres:// DSN)", Redact(location))
	}
	return sqlite.Open(ctx, location, sqlite.Options{BeforeMigrate: before})
}

// DefaultLocation is the SQLite file used when none is configured:
// /var/lib/coffer/catalog.db for root (a system service), otherwise
// $XDG_STATE_HOME/coffer/catalog.db, by default
// ~/.local/state/coffer/catalog.db. The catalog is state, not
// configuration and not a cache: it holds history that cannot be
// recreated (jobs, events), even though backup points can be.
func DefaultLocation() string {
	if os.Geteuid() == 0 {
		return "/var/lib/coffer/catalog.db"
	}
	if x := os.Getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "coffer", "catalog.db")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "coffer", "catalog.db")
	}
	return "catalog.db"
}

// Redact hides the password of a DSN for messages.
func Redact(location string) string {
	i := strings.Index(location, "://")
	if i < 0 {
		return location
	}
	rest := location[i+3:]
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return location
	}
	if c := strings.Index(rest[:at], ":"); c >= 0 {
		return location[:i+3] + rest[:c] + ":xxxxx" + rest[at:]
	}
	return location
}
