package gc

import (
	"bytes"
	"encoding/binary"
	"time"

	"github.com/coffer-backup/coffer/internal/extsort"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

// action is what the plan does with an indexed pack.
type action uint8

const (
	actKeep action = iota
	actDelete
	actRepack
)

// An entry record is one index entry keyed by its place in the packs:
// pack ID [16], offset, length, raw length (u32 big-endian, so that
// records sort by offset within a pack), chunk ID [32], state u8 (dead,
// live, or live but recorded broken).
const entryRecSize = 61

const (
	entryDead = iota
	entryLive
	entryLiveBroken
)

func putEntryRec(b []byte, e index.Entry, state byte) {
	copy(b[:16], e.Pack[:])
	binary.BigEndian.PutUint32(b[16:], e.Offset)
	binary.BigEndian.PutUint32(b[20:], e.Length)
	binary.BigEndian.PutUint32(b[24:], e.RawLength)
	copy(b[28:60], e.ID[:])
	b[60] = state
}

func getEntryRec(b []byte) (index.Entry, bool) {
	var e index.Entry
	copy(e.Pack[:], b[:16])
	e.Offset = binary.BigEndian.Uint32(b[16:])
	e.Length = binary.BigEndian.Uint32(b[20:])
	e.RawLength = binary.BigEndian.Uint32(b[24:])
	copy(e.ID[:], b[28:60])
	return e, b[60] != entryDead
}

// A pack record is a pack ID [16] and the plan's action for it.
const packRecSize = 17

// seekAction advances c, a cursor over pack records, to pid and returns
// its action (actKeep when the pack has no record).
func seekAction(c *extsort.Cursor, pid pack.ID) (action, error) {
	for c.Valid() && bytes.Compare(c.Record()[:16], pid[:]) < 0 {
		if err := c.Next(); err != nil {
			return 0, err
		}
	}
	if c.Valid() && bytes.Equal(c.Record()[:16], pid[:]) {
		return action(c.Record()[16]), nil
	}
	return actKeep, nil
}

// sortEntries sorts every index entry, with its liveness, by pack.
func (p *planner) sortEntries() error {
	s := extsort.New(entryRecSize, p.o.MemoryBudget, p.o.TempDir)
	var rec [entryRecSize]byte
	err := p.walk(func(e index.Entry, live bool) error {
		if live {
			p.rep.ChunksReferenced++
		}
		if e.ID != (id.ID{}) {
			p.rep.ChunksIndexed++
		}
		state := byte(entryDead)
		switch {
		case live && p.r.BrokenCopy(e.ID, e.Location):
			state = entryLiveBroken
		case live:
			state = entryLive
		}
		putEntryRec(rec[:], e, state)
		return s.Add(rec[:])
	})
	if err != nil {
		s.Close()
		return err
	}
	p.entries, err = s.Cursor(false)
	return err
}

// decide sums live and dead bytes per pack and records what to do with
// each indexed pack: delete it when nothing in it is live, repack it when
// enough of it is dead (within the run's repack budget), else keep it. A
// pack holding the only copy of a referenced chunk that verify recorded
// as broken is kept as it is: repacking would copy bytes known bad to a
// place the record does not name (so backups would deduplicate against
// them again), and `coffer repair packs` is where such packs are mended.
// A pack of a session whose lease lives is kept too: its packs can be
// indexed while it runs by another process that ended it
// (repo.EndSession), and if it in fact still runs it may index them again
// after this plan, which would name a pack the plan deleted.
func (p *planner) decide() error {
	out, err := extsort.NewOrdered(packRecSize, p.o.TempDir)
	if err != nil {
		return err
	}
	var rec [packRecSize]byte
	var cur pack.ID
	var total, live int64
	started, pinned := false, false
	repackBudget := p.o.MaxRepackBytes
	flush := func() error {
		if !started {
			return nil
		}
		act := actKeep
		switch {
		case pinned:
		case live == 0:
			act = actDelete
			p.rep.BytesFreed += total
		case float64(total-live)/float64(total) >= p.o.RepackThreshold && live <= repackBudget:
			act = actRepack
			repackBudget -= live
			p.rep.BytesFreed += total - live
		}
		copy(rec[:16], cur[:])
		rec[16] = byte(act)
		return out.Add(rec[:])
	}
	if err = p.entries.Rewind(); err == nil {
		err = p.entries.Each(func(rec []byte) error {
			e, l := getEntryRec(rec)
			if !started || e.Pack != cur {
				if err := flush(); err != nil {
					return err
				}
				cur, total, live, started, pinned = e.Pack, 0, 0, true, p.live[e.Pack.Session().String()]
			}
			pinned = pinned || rec[60] == entryLiveBroken
			total += int64(e.Length)
			if l {
				live += int64(e.Length)
			}
			return nil
		})
	}
	if err == nil {
		err = flush()
	}
	if err != nil {
		out.Close()
		return err
	}
	p.packs, err = out.Cursor()
	return err
}

// orphans lists the packs to delete in ascending order: the indexed ones
// decide doomed, and packs no index lists and no live session owns
// (leftovers of writers that died after their lease was already removed),
// found by merging the store's listing with the indexed packs.
func (p *planner) orphans() error {
	listed := extsort.New(24, p.o.MemoryBudget, p.o.TempDir)
	var rec [24]byte
	err := p.r.Store().List(p.ctx, "data/", func(fi store.ObjectInfo) error {
		pid, err := pack.ParseObjectName(fi.Name)
		if err != nil || p.live[pid.Session().String()] {
			return nil
		}
		if time.Since(fi.ModTime) < time.Hour {
			return nil // could belong to a writer that is just starting
		}
		copy(rec[:16], pid[:])
		binary.BigEndian.PutUint64(rec[16:], uint64(fi.Size))
		return listed.Add(rec[:])
	})
	if err != nil {
		listed.Close()
		return err
	}
	doomed, err := extsort.NewOrdered(16, p.o.TempDir)
	if err != nil {
		listed.Close()
		return err
	}
	indexed := p.packs
	// next consumes the current indexed pack, adding it when the plan
	// deletes or repacks it.
	next := func() error {
		if r := indexed.Record(); action(r[16]) != actKeep {
			if err := doomed.Add(r[:16]); err != nil {
				return err
			}
		}
		return indexed.Next()
	}
	if err = indexed.Rewind(); err == nil {
		err = listed.Iterate(true, func(r []byte) error {
			for indexed.Valid() && bytes.Compare(indexed.Record()[:16], r[:16]) < 0 {
				if err := next(); err != nil {
					return err
				}
			}
			if indexed.Valid() && bytes.Equal(indexed.Record()[:16], r[:16]) {
				return next()
			}
			p.rep.BytesFreed += int64(binary.BigEndian.Uint64(r[16:]))
			return doomed.Add(r[:16])
		})
	}
	for err == nil && indexed.Valid() {
		err = next()
	}
	if err != nil {
		doomed.Close()
		return err
	}
	p.rep.PacksPlanned = int(doomed.Len())
	p.doomed, err = doomed.Cursor()
	return err
}
