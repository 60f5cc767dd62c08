package nfsserve

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/willscott/go-nfs-client/nfs/rpc"
)

// servePortmap serves the portmapper of an export on nfsPort, on
// loopback ports of the system's choosing (ESXi asks port 111:
// ListenPortmap; the CLI's vSphere instant test covers that port).
func servePortmap(t *testing.T, nfsPort int) (tcpAddr, udpAddr string) {
	t.Helper()
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ul, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { NewPortmap(tl, ul, nfsPort).Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return tl.Addr().String(), ul.LocalAddr().String()
}

// getport asks the portmapper at addr with the client library.
func getport(t *testing.T, addr string, prog, vers, proto uint32) int {
	t.Helper()
	c, err := dialNFS(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	port, err := (&rpc.Portmapper{Client: c}).Getport(rpc.Mapping{Prog: prog, Vers: vers, Prot: proto})
	if err != nil {
		t.Fatalf("GETPORT %d v%d: %v", prog, vers, err)
	}
	return port
}

// TestPortmapLeadsAClientToTheExport: a client that knows only the
// portmapper, as ESXi does, learns the port of MOUNT and NFS version 3
// over TCP from it, mounts the export there and reads a disk; what is
// not served is port 0.
func TestPortmapLeadsAClientToTheExport(t *testing.T) {
	disk := randomDisk(7, 64<<10)
	e, err := Open(t.TempDir()+"/export", "vm", t.TempDir(), []Disk{{Key: "2000", Base: bytes.NewReader(disk), Size: int64(len(disk))}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	nfsAddr := serve(t, e.FS)
	_, p, _ := net.SplitHostPort(nfsAddr)
	nfsPort, _ := strconv.Atoi(p)
	pm, _ := servePortmap(t, nfsPort)

	mountPort := getport(t, pm, progMount, 3, protoTCP)
	if got := getport(t, pm, progNFS, 3, protoTCP); mountPort != nfsPort || got != nfsPort {
		t.Fatalf("MOUNT at %d, NFS at %d, want both at %d", mountPort, got, nfsPort)
	}
	for _, q := range [][3]uint32{{progNFS, 3, protoUDP}, {progNFS, 4, protoTCP}, {progMount, 1, protoTCP}, {100021, 4, protoTCP}} {
		if got := getport(t, pm, q[0], q[1], q[2]); got != 0 {
			t.Errorf("GETPORT %v = %d, want 0 (not served)", q, got)
		}
	}
	target := mount(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(mountPort)))
	if got := readAll(t, target, "vm/vm_0-flat.vmdk"); !bytes.Equal(got, disk) {
		t.Fatal("the disk read through the port the portmapper gave differs")
	}
}

// reply sends one call record over TCP and returns the reply's words
// after the XID, or nil when the server closed the connection.
func reply(t *testing.T, addr string, rec []byte) []uint32 {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // only against a hung server
	if _, err := c.Write(rec); err != nil {
		t.Fatal(err)
	}
	var mark [4]byte
	if _, err := io.ReadFull(c, mark[:]); err != nil {
		return nil
	}
	b := make([]byte, binary.BigEndian.Uint32(mark[:])&^(1<<31))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	var ws []uint32
	for i := 4; i+4 <= len(b); i += 4 {
		ws = append(ws, binary.BigEndian.Uint32(b[i:]))
	}
	return ws
}

// TestPortmapAnswersWhatItServesAndRefusesTheRest: NULL and DUMP are
// answered; SET and UNSET are refused (false); rpcbind's versions 3 and 4
// get a version mismatch naming 2, so clients fall back; another RPC
// version is denied; CALLIT is not served; a record that is fragmented,
// longer than any call or not a call closes the connection with no
// reply; and the server answers on, over UDP too.
func TestPortmapAnswersWhatItServesAndRefusesTheRest(t *testing.T) {
	pm, udp := servePortmap(t, 2049)
	// reply words: message type, accepted/denied, then the verifier (two
	// words) and the accept status when accepted.
	ok := []uint32{msgReply, replyAccepted, 0, 0, acceptSuccess}
	dump := append(append([]uint32{}, ok...), 1, pmapProg, 2, protoTCP, 111, 1, pmapProg, 2, protoUDP, 111,
		1, progMount, 3, protoTCP, 2049, 1, progNFS, 3, protoTCP, 2049, 0)
	for name, c := range map[string]struct {
		rec  []byte
		want []uint32
	}{
		"null":     {call(pmapProg, 2, procNull, nil), ok},
		"dump":     {call(pmapProg, 2, procDump, nil), dump},
		"set":      {call(pmapProg, 2, procSet, words(nil, progNFS, 3, protoTCP, 1)), append(append([]uint32{}, ok...), 0)},
		"unset":    {call(pmapProg, 2, procUnset, words(nil, progNFS, 3, protoTCP, 1)), append(append([]uint32{}, ok...), 0)},
		"rpcbind3": {call(pmapProg, 3, 3, nil), []uint32{msgReply, replyAccepted, 0, 0, acceptProgMis, 2, 2}},
		"rpcbind4": {call(pmapProg, 4, 3, nil), []uint32{msgReply, replyAccepted, 0, 0, acceptProgMis, 2, 2}},
		"callit":   {call(pmapProg, 2, 5, words(nil, progNFS, 3, 0, 0)), []uint32{msgReply, replyAccepted, 0, 0, acceptProcUnav}},
		"nfs":      {call(progNFS, 3, 0, nil), []uint32{msgReply, replyAccepted, 0, 0, acceptProgUnav}},
		"getport cut short": {call(pmapProg, 2, procGetport, words(nil, progNFS, 3)),
			[]uint32{msgReply, replyAccepted, 0, 0, acceptGarbage}},
		"rpc version 3": {rpcVersion3(call(pmapProg, 2, procNull, nil)), []uint32{msgReply, replyDenied, rpcMismatch, 2, 2}},
		"fragment":      {fragment(call(pmapProg, 2, procNull, nil)), nil},
		"too long":      {call(pmapProg, 2, procNull, make([]byte, pmapMaxCall)), nil},
		"a reply":       {replyRecord(), nil},
		"auth too long": {authTooLong(), nil},
	} {
		if got := reply(t, pm, c.rec); !equalWords(got, c.want) {
			t.Errorf("%s: reply %v, want %v", name, got, c.want)
		}
	}
	if got := getport(t, pm, progMount, 3, protoTCP); got != 2049 {
		t.Errorf("after the refusals, MOUNT at %d", got)
	}
	uc, err := net.Dial("udp", udp)
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	_ = uc.SetDeadline(time.Now().Add(30 * time.Second))
	_, _ = uc.Write(call(pmapProg, 2, procGetport, words(nil, progNFS, 3, protoTCP, 0))[4:])
	b := make([]byte, 64)
	n, err := uc.Read(b)
	if err != nil || n != 28 || binary.BigEndian.Uint32(b[24:]) != 2049 {
		t.Fatalf("GETPORT over UDP: %x, %v", b[:n], err)
	}
}

func equalWords(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// rpcVersion3 rewrites a call record's RPC version.
func rpcVersion3(rec []byte) []byte {
	binary.BigEndian.PutUint32(rec[12:], 3)
	return rec
}

// fragment clears the last-fragment bit of a record's mark.
func fragment(rec []byte) []byte {
	rec[0] &^= 0x80
	return rec
}

func replyRecord() []byte {
	rec := call(pmapProg, 2, procNull, nil)
	binary.BigEndian.PutUint32(rec[8:], msgReply)
	return rec
}

// authTooLong is a call whose credential claims more than 400 bytes.
func authTooLong() []byte {
	rec := call(pmapProg, 2, procNull, make([]byte, 404))
	binary.BigEndian.PutUint32(rec[4+28:], 401)
	return rec
}

// FuzzPortmapAnswer: any message gets a reply of bounded size or none,
// and never panics.
func FuzzPortmapAnswer(f *testing.F) {
	f.Add(call(pmapProg, 2, procGetport, words(nil, progNFS, 3, protoTCP, 0))[4:])
	f.Add(call(pmapProg, 2, procDump, nil)[4:])
	f.Add(authTooLong()[4:])
	p := NewPortmap(nil, nil, 2049)
	f.Fuzz(func(t *testing.T, msg []byte) {
		out, err := p.answer(msg)
		if err == nil && (len(out) < 24 || len(out) > 128) {
			t.Fatalf("a reply of %d bytes", len(out))
		}
	})
}
