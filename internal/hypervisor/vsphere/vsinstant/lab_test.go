package vsinstant

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/instant/nfsserve"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"
)

// lab is a vcsim vCenter served over TLS, with a "mount" that vcsim can
// follow: vcsim does not speak NFS, its CreateNasDatastore takes the
// spec's LocalPath as a directory of its own working directory. The lab
// works in a directory of its own and links the datastore's name there
// to the export's directory, so the files vSphere writes (the VM's .vmx)
// land in the export and the descriptors it looks for are there.
type lab struct {
	t      *testing.T
	url    *url.URL
	client *vim25.Client
	vcDir  string
}

func startLab(t *testing.T) *lab {
	t.Helper()
	m := simulator.VPX()
	m.Machine = 1
	if err := m.Create(); err != nil {
		t.Fatal(err)
	}
	vclab.RemovableDatastores(m) // the unmount vcsim lacks
	m.Service.TLS = new(tls.Config)
	srv := m.Service.NewServer()
	t.Cleanup(func() { srv.Close(); m.Remove() })
	l := &lab{t: t, url: srv.URL, vcDir: t.TempDir()}
	t.Chdir(l.vcDir) // vcsim's datastores named by a relative LocalPath are here
	c, err := govmomi.NewClient(context.Background(), srv.URL, true)
	if err != nil {
		t.Fatal(err)
	}
	l.client = c.Client
	return l
}

// mountable links datastore name, as vcsim resolves it, to dir.
func (l *lab) mountable(name, dir string) {
	l.t.Helper()
	if err := os.Symlink(dir, filepath.Join(l.vcDir, name)); err != nil {
		l.t.Fatal(err)
	}
}

// served is an export of two disks of a VM named name, served on
// loopback; ctx ends it.
type served struct {
	dir   string // the session's directory
	addr  string
	disks [][]byte
	cfg   hypervisor.VMConfig
	exp   *nfsserve.Export
}

func serveExport(t *testing.T, ctx context.Context, name string) *served {
	t.Helper()
	return serveExportIn(t, ctx, t.TempDir(), name)
}

// serveExportIn is serveExport in directory dir.
func serveExportIn(t *testing.T, ctx context.Context, dir, name string) *served {
	t.Helper()
	s := &served{dir: dir, disks: [][]byte{bytes.Repeat([]byte("coffer-0"), 128<<10), bytes.Repeat([]byte("coffer-1"), 64<<10)}}
	s.cfg = hypervisor.VMConfig{Kind: "vsphere", Name: "app", CPUs: 1, MemoryMiB: 64}
	var disks []nfsserve.Disk
	for i, b := range s.disks {
		key := []string{"2000", "2001"}[i]
		disks = append(disks, nfsserve.Disk{Key: key, Base: bytes.NewReader(b), Size: int64(len(b))})
		s.cfg.Disks = append(s.cfg.Disks, hypervisor.DiskInfo{Key: key, Size: int64(len(b))})
	}
	exp, err := nfsserve.Open(filepath.Join(s.dir, "export"), name, filepath.Join(s.dir, "overlays"), disks)
	if err != nil {
		t.Fatal(err)
	}
	s.exp = exp
	t.Cleanup(func() { _ = exp.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	go func() { _ = nfsserve.Serve(ctx, ln, exp.FS) }()
	return s
}

func soapURL(s string) (*url.URL, error) { return url.Parse(s) }

func (l *lab) datastore(name string) bool {
	l.t.Helper()
	f := find.NewFinder(l.client, true)
	dc, err := f.DefaultDatacenter(context.Background())
	if err != nil {
		l.t.Fatal(err)
	}
	f.SetDatacenter(dc)
	_, err = f.Datastore(context.Background(), name)
	return err == nil
}

func (l *lab) vm(name string) bool {
	l.t.Helper()
	f := find.NewFinder(l.client, true)
	dc, err := f.DefaultDatacenter(context.Background())
	if err != nil {
		l.t.Fatal(err)
	}
	f.SetDatacenter(dc)
	_, err = f.VirtualMachine(context.Background(), name)
	return err == nil
}
