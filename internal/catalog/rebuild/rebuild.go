// Package rebuild recreates a catalog's backup points from a repository,
// which is the source of truth: every manifest is a point, and a point
// without a manifest no longer exists.
package rebuild

import (
	"context"
	"fmt"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
)

// Skipped is a manifest that could not be read (damaged, or written by a
// newer coffer); it is left out of the catalog and reported.
type Skipped struct {
	ID  string `json:"id"`
	Err string `json:"error"`
}

// Result describes a rebuild.
type Result struct {
	Repository string    `json:"repository"` // repository ID
	Points     int       `json:"points"`
	Skipped    []Skipped `json:"skipped,omitempty"`
}

// Rebuild replaces the catalog's backup points of r with one point per
// manifest, atomically. Unreadable manifests are skipped and listed in the
// result. Any other error (the storage failing mid-listing, say) aborts
// the rebuild before the catalog is touched: a partial listing must never
// make points disappear from the catalog.
func Rebuild(ctx context.Context, cat catalog.Catalog, r *repo.Repository) (Result, error) {
	res := Result{Repository: r.Config().ID}
	snaps, err := r.Points(ctx, func(x id.ID, err error) {
		res.Skipped = append(res.Skipped, Skipped{ID: x.String(), Err: err.Error()})
	})
	if err != nil {
		return res, fmt.Errorf("rebuild catalog: list snapshots: %w", err)
	}
	points := make([]catalog.BackupPoint, len(snaps))
	for i, s := range snaps {
		points[i] = PointFromSnapshot(res.Repository, s)
	}
	if err := cat.ReplaceBackupPoints(ctx, res.Repository, points); err != nil {
		return res, fmt.Errorf("rebuild catalog: %w", err)
	}
	res.Points = len(points)
	return res, nil
}

// PointFromSnapshot is the catalog's record of a manifest of the
// repository whose ID is repositoryID.
func PointFromSnapshot(repositoryID string, s *repo.Point) catalog.BackupPoint {
	return catalog.BackupPoint{
		Repository:           repositoryID,
		ID:                   s.ID.String(),
		Time:                 s.Time,
		Connection:           s.Source.Connection,
		VMID:                 s.Source.VMID,
		VMName:               s.Source.VMName,
		Mode:                 s.Mode,
		Parent:               s.Parent,
		Disks:                len(s.Disks),
		BytesLogical:         s.Logical(),
		BytesStored:          s.BytesStored,
		Tags:                 s.Tags,
		Protected:            s.Protected,
		JobID:                s.JobID,
		SnapshotMode:         s.SnapshotMode,
		SnapshotModeAchieved: s.SnapshotModeAchieved, Hooks: s.Hooks,
	}
}

// Record adds (or refreshes) the point of one snapshot of r, for example
// right after a backup committed it, or after its protection changed.
func Record(ctx context.Context, cat catalog.Catalog, r *repo.Repository, s *repo.Point) error {
	return cat.PutBackupPoints(ctx, []catalog.BackupPoint{PointFromSnapshot(r.Config().ID, s)})
}
