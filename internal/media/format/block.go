// Package format is coffer's on-media format (docs/design/media-format.md):
// fixed-size blocks, each owned by one stream and carrying a header with a
// checksum, the labels that open and close volumes and sessions, and the
// index written at the end of a volume so that it can be catalogued from
// the tape alone. Every decoder here takes bytes read from a medium and
// refuses what is not exactly what the writer produced, with an error that
// says why; none trusts a length it has not bounded.
package format

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
)

// Block geometry.
const (
	HeaderSize = 64
	// DefaultBlockSize is 256 KiB: large enough for an LTO drive to
	// stream, as PBS uses.
	DefaultBlockSize = 256 << 10
	MinBlockSize     = 4 << 10
	MaxBlockSize     = 4 << 20
	Version          = 1
)

var blockMagic = [8]byte{'C', 'O', 'F', 'M', 'B', 'L', 'K', 0}

// Kind is what a block holds.
type Kind uint8

const (
	KindVolumeLabel  Kind = 1 // the first block of a volume
	KindSessionStart Kind = 2 // opens a session's tape file
	KindSessionEnd   Kind = 3 // closes it
	KindData         Kind = 4 // a piece of one stream
	KindIndex        Kind = 5 // the volume index, in a tape file of its own
)

func (k Kind) String() string {
	switch k {
	case KindVolumeLabel:
		return "volume label"
	case KindSessionStart:
		return "session start"
	case KindSessionEnd:
		return "session end"
	case KindData:
		return "data"
	case KindIndex:
		return "volume index"
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// Flags of a block.
const (
	// FlagEndOfStream marks a stream's last block.
	FlagEndOfStream uint8 = 1
)

// SessionID names one writing session; its blocks carry it, so that blocks
// of another session (a crashed one, or an older one on a reused volume)
// are never taken for its own.
type SessionID [16]byte

func (s SessionID) String() string { return fmt.Sprintf("%x", s[:]) }

// Header is a block's header.
//
//	magic "COFMBLK\0" [8] | version u8 | kind u8 | flags u8 | reserved u8
//	stream u32 | session [16] | seq u64 | length u32 | block size u32
//	crc32c u32 | reserved [12]
//
// The CRC covers the header (with the CRC field zero) and the payload;
// the padding after the payload is zero and not covered.
type Header struct {
	Kind    Kind
	Flags   uint8
	Stream  uint32
	Session SessionID
	Seq     uint64 // the block's number within its stream, from 0
	Length  uint32 // payload bytes
}

// Payload is how many payload bytes a block of this size carries.
func Payload(blockSize int) int { return blockSize - HeaderSize }

// ValidBlockSize reports whether a block size is one coffer writes.
func ValidBlockSize(n int) error {
	if n < MinBlockSize || n > MaxBlockSize || n%4096 != 0 {
		return fmt.Errorf("block size %d: use a multiple of 4 KiB from %d to %d", n, MinBlockSize, MaxBlockSize)
	}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeBlock fills block (its length is the block size) with the header
// and payload.
func EncodeBlock(block []byte, h Header, payload []byte) error {
	if err := ValidBlockSize(len(block)); err != nil {
		return err
	}
	if len(payload) > Payload(len(block)) {
		return fmt.Errorf("payload of %d bytes exceeds a %d-byte block", len(payload), len(block))
	}
	clear(block)
	copy(block, blockMagic[:])
	block[8] = Version
	block[9] = byte(h.Kind)
	block[10] = h.Flags
	binary.LittleEndian.PutUint32(block[12:], h.Stream)
	copy(block[16:32], h.Session[:])
	binary.LittleEndian.PutUint64(block[32:], h.Seq)
	binary.LittleEndian.PutUint32(block[40:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(block[44:], uint32(len(block)))
	copy(block[HeaderSize:], payload)
	crc := crc32.Update(crc32.Checksum(block[:HeaderSize], castagnoli), castagnoli, payload)
	binary.LittleEndian.PutUint32(block[48:], crc)
	return nil
}

// Errors of DecodeBlock.
var (
	// ErrNotCoffer: the record does not start with coffer's block magic
	// (a foreign or blank tape).
	ErrNotCoffer = errors.New("not a coffer media block")
	// ErrTorn: the record is shorter than the block it claims to be, as a
	// write cut by a crash leaves it.
	ErrTorn = errors.New("torn block")
	// ErrChecksum: the block's bytes do not match its checksum.
	ErrChecksum = errors.New("block checksum mismatch")
)

// DecodeBlock checks a record read from a medium and returns its header
// and payload (a slice of rec).
func DecodeBlock(rec []byte) (Header, []byte, error) {
	var h Header
	if len(rec) < HeaderSize || [8]byte(rec[:8]) != blockMagic {
		return h, nil, ErrNotCoffer
	}
	if rec[8] != Version {
		return h, nil, fmt.Errorf("media format version %d: this coffer reads version %d; upgrade coffer", rec[8], Version)
	}
	size := binary.LittleEndian.Uint32(rec[44:])
	if ValidBlockSize(int(size)) != nil {
		return h, nil, fmt.Errorf("%w: block size field %d", ErrChecksum, size)
	}
	if len(rec) < int(size) {
		return h, nil, fmt.Errorf("%w: %d of %d bytes", ErrTorn, len(rec), size)
	}
	if len(rec) > int(size) {
		return h, nil, fmt.Errorf("%w: a record of %d bytes for a block of %d", ErrChecksum, len(rec), size)
	}
	h = Header{Kind: Kind(rec[9]), Flags: rec[10], Stream: binary.LittleEndian.Uint32(rec[12:]),
		Seq: binary.LittleEndian.Uint64(rec[32:]), Length: binary.LittleEndian.Uint32(rec[40:])}
	copy(h.Session[:], rec[16:32])
	if int(h.Length) > Payload(int(size)) {
		return h, nil, fmt.Errorf("%w: payload length %d", ErrChecksum, h.Length)
	}
	var hdr [HeaderSize]byte
	copy(hdr[:], rec[:HeaderSize])
	clear(hdr[48:52])
	payload := rec[HeaderSize : HeaderSize+int(h.Length)]
	want := binary.LittleEndian.Uint32(rec[48:])
	if crc32.Update(crc32.Checksum(hdr[:], castagnoli), castagnoli, payload) != want {
		return h, nil, ErrChecksum
	}
	if h.Kind < KindVolumeLabel || h.Kind > KindIndex {
		return h, nil, fmt.Errorf("unknown block kind %d", h.Kind)
	}
	return h, payload, nil
}

// MarshalText writes a session ID as hex.
func (s SessionID) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a session ID written by MarshalText.
func (s *SessionID) UnmarshalText(b []byte) error {
	if len(b) != 32 {
		return fmt.Errorf("session ID %q: want 32 hex digits", b)
	}
	_, err := hex.Decode(s[:], b)
	return err
}
