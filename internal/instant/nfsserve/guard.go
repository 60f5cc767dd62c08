package nfsserve

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// maxConns is how many connections the export serves at once; one more
// is closed as soon as it is accepted. An ESXi host opens a few per
// datastore. With maxRecord per record, it bounds what clients can make
// the server hold.
const maxConns = 64

// guardedListener hands go-nfs connections that pass it only whole,
// checked call records (checkCall), and closes every connection it
// handed out when it is closed: go-nfs itself leaves them open.
type guardedListener struct {
	net.Listener
	slots chan struct{}
	mu    sync.Mutex
	conns map[*guardedConn]struct{}
}

func guard(l net.Listener) *guardedListener {
	return &guardedListener{Listener: l, slots: make(chan struct{}, maxConns), conns: map[*guardedConn]struct{}{}}
}

// Accept implements net.Listener.
func (l *guardedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
		default:
			_ = c.Close() // over maxConns: the client may come back later
			continue
		}
		g := &guardedConn{Conn: c, l: l}
		l.mu.Lock()
		l.conns[g] = struct{}{}
		l.mu.Unlock()
		return g, nil
	}
}

// Close implements net.Listener: no new connections, and the open ones
// end.
func (l *guardedListener) Close() error {
	err := l.Listener.Close()
	l.mu.Lock()
	conns := make([]*guardedConn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	return err
}

// guardedConn reads one record at a time from the client, checks it and
// only then lets go-nfs read it. A record that fails the check closes
// the connection: go-nfs could not have answered it either (its reply
// would need the arguments it cannot read), and the client's other
// calls on this connection are not worth a server's memory.
type guardedConn struct {
	net.Conn
	l       *guardedListener
	pending []byte // the checked record go-nfs is reading
	buf     []byte
	once    sync.Once
	out     replies
}

// Write implements net.Conn: FSINFO replies advertise MaxIO (replies.go).
func (c *guardedConn) Write(p []byte) (int, error) {
	c.out.patch(p)
	return c.Conn.Write(p)
}

// Read implements net.Conn.
func (c *guardedConn) Read(p []byte) (int, error) {
	if len(c.pending) == 0 {
		rec, err := c.nextRecord()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				// go-nfs closes a connection on EOF only.
				_ = c.Close()
			}
			return 0, err
		}
		c.pending = rec
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// nextRecord reads and checks one record, mark included. It returns
// io.EOF when the client closed between records.
func (c *guardedConn) nextRecord() ([]byte, error) {
	var mark [4]byte
	if _, err := io.ReadFull(c.Conn, mark[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w: torn record mark", errBadRecord)
		}
		return nil, err
	}
	m := binary.BigEndian.Uint32(mark[:])
	if m&(1<<31) == 0 {
		// go-nfs does not reassemble fragments; no client of it sends them.
		return nil, fmt.Errorf("%w: a record in fragments", errBadRecord)
	}
	n := int(m &^ (1 << 31))
	if n < minRecord || n > maxRecord {
		return nil, fmt.Errorf("%w: a record of %d bytes (%d to %d)", errBadRecord, n, minRecord, maxRecord)
	}
	if cap(c.buf) < 4+n {
		c.buf = make([]byte, 4+n) // at most maxRecord, once per size class a client reaches
	}
	rec := c.buf[:4+n]
	copy(rec, mark[:])
	if _, err := io.ReadFull(c.Conn, rec[4:]); err != nil {
		return nil, fmt.Errorf("%w: the record holds less than its mark says: %w", errBadRecord, err)
	}
	call, err := checkCall(rec[4:])
	if err != nil {
		return nil, err
	}
	capRead(rec[4:], call.readCount)
	if call.prog == progNFS && call.proc == procFSInfo {
		c.out.expect(call.xid)
	}
	return rec, nil
}

// Close implements net.Conn; it may be called more than once. The slot
// is free before the client sees the connection end.
func (c *guardedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		<-c.l.slots
	})
	return c.Conn.Close()
}
