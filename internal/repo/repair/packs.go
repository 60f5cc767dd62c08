package repair

import (
	"context"
	"errors"
	"fmt"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

// Packs rewrites damaged packs: those the damage record names (broken
// chunk blobs found by `verify --read-data`) and those whose header or
// trailer is damaged or that were cut short. Every chunk of such a pack
// that authenticates moves to a new pack; the index is rewritten without
// the damaged packs, which are then moved aside (damaged/data/...).
// Chunks that do not authenticate were unreadable already: the report
// names the points that lost them, and the damage record keeps them marked
// lost, so the next backup of those disks stores them again.
func Packs(ctx context.Context, r *repo.Repository, o Options) (*Report, error) {
	o.defaults()
	rep := &Report{DryRun: o.DryRun}
	lease, err := maintenance(ctx, r, "rewrite damaged packs")
	if err != nil {
		return nil, err
	}
	defer lease.Release(context.WithoutCancel(ctx))
	if _, err := r.Store().Stat(ctx, "gc/plan"); err == nil {
		return nil, errors.New("a garbage collection is half done (gc/plan exists): run `coffer gc` first, so that its deletions do not meet this rewrite")
	}
	if bad := r.DamagedIndexSegments(); len(bad) > 0 {
		return nil, fmt.Errorf("the index has damaged segments (%s): run `coffer repair index` first, which also salvages packs with a damaged trailer", bad[0])
	}
	candidates, why, err := damagedPacks(ctx, r)
	if err != nil {
		return nil, err
	}
	if len(candidates) == 0 {
		rep.step("no damaged pack found (packs the damage record names, or whose header or trailer is damaged)")
		return rep, nil
	}
	// The segments this rewrite replaces are those live now; the segment
	// of the new packs comes after them and stays.
	live := r.Index().Segments()
	supersede := r.Index().Retired()
	for _, s := range live {
		supersede = append(supersede, s.ID)
	}
	byPack, err := indexedIn(ctx, r, candidates)
	if err != nil {
		return nil, err
	}
	// lost and moved are bounded by the damaged packs' entries.
	lost, moved := map[id.ID]bool{}, map[id.ID]bool{}
	var w *repo.Writer
	var st *repo.Stream
	if !o.DryRun {
		if w, err = r.NewWriter(ctx, "repair packs"); err != nil {
			return nil, err
		}
		st = w.NewStream()
	}
	for p, size := range candidates {
		entries := byPack[p]
		k, d, err := salvage(ctx, r, p, size, entries, func(e index.Entry, sealed []byte) error {
			moved[e.ID] = true
			if st == nil {
				return nil
			}
			return st.Move(ctx, e.ID, sealed, int(e.RawLength))
		})
		if err != nil {
			if w != nil {
				_ = w.Close(ctx)
			}
			return nil, err
		}
		rep.Kept += int64(k)
		rep.Dropped += int64(d)
		rep.step("rewrite %s (%s): keep %d chunk(s), drop %d that do not authenticate", pack.ObjectName(p), why[p], k, d)
		if d > 0 {
			for _, e := range entries {
				lost[e.ID] = true
			}
		}
	}
	// Only chunks left without any good copy count as lost: not those
	// moved to a new pack (which the index does not list yet), nor those
	// with a copy in a pack that stays.
	for x := range moved {
		delete(lost, x)
	}
	for x := range lost {
		if loc, ok, err := r.Index().Lookup(ctx, x); err != nil {
			return nil, err
		} else if ok {
			if _, doomed := candidates[loc.Pack]; !doomed {
				delete(lost, x)
			}
		}
	}
	if rep.Affected, err = affectedBy(ctx, r, lost); err != nil {
		return nil, err
	}
	rep.step("write the index without the %d rewritten pack(s), then move them aside to damaged/", len(candidates))
	if o.DryRun {
		return rep, nil
	}
	if err := st.Flush(ctx); err != nil {
		_ = w.Close(ctx)
		return nil, err
	}
	if err := w.Close(ctx); err != nil {
		return nil, err
	}
	if err := compactWithout(ctx, r, live, supersede, candidates); err != nil {
		return nil, err
	}
	for p := range candidates {
		if err := moveAside(ctx, r.Store(), pack.ObjectName(p)); err != nil {
			r.Logger().Warn("rewritten pack left in place; gc removes it", "pack", p, "err", err)
		}
	}
	for _, sid := range supersede {
		if err := r.Store().Delete(ctx, index.ObjectName(sid)); err != nil && !errors.Is(err, store.ErrNotFound) {
			r.Logger().Warn("replaced index segment left for gc", "segment", sid.Short(), "err", err)
		}
	}
	if err := r.ReloadIndex(ctx); err != nil {
		return nil, err
	}
	// Broken copies in the rewritten packs are gone: what they stood for
	// is either stored elsewhere now, or lost (recorded without a place).
	_, err = r.RewriteDamage(ctx, func(b repo.BadChunk) (repo.BadChunk, bool) {
		if _, gone := candidates[b.Pack]; gone {
			b.Pack, b.Offset = pack.ID{}, 0
			return b, lost[b.Chunk]
		}
		return b, true
	})
	return rep, err
}

// damagedPacks lists packs to rewrite, with the reason: named by the
// damage record, or with a damaged header or trailer.
func damagedPacks(ctx context.Context, r *repo.Repository) (map[pack.ID]int64, map[pack.ID]string, error) {
	named := map[pack.ID]bool{}
	for _, b := range r.Damage() {
		if b.Pack != (pack.ID{}) {
			named[b.Pack] = true
		}
	}
	sizes, why := map[pack.ID]int64{}, map[pack.ID]string{}
	err := r.Store().List(ctx, "data/", func(fi store.ObjectInfo) error {
		p, err := pack.ParseObjectName(fi.Name)
		if err != nil {
			return nil
		}
		reason := ""
		if named[p] {
			reason = "broken chunk blobs"
		}
		if _, err := r.PackEntries(ctx, p, fi.Size); err != nil {
			if !errors.Is(err, pack.ErrFormat) && !errors.Is(err, store.ErrInvalidRange) {
				return err
			}
			reason = "damaged trailer"
		} else if head, err := store.Get(ctx, r.Store(), fi.Name, 0, pack.HeaderSize); err != nil {
			return err
		} else if pack.CheckHeader(head) != nil {
			reason = "damaged header"
		}
		if reason != "" {
			sizes[p], why[p] = fi.Size, reason
		}
		return nil
	})
	return sizes, why, err
}

// compactWithout writes one segment with the entries of the live segments
// that are not in the dropped packs, superseding supersede.
func compactWithout(ctx context.Context, r *repo.Repository, live []*index.Segment, supersede []id.ID, dropped map[pack.ID]int64) error {
	sid := id.Random()
	obj, err := r.Store().Create(ctx, index.ObjectName(sid), store.PutOptions{})
	if err != nil {
		return err
	}
	var expected uint64
	for _, s := range live {
		expected += s.Count()
	}
	sw, err := index.NewSegmentWriter(obj, r.Key(), int(expected), supersede)
	if err == nil {
		var last id.ID
		first := true
		err = index.Merge(ctx, r.Store(), r.Key(), live, func(e index.Entry) error {
			if _, gone := dropped[e.Pack]; gone || r.BrokenCopy(e.ID, e.Location) {
				return nil
			}
			if !first && e.ID == last {
				return nil
			}
			first, last = false, e.ID
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
	_, err = obj.Commit()
	return err
}
