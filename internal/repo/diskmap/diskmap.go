// Package diskmap defines disk maps: for one disk in one backup point, the
// ID of the chunk covering each chunk-sized span of the disk, in order. A
// disk map is complete whether the backup was full or incremental (unchanged
// spans simply repeat the previous point's IDs), so every backup point
// restores on its own: no chains, no synthetic fulls.
//
// The zero ID marks an all-zero span that was never stored (a hole).
//
// Layout (integers little-endian):
//
//	header  16 bytes: magic "COFDMAP\x00", version u16, flags u16, reserved u32
//	blocks  sealed("map-block") zstd-compressed runs of up to 4096 IDs
//	footer  sealed("map-footer"): disk size u64, chunk size u32, chunk count
//	        u64, block count u32, then per block: offset u64, sealed length
//	        u32, ID count u32
//	tail    8 bytes: footer length u32, magic "CFDM"
//
// Blocks make random access cheap (instant recovery, file browsing read one
// 128 KiB block to resolve an offset) and keep memory flat for huge disks.
package diskmap

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/store"
)

// Format constants; never change them in place.
const (
	Version    = 1
	BlockIDs   = 4096
	headerSize = 16
	tailSize   = 8
	rowSize    = 16
	blockSeal  = "map-block"
	footerSeal = "map-footer"
	// MaxChunkSize bounds chunk sizes accepted from a footer.
	MaxChunkSize = 64 << 20
)

var (
	magic     = [8]byte{'C', 'O', 'F', 'D', 'M', 'A', 'P', 0}
	tailMagic = [4]byte{'C', 'F', 'D', 'M'}
	// zstd encoders and decoders are safe for concurrent EncodeAll/DecodeAll.
	zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false))
	zdec, _ = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(BlockIDs*32+1024))
)

// ErrFormat reports a structurally invalid or unsupported disk map.
var ErrFormat = errors.New("invalid disk map")

type row struct {
	offset int64
	length uint32
	count  uint32
}

// Writer streams a disk map.
type Writer struct {
	w         io.Writer
	key       *crypto.Key
	diskSize  int64
	chunkSize int
	block     []byte
	off       int64
	rows      []row
	count     uint64
}

// NewWriter starts a disk map for a disk of diskSize bytes cut in chunkSize spans.
func NewWriter(w io.Writer, key *crypto.Key, diskSize int64, chunkSize int) (*Writer, error) {
	var h [headerSize]byte
	copy(h[:8], magic[:])
	binary.LittleEndian.PutUint16(h[8:], Version)
	if _, err := w.Write(h[:]); err != nil {
		return nil, err
	}
	return &Writer{w: w, key: key, diskSize: diskSize, chunkSize: chunkSize, off: headerSize}, nil
}

// ChunkCount is the number of spans of a disk.
func ChunkCount(diskSize int64, chunkSize int) uint64 {
	return uint64((diskSize + int64(chunkSize) - 1) / int64(chunkSize))
}

// Add appends the next span's ID.
func (w *Writer) Add(x id.ID) error {
	w.block = append(w.block, x[:]...)
	w.count++
	if len(w.block) == BlockIDs*32 {
		return w.flush()
	}
	return nil
}

func (w *Writer) flush() error {
	if len(w.block) == 0 {
		return nil
	}
	sealed := w.key.Seal(nil, zenc.EncodeAll(w.block, nil), blockSeal)
	if _, err := w.w.Write(sealed); err != nil {
		return err
	}
	w.rows = append(w.rows, row{offset: w.off, length: uint32(len(sealed)), count: uint32(len(w.block) / 32)})
	w.off += int64(len(sealed))
	w.block = w.block[:0]
	return nil
}

// Finish writes the footer; the number of IDs added must match the disk size.
func (w *Writer) Finish() error {
	if want := ChunkCount(w.diskSize, w.chunkSize); w.count != want {
		return fmt.Errorf("disk map has %d chunk IDs, a %d-byte disk needs %d", w.count, w.diskSize, want)
	}
	if err := w.flush(); err != nil {
		return err
	}
	f := binary.LittleEndian.AppendUint64(nil, uint64(w.diskSize))
	f = binary.LittleEndian.AppendUint32(f, uint32(w.chunkSize))
	f = binary.LittleEndian.AppendUint64(f, w.count)
	f = binary.LittleEndian.AppendUint32(f, uint32(len(w.rows)))
	for _, r := range w.rows {
		f = binary.LittleEndian.AppendUint64(f, uint64(r.offset))
		f = binary.LittleEndian.AppendUint32(f, r.length)
		f = binary.LittleEndian.AppendUint32(f, r.count)
	}
	sealed := w.key.Seal(nil, f, footerSeal)
	var tail [tailSize]byte
	binary.LittleEndian.PutUint32(tail[:4], uint32(len(sealed)))
	copy(tail[4:], tailMagic[:])
	_, err := w.w.Write(append(sealed, tail[:]...))
	return err
}

