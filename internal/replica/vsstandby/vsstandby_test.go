package vsstandby

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/repo"
)

const standbyName = "web-01-standby"

func (b *lab) options() Options {
	return Options{Name: standbyName, Mark: "dr/web-01", Keep: 2, StateDir: b.t.TempDir(),
		Networks: map[string]string{"VM Network": "DC0_DVPG0"}, Datastores: map[string]string{"LocalDS_0": "LocalDS_0"}}
}

// follow backs the source up and replicates it runs times, each run
// changing spans of its own (the last one turning an earlier span to
// zeros), and checks after each run that the standby's disk and its new
// point equal the source's disk at the backup, that a run wrote only the
// spans that changed, and that the standby stays powered off.
func (b *lab) follow(runs int) ([][]byte, []*repo.Point) {
	b.t.Helper()
	ctx := context.Background()
	var images [][]byte
	var pts []*repo.Point
	for run := 1; run <= runs; run++ {
		writes := map[int64][]byte{int64(run) * 600 << 10: bytes.Repeat([]byte{byte(run)}, 64<<10)}
		if run == 1 {
			writes[0] = bytes.Repeat([]byte{0xee}, diskSize/2)
		}
		if run == runs {
			writes[diskSize/4] = make([]byte, 256<<10)
		}
		p, img := b.backup(writes)
		res, err := Run(ctx, b.conn, b.r, p, b.options())
		if err != nil {
			b.t.Fatalf("run %d: %v", run, err)
		}
		if res.Point.Seq != run || res.Created != (run == 1) {
			b.t.Fatalf("run %d made point %d (created %v)", run, res.Point.Seq, res.Created)
		}
		if got := b.l.ReadFlat(b.l.Disk(standbyName)); !bytes.Equal(got, img) {
			b.t.Fatalf("run %d: the standby's disk differs from the source's at the backup", run)
		}
		if got := b.snap.point(standbyName, SnapshotName(run))[b.l.Disk(standbyName).Path]; !bytes.Equal(got, img) {
			b.t.Fatalf("run %d: point %d was not taken on the source's bytes", run, run)
		}
		if run > 1 {
			if want := b.changedBytes(p, writes); res.Point.BytesWritten != want {
				b.t.Fatalf("run %d wrote %d bytes, want %d: the spans its writes touched", run, res.Point.BytesWritten, want)
			}
		}
		if st := b.standby(standbyName).Runtime.PowerState; st != types.VirtualMachinePowerStatePoweredOff {
			b.t.Fatalf("run %d: the standby is %s", run, st)
		}
		images, pts = append(images, img), append(pts, p)
	}
	return images, pts
}

// changedBytes is the size of the spans of p's disk that writes touched.
func (b *lab) changedBytes(p *repo.Point, writes map[int64][]byte) int64 {
	m, err := b.r.OpenDiskMap(context.Background(), p.Disks[0].Map)
	if err != nil {
		b.t.Fatal(err)
	}
	cs := int64(m.ChunkSize())
	spans := map[int64]bool{}
	for off, data := range writes {
		for s := off / cs; s <= (off+int64(len(data))-1)/cs; s++ {
			spans[s] = true
		}
	}
	return int64(len(spans)) * cs
}

