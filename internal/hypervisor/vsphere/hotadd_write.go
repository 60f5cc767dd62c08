package vsphere

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/ranged"
)

// A restore through the hot-add transport writes each disk of the new VM
// in ranges (package ranged): the powered-off VM's disk is attached to
// the data mover independent-persistent, and its allocated pieces are
// written into the block device the data mover's OS sees, several
// streams at a time, before the disk is detached again. A /folder PUT
// cannot do that: it replaces a whole file, so it sends every hole as
// zeros and inflates a thin disk. The attachment is journalled like a
// read's (a killed coffer's next start detaches it).

// rangedJob is how one disk of a restore is written.
type rangedJob struct {
	dir     string        // the restore's journal directory
	fresh   bool          // the disk was just created: its holes read zeros already
	streams int           // pieces in flight for this disk
	slots   chan struct{} // the target datastore's streams, shared by the VM's disks
	retries hypervisor.RetryPolicy
	log     *slog.Logger
}

// rangedWriter is a transport that restores disks in ranges.
type rangedWriter interface {
	writeRanged(ctx context.Context, loc DiskLocation, src hypervisor.DiskSource, job rangedJob) (routed, ranged.Stats, error)
}

// writeRanged writes src into the disk at loc, taken up again from the
// journal within job.retries when it breaks.
func (h *HotAdd) writeRanged(ctx context.Context, loc DiskLocation, src hypervisor.DiskSource, job rangedJob) (routed, ranged.Stats, error) {
	pieces := ranged.Plan(src.Allocated(), loc.Size, !job.fresh)
	prog, err := ranged.OpenProgress(job.dir, loc.Descriptor, loc.Size, pieces)
	if err != nil {
		return routed{}, ranged.Stats{}, fmt.Errorf("vsphere: %w", err)
	}
	var r routed
	st, err := ranged.Retry(ctx, job.retries, job.log, loc.Descriptor, func() (st ranged.Stats, err error) {
		r, st, err = h.writeOnce(ctx, loc, src, pieces, prog, job)
		return st, err
	})
	return r, st, err
}

// newDeviceTarget wraps an attached disk's open device; tests replace it
// to break a restore at a chosen write.
var newDeviceTarget = func(f *os.File) ranged.Target { return ranged.Device{F: f} }

// writeOnce attaches the disk, writes the pieces not yet journalled, and
// detaches it.
func (h *HotAdd) writeOnce(ctx context.Context, loc DiskLocation, src hypervisor.DiskSource, pieces []ranged.Piece,
	prog *ranged.Progress, job rangedJob) (r routed, st ranged.Stats, err error) {
	file := fmt.Sprintf("[%s] %s", loc.Datastore, loc.Descriptor)
	d, dev, err := h.attachDevice(ctx, loc.VM, file, types.VirtualDiskModeIndependent_persistent, os.O_RDWR)
	if err != nil {
		return r, st, err
	}
	defer func() { err = errors.Join(err, d.Close()) }()
	end, err := d.f.Seek(0, io.SeekEnd)
	if err != nil {
		return r, st, fmt.Errorf("vsphere: hot-add: size of %s: %w", dev, err)
	}
	if end < loc.Size {
		return r, st, fmt.Errorf("vsphere: hot-add: %s shows as %s of %d bytes, smaller than the disk's %d", file, dev, end, loc.Size)
	}
	r.route = fmt.Sprintf("by hot-add: attached to data-mover VM %s (unit %d:%d), written to %s in ranges",
		h.c.cfg.DataMoverVM, d.att.Bus, d.att.Unit, dev)
	st, err = ranged.Write(ctx, newDeviceTarget(d.f), src, pieces, job.streams, job.slots, prog)
	if err != nil {
		err = fmt.Errorf("vsphere: hot-add: restore %s: %w", file, err)
	}
	return r, st, err
}

// WriteExtents writes src's allocated extents, and only those, into file
// ("[ds] dir/disk.vmdk", a disk of the powered-off VM vm) hot-added to the
// data mover: a vSphere standby's changed blocks (internal/replica/vsstandby).
// A /folder PUT would replace the whole file. journal keeps the pieces done.
func (c *Connector) WriteExtents(ctx context.Context, vm, file, journal string, src hypervisor.DiskSource) (ranged.Stats, error) {
	h, ok := c.transport.(*HotAdd)
	if !ok {
		return ranged.Stats{}, fmt.Errorf("vsphere: writing only changed blocks needs the hot-add transport (data-mover-vm), not %s: %w", c.transport.Name(), hypervisor.ErrUnsupported)
	}
	pieces := ranged.Plan(src.Allocated(), src.Size(), false)
	prog, err := ranged.OpenProgress(journal, file, src.Size(), pieces)
	if err != nil {
		return ranged.Stats{}, fmt.Errorf("vsphere: %w", err)
	}
	d, _, err := h.attachDevice(ctx, vm, file, types.VirtualDiskModeIndependent_persistent, os.O_RDWR)
	if err != nil {
		return ranged.Stats{}, err
	}
	st, err := ranged.Write(ctx, newDeviceTarget(d.f), src, pieces, ranged.DefaultStreams, nil, prog)
	return st, errors.Join(err, d.Close())
}
