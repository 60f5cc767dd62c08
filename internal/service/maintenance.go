package service

import (
	"context"
	"fmt"
	"log/slog"
	"syscall"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/forget"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/gc"
	"github.com/coffer-backup/coffer/internal/repo/verify"
	"github.com/coffer-backup/coffer/internal/retention"
	"github.com/coffer-backup/coffer/internal/stats"
	"github.com/coffer-backup/coffer/internal/task"
)

// Verify checks the default repository under a verify lease. When it finds
// problems, the report comes back with an integrity error.
func (s *Service) Verify(ctx context.Context, call *api.VerifyInput) (*api.VerifyReport, error) {
	in := call.Body
	if err := checkMemoryBudget(in.MemoryBytes); err != nil {
		return nil, err
	}
	return run(ctx, s, s.namedTask(task.KindVerify, call.Repo), func(ctx context.Context, t Task) (*api.VerifyReport, error) {
		o := verify.Options{ReadData: in.ReadData || in.SubsetPercent > 0 || in.SubsetDen > 0, Progress: &verify.Progress{},
			NoRecord: in.NoRecord, MemoryBudget: int(in.MemoryBytes), SubsetPercent: in.SubsetPercent,
			SubsetNum: in.SubsetNum, SubsetDen: in.SubsetDen}
		return withRepo(ctx, s, namedRepo(call.Repo), verifyLease, func(r *repo.Repository) (*api.VerifyReport, error) {
			t.Progress(Meter{Label: "verify", Done: o.Progress.PacksDone.Load, Total: o.Progress.PacksTotal.Load, Items: true})
			rep, err := verify.Run(ctx, r, o)
			if err != nil {
				return nil, err
			}
			doc := verifyDoc(rep)
			t.Log(slog.LevelInfo, "verified", "packs_read", rep.PacksRead, "packs", rep.Packs, "problems", len(rep.Problems))
			if !rep.OK() {
				s.emitDamage(ctx, s.namedTask(task.KindVerify, call.Repo).Repository, doc)
				return doc, api.Errorf(api.Integrity, "%d problem(s) found", len(rep.Problems))
			}
			return doc, nil
		})
	})
}

func verifyDoc(rep *verify.Report) *api.VerifyReport {
	doc := &api.VerifyReport{Points: rep.Snapshots, Disks: rep.Disks, ChunksReferenced: rep.Chunks, Packs: rep.Packs,
		PacksRead: rep.PacksRead, ChunksRead: rep.ChunksRead, ReadBytes: rep.BytesRead, Problems: []api.Problem{},
		DamagedPoints: []api.DamagedPoint{}, IntactPoints: rep.Intact, Repairs: list(rep.Repairs),
		DamageRecorded: rep.Recorded, Notices: list(rep.Notices)}
	for _, p := range rep.Problems {
		pd := api.Problem{Kind: p.Kind, Object: p.Object, Detail: p.Detail, DataLoss: p.DataLoss, Repair: p.Repair, Affects: []api.Affected{}}
		for _, a := range p.Affects {
			pd.Affects = append(pd.Affects, api.Affected{PointID: a.Snapshot, VM: a.Source, Disk: a.Disk, OffsetBytes: a.Offset, Spans: a.Spans})
		}
		doc.Problems = append(doc.Problems, pd)
	}
	for _, d := range rep.Damaged {
		doc.DamagedPoints = append(doc.DamagedPoints, api.DamagedPoint{PointID: d.Snapshot, VM: d.Source, Disks: list(d.Disks)})
	}
	return doc
}

// Forget removes the backup points of the default repository that no keep
// rule selects, separately for every source, and removes them from the
// catalog too, so that nothing reading the catalog shows a forgotten
// point. Protected and locked points are always kept.
func (s *Service) Forget(ctx context.Context, call *api.ForgetInput) (*api.ForgetResult, error) {
	in := call.Body
	keep := keepPolicy(in.Keep)
	return run(ctx, s, s.namedTask(task.KindForget, call.Repo), func(ctx context.Context, t Task) (*api.ForgetResult, error) {
		if keep.Empty() {
			return nil, invalidf("no keep rule given: use --keep-last, --keep-daily, ... (refusing to forget everything)")
		}
		return withRepo(ctx, s, namedRepo(call.Repo), noLease, func(r *repo.Repository) (*api.ForgetResult, error) {
			groups, ferr := forget.Run(ctx, r, forget.Options{Policy: keep, Name: in.VM, Tags: in.Tags, DryRun: in.DryRun,
				ForgetBootVerified: in.ForgetBootVerified})
			doc := &api.ForgetResult{DryRun: in.DryRun, Sources: forgetDocs(groups)}
			var removed []string
			for _, g := range groups {
				for _, d := range g.Remove {
					removed = append(removed, d.ID)
				}
			}
			if !in.DryRun && len(removed) > 0 {
				t.Log(slog.LevelInfo, "forgot backup points", "count", len(removed))
				doc.CatalogWarning = s.inCatalog(ctx, fmt.Sprintf("forgetting %d backup point(s)", len(removed)), func(ctx context.Context, c catalog.Catalog) error {
					return c.DeleteBackupPoints(ctx, r.Config().ID, removed)
				})
			}
			return doc, ferr
		})
	})
}

