package qemu

import (
	"context"
	"errors"
	"fmt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/nbdpool"
	"github.com/coffer-backup/coffer/internal/nbd"
)

// diskReader reads one fleecing export (nbdpool) and gives its change set
// from the export's frozen dirty bitmap.
type diskReader struct {
	*nbdpool.Reader
	d journalDisk
}

func openReader(ctx context.Context, network, sock string, d journalDisk, conns int) (*diskReader, error) {
	r, err := nbdpool.Open(ctx, nbdpool.Options{Network: network, Socket: sock, Export: d.Export, Conns: conns,
		Name: "qemu: disk " + d.ID, ReadError: func(err error) error {
			var ne *nbd.Error
			if errors.As(err, &ne) && ne.Errno == 22 {
				// copy-before-write broke the snapshot rather than fail a
				// guest write (its temporary space or time ran out).
				return fmt.Errorf("%w: the point-in-time snapshot of %s broke (fleecing space or copy-before-write timeout exhausted); the VM kept running: %v",
					hypervisor.ErrSnapshotSpace, d.ID, err)
			}
			return err
		}})
	if err != nil {
		return nil, err
	}
	return &diskReader{Reader: r, d: d}, nil
}

// Changed implements hypervisor.DiskReader.
func (r *diskReader) Changed(ctx context.Context) ([]hypervisor.Extent, bool, error) {
	bm := r.d.exportBitmap()
	if r.d.Changes == "full" || bm == "" {
		return nil, false, nil
	}
	ext, err := r.Dirty(ctx, bm)
	return ext, err == nil, err
}
