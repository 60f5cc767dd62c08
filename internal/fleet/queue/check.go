package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// ErrSchemaSkew refuses River's schema at a version this build does not
// speak.
var ErrSchemaSkew = errors.New("fleet: River's schema is not at this coffer's version")

// errSchemaOlder is ErrSchemaSkew for a schema older than this build's:
// a server of this version migrates it at its start.
var errSchemaOlder = fmt.Errorf("%w (older)", ErrSchemaSkew)

// CheckSchema is Migrate for a process that may not migrate (a worker's
// role): it refuses River's schema unless it is exactly this build's
// version, older (the servers, which migrate it at start, have not run
// this version yet) or newer (a newer River migrated it: install the
// servers' version of coffer here).
func CheckSchema(ctx context.Context, pool *pgxpool.Pool) error {
	driver := riverpgxv5.New(pool)
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: Schema})
	if err != nil {
		return err
	}
	all := m.AllVersions()
	have, want := 0, all[len(all)-1].Version
	existing, err := m.ExistingVersions(ctx)
	switch {
	case err != nil:
		// A version this build's bundle lacks (a newer River migrated
		// it) fails ExistingVersions: read the versions applied as they
		// are.
		applied, lerr := driver.GetExecutor().MigrationGetByLine(ctx, &riverdriver.MigrationGetByLineParams{Line: riverdriver.MigrationLineMain, Schema: Schema})
		if lerr != nil {
			return fmt.Errorf("fleet: read the version of River's schema: %w", err)
		}
		for _, a := range applied {
			have = max(have, a.Version)
		}
		if have <= want {
			return fmt.Errorf("fleet: read the version of River's schema: %w", err)
		}
	case len(existing) > 0:
		have = existing[len(existing)-1].Version
	}
	switch {
	case have < want:
		return fmt.Errorf("%w: it is at version %d, this coffer speaks %d: start a server of this version first (servers migrate it)", errSchemaOlder, have, want)
	case have > want:
		return fmt.Errorf("%w: it is at version %d, newer than this coffer speaks (%d): install the servers' version of coffer here", ErrSchemaSkew, have, want)
	}
	return nil
}

// schemaPoll is how often WaitSchema reads the schema's version again.
const schemaPoll = time.Second

// WaitSchema is CheckSchema for a process that may start before the
// servers of its version (a rolling start, a supervisor starting
// everything at once): a schema older than this build's is waited for,
// up to within, while a server of this version migrates it; one newer
// is refused at once (version skew: this build will never speak it).
// What it waits for is logged once, with the versions.
func WaitSchema(ctx context.Context, pool *pgxpool.Pool, within time.Duration, log *slog.Logger) error {
	deadline := time.Now().Add(within)
	logged := false
	for {
		err := CheckSchema(ctx, pool)
		if !errors.Is(err, errSchemaOlder) || !time.Now().Before(deadline) {
			if err == nil && logged {
				log.Info("River's schema is at this coffer's version: the wait is over")
			}
			return err
		}
		if !logged {
			logged = true
			log.Warn("River's schema is older than this coffer's: waiting for a server of this version to migrate it",
				"up_to", within.String(), "why", err.Error())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(schemaPoll, time.Until(deadline))):
		}
	}
}
