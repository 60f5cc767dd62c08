package nbd

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// ClientOptions select what a client negotiates.
type ClientOptions struct {
	Export string
	// MetaContexts to negotiate ("base:allocation", "qemu:dirty-bitmap:X").
	// QEMU fails a block-status request as a whole when one of several
	// contexts errors, so callers use one context per connection.
	MetaContexts []string
}

// Conn is one client connection in transmission phase. Requests are
// serialised; open several connections for parallelism (QEMU's read-only
// exports advertise can_multi_conn).
type Conn struct {
	mu        sync.Mutex
	conn      net.Conn
	br        *bufio.Reader
	size      int64
	flags     uint16
	contexts  map[string]uint32
	structed  bool
	cookie    uint64
	maxBlock  uint32
	broken    error
	hdr       [32]byte
	closeOnce sync.Once
}

// Dial connects over network ("unix" or "tcp") and negotiates export.
func Dial(ctx context.Context, network, addr string, o ClientOptions) (*Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("nbd: connect %s: %w", addr, err)
	}
	return NewConn(ctx, nc, o)
}

// NewConn negotiates over an established connection (closed on failure).
func NewConn(ctx context.Context, nc net.Conn, o ClientOptions) (*Conn, error) {
	c := &Conn{conn: nc, br: bufio.NewReaderSize(nc, 256<<10), contexts: map[string]uint32{}, maxBlock: maxRequest}
	stop := c.bound(ctx)
	err := c.handshake(o)
	stop()
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// bound makes blocking I/O give up when ctx ends.
func (c *Conn) bound(ctx context.Context) func() {
	if dl, ok := ctx.Deadline(); ok {
		c.conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	return func() {
		stop()
		c.conn.SetDeadline(time.Time{})
	}
}

func (c *Conn) handshake(o ClientOptions) error {
	var h [18]byte
	if _, err := io.ReadFull(c.br, h[:]); err != nil {
		return fmt.Errorf("nbd: handshake: %w", err)
	}
	if binary.BigEndian.Uint64(h[0:]) != magicNBD || binary.BigEndian.Uint64(h[8:]) != magicIHaveOpt {
		return errors.New("nbd: server does not speak newstyle NBD")
	}
	sflags := binary.BigEndian.Uint16(h[16:])
	if sflags&flagFixedNewstyle == 0 {
		return errors.New("nbd: server lacks fixed newstyle negotiation")
	}
	cflags := uint32(flagFixedNewstyle)
	if sflags&flagNoZeroes != 0 {
		cflags |= flagNoZeroes
	}
	if err := binary.Write(c.conn, binary.BigEndian, cflags); err != nil {
		return err
	}
	// Structured replies are required for block status and sparse reads.
	if err := c.sendOption(optStructured, nil); err != nil {
		return err
	}
	typ, _, err := c.readOptionReply(optStructured)
	if err != nil {
		return err
	}
	c.structed = typ == repAck
	if len(o.MetaContexts) > 0 {
		if !c.structed {
			return errors.New("nbd: server has no structured replies, so no block status")
		}
		if err := c.setMetaContexts(o); err != nil {
			return err
		}
	}
	return c.goExport(o.Export)
}

func (c *Conn) sendOption(opt uint32, data []byte) error {
	b := make([]byte, 16+len(data))
	binary.BigEndian.PutUint64(b, magicIHaveOpt)
	binary.BigEndian.PutUint32(b[8:], opt)
	binary.BigEndian.PutUint32(b[12:], uint32(len(data)))
	copy(b[16:], data)
	_, err := c.conn.Write(b)
	return err
}

// readOptionReply returns one reply; error replies become *Error except
// ERR_UNSUP, returned as a type for the caller to decide.
func (c *Conn) readOptionReply(opt uint32) (uint32, []byte, error) {
	var h [20]byte
	if _, err := io.ReadFull(c.br, h[:]); err != nil {
		return 0, nil, fmt.Errorf("nbd: option reply: %w", err)
	}
	if binary.BigEndian.Uint64(h[0:]) != magicOptReply || binary.BigEndian.Uint32(h[8:]) != opt {
		return 0, nil, errors.New("nbd: malformed option reply")
	}
	typ := binary.BigEndian.Uint32(h[12:])
	n := binary.BigEndian.Uint32(h[16:])
	if n > maxOptionLen {
		return 0, nil, fmt.Errorf("nbd: option reply of %d bytes", n)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(c.br, data); err != nil {
		return 0, nil, err
	}
	if typ&repErrBit != 0 && typ != repErrUnsup {
		return typ, data, &Error{Op: fmt.Sprintf("option %d", opt), Errno: typ &^ repErrBit, Msg: string(data)}
	}
	return typ, data, nil
}

func appendString32(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func (c *Conn) setMetaContexts(o ClientOptions) error {
	b := appendString32(nil, o.Export)
	b = binary.BigEndian.AppendUint32(b, uint32(len(o.MetaContexts)))
	for _, q := range o.MetaContexts {
		b = appendString32(b, q)
	}
	if err := c.sendOption(optSetMetaContext, b); err != nil {
		return err
	}
	for {
		typ, data, err := c.readOptionReply(optSetMetaContext)
		if err != nil {
			return err
		}
		switch typ {
		case repMetaContext:
			if len(data) < 4 {
				return errors.New("nbd: short meta context reply")
			}
			c.contexts[string(data[4:])] = binary.BigEndian.Uint32(data)
		case repAck:
			for _, q := range o.MetaContexts {
				if _, ok := c.contexts[q]; !ok {
					return fmt.Errorf("nbd: export %q has no meta context %q", o.Export, q)
				}
			}
			return nil
		default:
			return fmt.Errorf("nbd: meta context negotiation failed (reply %#x)", typ)
		}
	}
}

func (c *Conn) goExport(name string) error {
	b := appendString32(nil, name)
	b = binary.BigEndian.AppendUint16(b, 1)
	b = binary.BigEndian.AppendUint16(b, infoBlockSize)
	if err := c.sendOption(optGo, b); err != nil {
		return err
	}
	for {
		typ, data, err := c.readOptionReply(optGo)
		if err != nil {
			return fmt.Errorf("nbd: export %q: %w", name, err)
		}
		switch typ {
		case repInfo:
			if len(data) >= 12 && binary.BigEndian.Uint16(data) == infoExport {
				c.size = int64(binary.BigEndian.Uint64(data[2:]))
				c.flags = binary.BigEndian.Uint16(data[10:])
			}
			if len(data) >= 14 && binary.BigEndian.Uint16(data) == infoBlockSize {
				if m := binary.BigEndian.Uint32(data[10:]); m > 0 && m < c.maxBlock {
					c.maxBlock = m
				}
			}
		case repAck:
			return nil
		default:
			return fmt.Errorf("nbd: export %q not available (reply %#x)", name, typ)
		}
	}
}

// Size is the export's size in bytes.
func (c *Conn) Size() int64 { return c.size }

// Flags are the export's transmission flags.
func (c *Conn) Flags() uint16 { return c.flags }

// Close disconnects politely.
func (c *Conn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.mu.Lock()
		if c.broken == nil {
			c.conn.SetWriteDeadline(time.Now().Add(time.Second))
			_ = c.writeRequest(cmdDisc, 0, 0, 0) // a courtesy: the close below ends the session anyway
		}
		c.mu.Unlock()
		err = c.conn.Close()
	})
	return err
}

func (c *Conn) writeRequest(cmd, flags uint16, off int64, length uint32) error {
	c.cookie++
	binary.BigEndian.PutUint32(c.hdr[0:], magicRequest)
	binary.BigEndian.PutUint16(c.hdr[4:], flags)
	binary.BigEndian.PutUint16(c.hdr[6:], cmd)
	binary.BigEndian.PutUint64(c.hdr[8:], c.cookie)
	binary.BigEndian.PutUint64(c.hdr[16:], uint64(off))
	binary.BigEndian.PutUint32(c.hdr[24:], length)
	_, err := c.conn.Write(c.hdr[:28])
	return err
}

// fail marks the connection unusable after a protocol or I/O error.
func (c *Conn) fail(err error) error {
	if c.broken == nil {
		c.broken = err
		c.conn.Close()
	}
	return err
}
