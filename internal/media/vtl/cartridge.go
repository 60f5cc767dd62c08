package vtl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// A cartridge is one file: the tape's objects back to back, each an entry
// header then its payload. The payload CRC stands for the drive's own
// error correction: a record whose bytes changed on disk reads as a
// medium error, as a damaged tape would.
//
//	magic "CFTE" | kind u8 (1 record, 2 filemark) | length u32 | crc32c(payload) u32
//	| crc32c(the 13 bytes before) u32 | payload
//
// A damaged entry header loses only its entry: the scan looks for the
// next valid header (magic and header CRC), and the bytes in between read
// as one unreadable record, as a damaged stretch of tape does.
//
// The file is only appended to, or cut at an entry and appended (a write
// in the middle of a tape erases the rest). A process killed while
// appending leaves at most one incomplete entry at the end: an incomplete
// header is nothing (end of data comes before it); an incomplete payload
// is a torn record that reads back as the bytes that reached the file,
// which is what coffer's block checksums must detect.
const (
	entryHeaderSize = 17
	kindRecord      = 1
	kindFilemark    = 2
	kindDamaged     = 3 // in memory only: bytes between two valid headers
)

var (
	castagnoli  = crc32.MakeTable(crc32.Castagnoli)
	entryMagic  = []byte("CFTE")
	errDamaged  = errors.New("damaged stretch of the cartridge")
	maxEntryLen = uint32(64 << 20)
)

type entry struct {
	off    int64 // of the header in the file (of the damage, for kindDamaged)
	kind   byte
	length uint32 // payload bytes in the file (fewer than written if torn)
	crc    uint32
	torn   bool
}

type cartridge struct {
	f       *os.File
	entries []entry
	used    int64 // payload bytes recorded
}

// openCartridge opens a cartridge file and reads its entry headers.
func openCartridge(path string) (*cartridge, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	c := &cartridge{f: f}
	if err := c.scan(); err != nil {
		_ = f.Close() // nothing written yet
		return nil, fmt.Errorf("cartridge %s: %w", path, err)
	}
	return c, nil
}

// parseHeader reads an entry header; ok is false if it is not one.
func parseHeader(hdr []byte) (e entry, ok bool) {
	if len(hdr) < entryHeaderSize || string(hdr[:4]) != string(entryMagic) {
		return e, false
	}
	if crc32.Checksum(hdr[:13], castagnoli) != binary.LittleEndian.Uint32(hdr[13:]) {
		return e, false
	}
	e = entry{kind: hdr[4], length: binary.LittleEndian.Uint32(hdr[5:]), crc: binary.LittleEndian.Uint32(hdr[9:])}
	if (e.kind != kindRecord && e.kind != kindFilemark) || e.length > maxEntryLen || (e.kind == kindFilemark && e.length != 0) {
		return e, false
	}
	return e, true
}

func (c *cartridge) scan() error {
	fi, err := c.f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	hdr := make([]byte, entryHeaderSize)
	for off := int64(0); off+entryHeaderSize <= size; {
		if _, err := c.f.ReadAt(hdr, off); err != nil {
			return err
		}
		e, ok := parseHeader(hdr)
		if !ok {
			next, err := c.nextHeader(off+1, size)
			if err != nil {
				return err
			}
			c.entries = append(c.entries, entry{off: off, kind: kindDamaged, length: uint32(min(next-off, int64(maxEntryLen)))})
			off += int64(c.entries[len(c.entries)-1].length)
			continue
		}
		e.off = off
		if avail := size - off - entryHeaderSize; int64(e.length) > avail {
			e.length, e.torn = uint32(avail), true
		}
		c.entries = append(c.entries, e)
		c.used += int64(e.length)
		off += entryHeaderSize + int64(e.length)
	}
	return nil
}

// nextHeader finds the next valid entry header at or after from; size
// (the end) if there is none.
func (c *cartridge) nextHeader(from, size int64) (int64, error) {
	const window = 1 << 20
	buf := make([]byte, window+entryHeaderSize)
	for at := from; at+entryHeaderSize <= size; at += window {
		n, err := c.f.ReadAt(buf, at)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		b := buf[:n]
		for i := 0; i+entryHeaderSize <= len(b); i++ {
			j := bytes.Index(b[i:], entryMagic)
			if j < 0 {
				break
			}
			i += j
			if i+entryHeaderSize > len(b) {
				break
			}
			if _, ok := parseHeader(b[i:]); ok {
				return at + int64(i), nil
			}
		}
	}
	return size, nil
}

// endOffset is where the entry at pos starts (the file's end at EOD).
func (c *cartridge) endOffset(pos int64) int64 {
	if pos < int64(len(c.entries)) {
		return c.entries[pos].off
	}
	if len(c.entries) == 0 {
		return 0
	}
	last := c.entries[len(c.entries)-1]
	if last.kind == kindDamaged {
		return last.off + int64(last.length)
	}
	return last.off + entryHeaderSize + int64(last.length)
}

// truncate erases every entry from pos on.
func (c *cartridge) truncate(pos int64) error {
	if pos >= int64(len(c.entries)) {
		// Also drops an incomplete header left after the last entry.
		return c.f.Truncate(c.endOffset(pos))
	}
	if err := c.f.Truncate(c.entries[pos].off); err != nil {
		return err
	}
	for _, e := range c.entries[pos:] {
		if e.kind != kindDamaged {
			c.used -= int64(e.length)
		}
	}
	c.entries = c.entries[:pos]
	return nil
}

// appendEntry writes an entry at the end. keep < len(p) writes only the
// first keep bytes of the payload (the torn-write fault).
func (c *cartridge) appendEntry(kind byte, p []byte, keep int) error {
	off := c.endOffset(int64(len(c.entries)))
	buf := make([]byte, entryHeaderSize+len(p))
	copy(buf, entryMagic)
	buf[4] = kind
	binary.LittleEndian.PutUint32(buf[5:], uint32(len(p)))
	crc := crc32.Checksum(p, castagnoli)
	binary.LittleEndian.PutUint32(buf[9:], crc)
	binary.LittleEndian.PutUint32(buf[13:], crc32.Checksum(buf[:13], castagnoli))
	copy(buf[entryHeaderSize:], p)
	if keep < len(p) {
		buf = buf[:entryHeaderSize+keep]
	}
	if _, err := c.f.WriteAt(buf, off); err != nil {
		return err
	}
	if keep < len(p) {
		return nil // the caller simulates the crash; the entry is found torn on reopen
	}
	c.entries = append(c.entries, entry{off: off, kind: kind, length: uint32(len(p)), crc: crc})
	c.used += int64(len(p))
	return nil
}

// errCorrupt: a record's bytes do not match its CRC.
var errCorrupt = errors.New("record does not match its checksum")

// readPayload reads the payload of the entry at pos into p (len(p) must be
// at least the entry's length).
func (c *cartridge) readPayload(pos int64, p []byte) (int, error) {
	e := c.entries[pos]
	if e.kind == kindDamaged {
		return 0, errDamaged
	}
	n, err := c.f.ReadAt(p[:e.length], e.off+entryHeaderSize)
	if err != nil && !(errors.Is(err, io.EOF) && n == int(e.length)) {
		return n, err
	}
	if !e.torn && crc32.Checksum(p[:n], castagnoli) != e.crc {
		return n, errCorrupt
	}
	return n, nil
}

func (c *cartridge) sync() error  { return c.f.Sync() }
func (c *cartridge) close() error { return c.f.Close() }
