package nbd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ErrBroken is wrapped by errors on a connection that can no longer be
// used; callers redial.
var ErrBroken = errors.New("nbd: connection broken")

// ReadAt implements io.ReaderAt. Holes the server reports are zero-filled
// without being transferred.
func (c *Conn) ReadAt(p []byte, off int64) (int, error) {
	return c.ReadAtContext(context.Background(), p, off)
}

// ReadAtContext is ReadAt bounded by ctx.
func (c *Conn) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > c.size {
		if off >= c.size {
			return 0, io.EOF
		}
		n, err := c.ReadAtContext(ctx, p[:c.size-off], off)
		if err == nil {
			err = io.EOF
		}
		return n, err
	}
	done := 0
	for done < len(p) {
		n := min(len(p)-done, int(c.maxBlock))
		if err := c.readOnce(ctx, p[done:done+n], off+int64(done)); err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

func (c *Conn) readOnce(ctx context.Context, p []byte, off int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return fmt.Errorf("%w: %v", ErrBroken, c.broken)
	}
	defer c.bound(ctx)()
	if err := c.writeRequest(cmdRead, 0, off, uint32(len(p))); err != nil {
		return c.fail(fmt.Errorf("%w: %v", ErrBroken, err))
	}
	cookie := c.cookie
	if !c.structed {
		return c.readSimple(cookie, p)
	}
	var reqErr error
	for {
		typ, flags, n, err := c.readChunkHeader(cookie, len(p))
		if err != nil {
			return err
		}
		if typ == chunkOffsetData {
			if err := c.readDataChunk(p, off, n); err != nil {
				return err
			}
			if flags&chunkFlagDone != 0 {
				return reqErr
			}
			continue
		}
		payload, err := c.readPayload(n)
		if err != nil {
			return err
		}
		switch typ {
		case chunkOffsetHole:
			if len(payload) != 12 {
				return c.fail(fmt.Errorf("%w: bad hole chunk", ErrBroken))
			}
			at := int64(binary.BigEndian.Uint64(payload)) - off
			n := int64(binary.BigEndian.Uint32(payload[8:]))
			if !within(at, n, int64(len(p))) {
				return c.fail(fmt.Errorf("%w: hole chunk outside the request", ErrBroken))
			}
			clear(p[at : at+n])
		case chunkError, chunkErrorOffset:
			reqErr = chunkToError("read", payload)
		case chunkNone:
		default:
			if typ&(1<<15) != 0 {
				reqErr = chunkToError("read", payload)
			}
		}
		if flags&chunkFlagDone != 0 {
			return reqErr
		}
	}
}

func (c *Conn) readSimple(cookie uint64, p []byte) error {
	var h [16]byte
	if _, err := io.ReadFull(c.br, h[:]); err != nil {
		return c.fail(fmt.Errorf("%w: %v", ErrBroken, err))
	}
	if binary.BigEndian.Uint32(h[0:]) != magicSimple || binary.BigEndian.Uint64(h[8:]) != cookie {
		return c.fail(fmt.Errorf("%w: unexpected reply", ErrBroken))
	}
	if e := binary.BigEndian.Uint32(h[4:]); e != 0 {
		return &Error{Op: "read", Errno: e}
	}
	if _, err := io.ReadFull(c.br, p); err != nil {
		return c.fail(fmt.Errorf("%w: %v", ErrBroken, err))
	}
	return nil
}

// readChunk reads one structured reply chunk header and payload. Read
// replies' data chunks go through readDataChunk instead.
func (c *Conn) readChunk(cookie uint64, limit int) (typ, flags uint16, payload []byte, err error) {
	typ, flags, n, err := c.readChunkHeader(cookie, limit)
	if err != nil {
		return 0, 0, nil, err
	}
	payload, err = c.readPayload(n)
	return typ, flags, payload, err
}

// readChunkHeader reads one structured reply chunk header; the caller
// reads its n bytes of payload.
func (c *Conn) readChunkHeader(cookie uint64, limit int) (typ, flags uint16, n uint32, err error) {
	var h [20]byte
	if _, err := io.ReadFull(c.br, h[:]); err != nil {
		return 0, 0, 0, c.fail(fmt.Errorf("%w: %v", ErrBroken, err))
	}
	switch binary.BigEndian.Uint32(h[0:]) {
	case magicStructure:
	case magicSimple: // servers answer errors simply when structured replies are off
		if binary.BigEndian.Uint64(h[8:]) != cookie {
			return 0, 0, 0, c.fail(fmt.Errorf("%w: reply for unknown cookie", ErrBroken))
		}
		return 0, 0, 0, c.fail(&Error{Op: "request", Errno: binary.BigEndian.Uint32(h[4:])})
	default:
		return 0, 0, 0, c.fail(fmt.Errorf("%w: bad reply magic", ErrBroken))
	}
	flags = binary.BigEndian.Uint16(h[4:])
	typ = binary.BigEndian.Uint16(h[6:])
	if binary.BigEndian.Uint64(h[8:]) != cookie {
		return 0, 0, 0, c.fail(fmt.Errorf("%w: reply for unknown cookie", ErrBroken))
	}
	n = binary.BigEndian.Uint32(h[16:])
	if int64(n) > int64(limit)+64<<10 {
		return 0, 0, 0, c.fail(fmt.Errorf("%w: chunk of %d bytes", ErrBroken, n))
	}
	return typ, flags, n, nil
}

