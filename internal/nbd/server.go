package nbd

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"sync"
)

// Export is a read-only disk the server serves.
type Export interface {
	io.ReaderAt
	Size() int64
	// Allocated lists the ranges that hold data, sorted; the rest reads as
	// zeros and is reported as holes (base:allocation) without reading.
	Allocated() []Extent
}

// Server serves read-only exports with fixed newstyle negotiation,
// structured replies and base:allocation block status.
type Server struct {
	// Lookup returns the export for a name ("" is the default export).
	Lookup func(name string) (Export, bool)
	// List names the exports for NBD_OPT_LIST.
	List func() []string
	// Log receives per-connection errors; nil means slog.Default().
	Log *slog.Logger
	// Workers bounds concurrent requests per connection (default 8).
	Workers int

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// Serve accepts connections until ctx ends or l fails.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	stop := context.AfterFunc(ctx, func() { l.Close(); s.closeAll() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		s.track(c, true)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.track(c, false)
			defer c.Close()
			if err := s.serveConn(ctx, c); err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
				s.log().Debug("nbd connection ended", "remote", c.RemoteAddr().String(), "err", err)
			}
		}()
	}
}

func (s *Server) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

func (s *Server) track(c net.Conn, add bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		s.conns = map[net.Conn]struct{}{}
	}
	if add {
		s.conns[c] = struct{}{}
	} else {
		delete(s.conns, c)
	}
}

func (s *Server) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

// session is the negotiated state of one connection.
type session struct {
	c          net.Conn
	br         *bufio.Reader
	noZeroes   bool
	structured bool
	allocCtx   bool // base:allocation negotiated (context id 1)
	exp        Export
	name       string
}

const allocContextID = 1

func (s *Server) serveConn(ctx context.Context, c net.Conn) error {
	ss := &session{c: c, br: bufio.NewReaderSize(c, 64<<10)}
	var h [18]byte
	binary.BigEndian.PutUint64(h[0:], magicNBD)
	binary.BigEndian.PutUint64(h[8:], magicIHaveOpt)
	binary.BigEndian.PutUint16(h[16:], flagFixedNewstyle|flagNoZeroes)
	if _, err := c.Write(h[:]); err != nil {
		return err
	}
	var cflags uint32
	if err := binary.Read(ss.br, binary.BigEndian, &cflags); err != nil {
		return err
	}
	if cflags&flagFixedNewstyle == 0 || cflags&^uint32(flagFixedNewstyle|flagNoZeroes) != 0 {
		return fmt.Errorf("client flags %#x unsupported", cflags)
	}
	ss.noZeroes = cflags&flagNoZeroes != 0
	done, err := s.negotiate(ss)
	if err != nil || !done {
		return err
	}
	return s.transmit(ctx, ss)
}

// negotiate runs the option haggling phase; done reports that the client
// entered transmission.
func (s *Server) negotiate(ss *session) (bool, error) {
	for {
		var h [16]byte
		if _, err := io.ReadFull(ss.br, h[:]); err != nil {
			return false, err
		}
		if binary.BigEndian.Uint64(h[:]) != magicIHaveOpt {
			return false, errors.New("bad option magic")
		}
		opt := binary.BigEndian.Uint32(h[8:])
		n := binary.BigEndian.Uint32(h[12:])
		if n > maxOptionLen {
			return false, fmt.Errorf("option %d: %d bytes", opt, n)
		}
		data := make([]byte, n)
		if _, err := io.ReadFull(ss.br, data); err != nil {
			return false, err
		}
		switch opt {
		case optExportName:
			exp, ok := s.Lookup(string(data))
			if !ok {
				return false, fmt.Errorf("unknown export %q", data)
			}
			ss.exp, ss.name = exp, string(data)
			var r [10]byte
			binary.BigEndian.PutUint64(r[:], uint64(exp.Size()))
			binary.BigEndian.PutUint16(r[8:], s.transmissionFlags())
			out := r[:]
			if !ss.noZeroes {
				out = append(out, make([]byte, 124)...)
			}
			_, err := ss.c.Write(out)
			return err == nil, err
		case optAbort:
			_ = s.reply(ss, opt, repAck, nil) // the client leaves either way
			return false, nil
		case optList:
			if err := s.list(ss, opt, data); err != nil {
				return false, err
			}
		case optStructured:
			if err := s.structuredReplies(ss, opt, data); err != nil {
				return false, err
			}
		case optSetMetaContext, optListMetaCtx:
			if err := s.metaContext(ss, opt, data); err != nil {
				return false, err
			}
		case optInfo, optGo:
			entered, err := s.infoGo(ss, opt, data)
			if err != nil || entered {
				return entered, err
			}
		case optStartTLS:
			if err := s.reply(ss, opt, repErrPolicy, []byte("TLS is not offered; use a unix socket or a trusted network")); err != nil {
				return false, err
			}
		default:
			if err := s.reply(ss, opt, repErrUnsup, []byte("option not supported")); err != nil {
				return false, err
			}
		}
	}
}

// list answers LIST with the export names.
func (s *Server) list(ss *session, opt uint32, data []byte) error {
	if len(data) != 0 {
		return s.reply(ss, opt, repErrInvalid, []byte("LIST takes no data"))
	}
	var names []string
	if s.List != nil {
		names = s.List()
	}
	for _, nm := range names {
		if err := s.reply(ss, opt, repServer, appendString32(nil, nm)); err != nil {
			return err
		}
	}
	return s.reply(ss, opt, repAck, nil)
}

