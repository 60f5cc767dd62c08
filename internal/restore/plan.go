// Package restore reads disks back out of backup points: whole disks into
// sparse files or block devices (ToFile), and random access for browsing
// files inside images and for instant recovery (DiskReader).
package restore

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
)

// chunkRef is one distinct chunk of a disk and every span it fills.
type chunkRef struct {
	id    id.ID
	loc   repo.Location
	spans []uint64
}

// readGroup is a run of blobs of one pack read with a single request.
type readGroup struct {
	pack   repo.PackID
	offset int64
	length int64
	refs   []*chunkRef
}

// maxGroupBytes bounds one read request (and so each fetch worker's read
// buffer; see maxBatchBytes); maxGroupGap is the largest hole between blobs
// worth reading through to save a request.
const (
	maxGroupBytes = 4 << 20
	maxGroupGap   = 256 << 10
)

// planWindow is how many spans one plan covers. A plan costs about 200
// bytes per distinct chunk, so a whole multi-terabyte disk is not planned
// at once: 128Ki spans (32 GiB of disk at 256 KiB chunks) take about 25 MiB.
// A chunk repeated in two windows is read once per window.
var planWindow uint64 = 1 << 17

// rangeBytes is the disk size of spans from to end-1.
func rangeBytes(m *repo.DiskMap, from, end uint64) int64 {
	if end <= from {
		return 0
	}
	return int64(end-from-1)*int64(m.ChunkSize()) + int64(m.SpanLength(end-1))
}

// plan lists the chunks of spans from to end-1 grouped into pack reads, in
// pack order so reads are sequential within each pack. Spans in skip are
// left out (resumed restores). It also returns the bytes of zero spans,
// and calls lost for each span a repair recorded as lost (left as zeros).
func plan(ctx context.Context, r *repo.Repository, m *repo.DiskMap, skip func(uint64) bool, lost func(uint64), from, end uint64) ([]readGroup, int64, error) {
	byID := map[id.ID]*chunkRef{}
	var zeroBytes int64
	err := m.IterateRange(ctx, from, end, func(i uint64, x id.ID) error {
		if x.IsZero() {
			zeroBytes += int64(m.SpanLength(i))
			return nil
		}
		if x == repo.LostChunk {
			lost(i)
			return nil
		}
		if skip != nil && skip(i) {
			return nil
		}
		ref := byID[x]
		if ref == nil {
			ref = &chunkRef{id: x}
			byID[x] = ref
		}
		ref.spans = append(ref.spans, i)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	refs := make([]*chunkRef, 0, len(byID))
	for _, ref := range byID {
		loc, err := r.Locate(ctx, ref.id)
		if err != nil {
			return nil, 0, fmt.Errorf("span %d: %w", ref.spans[0], err)
		}
		ref.loc = loc
		refs = append(refs, ref)
	}
	sort.Slice(refs, func(i, j int) bool {
		a, b := refs[i].loc, refs[j].loc
		if a.Pack != b.Pack {
			return string(a.Pack[:]) < string(b.Pack[:])
		}
		return a.Offset < b.Offset
	})
	var groups []readGroup
	for _, ref := range refs {
		start, end := int64(ref.loc.Offset), int64(ref.loc.Offset)+int64(ref.loc.Length)
		if n := len(groups); n > 0 {
			g := &groups[n-1]
			if g.pack == ref.loc.Pack && start >= g.offset+g.length && start-(g.offset+g.length) <= maxGroupGap && end-g.offset <= maxGroupBytes {
				g.length = end - g.offset
				g.refs = append(g.refs, ref)
				continue
			}
		}
		groups = append(groups, readGroup{pack: ref.loc.Pack, offset: start, length: end - start, refs: []*chunkRef{ref}})
	}
	// Parallel backup workers store a disk's chunks slightly out of order;
	// decoding a group in disk order lets consecutive chunks be written
	// with one request (see fetch).
	for _, g := range groups {
		sort.Slice(g.refs, func(i, j int) bool { return g.refs[i].spans[0] < g.refs[j].spans[0] })
	}
	return groups, zeroBytes, nil
}

// Allocated returns the spans of a disk map that hold data, merged: the
// ranges a restore must write (everything else is zeros).
func Allocated(ctx context.Context, m *repo.DiskMap) ([]hypervisor.Extent, error) {
	var out []hypervisor.Extent
	cs := int64(m.ChunkSize())
	err := m.Iterate(ctx, func(i uint64, x id.ID) error {
		if x.IsZero() || x == repo.LostChunk {
			return nil
		}
		off, n := int64(i)*cs, int64(m.SpanLength(i))
		if k := len(out); k > 0 && out[k-1].Offset+out[k-1].Length == off {
			out[k-1].Length += n
			return nil
		}
		out = append(out, hypervisor.Extent{Offset: off, Length: n})
		return nil
	})
	return out, err
}

// ErrLostSpan is returned for a read of a span that a repair recorded as
// lost: its data is gone, and coffer says so rather than inventing zeros.
var ErrLostSpan = errors.New("this part of the disk was lost to repository damage (recorded by `coffer repair snapshots`)")

// addSpan appends span i of m to a list of byte ranges, merging neighbours.
func addSpan(list []hypervisor.Extent, m *repo.DiskMap, i uint64) []hypervisor.Extent {
	off, n := int64(i)*int64(m.ChunkSize()), int64(m.SpanLength(i))
	if k := len(list); k > 0 && list[k-1].Offset+list[k-1].Length == off {
		list[k-1].Length += n
		return list
	}
	return append(list, hypervisor.Extent{Offset: off, Length: n})
}
