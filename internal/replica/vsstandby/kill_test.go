package vsstandby

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/ranged"
)

// brokenRun is the DR site's connection of a run that dies mid-write: it
// writes garbage over the whole disk through the real hot-add path, then
// fails, as a worker killed after its first pieces leaves the disk.
type brokenRun struct{ *vsphere.Connector }

var errKilled = errors.New("the worker died mid-write")

func (b brokenRun) WriteExtents(ctx context.Context, vm, file, journal string, src hypervisor.DiskSource) (ranged.Stats, error) {
	st, err := b.Connector.WriteExtents(ctx, vm, file, journal, garbage{size: src.Size()})
	return st, errors.Join(errKilled, err)
}

type garbage struct{ size int64 }

func (g garbage) Size() int64 { return g.size }
func (g garbage) Allocated() []hypervisor.Extent {
	return []hypervisor.Extent{{Offset: 0, Length: g.size}}
}
func (g garbage) ReadAt(p []byte, _ int64) (int, error) {
	return copy(p, bytes.Repeat([]byte{0xab}, len(p))), nil
}

// TestBrokenRunLeavesTheLastPoint: a run that dies mid-write takes no
// point, and the next run reverts the standby to its newest point before
// it writes the changed spans, so that the new point equals the source
// and none of the dead run's bytes stay.
func TestBrokenRunLeavesTheLastPoint(t *testing.T) {
	b := newLab(t)
	b.follow(2)
	ctx := context.Background()
	p, img := b.backup(map[int64][]byte{3 << 20: bytes.Repeat([]byte{0x33}, 4096)})
	if _, err := Run(ctx, brokenRun{b.conn}, b.r, p, b.options()); !errors.Is(err, errKilled) {
		t.Fatalf("the broken run: %v", err)
	}
	if ps, err := Points(ctx, b.conn.Client(), standbyName); err != nil || len(ps) != 2 || ps[1].Seq != 2 {
		t.Fatalf("after the broken run: points %+v, %v", ps, err)
	}
	res, err := Run(ctx, b.conn, b.r, p, b.options())
	if err != nil || res.Point.Seq != 3 {
		t.Fatalf("the next run: %+v %v", res, err)
	}
	if got := b.l.ReadFlat(b.l.Disk(standbyName)); !bytes.Equal(got, img) {
		t.Fatal("the standby's disk after the next run differs from the source's")
	}
}

// brokenCreate dies while the first run writes the new standby's disks.
type brokenCreate struct{ *vsphere.Connector }

func (b brokenCreate) CreateVM(ctx context.Context, cfg hypervisor.VMConfig, o hypervisor.NewVMOptions) (hypervisor.NewVM, error) {
	nv, err := b.Connector.CreateVM(ctx, cfg, o)
	return dyingVM{nv}, err
}

type dyingVM struct{ hypervisor.NewVM }

// Abort does nothing: a killed process removes nothing.
func (d dyingVM) Abort(context.Context) error { return nil }

func (d dyingVM) WriteDisk(ctx context.Context, key string, src hypervisor.DiskSource) error {
	return errors.Join(errKilled, d.NewVM.WriteDisk(ctx, key, garbage{size: src.Size()}))
}

// TestBrokenFirstRunIsMadeAgain: a first run that dies leaves a marked
// VM without a point, which the next run replaces; a VM of the
// standby's name without the replication's mark is never written.
func TestBrokenFirstRunIsMadeAgain(t *testing.T) {
	b := newLab(t)
	ctx := context.Background()
	p, img := b.backup(map[int64][]byte{0: bytes.Repeat([]byte{0x11}, 8192)})
	if _, err := Run(ctx, brokenCreate{b.conn}, b.r, p, b.options()); !errors.Is(err, errKilled) {
		t.Fatalf("the broken first run: %v", err)
	}
	other := b.options()
	other.Mark = "dr2/web-01"
	if _, err := Run(ctx, b.conn, b.r, p, other); !errors.Is(err, ErrNotStandby) {
		t.Fatalf("another replication's run onto the VM: %v", err)
	}
	res, err := Run(ctx, b.conn, b.r, p, b.options())
	if err != nil || !res.Created || res.Point.Seq != 1 {
		t.Fatalf("the next run: %+v %v", res, err)
	}
	if got := b.l.ReadFlat(b.l.Disk(standbyName)); !bytes.Equal(got, img) {
		t.Fatal("the standby made again differs from the source")
	}
}
