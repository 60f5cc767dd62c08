package nbd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

type request struct {
	flags, cmd uint16
	cookie     uint64
	off        int64
	length     uint32
}

// replier serialises replies of concurrently served requests.
type replier struct {
	mu  sync.Mutex
	ss  *session
	err error
}

func (r *replier) write(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		_, r.err = r.ss.c.Write(b)
	}
}

func (r *replier) simple(cookie uint64, errno uint32, data []byte) {
	b := make([]byte, 16, 16+len(data))
	binary.BigEndian.PutUint32(b[0:], magicSimple)
	binary.BigEndian.PutUint32(b[4:], errno)
	binary.BigEndian.PutUint64(b[8:], cookie)
	r.write(append(b, data...))
}

var replyBuffers sync.Pool

// replyBuffer returns a pooled buffer of capacity at least n.
func replyBuffer(n int) *[]byte {
	if bp, ok := replyBuffers.Get().(*[]byte); ok && cap(*bp) >= n {
		return bp
	}
	b := make([]byte, 0, max(n, 1<<20+28))
	return &b
}

// putChunkHeader appends a structured reply chunk header to b (len 0).
func putChunkHeader(b []byte, cookie uint64, flags, typ uint16, n int) []byte {
	b = b[:20]
	binary.BigEndian.PutUint32(b[0:], magicStructure)
	binary.BigEndian.PutUint16(b[4:], flags)
	binary.BigEndian.PutUint16(b[6:], typ)
	binary.BigEndian.PutUint64(b[8:], cookie)
	binary.BigEndian.PutUint32(b[16:], uint32(n))
	return b
}

func chunkHeader(cookie uint64, flags, typ uint16, n int) []byte {
	return putChunkHeader(make([]byte, 20, 20+n), cookie, flags, typ, n)
}

func (r *replier) errorReply(q request, errno uint32, msg string) {
	if !r.ss.structured || (q.cmd != cmdRead && q.cmd != cmdBlockStatus) {
		r.simple(q.cookie, errno, nil)
		return
	}
	if len(msg) > 4096 {
		msg = msg[:4096]
	}
	b := chunkHeader(q.cookie, chunkFlagDone, chunkError, 6+len(msg))
	b = binary.BigEndian.AppendUint32(b, errno)
	b = binary.BigEndian.AppendUint16(b, uint16(len(msg)))
	r.write(append(b, msg...))
}

func (s *Server) transmit(ctx context.Context, ss *session) error {
	workers := s.Workers
	if workers <= 0 {
		workers = 8
	}
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	defer wg.Wait()
	rp := &replier{ss: ss}
	var h [28]byte
	for {
		if _, err := io.ReadFull(ss.br, h[:]); err != nil {
			return err
		}
		if binary.BigEndian.Uint32(h[0:]) != magicRequest {
			return errors.New("bad request magic; closing")
		}
		q := request{
			flags: binary.BigEndian.Uint16(h[4:]), cmd: binary.BigEndian.Uint16(h[6:]),
			cookie: binary.BigEndian.Uint64(h[8:]), off: int64(binary.BigEndian.Uint64(h[16:])),
			length: binary.BigEndian.Uint32(h[24:]),
		}
		switch q.cmd {
		case cmdDisc:
			return nil
		case cmdWrite:
			// The payload follows the header; it must be consumed to stay in
			// sync, unless it is absurd, in which case the stream is lost.
			if q.length > maxRequest {
				return fmt.Errorf("write of %d bytes", q.length)
			}
			if _, err := io.CopyN(io.Discard, ss.br, int64(q.length)); err != nil {
				return err
			}
			rp.simple(q.cookie, errPerm, nil)
			continue
		case cmdTrim, cmdWriteZeroes:
			rp.simple(q.cookie, errPerm, nil)
			continue
		case cmdFlush, cmdCache:
			rp.simple(q.cookie, 0, nil)
			continue
		case cmdRead, cmdBlockStatus:
		default:
			rp.simple(q.cookie, errInval, nil)
			continue
		}
		if !within(q.off, int64(q.length), ss.exp.Size()) || q.length == 0 && q.cmd == cmdBlockStatus {
			rp.errorReply(q, errInval, "request outside the export")
			continue
		}
		if q.cmd == cmdRead && q.length > maxRequest {
			rp.errorReply(q, errOverflow, "read larger than the maximum block size")
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if q.cmd == cmdRead {
				s.serveRead(rp, ss, q)
			} else {
				s.serveBlockStatus(rp, ss, q)
			}
		}()
		rp.mu.Lock()
		err := rp.err
		rp.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

func (s *Server) serveRead(rp *replier, ss *session, q request) {
	if !ss.structured || q.flags&cmdFlagDF != 0 {
		buf := make([]byte, q.length)
		if _, err := ss.exp.ReadAt(buf, q.off); err != nil && !errors.Is(err, io.EOF) {
			rp.errorReply(q, errIO, err.Error())
			return
		}
		if !ss.structured {
			rp.simple(q.cookie, 0, buf)
			return
		}
		b := chunkHeader(q.cookie, chunkFlagDone, chunkOffsetData, 8+len(buf))
		b = binary.BigEndian.AppendUint64(b, uint64(q.off))
		rp.write(append(b, buf...))
		return
	}
	// Holes go out as OFFSET_HOLE chunks: never read, never sent.
	exts := extentsIn(ss.exp.Allocated(), q.off, int64(q.length))
	for i, e := range exts {
		var flags uint16
		if i == len(exts)-1 {
			flags = chunkFlagDone
		}
		if e.Flags&StateHole != 0 {
			b := chunkHeader(q.cookie, flags, chunkOffsetHole, 12)
			b = binary.BigEndian.AppendUint64(b, uint64(e.Offset))
			rp.write(binary.BigEndian.AppendUint32(b, uint32(e.Length)))
			continue
		}
		// Reply buffers are reused: a client reading at full speed would
		// otherwise allocate its whole read rate and grow the heap far
		// beyond the chunk cache.
		bp := replyBuffer(28 + int(e.Length))
		b := putChunkHeader((*bp)[:0], q.cookie, flags, chunkOffsetData, 8+int(e.Length))
		b = binary.BigEndian.AppendUint64(b, uint64(e.Offset))
		data := b[len(b) : len(b)+int(e.Length)]
		if _, err := ss.exp.ReadAt(data, e.Offset); err != nil && !errors.Is(err, io.EOF) {
			replyBuffers.Put(bp)
			rp.errorReply(q, errIO, err.Error())
			return
		}
		rp.write(b[:len(b)+int(e.Length)])
		replyBuffers.Put(bp)
	}
}

func (s *Server) serveBlockStatus(rp *replier, ss *session, q request) {
	if !ss.allocCtx {
		rp.errorReply(q, errInval, "no meta context negotiated")
		return
	}
	exts := extentsIn(ss.exp.Allocated(), q.off, int64(q.length))
	if q.flags&cmdFlagReqOne != 0 && len(exts) > 1 {
		exts = exts[:1]
	}
	b := chunkHeader(q.cookie, chunkFlagDone, chunkBlockStatus, 4+8*len(exts))
	b = binary.BigEndian.AppendUint32(b, allocContextID)
	for _, e := range exts {
		b = binary.BigEndian.AppendUint32(b, uint32(e.Length))
		b = binary.BigEndian.AppendUint32(b, e.Flags)
	}
	rp.write(b)
}