// keepPolicy is a request's keep rules as retention applies them.
func keepPolicy(k api.KeepRules) retention.Policy {
	return retention.Policy{Last: k.Last, Hourly: k.Hourly, Daily: k.Daily, Weekly: k.Weekly, Monthly: k.Monthly, Yearly: k.Yearly,
		Within: k.Within()}
}

// keepRules is a retention policy as a request states it (schedules run
// forget with a policy's retention).
func keepRules(p retention.Policy) api.KeepRules {
	return api.KeepRules{Last: p.Last, Hourly: p.Hourly, Daily: p.Daily, Weekly: p.Weekly, Monthly: p.Monthly, Yearly: p.Yearly,
		WithinSeconds: p.Within.Seconds()}
}

// forgetDocs turns forget's verdicts into documents; the points under
// object lock are named with their lock's end.
func forgetDocs(groups []forget.Group) []api.ForgetSource {
	out := []api.ForgetSource{}
	for _, g := range groups {
		src := api.ForgetSource{VM: g.Source.VMName, VMID: g.Source.VMID, Connection: g.Source.Connection, SourceKind: g.Source.Kind,
			Keep: verdicts(g.Keep), Remove: verdicts(g.Remove), Locked: []api.LockedPoint{}}
		for _, l := range g.Locked {
			src.Locked = append(src.Locked, api.LockedPoint{PointID: l.ID, LockedUntil: l.Until})
		}
		out = append(out, src)
	}
	return out
}

func verdicts(ds []retention.Decision) []api.PointVerdict {
	out := []api.PointVerdict{}
	for _, d := range ds {
		out = append(out, api.PointVerdict{PointID: d.ID, Time: d.Time, Protected: d.Protected, Reasons: list(d.Reasons)})
	}
	return out
}

// GC deletes what no backup point needs from the default repository,
// beside running backups (gc takes the maintenance lease itself).
func (s *Service) GC(ctx context.Context, call *api.GCInput) (*api.GCReport, error) {
	in := call.Body
	if err := checkMemoryBudget(in.MemoryBytes); err != nil {
		return nil, err
	}
	return run(ctx, s, s.namedTask(task.KindGC, call.Repo), func(ctx context.Context, t Task) (*api.GCReport, error) {
		return withRepo(ctx, s, namedRepo(call.Repo), noLease, func(r *repo.Repository) (*api.GCReport, error) {
			s.reportTestAndSet(t, r.Store())
			rep, err := gc.Run(ctx, r, gc.Options{DryRun: in.DryRun, MemoryBudget: int(in.MemoryBytes), Wait: in.Wait(), RepackThreshold: in.RepackThreshold})
			if err != nil {
				return nil, err
			}
			return &api.GCReport{DryRun: rep.DryRun, Points: rep.Snapshots, ChunksReferenced: rep.ChunksReferenced,
				ChunksIndexed: rep.ChunksIndexed, PacksPlanned: rep.PacksPlanned, PacksDeleted: rep.PacksDeleted,
				PacksRepacked: rep.PacksRepacked, FreedBytes: rep.BytesFreed, RepackedBytes: rep.BytesRepacked,
				SegmentsMerged: rep.SegmentsMerged, MapsDeleted: rep.MapsDeleted, ChunksRescued: rep.ChunksRescued,
				Deferred: rep.Deferred, WaitingFor: list(rep.WaitingFor), ObjectsLocked: rep.Retained, LeftoversRemoved: rep.Leftovers}, nil
		})
	})
}

// Stats computes the default repository's sizes and ratios (the server
// binds the repository the request names).
func (s *Service) Stats(ctx context.Context, _ *api.RepoParam) (*api.Stats, error) {
	return withRepo(ctx, s, defaultRepo(), noLease, func(r *repo.Repository) (*api.Stats, error) {
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
		return invalidf("the memory budget must be between 0 (the default, 64 MiB) and this machine's memory (%d bytes), not %d bytes", limit, n)
	}
	return nil
}