// TestStandbyFollowsItsSource: four runs keep the newest two points as
// snapshots of a registered, powered-off VM on the mapped datastore and
// network, marked as coffer's standby and with its adapter left
// unconnected at power-on; each point equals the source's disk at its
// backup point.
func TestStandbyFollowsItsSource(t *testing.T) {
	b := newLab(t)
	images, pts := b.follow(4)
	ctx := context.Background()
	ps, err := Points(ctx, b.conn.Client(), standbyName)
	if err != nil || len(ps) != 2 || ps[0].Seq != 3 || ps[1].Seq != 4 {
		t.Fatalf("points %+v, %v; want 3 and 4", ps, err)
	}
	for i, p := range ps {
		if p.BackupPoint != pts[p.Seq-1].ID.String() {
			t.Fatalf("point %d records backup point %s, want %s", p.Seq, p.BackupPoint, pts[p.Seq-1].ID)
		}
		if got := b.snap.point(standbyName, SnapshotName(p.Seq))[b.l.Disk(standbyName).Path]; !bytes.Equal(got, images[p.Seq-1]) {
			t.Fatalf("kept point %d (%d) differs from the source at its backup point", p.Seq, i)
		}
	}
	vm := b.standby(standbyName)
	mark := ""
	for _, o := range vm.Config.ExtraConfig {
		if o.GetOptionValue().Key == markKey {
			mark, _ = o.GetOptionValue().Value.(string)
		}
	}
	if mark != "dr/web-01" {
		t.Fatalf("the standby's mark is %q", mark)
	}
	nics := 0
	for _, d := range vm.Config.Hardware.Device {
		card, ok := d.(types.BaseVirtualEthernetCard)
		if !ok {
			continue
		}
		nics++
		c := card.GetVirtualEthernetCard()
		if _, ok := c.Backing.(*types.VirtualEthernetCardDistributedVirtualPortBackingInfo); !ok {
			t.Fatalf("the standby's adapter is on %T, not the mapped port group", c.Backing)
		}
		if c.Connectable == nil || c.Connectable.StartConnected {
			t.Fatalf("the standby's adapter connects at power-on: %+v", c.Connectable)
		}
	}
	if nics != 1 {
		t.Fatalf("the standby has %d adapters", nics)
	}
	// Started by hand: refused; powered off again, what it wrote goes
	// at the next run, though that has no new point to write.
	b.l.Power(vm, true)
	if _, err := Run(ctx, b.conn, b.r, pts[3], b.options()); err == nil || !strings.Contains(err.Error(), "outside a failover") {
		t.Fatalf("a run onto a standby started by hand: %v", err)
	}
	b.l.Power(vm, false)
	b.l.WriteFlat(b.l.Disk(standbyName), bytes.Repeat([]byte{0x5a}, diskSize))
	res, err := Run(ctx, b.conn, b.r, pts[3], b.options())
	if err != nil || !res.UpToDate || res.Point.Seq != 4 {
		t.Fatalf("a run at the same point: %+v %v", res, err)
	}
	if got := b.l.ReadFlat(b.l.Disk(standbyName)); !bytes.Equal(got, images[3]) {
		t.Fatal("what the start by hand wrote stayed")
	}
	if _, err := Run(ctx, b.conn, b.r, pts[1], b.options()); !errors.Is(err, ErrOlderPoint) {
		t.Fatalf("a run to an older point: %v", err)
	}
}

// TestFailoverStartsTheChosenPoint: a failover onto the older of two
// points reverts the standby to it and powers it on with its adapter
// connected; a second failover and a replication onto it are refused.
func TestFailoverStartsTheChosenPoint(t *testing.T) {
	b := newLab(t)
	images, pts := b.follow(3)
	ctx := context.Background()
	// A failover killed once it had recorded its choice of point 2: the
	// next one, asking for the newest, finishes onto point 2.
	sb, err := findStandby(ctx, b.conn.Client(), standbyName)
	if err != nil {
		t.Fatal(err)
	}
	if err := recordFailover(ctx, b.conn.Client(), sb.ref, &failedOver{Seq: 2, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	pt, err := Failover(ctx, b.conn.Client(), standbyName, "dr/web-01", 0, time.Now())
	if err != nil || pt.Seq != 2 {
		t.Fatalf("failover: %+v %v", pt, err)
	}
	vm := b.standby(standbyName)
	if vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
		t.Fatalf("the failed-over standby is %s", vm.Runtime.PowerState)
	}
	if vm.Snapshot == nil || vm.Snapshot.CurrentSnapshot == nil || *vm.Snapshot.CurrentSnapshot != pt.Snapshot {
		t.Fatalf("the standby's current snapshot is not point 2's")
	}
	if got := b.l.ReadFlat(b.l.Disk(standbyName)); !bytes.Equal(got, images[1]) || bytes.Equal(got, images[2]) {
		t.Fatal("the failed-over standby's disk is not the source's at point 2")
	}
	for _, d := range vm.Config.Hardware.Device {
		if card, ok := d.(types.BaseVirtualEthernetCard); ok && !card.GetVirtualEthernetCard().Connectable.StartConnected {
			t.Fatal("the failed-over standby's adapter does not connect")
		}
	}
	if _, err := Failover(ctx, b.conn.Client(), standbyName, "dr/web-01", 0, time.Now()); !errors.Is(err, ErrFailedOver) {
		t.Fatalf("a second failover: %v", err)
	}
	if _, err := Run(ctx, b.conn, b.r, pts[2], b.options()); !errors.Is(err, ErrFailedOver) {
		t.Fatalf("a run onto the failed-over standby: %v", err)
	}
	if _, err := Failover(ctx, b.conn.Client(), standbyName, "dr/other", 0, time.Now()); !errors.Is(err, ErrNotStandby) {
		t.Fatalf("a failover of another replication's standby: %v", err)
	}
}
