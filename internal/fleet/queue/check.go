package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// ErrSchemaSkew refuses River's schema at a version this build does not
// speak.
var ErrSchemaSkew = errors.New("fleet: River's schema is not at this coffer's version")

// CheckSchema is Migrate for a process that may not migrate (a worker's
// role): it refuses River's schema unless it is exactly this build's
// version, older (the servers, which migrate it at start, have not run
// this version yet) or newer (a newer River migrated it: install the
// servers' version of coffer here).
func CheckSchema(ctx context.Context, pool *pgxpool.Pool) error {
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: Schema})
	if err != nil {
		return err
	}
	existing, err := m.ExistingVersions(ctx)
	if err != nil {
		return fmt.Errorf("fleet: read the version of River's schema: %w", err)
	}
	all := m.AllVersions()
	have, want := 0, all[len(all)-1].Version
	if len(existing) > 0 {
		have = existing[len(existing)-1].Version
	}
	switch {
	case have < want:
		return fmt.Errorf("%w: it is at version %d, this coffer speaks %d: start a server of this version first (servers migrate it)", ErrSchemaSkew, have, want)
	case have > want:
		return fmt.Errorf("%w: it is at version %d, newer than this coffer speaks (%d): install the servers' version of coffer here", ErrSchemaSkew, have, want)
	}
	return nil
}
