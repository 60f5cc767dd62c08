// Package index maps chunk IDs to their place in packs. The index is a set
// of immutable segments (index/<segment ID>), each a sorted run of entries;
// backups add small segments, garbage collection merges them into one.
//
// Memory does not grow with the index: only each segment's block table (one
// 56-byte row per 1024 entries) and a bloom filter (1.25 bytes per entry)
// stay in RAM; entry blocks are read on demand through a bounded LRU cache.
//
// Segment layout (integers little-endian):
//
//	header  16 bytes: magic "COFINDX\x00", version u16, flags u16, reserved u32
//	blocks  sealed("index-block") runs of up to 1024 sorted 60-byte entries:
//	        chunk ID [32], pack ID [16], offset u32, length u32, raw length u32
//	footer  sealed("index-footer"): entry count u64, block count u32,
//	        superseded-segment count u32, bloom bits u32, bloom hashes u32,
//	        superseded segment IDs [32] each, block table rows (first chunk
//	        ID [32], offset u64, sealed length u32, entry count u32),
//	        bloom bit array
//	tail    8 bytes: footer length u32, magic "CFIX"
//
// A segment that lists superseded segments replaces them: readers ignore the
// superseded ones even if their deletion has not happened yet.
package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo/pack"
)

// Format constants; never change them in place.
const (
	Version      = 1
	headerSize   = 16
	tailSize     = 8
	EntrySize    = 60
	BlockEntries = 1024
	rowSize      = 48
	blockSeal    = "index-block"
	footerSeal   = "index-footer"
	bloomHashes  = 7
	bloomBitsPer = 10
)

var (
	magic     = [8]byte{'C', 'O', 'F', 'I', 'N', 'D', 'X', 0}
	tailMagic = [4]byte{'C', 'F', 'I', 'X'}
)

// ErrFormat reports a structurally invalid or unsupported segment.
var ErrFormat = errors.New("invalid index segment")

// Location is where a chunk's blob lives.
type Location struct {
	Pack      pack.ID
	Offset    uint32
	Length    uint32
	RawLength uint32
}

// Entry is one index row.
type Entry struct {
	ID id.ID
	Location
}

func (e Entry) put(b []byte) {
	copy(b[:32], e.ID[:])
	copy(b[32:48], e.Pack[:])
	binary.LittleEndian.PutUint32(b[48:], e.Offset)
	binary.LittleEndian.PutUint32(b[52:], e.Length)
	binary.LittleEndian.PutUint32(b[56:], e.RawLength)
}

func getEntry(b []byte) Entry {
	var e Entry
	copy(e.ID[:], b[:32])
	copy(e.Pack[:], b[32:48])
	e.Offset = binary.LittleEndian.Uint32(b[48:])
	e.Length = binary.LittleEndian.Uint32(b[52:])
	e.RawLength = binary.LittleEndian.Uint32(b[56:])
	return e
}

// blockRow is one row of a segment's block table.
type blockRow struct {
	first  id.ID
	offset int64
	length uint32
	count  uint32
}

// SegmentWriter writes entries, which must arrive in strictly ascending ID
// order, as one segment.
type SegmentWriter struct {
	w          io.Writer
	key        *crypto.Key
	off        int64
	block      []byte
	blockFirst id.ID
	blockCount int
	rows       []blockRow
	count      uint64
	last       id.ID
	bloom      *bloom
	supersedes []id.ID
	sealed     []byte
}

// NewSegmentWriter starts a segment; expected sizes the bloom filter (an
// upper bound is fine) and supersedes lists segments this one replaces.
func NewSegmentWriter(w io.Writer, key *crypto.Key, expected int, supersedes []id.ID) (*SegmentWriter, error) {
	var h [headerSize]byte
	copy(h[:8], magic[:])
	binary.LittleEndian.PutUint16(h[8:], Version)
	if _, err := w.Write(h[:]); err != nil {
		return nil, err
	}
	return &SegmentWriter{w: w, key: key, off: headerSize, bloom: newBloom(expected), supersedes: supersedes,
		block: make([]byte, 0, BlockEntries*EntrySize)}, nil
}

// Add appends one entry.
func (s *SegmentWriter) Add(e Entry) error {
	if s.count > 0 && e.ID.Compare(s.last) <= 0 {
		return fmt.Errorf("index entries out of order: %s after %s", e.ID.Short(), s.last.Short())
	}
	if s.blockCount == 0 {
		s.blockFirst = e.ID
	}
	var row [EntrySize]byte
	e.put(row[:])
	s.block = append(s.block, row[:]...)
	s.blockCount++
	s.count++
	s.last = e.ID
	s.bloom.add(e.ID)
	if s.blockCount == BlockEntries {
		return s.flushBlock()
	}
	return nil
}

