package catalogopen

import (
	"context"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
)

// Schema is where a catalog's schema stands against this build.
type Schema struct {
	// Applied is the newest migration the database has had; Known, the
	// newest this build knows.
	Applied, Known int
	// Pending are the migrations this build would apply on opening it.
	Pending []sqlcat.Migration
	// Leases are the catalog's leases as they stand.
	Leases []catalog.Lease
}

// ReadSchema reads the schema of the catalog at location without
// changing anything (catalogopen.Open migrates). A schema newer than
// this build's is sqlcat.ErrSchemaTooNew (a catalog.ErrNewerSchema),
// with Applied and Known filled in.
func ReadSchema(ctx context.Context, location string) (Schema, error) {
	var (
		in  catalog.Inspection
		all []sqlcat.Migration
		err error
	)
	if IsPostgres(location) {
		if in, err = postgres.Inspect(ctx, location); err == nil {
			all, err = postgres.Migrations()
		}
	} else {
		if in, err = sqlite.Inspect(ctx, location); err == nil {
			all, err = sqlite.Migrations()
		}
	}
	if err != nil {
		return Schema{}, err
	}
	s := Schema{Known: len(all), Leases: in.Leases}
	for v := range in.Applied {
		s.Applied = max(s.Applied, v)
	}
	s.Pending, err = sqlcat.Pending(all, in.Applied)
	return s, err
}
