package gc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/extsort"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/diskmap"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

// planner carries the state of phase B. Everything in it that grows with
// the repository is a cursor over a sorted file.
type planner struct {
	ctx     context.Context
	r       *repo.Repository
	o       Options
	rep     *Report
	live    map[string]bool  // session prefixes of live leases
	refs    *extsort.Cursor  // sorted unique referenced chunk IDs
	segs    []*index.Segment // the segments the plan reads
	entries *extsort.Cursor  // every index entry, by pack and offset (entryRec)
	packs   *extsort.Cursor  // every indexed pack and its action (packRec)
	doomed  *extsort.Cursor  // packs to delete, ascending
	maps    *extsort.Cursor  // orphan disk maps, ascending
}

func (p *planner) close() {
	for _, c := range []*extsort.Cursor{p.refs, p.entries, p.packs, p.doomed, p.maps} {
		if c != nil {
			c.Close()
		}
	}
}

func plan(ctx context.Context, r *repo.Repository, o Options, rep *Report, ownLease string) error {
	if bad := r.DamagedIndexSegments(); len(bad) > 0 {
		// A damaged segment's entries are invisible: packs only it lists
		// would look unindexed and be collected as orphans.
		return fmt.Errorf("%w: damaged index segments (%s); run `coffer repair index` first", errAbort, strings.Join(bad, ", "))
	}
	p := &planner{ctx: ctx, r: r, o: o, rep: rep, live: map[string]bool{}}
	defer p.close()
	pf := &planFile{ID: newPlanID(), MarkTime: time.Now().UTC()}
	leases, err := r.Leases(ctx)
	if err != nil {
		return err
	}
	host := hostname()
	for _, l := range leases {
		if l.Name != ownLease && !l.Dead(time.Now(), host) && l.Session != "" {
			p.live[l.Session] = true
		}
	}
	snaps, err := p.snapshots(pf)
	if err != nil {
		return err
	}
	used, err := usedMaps(snaps, o)
	if err != nil {
		return err
	}
	orphans, err := orphanMaps(ctx, r, o, used, p.live)
	used.Close()
	if err != nil {
		return err
	}
	rep.MapsDeleted = int(orphans.Len())
	if p.maps, err = orphans.Cursor(); err != nil {
		return err
	}
	if err := p.mark(snaps); err != nil {
		return err
	}
	p.segs = r.Index().Segments()
	retired := r.Index().Retired()
	if err := p.sortEntries(); err != nil {
		return err
	}
	if err := p.decide(); err != nil {
		return err
	}
	if err := p.orphans(); err != nil {
		return err
	}
	needCompaction := len(p.segs) > 1 || len(retired) > 0 || rep.PacksPlanned > 0
	if o.DryRun || (!needCompaction && rep.MapsDeleted == 0) {
		return nil
	}
	if err := p.repack(); err != nil {
		return err
	}
	if needCompaction {
		if err := p.compact(pf, retired); err != nil {
			return err
		}
	}
	if err := p.writeLists(pf); err != nil {
		return err
	}
	// Sessions are listed after the compacted segment is committed: a
	// session whose lease appears later refreshed its index after that
	// and cannot use a doomed chunk (see execute).
	pf.Created = time.Now().UTC()
	if leases, err = r.Leases(ctx); err != nil {
		return err
	}
	for _, l := range leases {
		if l.Name != ownLease && !l.Dead(time.Now(), host) {
			pf.Sessions = append(pf.Sessions, l.Name)
		}
	}
	if err := savePlan(ctx, r, pf); err != nil {
		return err
	}
	removeStaleParts(ctx, r, pf)
	return nil
}

// snapshots loads every manifest; one that cannot be read stops the plan.
func (p *planner) snapshots(pf *planFile) ([]*repo.Point, error) {
	var bad []string
	snaps, err := p.r.Points(p.ctx, func(x id.ID, err error) { bad = append(bad, fmt.Sprintf("%s: %v", x.Short(), err)) })
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		// An unreadable manifest's chunks would look unreferenced: deleting
		// them could destroy a backup that is still repairable.
		return nil, fmt.Errorf("%w: unreadable backup point manifests (%s); run `coffer repair snapshots` (it moves them aside and keeps their disk maps restorable as recovered points), then gc again", errAbort, strings.Join(bad, "; "))
	}
	p.rep.Snapshots = len(snaps)
	for _, s := range snaps {
		pf.Snapshots = append(pf.Snapshots, s.ID.String())
	}
	return snaps, nil
}

