package nfsserve

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"
)

// The kernel of this machine has no NFS client (no nfs module, no
// mount.nfs), so the tests mount the export with the NFS client library
// github.com/willscott/go-nfs-client, over loopback TCP.

// serveDisks serves disks (key -> content) for VM "vm" and mounts the
// export with the client library.
func serveDisks(t *testing.T, disks map[string][]byte) (*Export, *nfsc.Target, string) {
	t.Helper()
	dir := t.TempDir()
	var ds []Disk
	for _, k := range []string{"2000", "2001"} {
		if b, ok := disks[k]; ok {
			ds = append(ds, Disk{Key: k, Base: bytes.NewReader(b), Size: int64(len(b))})
		}
	}
	e, err := Open(filepath.Join(dir, "export"), "vm", filepath.Join(dir, "overlays"), ds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	addr := serve(t, e.FS)
	return e, mount(t, addr), dir
}

func serve(t *testing.T, fs *FS) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, fs) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return l.Addr().String()
}

func mount(t *testing.T, addr string) *nfsc.Target {
	t.Helper()
	c, err := dialNFS(addr)
	if err != nil {
		t.Fatal(err)
	}
	m := &nfsc.Mount{Client: c}
	target, err := m.Mount("/", rpc.AuthNull)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Unmount(); c.Close() })
	return target
}

// dialNFS connects the client library to addr. The library binds a
// random local port of its own choosing (49152-65535), which may be one
// the system gave another connection, so a bind refused with
// "address already in use" is tried again with another port.
func dialNFS(addr string) (*rpc.Client, error) {
	for i := 0; ; i++ {
		c, err := rpc.DialTCP("tcp", addr, false)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || i == 20 {
			return c, err
		}
	}
}

func randomDisk(seed uint64, size int) []byte {
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := 0; i < size; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	return b
}

