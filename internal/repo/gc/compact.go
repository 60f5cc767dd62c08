package gc

import (
	"encoding/binary"
	"fmt"

	"github.com/coffer-backup/coffer/internal/extsort"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
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
	var err error
	for c := p.entries; err == nil && c.Valid(); err = c.Next() {
		e, live := getEntryRec(c.Record())
		if !live {
			continue
		}
		var act action
		if act, err = seekAction(p.packs, e.Pack); err == nil {
			err = fn(e, act)
		}
	}
	return err
}

// repack copies the live chunks of packs marked for repacking into new
// packs (sealed bytes are copied as they are, no re-encryption) and
// indexes them. Entries come in pack and offset order: each old pack is
// read once.
func (p *planner) repack() error {
	var w *repo.Writer
	var st *repo.Stream
	var cur pack.ID
	var raw []byte
	err := p.forLive(func(e index.Entry, act action) error {
		if act != actRepack {
			return nil
		}
		if w == nil {
			var err error
			if w, err = p.r.NewWriter(p.ctx, "gc repack"); err != nil {
				return err
			}
			st = w.NewStream()
		}
		if raw == nil || e.Pack != cur {
			b, err := store.Get(p.ctx, p.r.Store(), pack.ObjectName(e.Pack), 0, -1)
			if err != nil {
				return fmt.Errorf("repack %s: %w", e.Pack, err)
			}
			cur, raw = e.Pack, b
			p.rep.PacksRepacked++
		}
		if int(e.Offset)+int(e.Length) > len(raw) {
			return fmt.Errorf("repack %s: blob beyond the end of the pack", e.Pack)
		}
		p.rep.BytesRepacked += int64(e.Length)
		return st.Move(p.ctx, e.ID, raw[e.Offset:e.Offset+e.Length], int(e.RawLength))
	})
	if w == nil {
		return err
	}
	if err == nil {
		err = st.Flush(p.ctx)
	}
	if cerr := w.Close(p.ctx); err == nil {
		err = cerr
	}
	return err
}

// An index record is an index entry keyed by chunk ID, for writing a
// segment: chunk ID [32], pack ID [16], offset, length, raw length (u32).
const indexRecSize = 60

func putIndexRec(b []byte, e index.Entry) {
	copy(b[:32], e.ID[:])
	copy(b[32:48], e.Pack[:])
	binary.BigEndian.PutUint32(b[48:], e.Offset)
	binary.BigEndian.PutUint32(b[52:], e.Length)
	binary.BigEndian.PutUint32(b[56:], e.RawLength)
}

func getIndexRec(b []byte) index.Entry {
	var e index.Entry
	copy(e.ID[:], b[:32])
	copy(e.Pack[:], b[32:48])
	e.Offset = binary.BigEndian.Uint32(b[48:])
	e.Length = binary.BigEndian.Uint32(b[52:])
	e.RawLength = binary.BigEndian.Uint32(b[56:])
	return e
}

// compact writes one segment with every live entry of the packs the plan
// keeps (sorted back into chunk-ID order), superseding the segments it
// read and every retired segment whose object may still exist.
// Superseding is not transitive once the superseding segment is deleted: a
// retired segment left out here would come back to life when the plan
// deletes the segment that retired it, naming packs that are gone.
func (p *planner) compact(pf *planFile, retired []id.ID) error {
	kept := extsort.New(indexRecSize, p.o.MemoryBudget, p.o.TempDir)
	var rec [indexRecSize]byte
	err := p.forLive(func(e index.Entry, act action) error {
		if act != actKeep {
			return nil
		}
		putIndexRec(rec[:], e)
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
	if err := kept.Iterate(false, func(r []byte) error { return out.Add(getIndexRec(r)) }); err != nil {
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
