package repoops

import (
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/apidoc"

	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/rebuild"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
)

// Points lists the backup points of the repository the caller may see:
// all of them with Repo.Audit on the repository, else those of the VMs it
// holds it on.
func (s Ops) Points(ctx context.Context, in *api.ListPointsInput) ([]api.BackupPoint, error) {
	points, _, err := s.RepositoryPoints(ctx, in)
	if err != nil {
		return nil, err
	}
	return service.Visible(ctx, s.Service, auth.RepoAudit, points, func(p api.BackupPoint) []string {
		return auth.PointPaths(s.BoundRepo, p.Connection, p.VM)
	}), nil
}

// RepositoryPoints lists the backup points of the default repository,
// oldest first, straight from the repository, with the damage each still
// carries. Manifests that cannot be read are returned apart, as skipped:
// the command line names them, which the API's listing has no place for.
// in.VM keeps the points of this source name only; in.Point this point
// only (an ID, a unique prefix, latest): one manifest is read instead of
// every one (a point's page at scale).
func (s Ops) RepositoryPoints(ctx context.Context, in *api.ListPointsInput) ([]api.BackupPoint, []api.SkippedPoint, error) {
	r, release, err := s.Open(ctx, service.DefaultRepo(), service.NoLease)
	if err != nil {
		return nil, nil, err
	}
	defer release()
	skipped := []api.SkippedPoint{}
	var snaps []*repo.Point
	if in.Point != "" {
		snap, err := r.FindPoint(ctx, in.Point)
		if err != nil {
			return nil, nil, err
		}
		snaps = []*repo.Point{snap}
	} else if snaps, err = r.Points(ctx, func(x id.ID, err error) {
		skipped = append(skipped, api.SkippedPoint{PointID: x.String(), Error: err.Error()})
	}); err != nil {
		return nil, nil, err
	}
	damage, err := pointDamage(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	boots := service.BootSummaries(ctx, r, s.Logger())
	out := []api.BackupPoint{}
	for _, snap := range snaps {
		if in.VM == "" || snap.Source.VMName == in.VM {
			p := apidoc.PointDoc(r.Config().ID, snap)
			p.Damage = damageOf(snap, damage)
			p.BootVerification = boots[snap.ID.String()]
			out = append(out, p)
		}
	}
	return out, skipped, nil
}

// pointDamage says which points still lack chunks that verify recorded as
// lost (keyed by short ID). It costs one index lookup per recorded chunk:
// the damage record is small.
func pointDamage(ctx context.Context, r *repo.Repository) (map[string]string, error) {
	lost, err := r.DamagedPoints(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for p, chunks := range lost {
		out[p] = fmt.Sprintf("%d chunk(s) lost", len(chunks))
	}
	return out, nil
}

// damageOf adds to what verify recorded the spans a repair marked lost.
func damageOf(s *repo.Point, recorded map[string]string) string {
	parts := []string{}
	if d := recorded[s.ID.Short()]; d != "" {
		parts = append(parts, d)
	}
	var spans int64
	for _, d := range s.Disks {
		spans += d.LostSpans
	}
	if spans > 0 {
		parts = append(parts, fmt.Sprintf("%d span(s) lost (repaired)", spans))
	}
	return strings.Join(parts, ", ")
}

// catalogPointsQuery selects points recorded in the catalog.
type catalogPointsQuery struct {
	// VM matches a VM name or a VM ID ("": all).
	VM string
	// Repository is a repository ID ("": all).
	Repository string
	// Limit is the most points returned, newest first (0: all).
	Limit int
	// After continues a listing after this point (the last of the
	// previous page).
	After catalog.PointCursor
}

// catalogPoints lists backup points from the catalog alone, newest first,
// without opening any repository.
func (s Ops) catalogPoints(ctx context.Context, in catalogPointsQuery) ([]api.BackupPoint, error) {
	c, err := s.OpenCatalog(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	points, err := listPoints(ctx, c, catalog.BackupPointFilter{Repository: in.Repository, Limit: in.Limit, After: in.After}, in.VM)
	if err != nil {
		return nil, err
	}
	out := make([]api.BackupPoint, 0, len(points))
	for _, p := range points {
		out = append(out, apidoc.CatalogPointDoc(p))
	}
	return out, nil
}

// listPoints applies the filter, with vm matching a name or an ID.
func listPoints(ctx context.Context, c catalog.Catalog, f catalog.BackupPointFilter, vm string) ([]catalog.BackupPoint, error) {
	if vm == "" {
		return c.ListBackupPoints(ctx, f)
	}
	byName, byID := f, f
	byName.VMName, byID.VMID = vm, vm
	a, err := c.ListBackupPoints(ctx, byName)
	if err != nil {
		return nil, err
	}
	b, err := c.ListBackupPoints(ctx, byID)
	if err != nil {
		return nil, err
	}
	all := append(a, b...)
	slices.SortFunc(all, func(x, y catalog.BackupPoint) int { // the catalog's order
		return cmp.Or(y.Time.Compare(x.Time), cmp.Compare(y.ID, x.ID), cmp.Compare(x.Repository, y.Repository))
	})
	all = slices.CompactFunc(all, func(x, y catalog.BackupPoint) bool { return x.Repository == y.Repository && x.ID == y.ID })
	if f.Limit > 0 && len(all) > f.Limit {
		all = all[:f.Limit]
	}
	return all, nil
}

// RebuildCatalog replaces the catalog's backup points of the default
// repository with one per manifest, in one transaction. Damaged manifests
// are skipped and listed: the document comes back with an integrity error.
func (s Ops) RebuildCatalog(ctx context.Context, _ *api.RepoParam) (*api.CatalogRebuild, error) {
	return service.WithRepo(ctx, s.Service, service.DefaultRepo(), service.NoLease, func(r *repo.Repository) (*api.CatalogRebuild, error) {
		c, err := s.OpenCatalog(ctx)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		res, err := rebuild.Rebuild(ctx, c, r)
		if err != nil {
			return nil, err
		}
		doc := &api.CatalogRebuild{Repository: res.Repository, Points: res.Points, Skipped: []api.SkippedPoint{}}
		for _, sk := range res.Skipped {
			doc.Skipped = append(doc.Skipped, api.SkippedPoint{PointID: sk.ID, Error: sk.Err})
		}
		if len(doc.Skipped) > 0 {
			return doc, api.Errorf(api.Integrity, "%d damaged snapshot manifest(s) skipped", len(doc.Skipped))
		}
		return doc, nil
	})
}

// Protect protects backup points from forget and retention (or removes
// the protection), in the repository and in the catalog.
func (s Ops) Protect(ctx context.Context, call *api.ProtectInput) ([]api.ProtectResult, error) {
	in := call.Body
	return service.WithRepo(ctx, s.Service, service.DefaultRepo(), service.NoLease, func(r *repo.Repository) ([]api.ProtectResult, error) {
		out := []api.ProtectResult{}
		for _, ref := range in.Points {
			snap, err := r.FindPoint(ctx, ref)
			if err != nil {
				return out, err
			}
			snap.Protected = !in.Remove
			if err := r.UpdatePoint(ctx, snap); err != nil {
				return out, err
			}
			res := api.ProtectResult{PointID: snap.ID.String(), Protected: snap.Protected}
			res.CatalogWarning = s.RecordPoint(ctx, r, snap)
			out = append(out, res)
		}
		return out, nil
	})
}
