package verify

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/extsort"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/chunk"
	"github.com/coffer-backup/coffer/internal/repo/diskmap"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

// packTrouble is what is wrong with a pack as a whole.
type packTrouble struct {
	kind   string // missing-pack, truncated-pack, unreadable-pack
	detail string
	size   int64 // for truncated packs: entries ending past it are lost
}

// byPackRecord is an index entry keyed by pack and offset:
// pack [16] | offset u32 | length u32 | raw length u32 | chunk ID [32].
const byPackRecord = 60

func putByPack(b []byte, e index.Entry) {
	copy(b[:16], e.Pack[:])
	binary.BigEndian.PutUint32(b[16:], e.Offset)
	binary.BigEndian.PutUint32(b[20:], e.Length)
	binary.BigEndian.PutUint32(b[24:], e.RawLength)
	copy(b[28:], e.ID[:])
}

func getByPack(b []byte) index.Entry {
	return index.Entry{ID: id.ID(b[28:60]), Location: index.Location{Pack: pack.ID(b[:16]),
		Offset: binary.BigEndian.Uint32(b[16:]), Length: binary.BigEndian.Uint32(b[20:]), RawLength: binary.BigEndian.Uint32(b[24:])}}
}

// sortIndex reads the index once, segment after segment
// (index.ScanSegments, one block in memory), and sorts its entries twice:
// by pack and offset, for the pack checks, and by chunk ID, to join with
// the referenced chunks. A k-way merge of the segments would give the ID
// order without sorting, but it holds a decoded block of every segment at
// once, which grows with the index. Damaged index blocks are reported
// (metadata: the packs' trailers still list those chunks) and skipped.
func (c *checker) sortIndex() (byPack *extsort.Sorter, byID *extsort.Cursor, err error) {
	byPack = extsort.New(byPackRecord, c.o.MemoryBudget/4, c.o.TempDir)
	ids := extsort.New(index.RecordSize, c.o.MemoryBudget/4, c.o.TempDir)
	var prec [byPackRecord]byte
	var irec [index.RecordSize]byte
	err = index.ScanSegments(c.ctx, c.r.Store(), c.r.Key(), c.r.Index().Segments(), func(e index.Entry) error {
		putByPack(prec[:], e)
		if err := byPack.Add(prec[:]); err != nil {
			return err
		}
		index.PutRecord(irec[:], e)
		return ids.Add(irec[:])
	}, func(seg id.ID, block int, err error) {
		c.problem(Problem{Kind: "index-segment", Object: index.ObjectName(seg), Repair: repairIndex,
			Detail: fmt.Sprintf("index block %d is unreadable (%v); the chunks it lists are still in their packs", block, err)})
	})
	if err == nil {
		byID, err = ids.Cursor(false)
	}
	if err != nil {
		byPack.Close()
		ids.Close()
		return nil, nil, err
	}
	return byPack, byID, nil
}

