package vtl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// A cartridge is one file: the tape's objects back to back, each an entry
// header then its payload. The header's CRC stands for the drive's own
// error correction: a record whose bytes changed on disk reads as a medium
// error, as a damaged tape would.
//
//	kind u8 (1 record, 2 filemark) | length u32 | crc32c(payload) u32 | payload
//
// The file is only appended to, or cut at an entry and appended (a write
// in the middle of a tape erases the rest). A process killed while
// appending leaves at most one incomplete entry at the end: an incomplete
// header is nothing (end of data comes before it); an incomplete payload
// is a torn record that reads back as the bytes that reached the file,
// which is what coffer's block checksums must detect.
const (
	entryHeaderSize = 9
	kindRecord      = 1
	kindFilemark    = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type entry struct {
	off    int64 // of the header in the file
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
		f.Close()
		return nil, fmt.Errorf("cartridge %s: %w", path, err)
	}
	return c, nil
}

func (c *cartridge) scan() error {
	fi, err := c.f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	var hdr [entryHeaderSize]byte
	for off := int64(0); off+entryHeaderSize <= size; {
		if _, err := c.f.ReadAt(hdr[:], off); err != nil {
			return err
		}
		e := entry{off: off, kind: hdr[0], length: binary.LittleEndian.Uint32(hdr[1:]), crc: binary.LittleEndian.Uint32(hdr[5:])}
		if e.kind != kindRecord && e.kind != kindFilemark {
			// Not an entry header: the cartridge file was damaged outside
			// coffer. End of data comes here; nothing after is guessed at.
			return nil
		}
		if avail := size - off - entryHeaderSize; int64(e.length) > avail {
			e.length, e.torn = uint32(avail), true
		}
		c.entries = append(c.entries, e)
		c.used += int64(e.length)
		off += entryHeaderSize + int64(e.length)
	}
	return nil
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
		c.used -= int64(e.length)
	}
	c.entries = c.entries[:pos]
	return nil
}

// appendEntry writes an entry at the end. keep < len(p) writes only the
// first keep bytes of the payload (the torn-write fault).
func (c *cartridge) appendEntry(kind byte, p []byte, keep int) error {
	off := c.endOffset(int64(len(c.entries)))
	buf := make([]byte, entryHeaderSize+len(p))
	buf[0] = kind
	binary.LittleEndian.PutUint32(buf[1:], uint32(len(p)))
	crc := crc32.Checksum(p, castagnoli)
	binary.LittleEndian.PutUint32(buf[5:], crc)
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
