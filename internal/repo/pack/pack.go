// Package pack defines pack files: the objects (data/<pack ID>) that hold
// chunk blobs. Packing many chunks into one object keeps the object count
// and the request count per GiB low on S3 and the file count low on disk.
//
// Layout (all integers little-endian):
//
//	header   16 bytes: magic "COFPACK\x00", version u16, flags u16, reserved u32
//	blobs    sealed chunk blobs, back to back
//	trailer  sealed("pack-trailer") list of entries, 48 bytes each:
//	         chunk ID [32], offset u32, length u32, raw length u32, type u8, pad [3]
//	tail     8 bytes: trailer length u32, magic "CFPT"
//
// A pack is self-describing: its trailer lists every blob, so the index can
// always be rebuilt from packs alone (crash recovery, `repair`).
//
// A pack ID is 16 bytes: the writing session's 12-byte random prefix and a
// 4-byte sequence number. Listing data/<session prefix> therefore finds every
// pack a crashed session wrote, without reading anything else.
package pack

import (
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/id"
)

// Format constants; never change them in place (add a version instead).
const (
	Version     = 1
	HeaderSize  = 16
	tailSize    = 8
	EntrySize   = 48
	TypeChunk   = 1
	maxEntries  = 1 << 20 // sanity bound for corrupt trailers
	trailerSeal = "pack-trailer"
)

var (
	magic     = [8]byte{'C', 'O', 'F', 'P', 'A', 'C', 'K', 0}
	tailMagic = [4]byte{'C', 'F', 'P', 'T'}
)

// ErrFormat reports a structurally invalid or unsupported pack.
var ErrFormat = errors.New("invalid pack")

// ID names a pack.
type ID [16]byte

// SessionPrefix is the random part shared by all packs of one session.
type SessionPrefix [12]byte

// MakeID combines a session prefix and a sequence number.
func MakeID(s SessionPrefix, seq uint32) ID {
	var p ID
	copy(p[:12], s[:])
	binary.BigEndian.PutUint32(p[12:], seq)
	return p
}

// Session returns the session prefix of a pack ID.
func (p ID) Session() SessionPrefix {
	var s SessionPrefix
	copy(s[:], p[:12])
	return s
}

func (p ID) String() string { return hex.EncodeToString(p[:]) }

func (s SessionPrefix) String() string { return hex.EncodeToString(s[:]) }

// ObjectName is the store name of a pack.
func ObjectName(p ID) string { return "data/" + p.String() }

// SessionObjectPrefix is the store prefix of all packs of a session.
func SessionObjectPrefix(s SessionPrefix) string { return "data/" + s.String() }

// ParseObjectName extracts a pack ID from a store name.
func ParseObjectName(name string) (ID, error) {
	var p ID
	rest, ok := strings.CutPrefix(name, "data/")
	if !ok || len(rest) != 32 {
		return p, fmt.Errorf("not a pack name: %q", name)
	}
	if _, err := hex.Decode(p[:], []byte(rest)); err != nil {
		return p, fmt.Errorf("not a pack name: %q", name)
	}
	return p, nil
}

// Entry locates one blob inside a pack.
type Entry struct {
	ID        id.ID
	Offset    uint32 // from the start of the pack
	Length    uint32 // sealed length
	RawLength uint32 // plaintext length of the chunk
	Type      uint8
}

func (e Entry) put(b []byte) {
	copy(b[:32], e.ID[:])
	binary.LittleEndian.PutUint32(b[32:], e.Offset)
	binary.LittleEndian.PutUint32(b[36:], e.Length)
	binary.LittleEndian.PutUint32(b[40:], e.RawLength)
	b[44] = e.Type
	b[45], b[46], b[47] = 0, 0, 0
}

func getEntry(b []byte) Entry {
	var e Entry
	copy(e.ID[:], b[:32])
	e.Offset = binary.LittleEndian.Uint32(b[32:])
	e.Length = binary.LittleEndian.Uint32(b[36:])
	e.RawLength = binary.LittleEndian.Uint32(b[40:])
	e.Type = b[44]
	return e
}

// Writer builds one pack on an io.Writer (normally a store.ObjectWriter).
type Writer struct {
	w       io.Writer
	key     *crypto.Key
	size    int64
	entries []Entry
	trailer []byte // Finish's buffers, kept for the next pack (Reset)
	sealed  []byte
}

// NewWriter writes the header and returns a writer.
func NewWriter(w io.Writer, key *crypto.Key) (*Writer, error) {
	pw := &Writer{key: key}
	if err := pw.Reset(w); err != nil {
		return nil, err
	}
	return pw, nil
}

// Reset starts a new pack on w (after Finish), reusing the memory of the
// previous one: a writer of many packs then allocates its entry list and
// trailer once.
func (w *Writer) Reset(out io.Writer) error {
	var h [HeaderSize]byte
	copy(h[:8], magic[:])
	binary.LittleEndian.PutUint16(h[8:], Version)
	w.w, w.size, w.entries = out, HeaderSize, w.entries[:0]
	_, err := out.Write(h[:])
	return err
}

// Add appends a sealed blob and returns where it landed.
func (w *Writer) Add(chunkID id.ID, sealed []byte, rawLen int) (Entry, error) {
	if w.size+int64(len(sealed)) > 1<<32-1 {
		return Entry{}, fmt.Errorf("pack would exceed 4 GiB")
	}
	e := Entry{ID: chunkID, Offset: uint32(w.size), Length: uint32(len(sealed)), RawLength: uint32(rawLen), Type: TypeChunk}
	if _, err := w.w.Write(sealed); err != nil {
		return Entry{}, err
	}
	w.size += int64(len(sealed))
	w.entries = append(w.entries, e)
	return e, nil
}