// listed sorts the pack listing: pack [16] | size u64.
func (c *checker) listed() (*extsort.Cursor, error) {
	s := extsort.New(24, c.o.MemoryBudget/8, c.o.TempDir)
	var rec [24]byte
	err := c.r.Store().List(c.ctx, "data/", func(fi store.ObjectInfo) error {
		p, err := pack.ParseObjectName(fi.Name)
		if err != nil {
			return nil
		}
		c.rep.Packs++
		copy(rec[:16], p[:])
		binary.BigEndian.PutUint64(rec[16:], uint64(fi.Size))
		return s.Add(rec[:])
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	return s.Cursor(false)
}

// packs checks that every indexed pack exists and is long enough and, with
// ReadData, reads the selected ones. It walks the index entries grouped by
// pack beside the sorted pack listing.
func (c *checker) packs(byPack *extsort.Sorter) error {
	list, err := c.listed()
	if err != nil {
		byPack.Close()
		return err
	}
	defer list.Close()
	g, ctx := errgroup.WithContext(c.ctx)
	workers := max(c.r.Store().Properties().Connections, 2)
	g.SetLimit(workers)
	// Each reading goroutine takes a reader (its decoder and buffers) and
	// gives it back: there are never more than workers of them, and a pass
	// over any number of packs makes no garbage per pack.
	readers := make(chan *packReader, workers)
	for range workers {
		readers <- nil // made on first use
	}
	var mu sync.Mutex
	// The pack being walked: where its indexed contents end and, when it
	// is read, its entries (for that pack's reader, which holds the pack
	// anyway). A pack that is not read costs nothing per entry.
	var cur pack.ID
	var end int64
	have, read := false, false
	var group []index.Entry
	flush := func() error {
		if !have {
			return nil
		}
		p, entries := cur, group
		have, group = false, nil
		found, err := list.SeekTo(p[:])
		if err != nil {
			return err
		}
		if !found {
			c.badPacks[p] = packTrouble{kind: "missing-pack", detail: "the index names this pack but it does not exist"}
			return nil
		}
		size := int64(binary.BigEndian.Uint64(list.Record()[16:]))
		if size < end+8 {
			c.badPacks[p] = packTrouble{kind: "truncated-pack", size: size,
				detail: fmt.Sprintf("pack is %d bytes, shorter than its indexed contents (%d)", size, end+8)}
		}
		if !read {
			return nil
		}
		c.o.Progress.PacksTotal.Add(1)
		g.Go(func() error {
			pr := <-readers
			defer func() { readers <- pr }()
			if pr == nil {
				pr = &packReader{}
			}
			res := c.readPack(pr, p, size, entries)
			mu.Lock()
			defer mu.Unlock()
			c.absorb(p, res)
			c.o.Progress.PacksDone.Add(1)
			c.o.Progress.BytesRead.Add(res.bytes)
			return ctx.Err()
		})
		return nil
	}
	err = byPack.Iterate(false, func(rec []byte) error {
		e := getByPack(rec)
		if have && cur != e.Pack {
			if err := flush(); err != nil {
				return err
			}
		}
		if !have {
			cur, end, have = e.Pack, 0, true
			read = c.o.ReadData && c.o.selected(cur)
		}
		end = max(end, int64(e.Offset)+int64(e.Length))
		if read {
			group = append(group, e)
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if werr := g.Wait(); err == nil {
		err = werr
	}
	return err
}

// packResult is what reading one pack found.
type packResult struct {
	bytes, chunks int64
	readErr       error // the pack could not be read at all
	header        error // damaged header
	trailer       error // unreadable trailer
	unlisted      int   // index entries the readable trailer does not list
	broken        map[location]brokenCopy
	entries       int
}

// packReader is what one reading goroutine reuses from pack to pack.
type packReader struct {
	dec      *repo.Decoder
	raw, buf []byte
	listed   []uint32 // offsets the trailer lists
}

// readPack reads a whole pack and checks its header, its trailer against
// the index, and every chunk blob the index places in it. entries are in
// offset order.
func (c *checker) readPack(pr *packReader, p pack.ID, size int64, entries []index.Entry) packResult {
	res := packResult{entries: len(entries), broken: map[location]brokenCopy{}}
	if int64(cap(pr.raw)) < size {
		pr.raw = make([]byte, size)
	}
	raw := pr.raw[:size]
	if err := c.r.ReadPackRange(c.ctx, p, 0, raw); err != nil {
		res.readErr = err
		return res
	}
	res.bytes = int64(len(raw))
	res.header = pack.CheckHeader(raw)
	listed, err := pack.ReadTrailer(func(off, n int64) ([]byte, error) {
		if off < 0 || off+n > int64(len(raw)) {
			return nil, store.ErrInvalidRange
		}
		return raw[off : off+n], nil
	}, int64(len(raw)), c.r.Key())
	if err != nil {
		res.trailer = err
	} else {
		// Both sorted by offset, walked side by side: no set per pack.
		pr.listed = pr.listed[:0]
		for _, e := range listed {
			pr.listed = append(pr.listed, e.Offset)
		}
		slices.Sort(pr.listed)
		i := 0
		for _, e := range entries {
			for i < len(pr.listed) && pr.listed[i] < e.Offset {
				i++
			}
			if i == len(pr.listed) || pr.listed[i] != e.Offset {
				res.unlisted++
			}
		}
	}
	if pr.dec == nil {
		if pr.dec, err = c.r.NewDecoder(); err != nil {
			res.readErr = err
			return res
		}
	}
	for _, e := range entries {
		res.chunks++
		end := int64(e.Offset) + int64(e.Length)
		if end > int64(len(raw)) {
			res.broken[location{p, e.Offset}] = brokenCopy{e.ID, "the blob extends past the end of the pack"}
			continue
		}
		if pr.buf, err = pr.dec.Decode(pr.buf[:0], raw[e.Offset:end], e.ID, int(e.RawLength)); err != nil {
			res.broken[location{p, e.Offset}] = brokenCopy{e.ID, errText(err)}
		}
	}
	return res
}

// absorb turns one pack's findings into problems (metadata damage of the
// pack; broken chunk copies are judged later, per chunk).
func (c *checker) absorb(p pack.ID, res packResult) {
	c.rep.PacksRead++
	c.rep.ChunksRead += res.chunks
	c.rep.BytesRead += res.bytes
	name := pack.ObjectName(p)
	if res.readErr != nil {
		c.badPacks[p] = packTrouble{kind: "unreadable-pack", detail: fmt.Sprintf("pack could not be read: %v", res.readErr)}
		return
	}
	for loc, bc := range res.broken {
		c.brokenAt[loc] = bc
	}
	intact := res.entries - len(res.broken)
	if res.header != nil {
		c.problem(Problem{Kind: "pack-header", Object: name, Repair: repairPacks,
			Detail: fmt.Sprintf("pack header is damaged (%v); it is not needed to read the chunks (%d of %d authenticate)", res.header, intact, res.entries)})
	}
	switch {
	case res.trailer != nil:
		c.problem(Problem{Kind: "pack-trailer", Object: name, Repair: repairPacks,
			Detail: fmt.Sprintf("pack trailer (its table of contents) is unreadable (%v); the index still locates its chunks and %d of %d authenticate", res.trailer, intact, res.entries)})
	case res.unlisted > 0:
		c.problem(Problem{Kind: "pack-trailer", Object: name, Repair: repairPacks,
			Detail: fmt.Sprintf("pack trailer does not list %d of the %d chunks the index places in the pack", res.unlisted, res.entries)})
	}
}

// damage tells damage to an object (its content fails the format or
// authentication checks, it is cut short or gone) from other errors.
func damage(err error) bool {
	return errors.Is(err, diskmap.ErrFormat) || errors.Is(err, index.ErrFormat) || errors.Is(err, pack.ErrFormat) ||
		errors.Is(err, chunk.ErrCorrupt) || errors.Is(err, crypto.ErrAuth) ||
		errors.Is(err, store.ErrInvalidRange) || errors.Is(err, store.ErrNotFound)
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}
