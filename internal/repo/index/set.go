package index

import (
	"container/heap"
	"container/list"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/store"
)

// Prefix is the store prefix of index segments.
const Prefix = "index/"

// ObjectName is the store name of a segment.
func ObjectName(seg id.ID) string { return Prefix + seg.String() }

// Segment is one loaded segment: its footer in memory, blocks on demand.
type Segment struct {
	ID   id.ID
	Size int64
	f    *footer
}

// Count is the number of entries.
func (s *Segment) Count() uint64 { return s.f.count }

// HeaderDamaged reports a damaged header that was tolerated because the
// authenticated footer proved the segment readable.
func (s *Segment) HeaderDamaged() error { return s.f.header }

// Supersedes lists the segments this one replaces.
func (s *Segment) Supersedes() []id.ID { return s.f.supersedes }

// Set is the view over all live segments of a repository. Safe for
// concurrent use.
type Set struct {
	st  store.Store
	key *crypto.Key
	// segs is replaced, never mutated, so lookups read it without locking.
	segs  atomic.Pointer[[]*Segment]
	mu    sync.Mutex // serialises writers of segs and the bookkeeping below
	cache *blockCache
	// known holds every segment object this set has seen: live, retired
	// (superseded) or damaged. Refresh opens only names it does not know.
	known map[id.ID]bool
	// retired lists segments seen but superseded by another. Their objects
	// may still exist: a compaction must supersede them too, or deleting
	// the segment that superseded them would bring them back to life.
	retired []id.ID
	damaged []string
	// bad tells locations recorded as broken (the repository's damage
	// record); Lookup skips them so that a broken copy is never used.
	bad atomic.Pointer[func(id.ID, Location) bool]
}

// SetBad installs the test for broken locations that Lookup skips.
func (s *Set) SetBad(bad func(id.ID, Location) bool) { s.bad.Store(&bad) }

func (s *Set) isBad(x id.ID, loc Location) bool {
	if f := s.bad.Load(); f != nil {
		return (*f)(x, loc)
	}
	return false
}

// Load reads the footers of all segments in the store and drops segments
// superseded by others. cacheBlocks bounds the decoded-block cache. A
// segment that is corrupt is skipped and reported to bad (when non-nil; nil
// makes it an error): one damaged segment must not make the whole
// repository unreadable; `coffer repair index` rebuilds it from packs.
func Load(ctx context.Context, st store.Store, key *crypto.Key, cacheBlocks int, bad func(name string, err error)) (*Set, error) {
	s := &Set{st: st, key: key, cache: newBlockCache(cacheBlocks), known: map[id.ID]bool{}}
	s.segs.Store(&[]*Segment{})
	if err := s.Refresh(ctx, bad); err != nil {
		return nil, err
	}
	return s, nil
}

// Refresh adds the segments written since the set was loaded (by this or
// other processes) and applies what they supersede. Segments it already
// knows are not read again, so a refresh of an unchanged index costs one
// listing.
func (s *Set) Refresh(ctx context.Context, bad func(name string, err error)) error {
	var names []store.ObjectInfo
	err := s.st.List(ctx, Prefix, func(fi store.ObjectInfo) error {
		names = append(names, fi)
		return nil
	})
	if err != nil {
		return fmt.Errorf("list index: %w", err)
	}
	s.mu.Lock()
	fresh := names[:0]
	for _, fi := range names {
		if sid, err := id.Parse(strings.TrimPrefix(fi.Name, Prefix)); err != nil || !s.known[sid] {
			fresh = append(fresh, fi)
		}
	}
	s.mu.Unlock()
	segs := make([]*Segment, len(fresh))
	var damaged []string
	var dmu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, fi := range fresh {
		g.Go(func() error {
			sid, err := id.Parse(strings.TrimPrefix(fi.Name, Prefix))
			if err != nil {
				return fmt.Errorf("index: unexpected object %s", fi.Name)
			}
			seg, err := OpenSegment(gctx, s.st, s.key, sid, fi.Size)
			if err != nil {
				if bad != nil && (errors.Is(err, ErrFormat) || errors.Is(err, store.ErrInvalidRange)) {
					bad(fi.Name, err)
					dmu.Lock()
					damaged = append(damaged, fi.Name)
					dmu.Unlock()
					return nil
				}
				if errors.Is(err, store.ErrNotFound) {
					return nil // deleted since the listing (superseded and collected)
				}
				return err
			}
			segs[i] = seg
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	loaded := segs[:0]
	for _, seg := range segs {
		if seg != nil {
			loaded = append(loaded, seg)
		}
	}
	s.mu.Lock()
	for _, name := range damaged {
		if sid, err := id.Parse(strings.TrimPrefix(name, Prefix)); err == nil {
			s.known[sid] = true
		}
	}
	s.damaged = append(s.damaged, damaged...)
	s.mu.Unlock()
	s.install(loaded)
	return nil
}

// Retired lists segments that were seen but are superseded by another
// segment; their objects may still exist.
func (s *Set) Retired() []id.ID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]id.ID(nil), s.retired...)
}