func (c *Conn) readPayload(n uint32) ([]byte, error) {
	payload := make([]byte, n)
	if _, err := io.ReadFull(c.br, payload); err != nil {
		return nil, c.fail(fmt.Errorf("%w: %v", ErrBroken, err))
	}
	return payload, nil
}

// readDataChunk reads an OFFSET_DATA payload of n bytes straight into p,
// the buffer of the read request at off. Why not through readChunk: a
// staging buffer per chunk cost an allocation (zeroed) and a second copy
// of every byte a backup reads, 7% of a live backup's CPU.
func (c *Conn) readDataChunk(p []byte, off int64, n uint32) error {
	if n < 8 {
		return c.fail(fmt.Errorf("%w: short data chunk", ErrBroken))
	}
	var h [8]byte
	if _, err := io.ReadFull(c.br, h[:]); err != nil {
		return c.fail(fmt.Errorf("%w: %v", ErrBroken, err))
	}
	at := int64(binary.BigEndian.Uint64(h[:])) - off
	size := int64(n) - 8
	if !within(at, size, int64(len(p))) {
		return c.fail(fmt.Errorf("%w: data chunk outside the request", ErrBroken))
	}
	if _, err := io.ReadFull(c.br, p[at:at+size]); err != nil {
		return c.fail(fmt.Errorf("%w: %v", ErrBroken, err))
	}
	return nil
}

func chunkToError(op string, payload []byte) error {
	e := &Error{Op: op, Errno: errIO}
	if len(payload) >= 6 {
		e.Errno = binary.BigEndian.Uint32(payload)
		if m := int(binary.BigEndian.Uint16(payload[4:])); 6+m <= len(payload) {
			e.Msg = string(payload[6 : 6+m])
		}
	}
	return e
}

// BlockStatus returns the extents of meta context name covering
// [off, off+length), possibly ending before off+length (the server may
// answer for less); callers loop.
func (c *Conn) BlockStatus(ctx context.Context, name string, off, length int64) ([]Extent, error) {
	ctxID, ok := c.contexts[name]
	if !ok {
		return nil, fmt.Errorf("nbd: meta context %q was not negotiated", name)
	}
	length = min(length, c.size-off, 1<<31)
	if length <= 0 {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return nil, fmt.Errorf("%w: %v", ErrBroken, c.broken)
	}
	defer c.bound(ctx)()
	if err := c.writeRequest(cmdBlockStatus, 0, off, uint32(length)); err != nil {
		return nil, c.fail(fmt.Errorf("%w: %v", ErrBroken, err))
	}
	cookie := c.cookie
	var out []Extent
	var reqErr error
	for {
		typ, flags, payload, err := c.readChunk(cookie, 1<<20)
		if err != nil {
			return nil, err
		}
		switch {
		case typ == chunkBlockStatus:
			if len(payload) < 4 || (len(payload)-4)%8 != 0 {
				return nil, c.fail(fmt.Errorf("%w: bad block status chunk", ErrBroken))
			}
			if binary.BigEndian.Uint32(payload) != ctxID {
				break
			}
			at := off
			for p := payload[4:]; len(p) >= 8; p = p[8:] {
				n := int64(binary.BigEndian.Uint32(p))
				out = append(out, Extent{Offset: at, Length: n, Flags: binary.BigEndian.Uint32(p[4:])})
				at += n
			}
		case typ&(1<<15) != 0:
			reqErr = chunkToError("block-status", payload)
		}
		if flags&chunkFlagDone != 0 {
			if reqErr != nil {
				return nil, reqErr
			}
			return out, nil
		}
	}
}

// Map walks the whole export and returns every extent of context name,
// merged where adjacent extents have the same flags.
func (c *Conn) Map(ctx context.Context, name string) ([]Extent, error) {
	var out []Extent
	for off := int64(0); off < c.size; {
		ext, err := c.BlockStatus(ctx, name, off, c.size-off)
		if err != nil {
			return nil, err
		}
		if len(ext) == 0 {
			return nil, fmt.Errorf("nbd: empty block status at %d", off)
		}
		for _, e := range ext {
			if e.Offset+e.Length > c.size {
				e.Length = c.size - e.Offset
			}
			if e.Length <= 0 {
				continue
			}
			if k := len(out); k > 0 && out[k-1].Flags == e.Flags && out[k-1].Offset+out[k-1].Length == e.Offset {
				out[k-1].Length += e.Length
			} else {
				out = append(out, e)
			}
			off = e.Offset + e.Length
		}
	}
	return out, nil
}