func (s *SegmentWriter) flushBlock() error {
	if s.blockCount == 0 {
		return nil
	}
	s.sealed = s.key.Seal(s.sealed[:0], s.block, blockSeal) // reused: a segment of any size makes no garbage per block
	if _, err := s.w.Write(s.sealed); err != nil {
		return err
	}
	s.rows = append(s.rows, blockRow{first: s.blockFirst, offset: s.off, length: uint32(len(s.sealed)), count: uint32(s.blockCount)})
	s.off += int64(len(s.sealed))
	s.block = s.block[:0]
	s.blockCount = 0
	return nil
}

// Count is the number of entries added.
func (s *SegmentWriter) Count() uint64 { return s.count }

// Finish writes the last block, footer and tail.
func (s *SegmentWriter) Finish() error {
	if err := s.flushBlock(); err != nil {
		return err
	}
	f := make([]byte, 0, 24+len(s.supersedes)*32+len(s.rows)*rowSize+len(s.bloom.bits)*8)
	f = binary.LittleEndian.AppendUint64(f, s.count)
	f = binary.LittleEndian.AppendUint32(f, uint32(len(s.rows)))
	f = binary.LittleEndian.AppendUint32(f, uint32(len(s.supersedes)))
	f = binary.LittleEndian.AppendUint32(f, uint32(len(s.bloom.bits)*64))
	f = binary.LittleEndian.AppendUint32(f, bloomHashes)
	for _, sid := range s.supersedes {
		f = append(f, sid[:]...)
	}
	for _, r := range s.rows {
		f = append(f, r.first[:]...)
		f = binary.LittleEndian.AppendUint64(f, uint64(r.offset))
		f = binary.LittleEndian.AppendUint32(f, r.length)
		f = binary.LittleEndian.AppendUint32(f, r.count)
	}
	for _, w := range s.bloom.bits {
		f = binary.LittleEndian.AppendUint64(f, w)
	}
	sealed := s.key.Seal(nil, f, footerSeal)
	var tail [tailSize]byte
	binary.LittleEndian.PutUint32(tail[:4], uint32(len(sealed)))
	copy(tail[4:], tailMagic[:])
	_, err := s.w.Write(append(sealed, tail[:]...))
	return err
}

// footer is a parsed segment footer.
type footer struct {
	count      uint64
	rows       []blockRow
	supersedes []id.ID
	bloom      *bloom
	// header is set when the header was damaged but the authenticated
	// footer proved the segment readable.
	header error
}

// parseFooter reads the footer of a segment of the given size.
func parseFooter(readAt func(off, n int64) ([]byte, error), size int64, key *crypto.Key) (*footer, error) {
	if size < headerSize+tailSize {
		return nil, fmt.Errorf("%w: %d bytes is too short", ErrFormat, size)
	}
	head, err := readAt(0, headerSize)
	if err != nil {
		return nil, err
	}
	// The header is not authenticated. A damaged one is tolerated when the
	// footer authenticates as a version 1 footer: a newer version changes
	// its seal contexts, so it never authenticates as version 1.
	var headerErr error
	if [8]byte(head[:8]) != magic {
		headerErr = fmt.Errorf("%w: bad magic", ErrFormat)
	} else if v := binary.LittleEndian.Uint16(head[8:]); v != Version {
		headerErr = fmt.Errorf("%w: unsupported version %d (this coffer reads version %d)", ErrFormat, v, Version)
	}
	f, err := parseTail(readAt, size, key)
	if err != nil {
		if headerErr != nil {
			return nil, headerErr
		}
		return nil, err
	}
	f.header = headerErr
	return f, nil
}

func parseTail(readAt func(off, n int64) ([]byte, error), size int64, key *crypto.Key) (*footer, error) {
	tail, err := readAt(size-tailSize, tailSize)
	if err != nil {
		return nil, err
	}
	if [4]byte(tail[4:]) != tailMagic {
		return nil, fmt.Errorf("%w: bad tail (truncated?)", ErrFormat)
	}
	flen := int64(binary.LittleEndian.Uint32(tail))
	if flen > size-headerSize-tailSize {
		return nil, fmt.Errorf("%w: footer length %d exceeds segment", ErrFormat, flen)
	}
	sealed, err := readAt(size-tailSize-flen, flen)
	if err != nil {
		return nil, err
	}
	b, err := key.Open(nil, sealed, footerSeal)
	if err != nil {
		return nil, fmt.Errorf("%w: footer: %w", ErrFormat, err)
	}
	return decodeFooter(b, size-tailSize-flen)
}

