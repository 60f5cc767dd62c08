// Package guestvm builds and runs the small Linux guests coffer's demo and
// integration tests protect: a Debian cloud kernel, a busybox initramfs,
// optionally qemu-guest-agent, and coffer's own workload, which writes
// self-verifying 64 KiB blocks to its disk so a restored image can be
// checked block by block without knowing when the snapshot was taken.
package guestvm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
)

// BlockSize is the workload's write unit. Writes are O_DIRECT and aligned,
// so a crash-consistent snapshot holds every block whole or not at all.
const BlockSize = 64 << 10

var (
	blockMagic  = []byte("COFFERBK")
	headerMagic = []byte("COFFERHD")
)

// FillBlock writes block number index at sequence seq into b.
func FillBlock(b []byte, index, seq uint64) {
	copy(b, blockMagic)
	binary.LittleEndian.PutUint64(b[8:], index)
	binary.LittleEndian.PutUint64(b[16:], seq)
	x := index*0x9E3779B97F4A7C15 ^ seq*0xBF58476D1CE4E5B9 | 1
	for i := 56; i+8 <= len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(b[i:], x)
	}
	sum := sha256.Sum256(b[56:])
	copy(b[24:56], sum[:])
}

// FillHeader writes the dataset header (block 0) announcing base blocks.
func FillHeader(b []byte, base uint64) {
	clear(b)
	copy(b, headerMagic)
	binary.LittleEndian.PutUint64(b[8:], base)
}

// HeaderBase returns the base block count if b is a header.
func HeaderBase(b []byte) (uint64, bool) {
	if !bytes.Equal(b[:8], headerMagic) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[8:]), true
}

// CheckBlock reports whether b is a valid block for index, and its seq.
func CheckBlock(b []byte, index uint64) (seq uint64, ok bool) {
	if !bytes.Equal(b[:8], blockMagic) || binary.LittleEndian.Uint64(b[8:]) != index {
		return 0, false
	}
	sum := sha256.Sum256(b[56:])
	return binary.LittleEndian.Uint64(b[16:]), bytes.Equal(sum[:], b[24:56])
}

// Report summarises a disk checked with CheckDisk.
type Report struct {
	Blocks  int    // blocks examined
	Base    int    // base dataset blocks found intact
	Written int    // later workload blocks found intact
	Zero    int    // never written
	MaxSeq  uint64 // highest sequence number found
}

// CheckDisk verifies a workload disk: a header, every base block intact at
// sequence 0, every other block either zero or a whole, valid block. Any
// torn or misplaced block is an error naming it.
func CheckDisk(r io.ReaderAt, size int64) (Report, error) {
	var rep Report
	b := make([]byte, BlockSize)
	if _, err := r.ReadAt(b, 0); err != nil {
		return rep, err
	}
	base, ok := HeaderBase(b)
	if !ok {
		return rep, fmt.Errorf("no workload header in block 0")
	}
	zero := make([]byte, BlockSize)
	for i := uint64(1); int64(i+1)*BlockSize <= size; i++ {
		if _, err := r.ReadAt(b, int64(i)*BlockSize); err != nil && err != io.EOF {
			return rep, err
		}
		rep.Blocks++
		if bytes.Equal(b, zero) {
			if i <= base {
				return rep, fmt.Errorf("base block %d is missing", i)
			}
			rep.Zero++
			continue
		}
		seq, ok := CheckBlock(b, i)
		if !ok {
			return rep, fmt.Errorf("block %d is torn or misplaced", i)
		}
		rep.MaxSeq = max(rep.MaxSeq, seq)
		if i <= base {
			if seq != 0 {
				return rep, fmt.Errorf("base block %d has sequence %d", i, seq)
			}
			rep.Base++
		} else {
			rep.Written++
		}
	}
	if rep.Base != int(base) {
		return rep, fmt.Errorf("%d of %d base blocks intact", rep.Base, base)
	}
	return rep, nil
}