// Map gives random access to a stored disk map. Safe for concurrent use;
// it caches the most recently used block.
type Map struct {
	// readAt reads n bytes at off, into dst when it is large enough.
	readAt    func(ctx context.Context, off, n int64, dst []byte) ([]byte, error)
	key       *crypto.Key
	name      string
	diskSize  int64
	chunkSize int
	count     uint64
	rows      []row

	mu        sync.Mutex
	lastBlock int
	lastIDs   []byte
	// header is set when the header was damaged but the authenticated
	// footer proved the map readable.
	header error
}

// HeaderDamaged reports a damaged header that was tolerated.
func (m *Map) HeaderDamaged() error { return m.header }

// Open reads a disk map's footer.
func Open(ctx context.Context, st store.Store, key *crypto.Key, name string) (*Map, error) {
	fi, err := st.Stat(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("disk map %s: %w", name, err)
	}
	m, err := parse(func(off, n int64) ([]byte, error) { return store.Get(ctx, st, name, off, n) }, fi.Size, key)
	if err != nil {
		return nil, fmt.Errorf("disk map %s: %w", name, err)
	}
	m.key, m.name = key, name
	m.readAt = func(ctx context.Context, off, n int64, dst []byte) ([]byte, error) {
		if int64(cap(dst)) < n {
			dst = make([]byte, n)
		}
		dst = dst[:n]
		rc, err := st.Read(ctx, name, off, n)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		if _, err := io.ReadFull(rc, dst); err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		return dst, nil
	}
	return m, nil
}

func parse(readAt func(off, n int64) ([]byte, error), size int64, key *crypto.Key) (*Map, error) {
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
	m, err := parseBody(readAt, size, key)
	if err != nil {
		if headerErr != nil {
			return nil, headerErr
		}
		return nil, err
	}
	m.header = headerErr
	return m, nil
}

func parseBody(readAt func(off, n int64) ([]byte, error), size int64, key *crypto.Key) (*Map, error) {
	tail, err := readAt(size-tailSize, tailSize)
	if err != nil {
		return nil, err
	}
	if [4]byte(tail[4:]) != tailMagic {
		return nil, fmt.Errorf("%w: bad tail (truncated?)", ErrFormat)
	}
	flen := int64(binary.LittleEndian.Uint32(tail))
	if flen > size-headerSize-tailSize {
		return nil, fmt.Errorf("%w: footer length exceeds object", ErrFormat)
	}
	sealed, err := readAt(size-tailSize-flen, flen)
	if err != nil {
		return nil, err
	}
	f, err := key.Open(nil, sealed, footerSeal)
	if err != nil {
		return nil, fmt.Errorf("%w: footer: %w", ErrFormat, err)
	}
	if len(f) < 24 {
		return nil, fmt.Errorf("%w: short footer", ErrFormat)
	}
	m := &Map{
		diskSize:  int64(binary.LittleEndian.Uint64(f)),
		chunkSize: int(binary.LittleEndian.Uint32(f[8:])),
		count:     binary.LittleEndian.Uint64(f[12:]),
		lastBlock: -1,
	}
	nrows := int64(binary.LittleEndian.Uint32(f[20:]))
	if m.chunkSize <= 0 || m.chunkSize > MaxChunkSize || m.diskSize < 0 || m.count != ChunkCount(m.diskSize, m.chunkSize) {
		return nil, fmt.Errorf("%w: inconsistent geometry (size %d, chunk %d, count %d)", ErrFormat, m.diskSize, m.chunkSize, m.count)
	}
	if int64(len(f)) != 24+nrows*rowSize {
		return nil, fmt.Errorf("%w: footer length does not match %d blocks", ErrFormat, nrows)
	}
	var total uint64
	prevEnd := int64(headerSize)
	for i := range nrows {
		p := f[24+i*rowSize:]
		r := row{offset: int64(binary.LittleEndian.Uint64(p)), length: binary.LittleEndian.Uint32(p[8:]), count: binary.LittleEndian.Uint32(p[12:])}
		if r.offset != prevEnd || r.offset+int64(r.length) > size-tailSize-flen || r.count == 0 || r.count > BlockIDs {
			return nil, fmt.Errorf("%w: block %d out of bounds", ErrFormat, i)
		}
		if i < nrows-1 && r.count != BlockIDs {
			return nil, fmt.Errorf("%w: short block %d before the last", ErrFormat, i)
		}
		prevEnd = r.offset + int64(r.length)
		total += uint64(r.count)
		m.rows = append(m.rows, r)
	}
	if total != m.count {
		return nil, fmt.Errorf("%w: blocks hold %d IDs, footer says %d", ErrFormat, total, m.count)
	}
	return m, nil
}

// DiskSize is the disk's size in bytes.
func (m *Map) DiskSize() int64 { return m.diskSize }

// ChunkSize is the span covered by each ID.
func (m *Map) ChunkSize() int { return m.chunkSize }

// Count is the number of spans.
func (m *Map) Count() uint64 { return m.count }

