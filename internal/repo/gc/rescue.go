package gc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/coffer-backup/coffer/internal/extsort"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

// rescue re-indexes chunks that backup points committed after the mark use
// but the compacted index dropped, and keeps their packs. It returns the
// packs to keep and the disk maps in use, as sorted cursors.
func rescue(ctx context.Context, r *repo.Repository, o Options, pf *planFile, rep *Report) (keep, used *extsort.Cursor, err error) {
	marked := map[string]bool{}
	for _, s := range pf.Snapshots {
		marked[s] = true
	}
	var bad []string
	snaps, err := r.Points(ctx, func(x id.ID, err error) { bad = append(bad, x.Short()) })
	if err != nil {
		return nil, nil, err
	}
	if len(bad) > 0 {
		return nil, nil, fmt.Errorf("%w: unreadable backup point manifests %s; run `coffer repair snapshots`, then gc again", errAbort, strings.Join(bad, ", "))
	}
	// A session writes its index segments before its manifest: once the
	// manifest is listed, a refresh shows where its new chunks are.
	if err := r.RefreshIndex(ctx); err != nil {
		return nil, nil, err
	}
	if used, err = usedMaps(snaps, o); err != nil {
		return nil, nil, err
	}
	keep, err = rescueChunks(ctx, r, o, pf, snaps, marked, rep)
	if err != nil {
		used.Close()
		return nil, nil, err
	}
	return keep, used, nil
}

func rescueChunks(ctx context.Context, r *repo.Repository, o Options, pf *planFile, snaps []*repo.Point, marked map[string]bool, rep *Report) (*extsort.Cursor, error) {
	var fresh []*repo.Point
	for _, s := range snaps {
		if !marked[s.ID.String()] {
			fresh = append(fresh, s)
		}
	}
	keep := extsort.New(16, o.MemoryBudget, o.TempDir)
	if len(fresh) > 0 {
		if err := keepFor(ctx, r, o, pf, fresh, keep, rep); err != nil {
			keep.Close()
			return nil, err
		}
	}
	return keep.Cursor(true)
}

// keepFor adds to keep the packs the chunks of the given points need: the
// doomed packs the current index still finds them in (rescued by an earlier,
// interrupted execution of this plan, whose old segments may be gone), and
// the packs of chunks only the superseded segments list, which it
// re-indexes.
func keepFor(ctx context.Context, r *repo.Repository, o Options, pf *planFile, fresh []*repo.Point, keep *extsort.Sorter, rep *Report) error {
	s := extsort.New(32, o.MemoryBudget, o.TempDir)
	if err := addRefs(ctx, r, fresh, s); err != nil {
		s.Close()
		return err
	}
	refs, err := s.Cursor(true)
	if err != nil {
		return err
	}
	defer refs.Close()
	held := extsort.New(16, o.MemoryBudget, o.TempDir)
	missing, err := extsort.NewOrdered(32, o.TempDir)
	if err != nil {
		held.Close()
		return err
	}
	current, err := sortIndex(ctx, r, r.Index().Segments(), o)
	if err == nil {
		err = joinIndex(current, refs, func(e index.Entry) error { return held.Add(e.Pack[:]) }, missing.Add)
		current.Close()
	}
	if err != nil {
		held.Close()
		missing.Close()
		return err
	}
	heldCur, err := held.Cursor(true)
	if err != nil {
		missing.Close()
		return err
	}
	// Doomed packs that hold them, in ascending order; they join keep only
	// after reindex, so that at most one sort buffer fills at a time.
	rescued, err := extsort.NewOrdered(16, o.TempDir)
	if err == nil {
		err = readList(ctx, r, pf.Packs, pf.PackParts, func(name string) error {
			pid, err := pack.ParseObjectName(name)
			if err != nil {
				return nil
			}
			if found, err := heldCur.SeekTo(pid[:]); err != nil || !found {
				return err
			}
			return rescued.Add(pid[:])
		})
		if err != nil {
			rescued.Close()
		}
	}
	heldCur.Close()
	if err != nil {
		missing.Close()
		return err
	}
	n := missing.Len()
	lost, err := missing.Cursor() // owns missing's file from here
	if err == nil && n > 0 {
		err = reindex(ctx, r, o, pf, lost, int(n), keep, rep)
	}
	if lost != nil {
		lost.Close()
	}
	if err != nil {
		rescued.Close()
		return err
	}
	c, err := rescued.Cursor()
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Each(keep.Add)
}