// structuredReplies answers STRUCTURED_REPLY, which turns them on.
func (s *Server) structuredReplies(ss *session, opt uint32, data []byte) error {
	if len(data) != 0 {
		return s.reply(ss, opt, repErrInvalid, []byte("STRUCTURED_REPLY takes no data"))
	}
	ss.structured = true
	return s.reply(ss, opt, repAck, nil)
}

func (s *Server) transmissionFlags() uint16 {
	return FlagHasFlags | FlagReadOnly | FlagSendFlush | FlagCanMultiConn | FlagSendCache | FlagSendDF
}

func (s *Server) reply(ss *session, opt, typ uint32, data []byte) error {
	b := make([]byte, 20+len(data))
	binary.BigEndian.PutUint64(b, magicOptReply)
	binary.BigEndian.PutUint32(b[8:], opt)
	binary.BigEndian.PutUint32(b[12:], typ)
	binary.BigEndian.PutUint32(b[16:], uint32(len(data)))
	copy(b[20:], data)
	_, err := ss.c.Write(b)
	return err
}

// parseString32 reads a 32-bit length-prefixed string.
func parseString32(b []byte) (string, []byte, bool) {
	if len(b) < 4 {
		return "", nil, false
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return "", nil, false
	}
	return string(b[4 : 4+n]), b[4+n:], true
}

func (s *Server) metaContext(ss *session, opt uint32, data []byte) error {
	name, rest, ok := parseString32(data)
	if !ok || len(rest) < 4 {
		return s.reply(ss, opt, repErrInvalid, []byte("malformed meta context request"))
	}
	if opt == optSetMetaContext && !ss.structured {
		return s.reply(ss, opt, repErrInvalid, []byte("negotiate structured replies first"))
	}
	if _, found := s.Lookup(name); !found {
		return s.reply(ss, opt, repErrUnknown, []byte("unknown export"))
	}
	count := binary.BigEndian.Uint32(rest)
	rest = rest[4:]
	var queries []string
	for i := uint32(0); i < count; i++ {
		var q string
		if q, rest, ok = parseString32(rest); !ok {
			return s.reply(ss, opt, repErrInvalid, []byte("malformed meta context query"))
		}
		queries = append(queries, q)
	}
	if opt == optListMetaCtx && count == 0 {
		queries = []string{ContextAllocation}
	}
	if opt == optSetMetaContext {
		ss.allocCtx = false
	}
	for _, q := range queries {
		if q == ContextAllocation || (opt == optListMetaCtx && (q == "base:" || q == "base:*")) {
			if opt == optSetMetaContext {
				ss.allocCtx = true
			}
			b := binary.BigEndian.AppendUint32(nil, allocContextID)
			if err := s.reply(ss, opt, repMetaContext, append(b, ContextAllocation...)); err != nil {
				return err
			}
		}
	}
	return s.reply(ss, opt, repAck, nil)
}

func (s *Server) infoGo(ss *session, opt uint32, data []byte) (bool, error) {
	name, rest, ok := parseString32(data)
	if !ok || len(rest) < 2 || len(rest) != 2+2*int(binary.BigEndian.Uint16(rest)) {
		return false, s.reply(ss, opt, repErrInvalid, []byte("malformed INFO/GO request"))
	}
	exp, found := s.Lookup(name)
	if !found {
		return false, s.reply(ss, opt, repErrUnknown, []byte(fmt.Sprintf("no export named %q", name)))
	}
	var info [12]byte
	binary.BigEndian.PutUint16(info[0:], infoExport)
	binary.BigEndian.PutUint64(info[2:], uint64(exp.Size()))
	binary.BigEndian.PutUint16(info[10:], s.transmissionFlags())
	if err := s.reply(ss, opt, repInfo, info[:]); err != nil {
		return false, err
	}
	var bs [14]byte
	binary.BigEndian.PutUint16(bs[0:], infoBlockSize)
	binary.BigEndian.PutUint32(bs[2:], 1)
	binary.BigEndian.PutUint32(bs[6:], 4096)
	binary.BigEndian.PutUint32(bs[10:], maxRequest)
	if err := s.reply(ss, opt, repInfo, bs[:]); err != nil {
		return false, err
	}
	if err := s.reply(ss, opt, repAck, nil); err != nil {
		return false, err
	}
	if opt == optGo {
		ss.exp, ss.name = exp, name
		return true, nil
	}
	return false, nil
}

// extentsIn returns the allocation of [off, off+n) as data/hole extents.
func extentsIn(alloc []Extent, off, n int64) []Extent {
	end := off + n
	i := sort.Search(len(alloc), func(i int) bool { return alloc[i].Offset+alloc[i].Length > off })
	var out []Extent
	at := off
	for ; i < len(alloc) && alloc[i].Offset < end; i++ {
		a := alloc[i]
		if a.Offset > at {
			out = append(out, Extent{Offset: at, Length: a.Offset - at, Flags: StateHole | StateZero})
			at = a.Offset
		}
		stop := min(a.Offset+a.Length, end)
		out = append(out, Extent{Offset: at, Length: stop - at})
		at = stop
	}
	if at < end {
		out = append(out, Extent{Offset: at, Length: end - at, Flags: StateHole | StateZero})
	}
	return out
}
