package sqlcat

import "github.com/coffer-backup/coffer/internal/catalog"

// PruneSteps are PruneHistory's statements, for the test of their plans.
var PruneSteps = pruneSteps

// Pages are the listings by cursor, for the test of their plans.
var Pages = []string{
	"SELECT id FROM jobs WHERE " + jobsAfter + " ORDER BY created_at DESC, id DESC LIMIT 50",
	"SELECT id FROM backup_points WHERE " + pointsAfter + " ORDER BY taken_at DESC, id DESC, repository LIMIT 50",
}

// InventoryPage is a page of the inventory after a cursor, for the test
// of its plan.
var InventoryPage = "SELECT " + vmColumns + " FROM vms WHERE " + vmsAfter + " ORDER BY connection, name, id LIMIT 100"

// PointsQuery is ListBackupPoints' statement for f, for the test of its
// plan.
func (c *Catalog) PointsQuery(f catalog.BackupPointFilter) (string, []any) { return c.pointsQuery(f) }

// NewestOfVMs is NewestBackupPoints' statement on a database with arrays,
// for the test of its generic plan.
var NewestOfVMs = newestOfVMs