// reindex finds the chunks of missing (sorted) in the plan's superseded
// segments and writes them into a new segment; their packs go to keep.
func reindex(ctx context.Context, r *repo.Repository, o Options, pf *planFile, missing *extsort.Cursor, n int, keep *extsort.Sorter, rep *Report) error {
	segs, err := openSegments(ctx, r, pf.Segments)
	if err != nil {
		return err
	}
	old, err := sortIndex(ctx, r, segs, o)
	if err != nil {
		return err
	}
	defer old.Close()
	var out *index.SegmentObject
	var notFound int
	var example, last id.ID
	err = joinIndex(old, missing, func(e index.Entry) error {
		if out == nil {
			var err error
			if out, err = index.CreateSegment(ctx, r.Store(), r.Key(), n, nil); err != nil {
				return err
			}
		} else if e.ID == last {
			return nil // another copy of the chunk just rescued
		}
		last = e.ID
		if err := keep.Add(e.Pack[:]); err != nil {
			return err
		}
		return out.Add(e)
	}, func(x []byte) error {
		if notFound++; notFound == 1 {
			example = id.ID(x)
		}
		return nil
	})
	if err != nil {
		if out != nil {
			out.Abort()
		}
		return err
	}
	if notFound > 0 {
		r.Logger().Error("backup points committed since the gc plan reference chunks that are in no index; run `coffer verify`", "chunks", notFound, "example", example.Short())
	}
	if out == nil {
		return nil
	}
	seg, err := out.Commit(ctx)
	if err != nil {
		return err
	}
	r.Index().Add(seg)
	rep.ChunksRescued = int(seg.Count())
	return nil
}

// joinIndex merges idx (sorted index records) with refs (sorted unique
// chunk IDs): found is called with every entry of a referenced chunk (each
// copy), missing with every reference no entry has.
func joinIndex(idx, refs *extsort.Cursor, found func(index.Entry) error, missing func([]byte) error) error {
	matched := false
	// pass moves refs up to limit (to the end when nil), reporting the
	// references no entry matched.
	pass := func(limit []byte) error {
		for refs.Valid() && (limit == nil || bytes.Compare(refs.Record(), limit) < 0) {
			if !matched {
				if err := missing(refs.Record()); err != nil {
					return err
				}
			}
			matched = false
			if err := refs.Next(); err != nil {
				return err
			}
		}
		return nil
	}
	for idx.Valid() && refs.Valid() {
		rec := idx.Record()
		if err := pass(rec[:32]); err != nil {
			return err
		}
		if refs.Valid() && bytes.Equal(refs.Record(), rec[:32]) {
			matched = true
			if err := found(index.GetRecord(rec)); err != nil {
				return err
			}
		}
		if err := idx.Next(); err != nil {
			return err
		}
	}
	return pass(nil)
}

// openSegments loads the footers of the given segments that still exist.
func openSegments(ctx context.Context, r *repo.Repository, ids []string) ([]*index.Segment, error) {
	var segs []*index.Segment
	for _, s := range ids {
		sid, err := id.Parse(s)
		if err != nil {
			continue
		}
		fi, err := r.Store().Stat(ctx, index.ObjectName(sid))
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		seg, err := index.OpenSegment(ctx, r.Store(), r.Key(), sid, fi.Size)
		if err != nil {
			return nil, err
		}
		segs = append(segs, seg)
	}
	return segs, nil
}
