package libvirt

import (
	"context"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/nbdpool"
)

// diskReader reads one disk of a pull backup from libvirt's NBD export
// (nbdpool) and gives its change set from the merged checkpoint bitmap.
type diskReader struct {
	*nbdpool.Reader
	d sessionDisk
}

func openReader(ctx context.Context, sock string, d sessionDisk, conns int) (*diskReader, error) {
	r, err := nbdpool.Open(ctx, nbdpool.Options{Network: "unix", Socket: sock, Export: d.Key, Conns: conns,
		Name: "libvirt: export of disk " + d.Key})
	if err != nil {
		return nil, err
	}
	return &diskReader{Reader: r, d: d}, nil
}

// Changed implements hypervisor.DiskReader: the ranges libvirt's merged
// checkpoint bitmaps mark dirty since the disk's base checkpoint.
func (r *diskReader) Changed(ctx context.Context) ([]hypervisor.Extent, bool, error) {
	if r.d.since == "" {
		return nil, false, nil
	}
	ext, err := r.Dirty(ctx, exportBitmap)
	return ext, err == nil, err
}