// Size is the number of bytes written so far.
func (w *Writer) Size() int64 { return w.size }

// Count is the number of blobs added.
func (w *Writer) Count() int { return len(w.entries) }

// Entries returns the blobs added so far.
func (w *Writer) Entries() []Entry { return w.entries }

// Finish writes the trailer; the caller then commits the object.
func (w *Writer) Finish() error {
	n := 4 + len(w.entries)*EntrySize
	if cap(w.trailer) < n {
		w.trailer = make([]byte, n)
	}
	plain := w.trailer[:n]
	binary.LittleEndian.PutUint32(plain, uint32(len(w.entries)))
	for i, e := range w.entries {
		e.put(plain[4+i*EntrySize:])
	}
	w.sealed = w.key.Seal(w.sealed[:0], plain, trailerSeal)
	tlen := len(w.sealed)
	var tail [tailSize]byte
	binary.LittleEndian.PutUint32(tail[:4], uint32(tlen))
	copy(tail[4:], tailMagic[:])
	w.sealed = append(w.sealed, tail[:]...)
	if _, err := w.w.Write(w.sealed); err != nil {
		return err
	}
	w.size += int64(tlen) + tailSize
	return nil
}

// CheckHeader validates the first HeaderSize bytes of a pack.
func CheckHeader(h []byte) error {
	if len(h) < HeaderSize || [8]byte(h[:8]) != magic {
		return fmt.Errorf("%w: bad magic", ErrFormat)
	}
	if v := binary.LittleEndian.Uint16(h[8:]); v != Version {
		return fmt.Errorf("%w: unsupported pack version %d (this coffer reads version %d)", ErrFormat, v, Version)
	}
	return nil
}

// TailReadSize is how many bytes from the end of a pack ReadTrailer wants in
// one read; packs with larger trailers need a second read.
const TailReadSize = 64 << 10

// ReadTrailer parses the trailer given a function reading byte ranges of a
// pack of the given size. It validates that every entry lies inside the
// blob area.
func ReadTrailer(readAt func(off, n int64) ([]byte, error), size int64, key *crypto.Key) ([]Entry, error) {
	if size < HeaderSize+tailSize {
		return nil, fmt.Errorf("%w: %d bytes is too short", ErrFormat, size)
	}
	n := min(size, TailReadSize)
	buf, err := readAt(size-n, n)
	if err != nil {
		return nil, err
	}
	tail := buf[len(buf)-tailSize:]
	if [4]byte(tail[4:]) != tailMagic {
		return nil, fmt.Errorf("%w: bad trailer magic (truncated pack?)", ErrFormat)
	}
	tlen := int64(binary.LittleEndian.Uint32(tail))
	if tlen > size-HeaderSize-tailSize {
		return nil, fmt.Errorf("%w: trailer length %d exceeds pack", ErrFormat, tlen)
	}
	var sealed []byte
	if tlen+tailSize <= n {
		sealed = buf[len(buf)-tailSize-int(tlen) : len(buf)-tailSize]
	} else if sealed, err = readAt(size-tailSize-tlen, tlen); err != nil {
		return nil, err
	}
	plain, err := key.Open(nil, sealed, trailerSeal)
	if err != nil {
		return nil, fmt.Errorf("%w: trailer: %w", ErrFormat, err)
	}
	if len(plain) < 4 {
		return nil, fmt.Errorf("%w: short trailer", ErrFormat)
	}
	count := binary.LittleEndian.Uint32(plain)
	if count > maxEntries || int64(len(plain)) != 4+int64(count)*EntrySize {
		return nil, fmt.Errorf("%w: trailer claims %d entries in %d bytes", ErrFormat, count, len(plain))
	}
	blobEnd := size - tailSize - tlen
	entries := make([]Entry, count)
	for i := range entries {
		e := getEntry(plain[4+i*EntrySize:])
		if int64(e.Offset) < HeaderSize || int64(e.Offset)+int64(e.Length) > blobEnd {
			return nil, fmt.Errorf("%w: entry %d [%d,+%d) outside blob area", ErrFormat, i, e.Offset, e.Length)
		}
		entries[i] = e
	}
	return entries, nil
}

// Whole reports whether entries, the blobs the index knows in a pack of
// size bytes, are every blob of it: they lie back to back from the header
// on, and what follows them is exactly the trailer of that many entries.
// Blobs are written back to back and the trailer lists each one, so no
// other blob can hide in such a pack. It needs no read of the pack: a
// copy decides from its index alone whether a pack can be taken whole.
func Whole(entries []Entry, size int64, key *crypto.Key) bool {
	if len(entries) == 0 || len(entries) > maxEntries {
		return false
	}
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b Entry) int { return cmp.Compare(a.Offset, b.Offset) })
	end := int64(HeaderSize)
	seen := make(map[id.ID]bool, len(sorted))
	for _, e := range sorted {
		if int64(e.Offset) != end || seen[e.ID] {
			return false
		}
		seen[e.ID] = true
		end += int64(e.Length)
	}
	trailer := int64(4+len(sorted)*EntrySize) + int64(key.Overhead()) + tailSize
	return end+trailer == size
}
