package repoops

import (
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/apidoc"

	"context"
	"fmt"
	"log/slog"
	"syscall"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/forget"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/gc"
	"github.com/coffer-backup/coffer/internal/repo/verify"
	"github.com/coffer-backup/coffer/internal/stats"
)

// Verify checks the default repository under a verify lease. When it finds
// problems, the report comes back with an integrity error.
func (s Ops) Verify(ctx context.Context, call *api.VerifyInput) (*api.VerifyReport, error) {
	in := call.Body
	if err := checkMemoryBudget(in.MemoryBytes); err != nil {
		return nil, err
	}
	return service.Run(ctx, s.Service, s.NamedJob(job.KindVerify, call.Repo), func(ctx context.Context, t service.Job) (*api.VerifyReport, error) {
		o := verify.Options{ReadData: in.ReadData || in.SubsetPercent > 0 || in.SubsetDen > 0, Progress: &verify.Progress{},
			NoRecord: in.NoRecord, MemoryBudget: int(in.MemoryBytes), SubsetPercent: in.SubsetPercent,
			SubsetNum: in.SubsetNum, SubsetDen: in.SubsetDen}
		return service.WithRepo(ctx, s.Service, service.NamedRepo(call.Repo), service.VerifyLease, func(r *repo.Repository) (*api.VerifyReport, error) {
			t.Progress(service.Meter{Label: "verify", Done: o.Progress.PacksDone.Load, Total: o.Progress.PacksTotal.Load, Items: true})
			rep, err := verify.Run(ctx, r, o)
			if err != nil {
				return nil, err
			}
			doc := verifyDoc(rep)
			t.Log(slog.LevelInfo, "verified", "packs_read", rep.PacksRead, "packs", rep.Packs, "problems", len(rep.Problems))
			if !rep.OK() {
				s.EmitDamage(ctx, s.NamedJob(job.KindVerify, call.Repo).Repository, doc)
				return doc, api.Errorf(api.Integrity, "%d problem(s) found", len(rep.Problems))
			}
			return doc, nil
		})
	})
}

func verifyDoc(rep *verify.Report) *api.VerifyReport {
	doc := &api.VerifyReport{Points: rep.Snapshots, Disks: rep.Disks, ChunksReferenced: rep.Chunks, Packs: rep.Packs,
		PacksRead: rep.PacksRead, ChunksRead: rep.ChunksRead, ReadBytes: rep.BytesRead, Problems: []api.Problem{},
		DamagedPoints: []api.DamagedPoint{}, IntactPoints: rep.Intact, Repairs: apidoc.NonNil(rep.Repairs),
		DamageRecorded: rep.Recorded, Notices: apidoc.NonNil(rep.Notices)}
	for _, p := range rep.Problems {
		pd := api.Problem{Kind: p.Kind, Object: p.Object, Detail: p.Detail, DataLoss: p.DataLoss, Repair: p.Repair, Affects: []api.Affected{}}
		for _, a := range p.Affects {
			pd.Affects = append(pd.Affects, api.Affected{PointID: a.Snapshot, VM: a.Source, Disk: a.Disk, OffsetBytes: a.Offset, Spans: a.Spans})
		}
		doc.Problems = append(doc.Problems, pd)
	}
	for _, d := range rep.Damaged {
		doc.DamagedPoints = append(doc.DamagedPoints, api.DamagedPoint{PointID: d.Snapshot, VM: d.Source, Disks: apidoc.NonNil(d.Disks)})
	}
	return doc
}

