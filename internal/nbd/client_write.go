package nbd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ErrReadOnly is returned for writes to an export the server marked
// read-only.
var ErrReadOnly = errors.New("nbd: export is read-only")

// WriteAt implements io.WriterAt.
func (c *Conn) WriteAt(p []byte, off int64) (int, error) {
	return c.WriteAtContext(context.Background(), p, off, false)
}

// WriteAtContext writes p at off, in pieces of at most the server's
// maximum block size, each acknowledged before the next is sent: once it
// returns, the data is in the server's block layer (and on stable storage
// with fua), and later writes cannot overtake it. Writers that must know the
// order in which their writes reached the disk (tests of point-in-time
// snapshots) rely on that.
func (c *Conn) WriteAtContext(ctx context.Context, p []byte, off int64, fua bool) (int, error) {
	if c.flags&FlagReadOnly != 0 {
		return 0, ErrReadOnly
	}
	if off < 0 || off+int64(len(p)) > c.size {
		return 0, fmt.Errorf("nbd: write of %d bytes at %d beyond the export's %d bytes", len(p), off, c.size)
	}
	var flags uint16
	if fua {
		if c.flags&FlagSendFUA == 0 {
			return 0, errors.New("nbd: server does not support FUA writes")
		}
		flags = cmdFlagFUA
	}
	done := 0
	for done < len(p) {
		n := min(len(p)-done, int(c.maxBlock))
		if err := c.command(ctx, "write", cmdWrite, flags, off+int64(done), p[done:done+n], uint32(n)); err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

// Flush asks the server to commit every acknowledged write to stable
// storage.
func (c *Conn) Flush(ctx context.Context) error {
	if c.flags&FlagSendFlush == 0 {
		return nil // the server writes through: nothing to flush
	}
	return c.command(ctx, "flush", cmdFlush, 0, 0, nil, 0)
}

// command sends one request (with payload for writes) and waits for its
// reply, which carries no data.
func (c *Conn) command(ctx context.Context, op string, cmd, flags uint16, off int64, payload []byte, length uint32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return fmt.Errorf("%w: %v", ErrBroken, c.broken)
	}
	defer c.bound(ctx)()
	if err := c.writeRequest(cmd, flags, off, length); err != nil {
		return c.fail(fmt.Errorf("%w: %v", ErrBroken, err))
	}
	if len(payload) > 0 {
		if _, err := c.conn.Write(payload); err != nil {
			return c.fail(fmt.Errorf("%w: %v", ErrBroken, err))
		}
	}
	return c.readReply(op, c.cookie)
}

// readReply reads the reply to a command without data. Servers may answer
// it simply even when structured replies were negotiated (QEMU does on
// success, and structurally on error), so the magic decides.
func (c *Conn) readReply(op string, cookie uint64) error {
	magic, err := c.br.Peek(4)
	if err != nil {
		return c.fail(fmt.Errorf("%w: %v", ErrBroken, err))
	}
	if binary.BigEndian.Uint32(magic) == magicSimple {
		var h [16]byte
		if _, err := io.ReadFull(c.br, h[:]); err != nil {
			return c.fail(fmt.Errorf("%w: %v", ErrBroken, err))
		}
		if binary.BigEndian.Uint64(h[8:]) != cookie {
			return c.fail(fmt.Errorf("%w: reply for unknown cookie", ErrBroken))
		}
		if e := binary.BigEndian.Uint32(h[4:]); e != 0 {
			return &Error{Op: op, Errno: e}
		}
		return nil
	}
	var reqErr error
	for {
		typ, flags, payload, err := c.readChunk(cookie, 64<<10)
		if err != nil {
			return err
		}
		if typ&(1<<15) != 0 {
			reqErr = chunkToError(op, payload)
		}
		if flags&chunkFlagDone != 0 {
			return reqErr
		}
	}
}

// WriteZeroes makes length bytes at off read as zeros (NBD_CMD_WRITE_ZEROES):
// a qcow2 overlay records zero clusters instead of data, so the range reads
// as zeros whatever its backing file holds. The server must offer it.
func (c *Conn) WriteZeroes(ctx context.Context, off, length int64) error {
	if c.flags&FlagReadOnly != 0 {
		return ErrReadOnly
	}
	if c.flags&FlagWriteZeroes == 0 {
		return errors.New("nbd: server does not support write-zeroes")
	}
	if off < 0 || length < 0 || off+length > c.size {
		return fmt.Errorf("nbd: write-zeroes of %d bytes at %d beyond the export's %d bytes", length, off, c.size)
	}
	for length > 0 {
		n := min(length, int64(c.maxBlock))
		if err := c.command(ctx, "write-zeroes", cmdWriteZeroes, 0, off, nil, uint32(n)); err != nil {
			return err
		}
		off += n
		length -= n
	}
	return nil
}
