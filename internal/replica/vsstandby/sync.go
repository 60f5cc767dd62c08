package vsstandby

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/ranged"
)

// DiskConn is a site's vSphere connection (*vsphere.Connector) that reads
// and writes powered-off VMs' current disks through its hot-add data
// mover: a planned failover brings the shut-down source's last writes
// onto the standby with it, a failback the DR site's onto the original.
type DiskConn interface {
	Client() *vim25.Client
	Transport() vsphere.Transport
	WriteExtents(ctx context.Context, vm, file, journal string, src hypervisor.DiskSource) (ranged.Stats, error)
}

// readDisk opens file ("[ds] dir/disk.vmdk", the current disk of the
// powered-off VM vm: on vSphere the newest delta of its chain) hot-added
// to the data mover of conn, read-only (independent-nonpersistent);
// Close detaches it.
func readDisk(ctx context.Context, conn DiskConn, vm, file string) (vsphere.DiskData, error) {
	h, ok := conn.Transport().(*vsphere.HotAdd)
	if !ok {
		return nil, fmt.Errorf("reading a VM's current disk needs the hot-add transport (data-mover-vm), not %s: %w", conn.Transport().Name(), hypervisor.ErrUnsupported)
	}
	ds, path, ok := strings.Cut(strings.TrimPrefix(file, "["), "] ")
	if !ok {
		return nil, fmt.Errorf("disk file %q is not [datastore] path", file)
	}
	return h.OpenDisk(ctx, vsphere.DiskLocation{VM: vm, Datastore: ds, Descriptor: path})
}

// compareBlock is the granularity of a copy of what differs: a block
// that differs in one byte is written whole.
const compareBlock = 64 << 10

// disk names one disk of a powered-off VM on a site.
type disk struct {
	conn DiskConn
	vm   string // the VM's managed object ID
	file string // "[ds] dir/disk.vmdk": the VM's current file of it
}

// syncStats is what a copy of the differing blocks read from the disk
// it copies (it reads as much of the other) and wrote.
type syncStats struct {
	Read, Written int64
}

// copyChanged makes to equal from (size bytes each): both are read
// whole, compared block by block, and only the blocks that differ are
// written onto to, journalled in journal. vcsim has no changed block
// tracking, and a VM's disks since a failover or since a backup have no
// common change set coffer can ask for, so the comparison is what finds
// the changes; the writes are only those.
func copyChanged(ctx context.Context, from, to disk, size int64, journal string) (syncStats, error) {
	src, err := readDisk(ctx, from.conn, from.vm, from.file)
	if err != nil {
		return syncStats{}, fmt.Errorf("read %s: %w", from.file, err)
	}
	defer func() { _ = src.Close() }() // read-only: detached, nothing to lose
	ext, st, err := differing(ctx, src, to, size)
	if err != nil || len(ext) == 0 {
		return st, err
	}
	// The comparison has just found what is left to write: the journal of
	// an attempt that was killed describes another plan.
	if err := os.RemoveAll(journal); err != nil {
		return st, err
	}
	ws, err := to.conn.WriteExtents(ctx, to.vm, to.file, journal, extentSource{ReaderAt: src, size: size, ext: ext})
	if err != nil {
		return st, fmt.Errorf("write %s: %w", to.file, err)
	}
	st.Written = ws.Written
	return st, os.RemoveAll(journal)
}

// differing lists the blocks of src that differ from to's disk, which it
// opens for reading and closes before anything is written onto it.
func differing(ctx context.Context, src io.ReaderAt, to disk, size int64) ([]hypervisor.Extent, syncStats, error) {
	dst, err := readDisk(ctx, to.conn, to.vm, to.file)
	if err != nil {
		return nil, syncStats{}, fmt.Errorf("read %s: %w", to.file, err)
	}
	defer func() { _ = dst.Close() }()
	var ext []hypervisor.Extent
	var st syncStats
	a, b := make([]byte, compareBlock), make([]byte, compareBlock)
	for off := int64(0); off < size; off += compareBlock {
		if err := ctx.Err(); err != nil {
			return nil, st, err
		}
		n := min(compareBlock, size-off)
		if err := readFull(src, a[:n], off); err != nil {
			return nil, st, err
		}
		if err := readFull(dst, b[:n], off); err != nil {
			return nil, st, fmt.Errorf("%s: %w", to.file, err)
		}
		st.Read += n
		if bytes.Equal(a[:n], b[:n]) {
			continue
		}
		if k := len(ext) - 1; k >= 0 && ext[k].Offset+ext[k].Length == off {
			ext[k].Length += n
			continue
		}
		ext = append(ext, hypervisor.Extent{Offset: off, Length: n})
	}
	return ext, st, nil
}

// readFull reads len(p) bytes at off; a device shorter than the disk is
// an error, not zeros.
func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read at %d: %w", off, err)
}

// extentSource is a disk whose listed extents are what a write sends.
type extentSource struct {
	io.ReaderAt
	size int64
	ext  []hypervisor.Extent
}

func (s extentSource) Size() int64                    { return s.size }
func (s extentSource) Allocated() []hypervisor.Extent { return s.ext }

// diskFileOf is the current file of the VM's disk device key (after a
// snapshot on vSphere, its newest delta), and its size.
func diskFileOf(devs []types.BaseVirtualDevice, key int32) (string, int64, bool) {
	for _, d := range devs {
		vd, ok := d.(*types.VirtualDisk)
		if !ok || vd.Key != key {
			continue
		}
		b, ok := vd.Backing.(types.BaseVirtualDeviceFileBackingInfo)
		if !ok {
			return "", 0, false
		}
		size := vd.CapacityInBytes
		if size == 0 {
			size = vd.CapacityInKB * 1024
		}
		return b.GetVirtualDeviceFileBackingInfo().FileName, size, true
	}
	return "", 0, false
}