func readAll(t *testing.T, target *nfsc.Target, name string) []byte {
	t.Helper()
	f, err := target.Open(name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return b
}

// TestServedFlatExtentsAreThePointsDisksAndWritesGoToTheOverlay: through
// an NFS client, each flat extent reads as its disk byte for byte and
// its descriptor names it with the disk's size in sectors. Writes through
// the client, unaligned and across blocks, read back, leave the point's
// disk as it was, and land in the overlay only: its map names exactly
// the blocks written, and a reopened overlay reads the same.
func TestServedFlatExtentsAreThePointsDisksAndWritesGoToTheOverlay(t *testing.T) {
	d0, d1 := randomDisk(1, 3<<20+512), randomDisk(2, 1<<20)
	orig0 := bytes.Clone(d0)
	e, target, dir := serveDisks(t, map[string][]byte{"2000": d0, "2001": d1})

	if got := readAll(t, target, "vm/vm_0-flat.vmdk"); !bytes.Equal(got, d0) {
		t.Fatalf("flat extent 0: %d bytes, differs from the disk's %d", len(got), len(d0))
	}
	if got := readAll(t, target, "vm/vm_1-flat.vmdk"); !bytes.Equal(got, d1) {
		t.Fatal("flat extent 1 differs from its disk")
	}
	desc := string(readAll(t, target, "vm/vm_0.vmdk"))
	if !strings.Contains(desc, `RW 6145 VMFS "vm_0-flat.vmdk"`) || !strings.Contains(desc, `createType="vmfs"`) {
		t.Fatalf("descriptor:\n%s", desc)
	}

	f, err := target.OpenFile("vm/vm_0-flat.vmdk", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(d0)
	writes := []struct {
		off int64
		n   int
	}{{100, 10}, {BlockSize - 3, 7000}, {3<<20 + 500, 12}}
	for i, w := range writes {
		p := bytes.Repeat([]byte{byte(0xa0 + i)}, w.n)
		if _, err := f.Seek(w.off, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(p); err != nil {
			t.Fatalf("write at %d: %v", w.off, err)
		}
		copy(want[w.off:], p)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, target, "vm/vm_0-flat.vmdk"); !bytes.Equal(got, want) {
		t.Fatal("the written extent does not read back as written")
	}
	if !bytes.Equal(d0, orig0) {
		t.Fatal("a write reached the point's disk")
	}
	wantRanges := [][2]int64{{0, 3 * BlockSize}, {3<<20 + 0, 3<<20 + 512}}
	if got := e.Overlays["2000"].Written(); len(got) != 2 || got[0] != wantRanges[0] || got[1] != wantRanges[1] {
		t.Fatalf("written ranges %v, want %v", got, wantRanges)
	}
	if got := e.Overlays["2001"].Written(); len(got) != 0 {
		t.Fatalf("disk 1 was not written, its overlay names %v", got)
	}
	ov, err := OpenOverlay(filepath.Join(dir, "overlays", "2000"), bytes.NewReader(orig0), int64(len(orig0)))
	if err != nil {
		t.Fatal(err)
	}
	defer ov.Close()
	got := make([]byte, len(want))
	if _, err := ov.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the reopened overlay does not read as written: %v", err)
	}
}

// TestTheFlatExtentsStayTheDisks: the hypervisor's own files come and go
// in the VM's directory, but the flat extents cannot be removed, renamed,
// cut or written past the disk's end.
func TestTheFlatExtentsStayTheDisks(t *testing.T) {
	d0 := randomDisk(3, 64<<10)
	_, target, dir := serveDisks(t, map[string][]byte{"2000": d0})
	if _, err := target.Create("vm/vm.vmx", 0o600); err != nil {
		t.Fatalf("create the VM's configuration: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "export", "vm", "vm.vmx")); err != nil {
		t.Fatalf("the created file is not in the export's directory: %v", err)
	}
	entries, err := target.ReadDirPlus("vm")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.FileName != "." && e.FileName != ".." {
			names = append(names, e.FileName)
		}
	}
	sort.Strings(names) // the client's listing has no order
	if strings.Join(names, ",") != "vm.vmx,vm_0-flat.vmdk,vm_0.vmdk" {
		t.Fatalf("the VM's directory lists %v", names)
	}
	if err := target.Remove("vm/vm_0-flat.vmdk"); err == nil {
		t.Error("the flat extent was removed")
	}
	if err := target.Rename("vm/vm_0-flat.vmdk", "vm/x.vmdk"); err == nil {
		t.Error("the flat extent was renamed")
	}
	if err := target.Setattr("vm/vm_0-flat.vmdk", nfsc.Sattr3{Size: nfsc.SetSize{SetIt: true, Size: 4096}}); err == nil {
		t.Error("the flat extent was cut")
	}
	f, err := target.OpenFile("vm/vm_0-flat.vmdk", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(64<<10-2, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("past")); err == nil {
		t.Error("a write past the disk's end was taken")
	}
	if got := readAll(t, target, "vm/vm_0-flat.vmdk"); !bytes.Equal(got, d0) {
		t.Error("the refused operations changed the extent")
	}
}

// TestATornMapEntryIsDropped: an overlay whose map ends in a partial or
// corrupt entry (a crash mid-write) opens with the entries before it,
// and the next write's entry follows the last good one.
func TestATornMapEntryIsDropped(t *testing.T) {
	base := randomDisk(4, 16*BlockSize)
	p := filepath.Join(t.TempDir(), "d")
	o, err := OpenOverlay(p, bytes.NewReader(base), int64(len(base)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.WriteAt([]byte("first"), 0); err != nil {
		t.Fatal(err)
	}
	o.Close()
	m, _ := os.OpenFile(p+".map", os.O_WRONLY|os.O_APPEND, 0)
	m.Write([]byte{5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 9, 9}) // torn: 14 of 16 bytes, bad sum
	m.Close()
	o, err = OpenOverlay(p, bytes.NewReader(base), int64(len(base)))
	if err != nil {
		t.Fatal(err)
	}
	if got := o.Written(); len(got) != 1 || got[0] != [2]int64{0, BlockSize} {
		t.Fatalf("after a torn entry: %v", got)
	}
	if _, err := o.WriteAt([]byte("second"), 9*BlockSize); err != nil {
		t.Fatal(err)
	}
	o.Close()
	o, err = OpenOverlay(p, bytes.NewReader(base), int64(len(base)))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if got := o.Written(); len(got) != 2 || got[1] != [2]int64{9 * BlockSize, 10 * BlockSize} {
		t.Fatalf("the entry after the torn one: %v", got)
	}
}

// sendOne sends b on a connection of its own and reads what comes back.
func sendOne(t *testing.T, addr string, b []byte) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	_, _ = c.Write(b)
	_ = c.(*net.TCPConn).CloseWrite() // the server reads to the end and answers
	// The server closes the connection after the last record or a
	// refused one; the deadline only keeps a broken server from hanging
	// the test.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<16))
}

// call is one ONC RPC call record (RFC 5531) with null credentials.
func call(prog, vers, proc uint32, args []byte) []byte {
	var b bytes.Buffer
	for _, v := range []uint32{rand.Uint32(), 0, 2, prog, vers, proc, 0, 0, 0, 0} {
		_ = binary.Write(&b, binary.BigEndian, v)
	}
	b.Write(args)
	rec := make([]byte, 4, 4+b.Len())
	binary.BigEndian.PutUint32(rec, 0x80000000|uint32(b.Len()))
	return append(rec, b.Bytes()...)
}

// TestFSInfoAdvertisesTheLargestCallServed: FSINFO answers MaxIO as the
// largest and preferred READ and WRITE (go-nfs's own answer is 1 GiB,
// whose WRITEs the guard refuses), and a client writing and reading
// that much in one call is served.
func TestFSInfoAdvertisesTheLargestCallServed(t *testing.T) {
	d0 := randomDisk(9, 2*MaxIO)
	_, target, _ := serveDisks(t, map[string][]byte{"2000": d0})
	info, err := target.FSInfo()
	if err != nil {
		t.Fatal(err)
	}
	if info.RTMax != MaxIO || info.RTPref != MaxIO || info.WTMax != MaxIO || info.WTPref != MaxIO {
		t.Fatalf("FSINFO: rtmax %d rtpref %d wtmax %d wtpref %d, want %d", info.RTMax, info.RTPref, info.WTMax, info.WTPref, MaxIO)
	}
	f, err := target.OpenFile("vm/vm_0-flat.vmdk", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	p := bytes.Repeat([]byte{0x5a}, MaxIO)
	if _, err := f.Write(p); err != nil {
		t.Fatalf("a write of MaxIO: %v", err)
	}
	_ = f.Close()
	want := append(bytes.Clone(p), d0[MaxIO:]...)
	if got := readAll(t, target, "vm/vm_0-flat.vmdk"); !bytes.Equal(got, want) {
		t.Fatal("the extent does not read back as written")
	}
}
