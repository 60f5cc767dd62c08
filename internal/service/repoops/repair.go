package repoops

import (
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/apidoc"

	"context"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repair"
	"github.com/coffer-backup/coffer/internal/store"
)

// Repairs are the repairs Repair knows, in the order verify recommends
// them.
var Repairs = []string{"config", "keys", "index", "packs", "snapshots"}

var repairs = map[string]func(context.Context, *repo.Repository, repair.Options) (*repair.Report, error){
	"config":    metadataRepair((*repo.Repository).RepairConfig),
	"keys":      metadataRepair((*repo.Repository).RepairKeys),
	"index":     repair.Index,
	"packs":     repair.Packs,
	"snapshots": repair.Snapshots,
}

// metadataRepair adapts a repository method that rewrites config or key
// files to the shape of the other repairs.
func metadataRepair(fn func(*repo.Repository, context.Context, bool) ([]string, error)) func(context.Context, *repo.Repository, repair.Options) (*repair.Report, error) {
	return func(ctx context.Context, r *repo.Repository, o repair.Options) (*repair.Report, error) {
		steps, err := fn(r, ctx, o.DryRun)
		if err != nil {
			return nil, err
		}
		return &repair.Report{DryRun: o.DryRun, Steps: steps}, nil
	}
}

// Repair mends what verify found in the default repository, keeping
// everything still readable; with DryRun it only plans.
func (s Ops) Repair(ctx context.Context, in *api.RepairInput) (*api.RepairReport, error) {
	fn, ok := repairs[in.What]
	if !ok {
		return nil, service.Invalidf("no repair %q (config, keys, index, packs, snapshots, undelete)", in.What)
	}
	return service.Run(ctx, s.Service, service.WithDetail(s.RepoJob(job.KindRepair, s.Config.Repository.Location), in.What), func(ctx context.Context, _ service.Job) (*api.RepairReport, error) {
		return service.WithRepo(ctx, s.Service, service.DefaultRepo(), service.NoLease, func(r *repo.Repository) (*api.RepairReport, error) {
			rep, err := fn(ctx, r, repair.Options{DryRun: in.Body.DryRun})
			if err != nil {
				return nil, err
			}
			doc := &api.RepairReport{DryRun: rep.DryRun, Steps: apidoc.NonNil(rep.Steps), Kept: rep.Kept, Dropped: rep.Dropped, AffectedPoints: []api.LostDisk{}}
			for _, a := range rep.Affected {
				doc.AffectedPoints = append(doc.AffectedPoints, api.LostDisk{PointID: a.Snapshot, VM: a.Source, Disk: a.Disk, Spans: a.Spans})
			}
			return doc, nil
		})
	})
}

// Undelete makes locked objects of the default repository that deletes or
// unlocked versions hide current again (versioned storage with object
// lock). It needs no password.
func (s Ops) Undelete(ctx context.Context, _ *api.RepoParam) (*api.UndeleteReport, error) {
	return service.Run(ctx, s.Service, service.WithDetail(s.RepoJob(job.KindRepair, s.Config.Repository.Location), "undelete"), func(ctx context.Context, _ service.Job) (*api.UndeleteReport, error) {
		st, err := s.OpenStore(ctx, s.Config.Repository.Location)
		if err != nil {
			return nil, err
		}
		defer st.Close()
		vs, ok := st.(store.Versioned)
		if !ok {
			return nil, service.Invalidf("%s keeps no versions of objects: there is nothing hidden to bring back", st.Properties().Location)
		}
		rep, err := store.Unhide(ctx, vs, "", time.Now())
		if err != nil {
			return nil, err
		}
		return &api.UndeleteReport{Objects: rep.Objects, DeleteMarkers: rep.Markers, Versions: rep.Versions, Names: apidoc.NonNil(rep.Names)}, nil
	})
}