func decodeFooter(b []byte, blocksEnd int64) (*footer, error) {
	if len(b) < 24 {
		return nil, fmt.Errorf("%w: short footer", ErrFormat)
	}
	f := &footer{count: binary.LittleEndian.Uint64(b)}
	nrows := int64(binary.LittleEndian.Uint32(b[8:]))
	nsup := int64(binary.LittleEndian.Uint32(b[12:]))
	bloomBits := int64(binary.LittleEndian.Uint32(b[16:]))
	hashes := binary.LittleEndian.Uint32(b[20:])
	if bloomBits%64 != 0 || hashes != bloomHashes {
		return nil, fmt.Errorf("%w: bad bloom parameters", ErrFormat)
	}
	want := 24 + nsup*32 + nrows*rowSize + bloomBits/8
	if int64(len(b)) != want {
		return nil, fmt.Errorf("%w: footer is %d bytes, its counts imply %d", ErrFormat, len(b), want)
	}
	p := b[24:]
	for range nsup {
		f.supersedes = append(f.supersedes, id.ID(p[:32]))
		p = p[32:]
	}
	var total uint64
	prevEnd := int64(headerSize)
	f.rows = make([]blockRow, nrows)
	for i := range f.rows {
		r := blockRow{first: id.ID(p[:32]), offset: int64(binary.LittleEndian.Uint64(p[32:])),
			length: binary.LittleEndian.Uint32(p[40:]), count: binary.LittleEndian.Uint32(p[44:])}
		if r.offset != prevEnd || r.offset+int64(r.length) > blocksEnd || r.count == 0 || r.count > BlockEntries {
			return nil, fmt.Errorf("%w: block %d table row out of bounds", ErrFormat, i)
		}
		if i > 0 && r.first.Compare(f.rows[i-1].first) <= 0 {
			return nil, fmt.Errorf("%w: block table not sorted", ErrFormat)
		}
		prevEnd = r.offset + int64(r.length)
		total += uint64(r.count)
		f.rows[i] = r
		p = p[rowSize:]
	}
	if total != f.count {
		return nil, fmt.Errorf("%w: blocks hold %d entries, footer says %d", ErrFormat, total, f.count)
	}
	f.bloom = &bloom{bits: make([]uint64, bloomBits/64)}
	for i := range f.bloom.bits {
		f.bloom.bits[i] = binary.LittleEndian.Uint64(p[i*8:])
	}
	return f, nil
}

// decodeBlock opens one block and checks it against its table row.
func decodeBlock(key *crypto.Key, sealed []byte, row blockRow) ([]Entry, error) {
	b, err := key.Open(nil, sealed, blockSeal)
	if err != nil {
		return nil, fmt.Errorf("%w: block: %w", ErrFormat, err)
	}
	out := make([]Entry, 0, row.count)
	err = blockEntries(b, row, func(e Entry) error {
		out = append(out, e)
		return nil
	})
	return out, err
}

// blockEntries checks an opened block against its table row and calls fn
// with each of its entries.
func blockEntries(b []byte, row blockRow, fn func(Entry) error) error {
	if len(b) != int(row.count)*EntrySize {
		return fmt.Errorf("%w: block holds %d bytes, table says %d entries", ErrFormat, len(b), row.count)
	}
	var prev id.ID
	for i := range int(row.count) {
		e := getEntry(b[i*EntrySize:])
		if i == 0 && e.ID != row.first {
			return fmt.Errorf("%w: block does not start where the table says", ErrFormat)
		}
		if i > 0 && e.ID.Compare(prev) <= 0 {
			return fmt.Errorf("%w: block entries not sorted", ErrFormat)
		}
		prev = e.ID
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// bloom is a classic bloom filter. Chunk IDs are uniformly distributed
// (keyed hashes), so their own bytes serve as the hash functions (double
// hashing over two 64-bit words).
type bloom struct{ bits []uint64 }

func newBloom(expected int) *bloom {
	n := max(expected, 1) * bloomBitsPer
	return &bloom{bits: make([]uint64, (n+63)/64)}
}

func (b *bloom) positions(x id.ID, fn func(uint64)) {
	h1 := binary.LittleEndian.Uint64(x[:8])
	h2 := binary.LittleEndian.Uint64(x[8:16]) | 1
	m := uint64(len(b.bits) * 64)
	for i := range uint64(bloomHashes) {
		fn((h1 + i*h2) % m)
	}
}

func (b *bloom) add(x id.ID) {
	b.positions(x, func(p uint64) { b.bits[p/64] |= 1 << (p % 64) })
}

func (b *bloom) mayContain(x id.ID) bool {
	ok := true
	b.positions(x, func(p uint64) {
		if b.bits[p/64]&(1<<(p%64)) == 0 {
			ok = false
		}
	})
	return ok
}
