package vsstandby

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"time"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// Source is the VM a standby keeps, reached through its own site's
// connection (the backup points' connection).
type Source struct {
	Conn DiskConn
	// VM is its managed object ID (the points' source VM ID).
	VM string
	// ShutdownTimeout bounds a guest shutdown (default 5 minutes).
	ShutdownTimeout time.Duration
}

func (s Source) ref() types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: "VirtualMachine", Value: s.VM}
}

// StepFunc records one stage of an operation as its job's step.
type StepFunc func(name string, began time.Time, err error, detail string)

// PlannedOptions say which standby a planned failover switches to.
type PlannedOptions struct {
	DR     DiskConn
	Source Source
	Name   string
	Mark   string
	// BackupPoint is the newest backup point, which the replication has
	// just brought the standby to.
	BackupPoint string
	Keep        int
	StateDir    string
	Now         func() time.Time
	Log         *slog.Logger
	Step        StepFunc
}

// PlannedFailover is a migration without loss. The standby equals the
// source's newest backup point; the source may have written since. So
// the source is shut down (step shutdown), then its disks, as it left
// them, are compared with the standby's at that point and what differs
// is written onto the standby, which takes it as a new, final point
// (step final-replication); then the standby fails over onto that point.
// A planned failover killed midway is run again: the shutdown is done,
// the comparison finds what the killed one did not write, and a standby
// whose failover was recorded is finished as Failover does.
func PlannedFailover(ctx context.Context, o PlannedOptions) (Point, error) {
	o = o.withDefaults()
	c := o.DR.Client()
	sb, err := findStandby(ctx, c, o.Name)
	if err != nil {
		return Point{}, err
	}
	if sb == nil {
		return Point{}, fmt.Errorf("no standby VM %s (run the replication first): %w", o.Name, hypervisor.ErrNotFound)
	}
	if sb.failover != nil && sb.vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOff {
		return failOver(ctx, c, o.Name, o.Mark, sb.failover.Seq, o.Now(), true)
	}
	if err := sb.check(o.Mark); err != nil {
		return Point{}, err
	}
	ps, err := points(sb.vm)
	if err != nil {
		return Point{}, err
	}
	if len(ps) == 0 || ps[len(ps)-1].BackupPoint != o.BackupPoint {
		return Point{}, fmt.Errorf("the standby %s is not at the final backup point %s (its points: %d): the replication did not bring it there", o.Name, o.BackupPoint, len(ps))
	}
	began := time.Now()
	how, err := shutDown(ctx, o.Source.Conn.Client(), o.Source.ref(), o.Source.ShutdownTimeout)
	o.Step("shutdown", began, err, how)
	if err != nil {
		return Point{}, fmt.Errorf("shut the source down: %w", err)
	}
	began = time.Now()
	pt, err := finalPoint(ctx, o, sb, ps)
	detail := fmt.Sprintf("point %d: %d bytes written, what the source wrote after backup point %s", pt.Seq, pt.BytesWritten, o.BackupPoint)
	o.Step("final-replication", began, err, detail)
	if err != nil {
		return Point{}, fmt.Errorf("the final replication: %w", err)
	}
	return failOver(ctx, c, o.Name, o.Mark, pt.Seq, o.Now(), true)
}

func (o PlannedOptions) withDefaults() PlannedOptions {
	o.Keep = max(o.Keep, 1)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Step == nil {
		o.Step = func(string, time.Time, error, string) {}
	}
	if o.Source.ShutdownTimeout <= 0 {
		o.Source.ShutdownTimeout = 5 * time.Minute
	}
	return o
}

// finalPoint reverts the standby to its newest point, writes onto it
// what differs on the shut-down source's disks, and snapshots that as a
// final point (the newest itself when nothing differs).
func finalPoint(ctx context.Context, o PlannedOptions, sb *standbyVM, ps []Point) (Point, error) {
	c := o.DR.Client()
	newest := ps[len(ps)-1]
	if err := revert(ctx, c, newest); err != nil {
		return Point{}, err
	}
	sb, err := loadStandby(ctx, c, sb.ref)
	if err != nil {
		return Point{}, err
	}
	var src mo.VirtualMachine
	if err := property.DefaultCollector(o.Source.Conn.Client()).RetrieveOne(ctx, o.Source.ref(), []string{"config.hardware.device"}, &src); err != nil {
		return Point{}, err
	}
	if src.Config == nil {
		return Point{}, fmt.Errorf("the source VM %s has no configuration", o.Source.VM)
	}
	pt := Point{Seq: newest.Seq + 1, BackupPoint: newest.BackupPoint, SourceTime: o.Now().UTC(), ReplicatedAt: o.Now().UTC(),
		Maps: map[string]string{}, Devices: newest.Devices, Final: true}
	journal := filepath.Join(o.StateDir, "vsstandby", sb.ref.Value)
	for key, dev := range newest.Devices {
		from, to, size, err := diskPair(o.Source.Conn, o.Source.VM, src.Config.Hardware.Device, key, disk{conn: o.DR, vm: sb.ref.Value}, sb.vm.Config.Hardware.Device, dev)
		if err != nil {
			return Point{}, err
		}
		st, err := copyChanged(ctx, from, to, size, journal)
		if err != nil {
			return Point{}, fmt.Errorf("disk %s: %w", key, err)
		}
		pt.BytesWritten += st.Written
	}
	if pt.BytesWritten == 0 {
		newest.BytesWritten = 0
		return newest, nil
	}
	if err := takePoint(ctx, c, sb.ref, pt); err != nil {
		return Point{}, err
	}
	if _, err := prune(ctx, c, append(ps, pt), o.Keep); err != nil {
		o.Log.Warn("vsphere standby: pruning after the final point", "vm", o.Name, "err", err)
	}
	return pt, nil
}

// diskPair names the disk a copy reads (the recorded disk key of VM vm,
// through conn) and the one it writes (device dev of the other VM), of
// the same size.
func diskPair(conn DiskConn, vm string, devs []types.BaseVirtualDevice, key string, other disk, otherDevs []types.BaseVirtualDevice, dev int32) (disk, disk, int64, error) {
	k, err := strconv.Atoi(key)
	if err != nil {
		return disk{}, disk{}, 0, fmt.Errorf("disk key %q is not a vSphere device key", key)
	}
	file, size, ok := diskFileOf(devs, int32(k))
	if !ok {
		return disk{}, disk{}, 0, fmt.Errorf("VM %s has no disk %s any more", vm, key)
	}
	ofile, osize, ok := diskFileOf(otherDevs, dev)
	if !ok || osize != size {
		return disk{}, disk{}, 0, fmt.Errorf("VM %s has no disk of %d bytes for disk %s (device %d)", other.vm, size, key, dev)
	}
	other.file = ofile
	return disk{conn: conn, vm: vm, file: file}, other, size, nil
}
