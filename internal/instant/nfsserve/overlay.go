package nfsserve

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
)

// BlockSize is the overlay's unit: a write covers whole blocks, its
// partial first and last blocks completed from what the disk held.
const BlockSize = 4096

// recordSize is one entry of the written map: first block, block count,
// CRC-32 of the twelve bytes before it.
const recordSize = 16

// ErrBeyondDisk is returned for a write past the end of the disk: a
// flat extent has the disk's size, fixed by its descriptor.
var ErrBeyondDisk = errors.New("write past the end of the disk")

// Overlay takes the writes to one served disk: the blocks written go to a
// sparse data file, and a map file lists them. A write is acknowledged
// only after its data and then its map entry are on stable storage (the
// NFS server answers every WRITE as FILE_SYNC), so after a crash the map
// names only blocks whose data is complete; a torn last entry fails its
// checksum and is dropped, its write never acknowledged.
type Overlay struct {
	base io.ReaderAt // the disk as the backup point holds it
	size int64

	mu      sync.RWMutex
	data    *os.File
	log     *os.File
	written []uint64 // one bit per block
}

// OpenOverlay opens (or creates) the overlay of a disk of size bytes read
// from base, in files path+".data" and path+".map", replaying the map.
func OpenOverlay(path string, base io.ReaderAt, size int64) (*Overlay, error) {
	data, err := os.OpenFile(path+".data", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	log, err := os.OpenFile(path+".map", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		_ = data.Close() // the error returned is the open's
		return nil, err
	}
	o := &Overlay{base: base, size: size, data: data, log: log, written: make([]uint64, (blocks(size)+63)/64)}
	if err := o.replay(); err != nil {
		_ = o.Close() // the error returned is the replay's
		return nil, fmt.Errorf("overlay %s: %w", path, err)
	}
	return o, nil
}

func blocks(size int64) int64 { return (size + BlockSize - 1) / BlockSize }

// replay reads the map's entries; it stops at the first that does not
// check (a write cut short by a crash) and cuts the file there, so that
// the next entry follows the last good one.
func (o *Overlay) replay() error {
	b, err := io.ReadAll(o.log)
	if err != nil {
		return err
	}
	good := 0
	for ; good+recordSize <= len(b); good += recordSize {
		r := b[good : good+recordSize]
		if crc32.ChecksumIEEE(r[:12]) != binary.LittleEndian.Uint32(r[12:]) {
			break
		}
		first, n := int64(binary.LittleEndian.Uint64(r)), int64(binary.LittleEndian.Uint32(r[8:]))
		if first < 0 || n <= 0 || first+n > blocks(o.size) {
			break
		}
		o.mark(first, n)
	}
	if good != len(b) {
		if err := o.log.Truncate(int64(good)); err != nil {
			return err
		}
	}
	_, err = o.log.Seek(int64(good), io.SeekStart)
	return err
}

func (o *Overlay) mark(first, n int64) {
	for b := first; b < first+n; b++ {
		o.written[b/64] |= 1 << (b % 64)
	}
}

func (o *Overlay) isWritten(b int64) bool { return o.written[b/64]&(1<<(b%64)) != 0 }

// Size is the disk's size.
func (o *Overlay) Size() int64 { return o.size }

// ReadAt reads the disk as the VM sees it: written blocks from the
// overlay, the rest from the backup point.
func (o *Overlay) ReadAt(p []byte, off int64) (int, error) {
	if off >= o.size {
		return 0, io.EOF
	}
	want := len(p)
	if int64(want) > o.size-off {
		p = p[:o.size-off]
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	done := 0
	for done < len(p) {
		at := off + int64(done)
		written := o.isWritten(at / BlockSize)
		// The run of blocks from one source.
		end := (at/BlockSize + 1) * BlockSize
		for end < off+int64(len(p)) && o.isWritten(end/BlockSize) == written {
			end += BlockSize
		}
		end = min(end, off+int64(len(p)))
		src := o.base
		if written {
			src = o.data
		}
		n, err := src.ReadAt(p[done:done+int(end-at)], at)
		if err == io.EOF && n == int(end-at) {
			err = nil
		}
		done += n
		if err != nil {
			return done, err
		}
	}
	if done < want {
		return done, io.EOF
	}
	return done, nil
}

// WriteAt writes p at off into the overlay and returns once the write is
// on stable storage.
func (o *Overlay) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > o.size {
		return 0, ErrBeyondDisk
	}
	if len(p) == 0 {
		return 0, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	first, last := off/BlockSize, (off+int64(len(p))-1)/BlockSize
	start := first * BlockSize
	buf := make([]byte, min((last+1)*BlockSize, o.size)-start)
	// The partial first and last blocks keep what the disk held.
	for _, b := range []int64{first, last} {
		lo, hi := b*BlockSize-start, min((b+1)*BlockSize, o.size)-start
		if err := o.fill(buf[lo:hi], b*BlockSize); err != nil {
			return 0, err
		}
	}
	copy(buf[off-start:], p)
	if _, err := o.data.WriteAt(buf, start); err != nil {
		return 0, err
	}
	if err := o.data.Sync(); err != nil {
		return 0, err
	}
	var r [recordSize]byte
	binary.LittleEndian.PutUint64(r[:], uint64(first))
	binary.LittleEndian.PutUint32(r[8:], uint32(last-first+1))
	binary.LittleEndian.PutUint32(r[12:], crc32.ChecksumIEEE(r[:12]))
	if _, err := o.log.Write(r[:]); err != nil {
		return 0, err
	}
	if err := o.log.Sync(); err != nil {
		return 0, err
	}
	o.mark(first, last-first+1)
	return len(p), nil
}

// fill reads the current content of one block (overlay or point).
func (o *Overlay) fill(p []byte, off int64) error {
	src := o.base
	if o.isWritten(off / BlockSize) {
		src = o.data
	}
	n, err := src.ReadAt(p, off)
	if err == io.EOF && n == len(p) {
		err = nil
	}
	return err
}

// Written lists the written ranges, in bytes, in order.
func (o *Overlay) Written() [][2]int64 {
	o.mu.RLock()
	defer o.mu.RUnlock()
	var out [][2]int64
	for b := int64(0); b < blocks(o.size); b++ {
		if !o.isWritten(b) {
			continue
		}
		at, end := b*BlockSize, min((b+1)*BlockSize, o.size)
		if n := len(out); n > 0 && out[n-1][1] == at {
			out[n-1][1] = end
		} else {
			out = append(out, [2]int64{at, end})
		}
	}
	return out
}

// Close closes the overlay's files.
func (o *Overlay) Close() error {
	return errors.Join(o.data.Close(), o.log.Close())
}
