package repair

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/coffer-backup/coffer/internal/extsort"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

// Options tune a repair.
type Options struct {
	DryRun bool
	// MemoryBudget bounds the entries sorted in memory (default 64 MiB).
	MemoryBudget int
	TempDir      string
}

func (o *Options) defaults() {
	if o.MemoryBudget <= 0 {
		o.MemoryBudget = 64 << 20
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
}

// entryRecord is an index entry sorted by chunk ID:
// chunk ID [32] | pack [16] | offset u32 | length u32 | raw length u32.
const entryRecord = 60

func putEntry(b []byte, e index.Entry) {
	copy(b[:32], e.ID[:])
	copy(b[32:48], e.Pack[:])
	binary.BigEndian.PutUint32(b[48:], e.Offset)
	binary.BigEndian.PutUint32(b[52:], e.Length)
	binary.BigEndian.PutUint32(b[56:], e.RawLength)
}

func getEntry(b []byte) index.Entry {
	return index.Entry{ID: id.ID(b[:32]), Location: index.Location{Pack: pack.ID(b[32:48]),
		Offset: binary.BigEndian.Uint32(b[48:]), Length: binary.BigEndian.Uint32(b[52:]), RawLength: binary.BigEndian.Uint32(b[56:])}}
}

// Index rebuilds the chunk index: one new segment lists every chunk the
// packs' trailers list, plus, for packs whose trailer is damaged, every
// chunk the current index places in them that authenticates. It
// supersedes every existing segment, damaged ones included. Index entries
// that point into missing packs, or at blobs that fail authentication, are
// not kept: those chunks were unreadable already, and the report names the
// points that lost them.
func Index(ctx context.Context, r *repo.Repository, o Options) (*Report, error) {
	o.defaults()
	rep := &Report{DryRun: o.DryRun}
	lease, err := maintenance(ctx, r, "rebuild index")
	if err != nil {
		return nil, err
	}
	defer lease.Release(context.WithoutCancel(ctx))
	var old []id.ID
	if err := r.Store().List(ctx, index.Prefix, func(fi store.ObjectInfo) error {
		if sid, err := id.Parse(strings.TrimPrefix(fi.Name, index.Prefix)); err == nil {
			old = append(old, sid)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	entries := extsort.New(entryRecord, o.MemoryBudget/2, o.TempDir)
	defer entries.Close()
	var rec [entryRecord]byte
	damagedTrailer := map[pack.ID]int64{}
	packs := 0
	err = r.Store().List(ctx, "data/", func(fi store.ObjectInfo) error {
		pid, err := pack.ParseObjectName(fi.Name)
		if err != nil {
			return nil
		}
		packs++
		pe, err := r.PackEntries(ctx, pid, fi.Size)
		if err != nil {
			if !errors.Is(err, pack.ErrFormat) && !errors.Is(err, store.ErrInvalidRange) {
				return err
			}
			damagedTrailer[pid] = fi.Size
			return nil
		}
		for _, e := range pe {
			putEntry(rec[:], index.Entry{ID: e.ID, Location: index.Location{Pack: pid, Offset: e.Offset, Length: e.Length, RawLength: e.RawLength}})
			if err := entries.Add(rec[:]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rep.step("read the trailers of %d pack(s)", packs)
	if len(damagedTrailer) > 0 {
		kept, dropped, err := salvageEntries(ctx, r, damagedTrailer, func(e index.Entry) error {
			putEntry(rec[:], e)
			return entries.Add(rec[:])
		})
		if err != nil {
			return nil, err
		}
		rep.step("%d pack(s) have a damaged trailer: kept the %d index entries whose chunks authenticate, dropped %d that do not", len(damagedTrailer), kept, dropped)
	}
	sorted, err := entries.Cursor(false)
	if err != nil {
		return nil, err
	}
	defer sorted.Close()
	lost, err := notKept(ctx, r, sorted)
	if err != nil {
		return nil, err
	}
	rep.Dropped = int64(len(lost))
	if rep.Affected, err = affectedBy(ctx, r, lost); err != nil {
		return nil, err
	}
	if len(lost) > 0 {
		rep.step("%d chunk(s) of the current index have no readable copy in any pack and are not kept (already unreadable)", len(lost))
	}
	rep.step("write one index segment replacing %d segment(s)", len(old))
	if o.DryRun {
		return rep, nil
	}
	if err := sorted.Rewind(); err != nil {
		return nil, err
	}
	n, err := writeSegment(ctx, r, sorted, int(entries.Len()), old)
	if err != nil {
		return nil, err
	}
	rep.Kept = n
	for _, sid := range old {
		if err := r.Store().Delete(ctx, index.ObjectName(sid)); err != nil && !errors.Is(err, store.ErrNotFound) {
			r.Logger().Warn("replaced index segment left for gc", "segment", sid.Short(), "err", err)
		}
	}
	// A pending collection's plan named segments and packs of the old
	// index; every pack is indexed again now, so it has nothing left to do.
	// Its part objects (gc/part-...) are then named by no plan, and the
	// next gc removes them as leftovers.
	if err := r.Store().Delete(ctx, "gc/plan"); err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	return rep, r.ReloadIndex(ctx)
}

// writeSegment writes the sorted entries as one segment superseding old.
// Of several copies of a chunk it keeps the first that the damage record
// does not list as broken.
func writeSegment(ctx context.Context, r *repo.Repository, sorted *extsort.Cursor, expected int, old []id.ID) (int64, error) {
	sid := id.Random()
	obj, err := r.Store().Create(ctx, index.ObjectName(sid), store.PutOptions{})
	if err != nil {
		return 0, err
	}
	sw, err := index.NewSegmentWriter(obj, r.Key(), expected, old)
	if err != nil {
		_ = obj.Abort()
		return 0, err
	}
	var n int64
	var pending index.Entry
	have := false
	flush := func() error {
		if !have {
			return nil
		}
		have = false
		n++
		return sw.Add(pending)
	}
	for ; sorted.Valid() && err == nil; err = sorted.Next() {
		e := getEntry(sorted.Record())
		if have && e.ID == pending.ID {
			if r.BrokenCopy(pending.ID, pending.Location) && !r.BrokenCopy(e.ID, e.Location) {
				pending = e
			}
			continue
		}
		if err = flush(); err != nil {
			break
		}
		pending, have = e, true
	}
	if err == nil {
		err = flush()
	}
	if err == nil {
		err = sw.Finish()
	}
	if err != nil {
		_ = obj.Abort()
		return 0, err
	}
	if _, err := obj.Commit(); err != nil {
		return 0, fmt.Errorf("commit index segment: %w", err)
	}
	return n, nil
}

// notKept returns the chunks the current index locates that the new
// entries do not (both streams sorted by chunk ID).
func notKept(ctx context.Context, r *repo.Repository, sorted *extsort.Cursor) (map[id.ID]bool, error) {
	lost := map[id.ID]bool{}
	err := r.Index().Iterate(ctx, func(e index.Entry) error {
		found, err := sorted.SeekTo(e.ID[:])
		if err != nil {
			return err
		}
		if !found && len(lost) < 1<<20 {
			lost[e.ID] = true
		}
		return nil
	})
	if err != nil && !errors.Is(err, index.ErrFormat) {
		return nil, err
	}
	return lost, nil
}
