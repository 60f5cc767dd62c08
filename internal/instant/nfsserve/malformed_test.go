//go:build linux

package nfsserve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	nfs "github.com/willscott/go-nfs"
)

// childAddressSpace is the address space the serving process may use:
// room for the Go runtime, the test binary and 64 connections holding a
// record each, far below what one unchecked request makes go-nfs
// allocate (a claimed length of up to 4 GiB). Exceeding it kills the
// process ("out of memory"), so the test fails if any request gets
// through unbounded.
const childAddressSpace = 2 << 30

// malformedDisk is the disk the serving process exports.
func malformedDisk() []byte { return randomDisk(5, 256<<10) }

// TestHelperNFSServer is the serving process of
// TestMalformedRequestsDoNotStopTheServer: it limits its own address
// space, serves malformedDisk, prints its address and serves until its
// standard input closes.
func TestHelperNFSServer(t *testing.T) {
	if os.Getenv("COFFER_NFS_HELPER") == "" {
		t.Skip("helper process of TestMalformedRequestsDoNotStopTheServer")
	}
	lim := syscall.Rlimit{Cur: childAddressSpace, Max: childAddressSpace}
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &lim); err != nil {
		t.Fatal(err)
	}
	nfs.Log.SetLevel(nfs.PanicLevel) // a line per refused call otherwise
	d0 := malformedDisk()
	dir := t.TempDir()
	e, err := Open(filepath.Join(dir, "export"), "vm", filepath.Join(dir, "overlays"), []Disk{{Key: "2000", Base: bytes.NewReader(d0), Size: int64(len(d0))}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel() }()
	fmt.Printf("addr %s\n", l.Addr())
	if err := Serve(ctx, l, e.FS); err != nil {
		t.Fatal(err)
	}
}

// startNFSServerProcess runs TestHelperNFSServer and returns its
// address and a function that stops it and reports how it ended.
func startNFSServerProcess(t *testing.T) (string, func() error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperNFSServer$", "-test.count=1")
	cmd.Env = append(os.Environ(), "COFFER_NFS_HELPER=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(io.TeeReader(stdout, &out))
	var addr string
	for addr == "" && sc.Scan() {
		addr, _ = strings.CutPrefix(sc.Text(), "addr ")
	}
	go func() { _, _ = io.Copy(&out, stdout) }()
	if addr == "" {
		_ = cmd.Wait()
		t.Fatalf("the server process gave no address:\n%s\n%s", out.String(), stderr.String())
	}
	stop := func() error {
		_ = stdin.Close()
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("server process: %w\n%s\n%s", err, out.String(), lastLines(stderr.String(), 20))
		}
		return nil
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return addr, stop
}

func lastLines(s string, n int) string {
	l := strings.Split(s, "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// TestMalformedRequestsDoNotStopTheServer sends a server, which runs in
// a process of its own with a bounded address space, bytes that are not
// NFS: garbage, records that claim more than they hold or more than the
// largest call, calls of every MOUNT and NFS procedure whose first
// length claims 2 GiB or 4 GiB, and calls with valid headers and random
// arguments. The server survives all of them (a panic or an allocation
// past its address space would end it), a client mounted before them
// still reads the disk as it is, a new client mounts and reads it too,
// and the process ends cleanly when asked.
func TestMalformedRequestsDoNotStopTheServer(t *testing.T) {
	d0 := malformedDisk()
	addr, stop := startNFSServerProcess(t)
	t.Cleanup(func() { // after the clients' cleanups: they unmount
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	before := mount(t, addr)
	r := rand.New(rand.NewPCG(6, 7))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	send := func(b []byte) {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			sendOne(t, addr, b)
		}()
	}
	for range 10 {
		send(randomBytes(r, r.IntN(300)))
	}
	send([]byte{0x80, 0, 0, 100, 1, 2, 3})                 // a record of 100 bytes that holds 3
	send([]byte{0xff, 0xff, 0xff, 0xff})                   // a record of 2 GiB
	send(call(progNFS, 3, 7, make([]byte, MaxIO+64)))      // a WRITE larger than the largest accepted
	send(binary.BigEndian.AppendUint32(nil, 0x80000000|8)) // shorter than any call
	for _, p := range []struct{ prog, procs uint32 }{{progMount, 6}, {progNFS, 22}} {
		for proc := uint32(0); proc < p.procs+2; proc++ {
			for _, claim := range []uint32{0x7fffffff, 0xffffffff, maxRecord} {
				send(call(p.prog, 3, proc, binary.BigEndian.AppendUint32(nil, claim)))
			}
			for range 8 {
				send(call(p.prog, 3, proc, randomBytes(r, r.IntN(120))))
			}
		}
	}
	send(callWithCred(progNFS, 3, 1, 0x7fffffff)) // credentials claiming 2 GiB
	wg.Wait()
	if got := readAll(t, before, "vm/vm_0-flat.vmdk"); !bytes.Equal(got, d0) {
		t.Fatal("after the malformed requests, the client mounted before reads the extent differently")
	}
	if got := readAll(t, mount(t, addr), "vm/vm_0-flat.vmdk"); !bytes.Equal(got, d0) {
		t.Fatal("after the malformed requests, a new client reads the extent differently")
	}
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// callWithCred is a call record whose credentials' body claims n bytes.
func callWithCred(prog, vers, proc, n uint32) []byte {
	var b []byte
	for _, v := range []uint32{1, 0, 2, prog, vers, proc, 1, n, 0, 0} {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	b = append(b, make([]byte, 64)...)
	return append(binary.BigEndian.AppendUint32(nil, 0x80000000|uint32(len(b))), b...)
}

// TestConnectionsBeyondTheLimitAreClosed: with maxConns connections
// open, the next is closed at once; when one of them ends, a client
// mounts and reads again.
func TestConnectionsBeyondTheLimitAreClosed(t *testing.T) {
	d0 := randomDisk(8, 64<<10)
	dir := t.TempDir()
	e, err := Open(filepath.Join(dir, "export"), "vm", filepath.Join(dir, "overlays"), []Disk{{Key: "2000", Base: bytes.NewReader(d0), Size: int64(len(d0))}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	addr := serve(t, e.FS)
	held := make([]net.Conn, maxConns)
	for i := range held {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held[i] = c
	}
	// The connections are accepted in order, so once the server has
	// answered a call on the last one, all maxConns hold a slot.
	if _, err := held[maxConns-1].Write(call(progNFS, 3, 0, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(held[maxConns-1], make([]byte, 4)); err != nil {
		t.Fatalf("the last connection within the limit is not answered: %v", err)
	}
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	_, _ = extra.Write(call(progNFS, 3, 0, nil))
	if n, err := extra.Read(make([]byte, 4)); err == nil {
		t.Fatalf("a connection beyond the limit was answered (%d bytes)", n)
	}
	// The server frees a slot before it closes the connection, so once
	// this one reads the end, a new client is served.
	_ = held[0].(*net.TCPConn).CloseWrite()
	if _, err := io.Copy(io.Discard, held[0]); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, mount(t, addr), "vm/vm_0-flat.vmdk"); !bytes.Equal(got, d0) {
		t.Fatal("after a connection ended, a new client reads the extent differently")
	}
}
