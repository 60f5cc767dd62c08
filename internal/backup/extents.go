package backup

import (
	"sort"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// cursor answers range queries over a sorted extent list. A nil list means
// the whole disk. Not safe for concurrent use (it reuses a scratch slice).
type cursor struct {
	ext     []hypervisor.Extent
	all     bool
	size    int64
	scratch []hypervisor.Extent
}

func newCursor(ext []hypervisor.Extent, size int64) *cursor {
	if ext == nil {
		return &cursor{all: true, size: size}
	}
	return &cursor{ext: Normalize(ext, size), size: size}
}

// changedCursor is a disk's change set as a cursor. With a valid change
// set, no range (nil or empty) means nothing changed: a connector may
// return either, and read as newCursor reads nil (the whole disk, right
// for an allocation map a reader could not give) it made an idle disk's
// incremental read the disk whole. Without a valid one, every span.
func changedCursor(d Disk) *cursor {
	if !d.ChangedValid {
		return &cursor{all: true, size: d.Size}
	}
	return &cursor{ext: Normalize(d.Changed, d.Size), size: d.Size}
}

// Normalize sorts extents, merges overlapping or adjacent ones and clips
// them to [0, size).
func Normalize(ext []hypervisor.Extent, size int64) []hypervisor.Extent {
	out := make([]hypervisor.Extent, 0, len(ext))
	for _, e := range ext {
		start, end := max(e.Offset, 0), min(e.Offset+e.Length, size)
		if end > start {
			out = append(out, hypervisor.Extent{Offset: start, Length: end - start})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Offset < out[j].Offset })
	merged := out[:0]
	for _, e := range out {
		if n := len(merged); n > 0 && e.Offset <= merged[n-1].Offset+merged[n-1].Length {
			last := &merged[n-1]
			last.Length = max(last.Offset+last.Length, e.Offset+e.Length) - last.Offset
			continue
		}
		merged = append(merged, e)
	}
	return merged
}

// first returns the index of the first extent ending after off.
func (c *cursor) first(off int64) int {
	return sort.Search(len(c.ext), func(i int) bool { return c.ext[i].Offset+c.ext[i].Length > off })
}

// overlaps reports whether [off, off+length) intersects the extents.
func (c *cursor) overlaps(off, length int64) bool {
	if c.all {
		return true
	}
	i := c.first(off)
	return i < len(c.ext) && c.ext[i].Offset < off+length
}

// within returns the extents clipped to [off, end), in order.
func (c *cursor) within(off, end int64) []hypervisor.Extent {
	if c.all {
		c.scratch = append(c.scratch[:0], hypervisor.Extent{Offset: off, Length: min(end, c.size) - off})
		return c.scratch
	}
	c.scratch = c.scratch[:0]
	for i := c.first(off); i < len(c.ext) && c.ext[i].Offset < end; i++ {
		s, e := max(c.ext[i].Offset, off), min(c.ext[i].Offset+c.ext[i].Length, end)
		c.scratch = append(c.scratch, hypervisor.Extent{Offset: s, Length: e - s})
	}
	return c.scratch
}
