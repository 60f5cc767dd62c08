package gc

import (
	"context"
	"encoding/binary"
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

type action uint8

const (
	actDelete action = iota + 1
	actRepack
)

// planner carries the state of phase B.
type planner struct {
	ctx     context.Context
	r       *repo.Repository
	o       Options
	rep     *Report
	refs    *extsort.Cursor // sorted unique referenced chunk IDs
	segs    []*index.Segment
	actions map[pack.ID]action
	live    map[string]bool // session prefixes of live leases
}

func plan(ctx context.Context, r *repo.Repository, o Options, rep *Report, ownLease string) error {
	if bad := r.DamagedIndexSegments(); len(bad) > 0 {
		// A damaged segment's entries are invisible: packs only it lists
		// would look unindexed and be collected as orphans.
		return fmt.Errorf("%w: damaged index segments (%s); run `coffer repair index` first", errAbort, strings.Join(bad, ", "))
	}
	p := &planner{ctx: ctx, r: r, o: o, rep: rep, actions: map[pack.ID]action{}, live: map[string]bool{}}
	pf := &planFile{MarkTime: time.Now().UTC()}
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
	mapsUsed, err := p.mark(pf)
	if err != nil {
		return err
	}
	defer p.refs.Close()
	p.segs = r.Index().Segments()
	retired := r.Index().Retired()
	indexed, err := p.packStats()
	if err != nil {
		return err
	}
	if err := p.orphans(indexed, pf); err != nil {
		return err
	}
	if err := p.orphanMaps(mapsUsed, pf); err != nil {
		return err
	}
	for pid := range p.actions {
		pf.Packs = append(pf.Packs, pack.ObjectName(pid))
	}
	rep.PacksPlanned = len(pf.Packs)
	needCompaction := len(p.segs) > 1 || len(retired) > 0 || len(p.actions) > 0
	if o.DryRun || (!needCompaction && len(pf.Maps) == 0) {
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
	return savePlan(ctx, r, pf)
}

// mark sorts the IDs of every chunk referenced by any backup point.
func (p *planner) mark(pf *planFile) (map[string]bool, error) {
	var bad []string
	snaps, err := p.r.Snapshots(p.ctx, func(x id.ID, err error) { bad = append(bad, fmt.Sprintf("%s: %v", x.Short(), err)) })
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		// An unreadable manifest's chunks would look unreferenced: deleting
		// them could destroy a backup that is still repairable.
		return nil, fmt.Errorf("%w: unreadable snapshot manifests (%s); run `coffer verify`", errAbort, strings.Join(bad, "; "))
	}
	p.rep.Snapshots = len(snaps)
	refs := extsort.New(32, p.o.MemoryBudget, p.o.TempDir)
	mapsUsed := map[string]bool{}
	for _, s := range snaps {
		pf.Snapshots = append(pf.Snapshots, s.ID.String())
		for _, d := range s.Disks {
			mapsUsed[d.Map] = true
			m, err := diskmap.Open(p.ctx, p.r.Store(), p.r.Key(), d.Map)
			if err != nil {
				refs.Close()
				return nil, fmt.Errorf("%w: disk map of snapshot %s: %v", errAbort, s.ID.Short(), err)
			}
			if err := m.Iterate(p.ctx, func(_ uint64, x id.ID) error {
				if x.IsZero() {
					return nil
				}
				return refs.Add(x[:])
			}); err != nil {
				refs.Close()
				return nil, fmt.Errorf("%w: disk map of snapshot %s: %v", errAbort, s.ID.Short(), err)
			}
		}
	}
	cur, err := refs.Cursor(true)
	if err != nil {
		return nil, err
	}
	p.refs = cur
	return mapsUsed, nil
}

// walk merges the index with the referenced set and reports every entry
// with its liveness: an entry is live when its chunk is referenced and it is
// the first copy of that chunk (later copies are duplicates).
func (p *planner) walk(fn func(e index.Entry, live bool) error) error {
	if err := p.refs.Rewind(); err != nil {
		return err
	}
	var last id.ID
	first := true
	return index.Merge(p.ctx, p.r.Store(), p.r.Key(), p.segs, func(e index.Entry) error {
		dup := !first && e.ID == last
		first, last = false, e.ID
		live := false
		if !dup {
			var err error
			if live, err = p.refs.SeekTo(e.ID[:]); err != nil {
				return err
			}
		}
		return fn(e, live)
	})
}

// packStats sums live and dead bytes per pack and decides what to do with
// each; it returns a cursor over the IDs of every indexed pack.
func (p *planner) packStats() (*extsort.Cursor, error) {
	stats := extsort.New(24, p.o.MemoryBudget, p.o.TempDir)
	var rec [24]byte
	err := p.walk(func(e index.Entry, live bool) error {
		copy(rec[:16], e.Pack[:])
		binary.BigEndian.PutUint32(rec[16:], e.Length)
		rec[20] = 0
		if live {
			rec[20] = 1
			p.rep.ChunksReferenced++
		}
		if e.ID != (id.ID{}) {
			p.rep.ChunksIndexed++
		}
		return stats.Add(rec[:])
	})
	if err != nil {
		stats.Close()
		return nil, err
	}
	indexed := extsort.New(16, p.o.MemoryBudget, p.o.TempDir)
	var cur pack.ID
	var total, live int64
	started := false
	var repackBudget = p.o.MaxRepackBytes
	flush := func() error {
		if !started {
			return nil
		}
		switch {
		case live == 0:
			p.actions[cur] = actDelete
			p.rep.BytesFreed += total
		case float64(total-live)/float64(total) >= p.o.RepackThreshold && live <= repackBudget:
			p.actions[cur] = actRepack
			repackBudget -= live
			p.rep.BytesFreed += total - live
		}
		return indexed.Add(cur[:])
	}
	err = stats.Iterate(false, func(r []byte) error {
		pid := pack.ID(r[:16])
		if !started || pid != cur {
			if err := flush(); err != nil {
				return err
			}
			cur, total, live, started = pid, 0, 0, true
		}
		n := int64(binary.BigEndian.Uint32(r[16:]))
		total += n
		if r[20] == 1 {
			live += n
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		indexed.Close()
		return nil, err
	}
	return indexed.Cursor(true)
}

// orphans plans deletion of packs no index lists and no live session owns:
// leftovers of writers that died after their lease was already removed.
func (p *planner) orphans(indexed *extsort.Cursor, pf *planFile) error {
	defer indexed.Close()
	listed := extsort.New(16, p.o.MemoryBudget, p.o.TempDir)
	sizes := map[pack.ID]int64{}
	err := p.r.Store().List(p.ctx, "data/", func(fi store.ObjectInfo) error {
		pid, err := pack.ParseObjectName(fi.Name)
		if err != nil || p.live[pid.Session().String()] {
			return nil
		}
		if time.Since(fi.ModTime) < time.Hour {
			return nil // could belong to a writer that is just starting
		}
		sizes[pid] = fi.Size
		return listed.Add(pid[:])
	})
	if err != nil {
		listed.Close()
		return err
	}
	return listed.Iterate(true, func(r []byte) error {
		found, err := indexed.SeekTo(r)
		if err != nil || found {
			return err
		}
		pid := pack.ID(r)
		p.actions[pid] = actDelete
		p.rep.BytesFreed += sizes[pid]
		return nil
	})
}

// orphanMaps plans deletion of disk maps no manifest references, except
// those of live sessions (a backup writes its maps before its manifest).
func (p *planner) orphanMaps(used map[string]bool, pf *planFile) error {
	return p.r.Store().List(p.ctx, "maps/", func(fi store.ObjectInfo) error {
		if used[fi.Name] {
			return nil
		}
		session, _, _ := strings.Cut(strings.TrimPrefix(fi.Name, "maps/"), "-")
		if p.live[session] {
			return nil
		}
		pf.Maps = append(pf.Maps, fi.Name)
		p.rep.MapsDeleted++
		return nil
	})
}

// repack copies the live chunks of packs marked for repacking into new
// packs (sealed bytes are copied as they are, no re-encryption) and
// indexes them.
func (p *planner) repack() error {
	moves := extsort.New(60, p.o.MemoryBudget, p.o.TempDir)
	var rec [60]byte
	err := p.walk(func(e index.Entry, live bool) error {
		if !live || p.actions[e.Pack] != actRepack {
			return nil
		}
		copy(rec[:16], e.Pack[:])
		binary.BigEndian.PutUint32(rec[16:], e.Offset)
		binary.BigEndian.PutUint32(rec[20:], e.Length)
		binary.BigEndian.PutUint32(rec[24:], e.RawLength)
		copy(rec[28:], e.ID[:])
		return moves.Add(rec[:])
	})
	if err != nil || moves.Len() == 0 {
		moves.Close()
		return err
	}
	w, err := p.r.NewWriter(p.ctx, "gc repack")
	if err != nil {
		moves.Close()
		return err
	}
	st := w.NewStream()
	var cur pack.ID
	var raw []byte
	err = moves.Iterate(false, func(r []byte) error {
		pid := pack.ID(r[:16])
		if raw == nil || pid != cur {
			b, err := store.Get(p.ctx, p.r.Store(), pack.ObjectName(pid), 0, -1)
			if err != nil {
				return fmt.Errorf("repack %s: %w", pid, err)
			}
			cur, raw = pid, b
			p.rep.PacksRepacked++
		}
		off, n, rawLen := binary.BigEndian.Uint32(r[16:]), binary.BigEndian.Uint32(r[20:]), binary.BigEndian.Uint32(r[24:])
		if int(off)+int(n) > len(raw) {
			return fmt.Errorf("repack %s: blob beyond the end of the pack", pid)
		}
		p.rep.BytesRepacked += int64(n)
		return st.Move(p.ctx, id.ID(r[28:60]), raw[off:off+n], int(rawLen))
	})
	if err == nil {
		err = st.Flush(p.ctx)
	}
	if cerr := w.Close(p.ctx); err == nil {
		err = cerr
	}
	return err
}

// compact writes one segment with every live entry outside doomed packs,
// superseding the segments it read and every retired segment whose object
// may still exist. Superseding is not transitive once the superseding
// segment is deleted: a retired segment left out here would come back to
// life when the plan deletes the segment that retired it, naming packs
// that are gone.
func (p *planner) compact(pf *planFile, retired []id.ID) error {
	sid := id.Random()
	obj, err := p.r.Store().Create(p.ctx, index.ObjectName(sid), store.PutOptions{})
	if err != nil {
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
	cw := &counter{w: obj}
	sw, err := index.NewSegmentWriter(cw, p.r.Key(), int(p.rep.ChunksReferenced), supersedes)
	if err == nil {
		err = p.walk(func(e index.Entry, live bool) error {
			if !live || p.actions[e.Pack] != 0 {
				return nil
			}
			return sw.Add(e)
		})
	}
	if err == nil {
		err = sw.Finish()
	}
	if err != nil {
		_ = obj.Abort()
		return err
	}
	if _, err := obj.Commit(); err != nil {
		return err
	}
	p.rep.SegmentsMerged = len(supersedes)
	pf.Compacted = sid.String()
	return p.r.ReloadIndex(p.ctx)
}

type counter struct {
	w interface{ Write([]byte) (int, error) }
	n int64
}

func (c *counter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

var errNoPlan = errors.New("no pending plan")
