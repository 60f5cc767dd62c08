// Package nfsserve serves a backup point's disks as an NFSv3 export that
// an ESXi host mounts as a datastore: in the VM's directory, each disk is
// a descriptor (NAME_i.vmdk, a real file) and its flat extent
// (NAME_i-flat.vmdk), read from the repository, its writes kept in an
// overlay outside the export. The protocol is github.com/willscott/go-nfs;
// the export is its billy filesystem (FS).
package nfsserve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"

	nfs "github.com/willscott/go-nfs"
	nfshelper "github.com/willscott/go-nfs/helpers"

	"github.com/vmware/govmomi/vmdk"

	"github.com/coffer-backup/coffer/internal/statefile"
)

// Disk is one disk to serve.
type Disk struct {
	Key  string
	Base io.ReaderAt // the point's disk
	Size int64
}

// Export is a point's disks laid out for a datastore.
type Export struct {
	FS       *FS
	VMDir    string
	Overlays map[string]*Overlay // by disk key
	// Descriptors are the disks' descriptor paths in the datastore, in
	// the order of the disks ("VM/VM_0.vmdk").
	Descriptors []string
}

// DescriptorName is the i-th disk's descriptor under vmDir: the name a
// restore gives the i-th disk of a VM named vmDir (restoredevs.DiskFile).
func DescriptorName(vmDir string, i int) string { return fmt.Sprintf("%s/%s_%d.vmdk", vmDir, vmDir, i) }

// flatName is a descriptor's flat extent.
func flatName(descriptor string) string {
	return descriptor[:len(descriptor)-len(".vmdk")] + "-flat.vmdk"
}

// Open lays out disks under root/vmDir (descriptors written atomically)
// with their overlays in overlayDir (KEY.data and KEY.map), reopening
// overlays that exist.
func Open(root, vmDir, overlayDir string, disks []Disk) (*Export, error) {
	if vmDir == "" || filepath.Base(vmDir) != vmDir || vmDir == "." || vmDir == ".." {
		return nil, fmt.Errorf("nfsserve: %q cannot name a VM directory", vmDir)
	}
	if err := os.MkdirAll(filepath.Join(root, vmDir), 0o700); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(overlayDir, 0o700); err != nil {
		return nil, err
	}
	e := &Export{VMDir: vmDir, Overlays: map[string]*Overlay{}}
	fail := func(err error) (*Export, error) {
		_ = e.Close() // the error returned is what failed
		return nil, err
	}
	flats := map[string]*Overlay{}
	for i, d := range disks {
		if d.Size <= 0 || d.Size%vmdk.SectorSize != 0 {
			return fail(fmt.Errorf("nfsserve: disk %s: a flat extent holds whole sectors, not %d bytes", d.Key, d.Size))
		}
		desc := DescriptorName(vmDir, i)
		var b bytes.Buffer
		dd := vmdk.NewDescriptor(vmdk.Extent{Size: d.Size / vmdk.SectorSize, Info: filepath.Base(flatName(desc))})
		dd.CID = vmdk.DiskContentID(0xfffffffe)
		dd.ParentCID = vmdk.DiskContentID(0xffffffff)
		dd.DDB["adapterType"] = "lsilogic"
		if err := dd.Write(&b); err != nil {
			return fail(err)
		}
		if err := statefile.WriteFile(filepath.Join(root, desc), b.Bytes(), 0o600); err != nil {
			return fail(err)
		}
		o, err := OpenOverlay(filepath.Join(overlayDir, filepath.Base(d.Key)), d.Base, d.Size)
		if err != nil {
			return fail(err)
		}
		e.Overlays[d.Key] = o
		flats[flatName(desc)] = o
		e.Descriptors = append(e.Descriptors, desc)
	}
	e.FS = NewFS(root, flats)
	return e, nil
}

// Close closes the overlays.
func (e *Export) Close() error {
	var errs []error
	for _, o := range e.Overlays {
		errs = append(errs, o.Close())
	}
	return errors.Join(errs...)
}

// handleCache is how many file handles the server keeps: an ESXi VM
// holds a few dozen files open.
const handleCache = 4096

// Serve answers NFSv3 (MOUNT and NFS on the one port of l) for the
// export until ctx ends, then closes its clients' connections. Each call
// is checked before go-nfs reads it (guard.go), so that what a request
// claims cannot make the server allocate more than maxRecord for it.
func Serve(ctx context.Context, l net.Listener, fs *FS) error {
	h := nfshelper.NewCachingHandler(nfshelper.NewNullAuthHandler(fs), handleCache)
	srv := &nfs.Server{Handler: h, Context: ctx}
	gl := guard(l)
	stop := context.AfterFunc(ctx, func() { _ = gl.Close() })
	defer stop()
	err := srv.Serve(gl)
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("nfs server: %w", err)
}
