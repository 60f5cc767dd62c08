package nfsserve

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// The portmapper (RFC 1833, version 2) tells an NFSv3 client where the
// MOUNT and NFS programs listen. ESXi's NFS client asks it on port 111
// before it mounts, and go-nfs serves none: it answers MOUNT and NFS on
// the one port of its listener. No maintained Go package serves a
// portmapper (go-nfs-client has only the client side), and coffer needs
// just its lookups, so this answers those few calls itself: NULL, GETPORT
// and DUMP, over TCP and UDP, for a fixed table. SET and UNSET are
// refused (nothing registers here) and CALLIT, the indirect call that
// portmappers are abused for, is not served.
const (
	PortmapPort = 111

	pmapProg    = 100000
	pmapVers    = 2
	protoTCP    = 6
	protoUDP    = 17
	procNull    = 0
	procSet     = 1
	procUnset   = 2
	procGetport = 3
	procDump    = 4
)

// A call's bounds: a GETPORT with the largest credential and verifier
// the protocol allows (400 bytes each) fits in pmapMaxCall.
const (
	pmapMaxCall  = 1024
	pmapMaxConns = 16
	pmapIdle     = 30 * time.Second
)

// mapping is one row of the portmapper's table.
type mapping struct{ prog, vers, proto, port uint32 }

// Portmap serves the table of one export: the portmapper itself on
// port 111, and MOUNT and NFS version 3 over TCP on nfsPort.
type Portmap struct {
	table []mapping
	tcp   net.Listener
	udp   net.PacketConn
	slots chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// ListenPortmap listens on host's port 111 (TCP and UDP) for the
// portmapper of an export served on host:nfsPort.
func ListenPortmap(host string, nfsPort int) (*Portmap, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(PortmapPort))
	tl, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("portmapper: %w", err)
	}
	ul, err := net.ListenPacket("udp", addr)
	if err != nil {
		_ = tl.Close()
		return nil, fmt.Errorf("portmapper: %w", err)
	}
	return NewPortmap(tl, ul, nfsPort), nil
}

// NewPortmap serves the table of an export on nfsPort on tcp and udp
// (either may be nil), which it owns.
func NewPortmap(tcp net.Listener, udp net.PacketConn, nfsPort int) *Portmap {
	p := uint32(nfsPort)
	return &Portmap{tcp: tcp, udp: udp, slots: make(chan struct{}, pmapMaxConns), conns: map[net.Conn]struct{}{},
		table: []mapping{
			{pmapProg, pmapVers, protoTCP, PortmapPort}, {pmapProg, pmapVers, protoUDP, PortmapPort},
			{progMount, 3, protoTCP, p}, {progNFS, 3, protoTCP, p},
		}}
}

// Serve answers calls until ctx ends, then closes everything it holds.
func (p *Portmap) Serve(ctx context.Context) {
	if p.tcp != nil {
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.acceptTCP() }()
	}
	if p.udp != nil {
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.serveUDP() }()
	}
	<-ctx.Done()
	p.close()
	p.wg.Wait()
}

func (p *Portmap) close() {
	if p.tcp != nil {
		_ = p.tcp.Close()
	}
	if p.udp != nil {
		_ = p.udp.Close()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *Portmap) acceptTCP() {
	for {
		c, err := p.tcp.Accept()
		if err != nil {
			return
		}
		select {
		case p.slots <- struct{}{}:
		default:
			_ = c.Close() // over pmapMaxConns
			continue
		}
		p.mu.Lock()
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serveConn(c)
			p.mu.Lock()
			delete(p.conns, c)
			p.mu.Unlock()
			_ = c.Close()
			<-p.slots
		}()
	}
}

// serveConn answers one call record after another; a record that is
// fragmented, too long or not a call ends the connection.
func (p *Portmap) serveConn(c net.Conn) {
	var hdr [4]byte
	buf := make([]byte, pmapMaxCall)
	for {
		_ = c.SetReadDeadline(time.Now().Add(pmapIdle))
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		mark := binary.BigEndian.Uint32(hdr[:])
		n := mark &^ (1 << 31)
		if mark&(1<<31) == 0 || n > pmapMaxCall {
			return
		}
		if _, err := io.ReadFull(c, buf[:n]); err != nil {
			return
		}
		reply, err := p.answer(buf[:n])
		if err != nil {
			return
		}
		out := binary.BigEndian.AppendUint32(nil, uint32(len(reply))|1<<31)
		_ = c.SetWriteDeadline(time.Now().Add(pmapIdle))
		if _, err := c.Write(append(out, reply...)); err != nil {
			return
		}
	}
}

func (p *Portmap) serveUDP() {
	buf := make([]byte, pmapMaxCall+1)
	for {
		n, from, err := p.udp.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if n > pmapMaxCall {
			continue
		}
		if reply, err := p.answer(buf[:n]); err == nil {
			_, _ = p.udp.WriteTo(reply, from)
		}
	}
}
