// Command vsinstant measures the time to a powered-on vSphere VM from a
// backup point's disk, by instant recovery (coffer's NFS export mounted
// as a datastore, the VM created on it and powered on:
// internal/instant/nfsserve and internal/hypervisor/vsphere/vsinstant)
// against a full restore (the vSphere connector's restore to a new VM,
// every byte written to the datastore, then power on), in one run, on
// one vcsim:
//
//	go run ./bench/vsinstant -disk 4GiB
//
// vcsim does not mount NFS: its CreateNasDatastore takes the datastore's
// name as a directory of its working directory, so the run links that
// name to the export's directory (as the tests do) and vcsim finds the
// descriptors there. The disk's source is generated on the fly (the same
// bytes for both paths, fully allocated), so the figures are the paths'
// alone, not the repository's reads.
package main

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/soap"

	"github.com/coffer-backup/coffer/bench/benchutil"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/vsinstant"
	"github.com/coffer-backup/coffer/internal/instant/nfsserve"
)

// source is a fully allocated disk: a 1 MiB pseudo-random pattern,
// repeated (copied, so that producing the bytes costs little next to
// writing them).
type source struct {
	size    int64
	pattern []byte
}

func newSource(size int64) source {
	s := source{size: size, pattern: make([]byte, 1<<20)}
	x := uint64(0x9e3779b97f4a7c15)
	for i := 0; i < len(s.pattern); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(s.pattern[i:], x)
	}
	return s
}

func (s source) Size() int64 { return s.size }
func (s source) Allocated() []hypervisor.Extent {
	return []hypervisor.Extent{{Offset: 0, Length: s.size}}
}

func (s source) ReadAt(p []byte, off int64) (int, error) {
	if off >= s.size {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && off+int64(n) < s.size {
		at := (off + int64(n)) % int64(len(s.pattern))
		c := copy(p[n:min(len(p), n+int(s.size-off-int64(n)))], s.pattern[at:])
		n += c
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func main() {
	size := flag.String("disk", "4GiB", "the disk's size")
	flag.Parse()
	ctx := context.Background()
	src := newSource(benchutil.Size(*size))
	work, err := os.MkdirTemp("", "vsinstant-bench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(work)
	if err := os.Chdir(work); err != nil { // vcsim's NAS datastores are named here
		log.Fatal(err)
	}
	m := simulator.VPX()
	m.Machine = 0
	if err := m.Create(); err != nil {
		log.Fatal(err)
	}
	defer m.Remove()
	m.Service.TLS = new(tls.Config)
	srv := m.Service.NewServer()
	defer srv.Close()
	cfg := hypervisor.VMConfig{Kind: "vsphere", Name: "web-1", CPUs: 1, MemoryMiB: 256,
		Disks: []hypervisor.DiskInfo{{Key: "2000", Name: "Hard disk 1", Size: src.size, Datastore: "LocalDS_0"}}}
	fmt.Printf("one disk of %d MiB, fully allocated; vcsim v0.56.0 in-process; %d cores\n\n", src.size>>20, runtime.NumCPU())
	fmt.Printf("generating the disk's bytes alone (part of the full restore): %s\n", readAll(src).Round(time.Millisecond))
	restore := fullRestore(ctx, srv, cfg, src, filepath.Join(work, "state"))
	fmt.Printf("full restore, to powered on:      %s\n", restore.Round(time.Millisecond))
	inst := instantStart(ctx, srv, cfg, src, work)
	fmt.Printf("instant recovery, to powered on:  %s\n", inst.Round(time.Millisecond))
	fmt.Printf("\nfull restore / instant recovery: %.1fx\n", float64(restore)/float64(inst))
}

// readAll is the time to read the whole source in 1 MiB pieces.
func readAll(src source) time.Duration {
	start := time.Now()
	buf := make([]byte, 1<<20)
	for off := int64(0); off < src.size; off += int64(len(buf)) {
		_, _ = src.ReadAt(buf[:min(int64(len(buf)), src.size-off)], off)
	}
	return time.Since(start)
}

// fullRestore restores the disk as a new VM with the vSphere connector
// (as `coffer restore vm` does) and powers it on.
func fullRestore(ctx context.Context, srv *simulator.Server, cfg hypervisor.VMConfig, src source, state string) time.Duration {
	sdk := &url.URL{Scheme: srv.URL.Scheme, Host: srv.URL.Host, Path: srv.URL.Path}
	pass, _ := srv.URL.User.Password()
	c, err := vsphere.New(ctx, vsphere.Config{URL: sdk.String(), User: srv.URL.User.Username(), Password: pass,
		Thumbprint: soap.ThumbprintSHA256(srv.Certificate()), StateDir: state, ReadFrom: vsphere.ReadFromVCenter})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	start := time.Now()
	nv, err := c.CreateVM(ctx, cfg, hypervisor.NewVMOptions{Name: "web-1-restored", Datastore: "LocalDS_0", Point: "bench"})
	if err != nil {
		log.Fatal(err)
	}
	if err := nv.WriteDisk(ctx, "2000", src); err != nil {
		log.Fatal(err)
	}
	if cp, ok := nv.(hypervisor.Completer); ok {
		if err := cp.Complete(ctx); err != nil {
			log.Fatal(err)
		}
	}
	if err := nv.Start(ctx); err != nil {
		log.Fatal(err)
	}
	return time.Since(start)
}

// instantStart serves the disk over NFS, mounts it, creates the VM on it
// and powers it on.
func instantStart(ctx context.Context, srv *simulator.Server, cfg hypervisor.VMConfig, src source, work string) time.Duration {
	client, err := govmomi.NewClient(ctx, srv.URL, true)
	if err != nil {
		log.Fatal(err)
	}
	sess := filepath.Join(work, "session")
	const ds, name = "coffer-instant-bench", "web-1-instant"
	if err := os.MkdirAll(filepath.Join(sess, "export"), 0o700); err != nil {
		log.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(sess, "export"), filepath.Join(work, ds)); err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	exp, err := nfsserve.Open(filepath.Join(sess, "export"), name, filepath.Join(sess, "overlays"),
		[]nfsserve.Disk{{Key: "2000", Base: src, Size: src.size}})
	if err != nil {
		log.Fatal(err)
	}
	defer exp.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = nfsserve.Serve(sctx, l, exp.FS) }()
	rec := vsinstant.NewRecord(filepath.Join(work, "state"), "bench")
	rec.Dir = sess
	if err := vsinstant.Start(ctx, client.Client, cfg, rec, vsinstant.Options{NFSHost: "127.0.0.1", NFSPath: "/", Datastore: ds, Name: name}); err != nil {
		log.Fatal(err)
	}
	return time.Since(start)
}
