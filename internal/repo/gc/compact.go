package gc

import (
	"github.com/coffer-backup/coffer/internal/extsort"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo/index"
)

// forLive calls fn with every live index entry and its pack's action, in
// pack and offset order (a merge-join of the entries with the actions).
func (p *planner) forLive(fn func(e index.Entry, act action) error) error {
	if err := p.entries.Rewind(); err != nil {
		return err
	}
	if err := p.packs.Rewind(); err != nil {
		return err
	}
	return p.entries.Each(func(rec []byte) error {
		e, live := getEntryRec(rec)
		if !live {
			return nil
		}
		act, err := seekAction(p.packs, e.Pack)
		if err != nil {
			return err
		}
		return fn(e, act)
	})
}

// compact writes one segment with every live entry of the packs the plan
// keeps (sorted back into chunk-ID order), superseding the segments it
// read and every retired segment whose object may still exist.
// Superseding is not transitive once the superseding segment is deleted: a
// retired segment left out here would come back to life when the plan
// deletes the segment that retired it, naming packs that are gone.
func (p *planner) compact(pf *planFile, retired []id.ID) error {
	kept := extsort.New(index.RecordSize, p.o.MemoryBudget, p.o.TempDir)
	var rec [index.RecordSize]byte
	err := p.forLive(func(e index.Entry, act action) error {
		if act != actKeep {
			return nil
		}
		index.PutRecord(rec[:], e)
		return kept.Add(rec[:])
	})
	if err != nil {
		kept.Close()
		return err
	}
	supersedes := make([]id.ID, 0, len(p.segs)+len(retired))
	for _, s := range p.segs {
		supersedes = append(supersedes, s.ID)
	}
	supersedes = append(supersedes, retired...)
	for _, x := range supersedes {
		pf.Segments = append(pf.Segments, x.String())
	}
	out, err := index.CreateSegment(p.ctx, p.r.Store(), p.r.Key(), int(kept.Len()), supersedes)
	if err != nil {
		kept.Close()
		return err
	}
	if err := kept.Iterate(false, func(r []byte) error { return out.Add(index.GetRecord(r)) }); err != nil {
		out.Abort()
		return err
	}
	seg, err := out.Commit(p.ctx)
	if err != nil {
		return err
	}
	p.rep.SegmentsMerged = len(supersedes)
	pf.Compacted = seg.ID.String()
	return p.r.ReloadIndex(p.ctx)
}