// Forget removes the backup points of the default repository that no keep
// rule selects, separately for every source, and removes them from the
// catalog too, so that nothing reading the catalog shows a forgotten
// point. Protected and locked points are always kept.
func (s Ops) Forget(ctx context.Context, call *api.ForgetInput) (*api.ForgetResult, error) {
	in := call.Body
	keep := apidoc.KeepPolicy(in.Keep)
	return service.Run(ctx, s.Service, s.NamedJob(job.KindForget, call.Repo), func(ctx context.Context, t service.Job) (*api.ForgetResult, error) {
		if keep.Empty() {
			return nil, service.Invalidf("no keep rule given: use --keep-last, --keep-daily, ... (refusing to forget everything)")
		}
		return service.WithRepo(ctx, s.Service, service.NamedRepo(call.Repo), service.NoLease, func(r *repo.Repository) (*api.ForgetResult, error) {
			groups, ferr := forget.Run(ctx, r, forget.Options{Policy: keep, Name: in.VM, Tags: in.Tags, DryRun: in.DryRun,
				ForgetBootVerified: in.ForgetBootVerified})
			doc := &api.ForgetResult{DryRun: in.DryRun, Sources: apidoc.ForgetDocs(groups)}
			var removed []string
			for _, g := range groups {
				for _, d := range g.Remove {
					removed = append(removed, d.ID)
				}
			}
			if !in.DryRun && len(removed) > 0 {
				t.Log(slog.LevelInfo, "forgot backup points", "count", len(removed))
				doc.CatalogWarning = s.InCatalog(ctx, fmt.Sprintf("forgetting %d backup point(s)", len(removed)), func(ctx context.Context, c catalog.Catalog) error {
					return c.DeleteBackupPoints(ctx, r.Config().ID, removed)
				})
			}
			return doc, ferr
		})
	})
}

// GC deletes what no backup point needs from the default repository,
// beside running backups (gc takes the maintenance lease itself).
func (s Ops) GC(ctx context.Context, call *api.GCInput) (*api.GCReport, error) {
	in := call.Body
	if err := checkMemoryBudget(in.MemoryBytes); err != nil {
		return nil, err
	}
	return service.Run(ctx, s.Service, s.NamedJob(job.KindGC, call.Repo), func(ctx context.Context, t service.Job) (*api.GCReport, error) {
		return service.WithRepo(ctx, s.Service, service.NamedRepo(call.Repo), service.NoLease, func(r *repo.Repository) (*api.GCReport, error) {
			s.ReportTestAndSet(t, r.Store())
			rep, err := gc.Run(ctx, r, gc.Options{DryRun: in.DryRun, MemoryBudget: int(in.MemoryBytes), Wait: in.Wait(), RepackThreshold: in.RepackThreshold})
			if err != nil {
				return nil, err
			}
			return &api.GCReport{DryRun: rep.DryRun, Points: rep.Snapshots, ChunksReferenced: rep.ChunksReferenced,
				ChunksIndexed: rep.ChunksIndexed, PacksPlanned: rep.PacksPlanned, PacksDeleted: rep.PacksDeleted,
				PacksRepacked: rep.PacksRepacked, FreedBytes: rep.BytesFreed, RepackedBytes: rep.BytesRepacked,
				SegmentsMerged: rep.SegmentsMerged, MapsDeleted: rep.MapsDeleted, ChunksRescued: rep.ChunksRescued,
				Deferred: rep.Deferred, WaitingFor: apidoc.NonNil(rep.WaitingFor), ObjectsLocked: rep.Retained, LeftoversRemoved: rep.Leftovers}, nil
		})
	})
}

// Stats computes the default repository's sizes and ratios (the server
// binds the repository the request names).
func (s Ops) Stats(ctx context.Context, _ *api.RepoParam) (*api.Stats, error) {
	return service.WithRepo(ctx, s.Service, service.DefaultRepo(), service.NoLease, func(r *repo.Repository) (*api.Stats, error) {
		st, err := stats.Compute(ctx, r)
		if err != nil {
			return nil, err
		}
		return &api.Stats{Points: st.Snapshots, Disks: st.Disks, LogicalBytes: st.Logical, DataBytes: st.Data, UniqueBytes: st.Unique,
			Chunks: st.Chunks, ChunkBytes: st.Sealed, StoredBytes: st.Stored, PackBytes: st.PackBytes, Packs: st.Packs,
			IndexSegments: st.Segments, Objects: st.Objects, DedupRatio: st.Dedup, CompressionRatio: st.Compression, TotalRatio: st.Total}, nil
	})
}

// maxMemoryBudget bounds --memory: the external sorts map their buffer at
// the budget, and a budget no machine has fails deep inside them.
const maxMemoryBudget = 1 << 40

// checkMemoryBudget refuses a sort budget beyond this machine's memory or
// maxMemoryBudget (0 is the default).
func checkMemoryBudget(n int64) error {
	limit := int64(maxMemoryBudget)
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) == nil && si.Totalram > 0 {
		limit = min(limit, int64(si.Totalram)*int64(si.Unit))
	}
	if n < 0 || n > limit {
		return service.Invalidf("the memory budget must be between 0 (the default, 64 MiB) and this machine's memory (%d bytes), not %d bytes", limit, n)
	}
	return nil
}