// Damaged lists segment objects that could not be read.
func (s *Set) Damaged() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.damaged...)
}

// NewSet builds a set over explicit segments (no superseding applied), e.g.
// to look chunks up in segments that a compaction replaced.
func NewSet(st store.Store, key *crypto.Key, segs []*Segment, cacheBlocks int) *Set {
	s := &Set{st: st, key: key, cache: newBlockCache(cacheBlocks), known: map[id.ID]bool{}}
	cp := append([]*Segment(nil), segs...)
	s.segs.Store(&cp)
	return s
}

// OpenSegment reads one segment's footer.
func OpenSegment(ctx context.Context, st store.Store, key *crypto.Key, sid id.ID, size int64) (*Segment, error) {
	name := ObjectName(sid)
	f, err := parseFooter(func(off, n int64) ([]byte, error) { return store.Get(ctx, st, name, off, n) }, size, key)
	if err != nil {
		return nil, fmt.Errorf("index segment %s: %w", sid.Short(), err)
	}
	return &Segment{ID: sid, Size: size, f: f}, nil
}

// install adds segments and drops every segment superseded by another.
func (s *Set) install(add []*Segment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := append(append([]*Segment(nil), *s.segs.Load()...), add...)
	dead := map[id.ID]bool{}
	for _, seg := range all {
		s.known[seg.ID] = true
		for _, old := range seg.f.supersedes {
			dead[old] = true
		}
	}
	live := make([]*Segment, 0, len(all))
	for _, seg := range all {
		if !dead[seg.ID] {
			live = append(live, seg)
		} else {
			s.retired = append(s.retired, seg.ID)
		}
	}
	s.segs.Store(&live)
}

// Add makes a newly written segment part of the set.
func (s *Set) Add(seg *Segment) { s.install([]*Segment{seg}) }

// Segments returns the live segments; the slice must not be modified.
func (s *Set) Segments() []*Segment { return *s.segs.Load() }

// Count is the number of entries over all live segments (duplicates
// counted once per segment).
func (s *Set) Count() uint64 {
	var n uint64
	for _, seg := range s.Segments() {
		n += seg.f.count
	}
	return n
}

// Lookup finds a chunk. The bloom filter answers most misses without I/O.
// A copy recorded as broken is skipped: another segment may list a good
// one, and otherwise the chunk counts as absent (so it is stored again).
func (s *Set) Lookup(ctx context.Context, x id.ID) (Location, bool, error) {
	var found Location
	ok := false
	err := s.lookup(ctx, x, func(loc Location) bool {
		if s.isBad(x, loc) {
			return true
		}
		found, ok = loc, true
		return false
	})
	return found, ok, err
}

// LookupAll returns every location the live segments list for a chunk,
// broken ones included.
func (s *Set) LookupAll(ctx context.Context, x id.ID) ([]Location, error) {
	var all []Location
	err := s.lookup(ctx, x, func(loc Location) bool {
		all = append(all, loc)
		return true
	})
	return all, err
}