// SpanLength is the length of span i (the last one may be short).
func (m *Map) SpanLength(i uint64) int {
	if i == m.count-1 {
		if rest := m.diskSize - int64(i)*int64(m.chunkSize); rest < int64(m.chunkSize) {
			return int(rest)
		}
	}
	return m.chunkSize
}

// blockBuffers are reused from block to block by one iteration, which
// then makes no garbage per block: garbage collection and verification
// read every block of every map.
type blockBuffers struct{ sealed, comp, ids []byte }

// blockPool shares block buffers between iterations: a pass over every map
// of a repository then allocates them once rather than once per map.
var blockPool = sync.Pool{New: func() any { return &blockBuffers{} }}

// readBlock decodes block b, into buf's buffers when buf is not nil.
func (m *Map) readBlock(ctx context.Context, b int, buf *blockBuffers) ([]byte, error) {
	if buf == nil {
		buf = &blockBuffers{}
	}
	r := m.rows[b]
	var err error
	buf.sealed, err = m.readAt(ctx, r.offset, int64(r.length), buf.sealed)
	if err != nil {
		return nil, fmt.Errorf("disk map %s block %d: %w", m.name, b, err)
	}
	buf.comp, err = m.key.Open(buf.comp[:0], buf.sealed, blockSeal)
	if err != nil {
		return nil, fmt.Errorf("disk map %s block %d: %w: %w", m.name, b, ErrFormat, err)
	}
	buf.ids, err = zdec.DecodeAll(buf.comp, buf.ids[:0])
	if err != nil || len(buf.ids) != int(r.count)*32 {
		return nil, fmt.Errorf("disk map %s block %d: %w: bad block payload", m.name, b, ErrFormat)
	}
	return buf.ids, nil
}

// Get returns the ID of span i.
func (m *Map) Get(ctx context.Context, i uint64) (id.ID, error) {
	if i >= m.count {
		return id.ID{}, fmt.Errorf("span %d beyond disk map of %d", i, m.count)
	}
	b, k := int(i/BlockIDs), int(i%BlockIDs)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lastBlock != b {
		ids, err := m.readBlock(ctx, b, nil)
		if err != nil {
			return id.ID{}, err
		}
		m.lastBlock, m.lastIDs = b, ids
	}
	return id.ID(m.lastIDs[k*32 : k*32+32]), nil
}

// Iterate calls fn for every span in order.
func (m *Map) Iterate(ctx context.Context, fn func(i uint64, x id.ID) error) error {
	return m.IterateRange(ctx, 0, m.count, fn)
}

// IterateRange calls fn for spans from to end-1 in order, reading only the
// blocks that hold them.
func (m *Map) IterateRange(ctx context.Context, from, end uint64, fn func(i uint64, x id.ID) error) error {
	end = min(end, m.count)
	buf := blockPool.Get().(*blockBuffers)
	defer blockPool.Put(buf)
	for i := from; i < end; {
		b := int(i / BlockIDs)
		ids, err := m.readBlock(ctx, b, buf)
		if err != nil {
			return err
		}
		k := int(i % BlockIDs)
		if k*32 >= len(ids) {
			return fmt.Errorf("disk map %s block %d: %w: %d IDs, span %d expected in it", m.name, b, ErrFormat, len(ids)/32, i)
		}
		for ; k < BlockIDs && k*32 < len(ids) && i < end; k++ {
			if err := fn(i, id.ID(ids[k*32:k*32+32])); err != nil {
				return err
			}
			i++
		}
	}
	return nil
}

// All loads every ID (memory: 32 bytes per span; 2 MiB for a 64 GiB disk at
// 1 MiB chunks). Used by backups to compare against the previous point.
func (m *Map) All(ctx context.Context) ([]id.ID, error) {
	out := make([]id.ID, 0, m.count)
	err := m.Iterate(ctx, func(_ uint64, x id.ID) error {
		out = append(out, x)
		return nil
	})
	return out, err
}

// Scan calls fn for every span like Iterate, but a block that cannot be
// decoded (damaged, or cut off) is reported to damaged with the spans
// [first, end) it covers and skipped, so one bad block does not hide the
// rest of the map. Errors other than damage (I/O, cancellation) stop it.
func (m *Map) Scan(ctx context.Context, fn func(i uint64, x id.ID) error, damaged func(first, end uint64, err error)) error {
	buf := blockPool.Get().(*blockBuffers)
	defer blockPool.Put(buf)
	for b := range m.rows {
		first := uint64(b) * BlockIDs
		end := min(first+BlockIDs, m.count)
		ids, err := m.readBlock(ctx, b, buf)
		if err == nil && uint64(len(ids)/32) != end-first {
			err = fmt.Errorf("disk map %s block %d: %w: %d IDs, want %d", m.name, b, ErrFormat, len(ids)/32, end-first)
		}
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, store.ErrInvalidRange) {
				return err
			}
			damaged(first, end, err)
			continue
		}
		for k := range end - first {
			if err := fn(first+k, id.ID(ids[k*32:k*32+32])); err != nil {
				return err
			}
		}
	}
	return nil
}