// mark sorts the IDs of every chunk referenced by any backup point.
func (p *planner) mark(snaps []*repo.Point) error {
	refs := extsort.New(32, p.o.MemoryBudget, p.o.TempDir)
	if err := addRefs(p.ctx, p.r, snaps, refs); err != nil {
		refs.Close()
		return err
	}
	cur, err := refs.Cursor(true)
	if err != nil {
		return err
	}
	p.refs = cur
	return nil
}

// addRefs adds the chunk IDs of every disk of the given points to s. A
// point forgotten while it is read (its manifest gone, then its maps) is
// skipped: its chunks are no longer needed. A map missing under a manifest
// that is still there stops the plan (its chunks would look dead).
func addRefs(ctx context.Context, r *repo.Repository, snaps []*repo.Point, s *extsort.Sorter) error {
	for _, sn := range snaps {
		for _, d := range sn.Disks {
			err := addMapRefs(ctx, r, d.Map, s)
			if errors.Is(err, store.ErrNotFound) && forgotten(ctx, r, sn) {
				break
			}
			if err != nil {
				return fmt.Errorf("%w: disk map of snapshot %s: %v", errAbort, sn.ID.Short(), err)
			}
		}
	}
	return nil
}

// addMapRefs adds the chunk IDs of one disk map to s.
func addMapRefs(ctx context.Context, r *repo.Repository, name string, s *extsort.Sorter) error {
	m, err := diskmap.Open(ctx, r.Store(), r.Key(), name)
	if err != nil {
		return err
	}
	return m.Iterate(ctx, func(_ uint64, x id.ID) error {
		if x.IsZero() {
			return nil
		}
		return s.Add(x[:])
	})
}

// forgotten reports whether a point's manifest is gone: a forget deletes
// the manifest before the disk maps (repo.DeletePoint).
func forgotten(ctx context.Context, r *repo.Repository, sn *repo.Point) bool {
	_, err := r.LoadPoint(ctx, sn.ID)
	return errors.Is(err, repo.ErrSnapshotNotFound)
}

// walk merges the index with the referenced set and reports every entry
// with its liveness: of the copies of a referenced chunk, one is live and
// the others are duplicates. The live copy is the first one the damage
// record does not list as broken: keeping the first in pack order would,
// half the time, keep the broken copy of a chunk that a backup has stored
// again since, and drop the good one. When every copy is broken the first
// stays live (and its pack is kept, see decide).
func (p *planner) walk(fn func(e index.Entry, live bool) error) error {
	idx, err := sortIndex(p.ctx, p.r, p.segs, p.o)
	if err != nil {
		return err
	}
	defer idx.Close()
	if err := p.refs.Rewind(); err != nil {
		return err
	}
	var copies []index.Entry // of one chunk: a handful at most
	flush := func() error {
		if len(copies) == 0 {
			return nil
		}
		referenced, err := p.refs.SeekTo(copies[0].ID[:])
		if err != nil {
			return err
		}
		good := 0
		for i, e := range copies {
			if !p.r.BrokenCopy(e.ID, e.Location) {
				good = i
				break
			}
		}
		for i, e := range copies {
			if err := fn(e, referenced && i == good); err != nil {
				return err
			}
		}
		copies = copies[:0]
		return nil
	}
	err = idx.Each(func(rec []byte) error {
		e := index.GetRecord(rec)
		if len(copies) > 0 && copies[0].ID != e.ID {
			if err := flush(); err != nil {
				return err
			}
		}
		copies = append(copies, e)
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// writeLists writes the doomed packs and orphan maps into the plan's parts.
func (p *planner) writeLists(pf *planFile) error {
	if err := p.doomed.Rewind(); err != nil {
		return err
	}
	if err := p.maps.Rewind(); err != nil {
		return err
	}
	pw := newListWriter(p.ctx, p.r, pf.ID, "packs")
	if err := p.doomed.Each(func(rec []byte) error { return pw.add(pack.ObjectName(pack.ID(rec))) }); err != nil {
		return err
	}
	var err error
	if pf.PackParts, err = pw.finish(); err != nil {
		return err
	}
	mw := newListWriter(p.ctx, p.r, pf.ID, "maps")
	if err := p.maps.Each(func(rec []byte) error { return mw.add(mapName(rec)) }); err != nil {
		return err
	}
	pf.MapParts, err = mw.finish()
	return err
}

var errNoPlan = errors.New("no pending plan")