// lookup calls fn with each segment's location of x until fn returns false.
// A segment block that cannot be read is skipped: another segment may list
// the chunk. Only when none does is the damage returned, so one damaged
// block does not make chunks listed elsewhere unreachable.
func (s *Set) lookup(ctx context.Context, x id.ID, fn func(Location) bool) error {
	var damaged error
	for _, seg := range s.Segments() {
		if !seg.f.bloom.mayContain(x) {
			continue
		}
		rows := seg.f.rows
		i := sort.Search(len(rows), func(i int) bool { return rows[i].first.Compare(x) > 0 }) - 1
		if i < 0 {
			continue
		}
		entries, err := s.block(ctx, seg, i)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, store.ErrInvalidRange) {
				return err
			}
			damaged = err
			continue
		}
		j := sort.Search(len(entries), func(j int) bool { return entries[j].ID.Compare(x) >= 0 })
		if j < len(entries) && entries[j].ID == x {
			if !fn(entries[j].Location) {
				return nil
			}
			damaged = nil // found a copy: a damaged block elsewhere does not matter
		}
	}
	return damaged
}

func (s *Set) block(ctx context.Context, seg *Segment, i int) ([]Entry, error) {
	k := cacheKey{seg.ID, i}
	if e, ok := s.cache.get(k); ok {
		return e, nil
	}
	entries, err := readBlock(ctx, s.st, s.key, seg, i)
	if err != nil {
		return nil, err
	}
	s.cache.put(k, entries)
	return entries, nil
}

func readBlock(ctx context.Context, st store.Store, key *crypto.Key, seg *Segment, i int) ([]Entry, error) {
	row := seg.f.rows[i]
	sealed, err := store.Get(ctx, st, ObjectName(seg.ID), row.offset, int64(row.length))
	if err != nil {
		return nil, fmt.Errorf("index segment %s block %d: %w", seg.ID.Short(), i, err)
	}
	entries, err := decodeBlock(key, sealed, row)
	if err != nil {
		return nil, fmt.Errorf("index segment %s block %d: %w", seg.ID.Short(), i, err)
	}
	return entries, nil
}

// Iterate calls fn for every entry of every live segment in ascending ID
// order (a k-way merge). An ID present in several segments is reported
// once per segment, consecutively.
func (s *Set) Iterate(ctx context.Context, fn func(Entry) error) error {
	return Merge(ctx, s.st, s.key, s.Segments(), fn)
}

// Scan is Iterate, except that a block that cannot be read (damaged, cut
// off) is reported to damaged and skipped instead of ending the scan, so
// one damaged block does not hide the rest of the index.
func (s *Set) Scan(ctx context.Context, fn func(Entry) error, damaged func(seg id.ID, block int, err error)) error {
	return merge(ctx, s.st, s.key, s.Segments(), fn, damaged)
}

// Merge is Iterate over an explicit list of segments. It holds one decoded
// block per segment in memory and picks the next entry with a heap, so the
// cost per entry is O(log segments).
func Merge(ctx context.Context, st store.Store, key *crypto.Key, segs []*Segment, fn func(Entry) error) error {
	return merge(ctx, st, key, segs, fn, nil)
}

func merge(ctx context.Context, st store.Store, key *crypto.Key, segs []*Segment, fn func(Entry) error, damaged func(id.ID, int, error)) error {
	h := &cursorHeap{}
	for _, seg := range segs {
		c := &cursor{seg: seg, damaged: damaged}
		if err := c.next(ctx, st, key); err != nil {
			return err
		}
		if !c.done {
			h.items = append(h.items, c)
		}
	}
	heap.Init(h)
	for h.Len() > 0 {
		c := h.items[0]
		if err := fn(c.cur()); err != nil {
			return err
		}
		if err := c.next(ctx, st, key); err != nil {
			return err
		}
		if c.done {
			heap.Pop(h)
		} else {
			heap.Fix(h, 0)
		}
	}
	return nil
}

type cursorHeap struct{ items []*cursor }

func (h *cursorHeap) Len() int           { return len(h.items) }
func (h *cursorHeap) Less(i, j int) bool { return h.items[i].cur().ID.Less(h.items[j].cur().ID) }
func (h *cursorHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *cursorHeap) Push(x any)         { h.items = append(h.items, x.(*cursor)) }
func (h *cursorHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

type cursor struct {
	seg     *Segment
	block   int // next block to load
	entries []Entry
	pos     int
	done    bool
	// damaged, when set, receives blocks that cannot be read, which are
	// then skipped.
	damaged func(seg id.ID, block int, err error)
}

func (c *cursor) cur() Entry { return c.entries[c.pos] }

func (c *cursor) next(ctx context.Context, st store.Store, key *crypto.Key) error {
	if c.entries != nil && c.pos+1 < len(c.entries) {
		c.pos++
		return nil
	}
	for {
		if c.block >= len(c.seg.f.rows) {
			c.done = true
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		entries, err := readBlock(ctx, st, key, c.seg, c.block)
		c.block++
		if err != nil {
			if c.damaged == nil || (!errors.Is(err, ErrFormat) && !errors.Is(err, store.ErrInvalidRange)) {
				return err
			}
			c.damaged(c.seg.ID, c.block-1, err)
			continue
		}
		if len(entries) == 0 {
			continue
		}
		c.entries, c.pos = entries, 0
		return nil
	}
}

// WriteSegment writes entries (any order; sorted here, duplicates of the
// same ID keep the first) as a new segment and returns it loaded.
func WriteSegment(ctx context.Context, st store.Store, key *crypto.Key, entries []Entry, supersedes []id.ID) (*Segment, error) {
	sort.Slice(entries, func(i, j int) bool { return entries[i].ID.Less(entries[j].ID) })
	sid := id.Random()
	w, err := st.Create(ctx, ObjectName(sid), store.PutOptions{IfNotExists: st.Properties().ConditionalWrites})
	if err != nil {
		return nil, err
	}
	cw := &countingWriter{w: w}
	sw, err := NewSegmentWriter(cw, key, len(entries), supersedes)
	if err != nil {
		_ = w.Abort()
		return nil, err
	}
	for i, e := range entries {
		if i > 0 && e.ID == entries[i-1].ID {
			continue
		}
		if err := sw.Add(e); err != nil {
			_ = w.Abort()
			return nil, err
		}
	}
	if err := sw.Finish(); err != nil {
		_ = w.Abort()
		return nil, err
	}
	if _, err := w.Commit(); err != nil {
		return nil, fmt.Errorf("commit index segment: %w", err)
	}
	return OpenSegment(ctx, st, key, sid, cw.n)
}

type countingWriter struct {
	w interface{ Write([]byte) (int, error) }
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// IsFormatError reports a corrupt or unsupported segment.
func IsFormatError(err error) bool { return errors.Is(err, ErrFormat) }

type cacheKey struct {
	seg   id.ID
	block int
}

// blockCache is a small LRU of decoded blocks.
type blockCache struct {
	mu    sync.Mutex
	max   int
	order *list.List
	items map[cacheKey]*list.Element
}

type cacheItem struct {
	k cacheKey
	v []Entry
}

func newBlockCache(max int) *blockCache {
	return &blockCache{max: max, order: list.New(), items: map[cacheKey]*list.Element{}}
}

func (c *blockCache) get(k cacheKey) ([]Entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*cacheItem).v, true
	}
	return nil, false
}

func (c *blockCache) put(k cacheKey, v []Entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[k]; ok {
		return
	}
	c.items[k] = c.order.PushFront(&cacheItem{k, v})
	for c.order.Len() > c.max {
		el := c.order.Back()
		c.order.Remove(el)
		delete(c.items, el.Value.(*cacheItem).k)
	}
}
