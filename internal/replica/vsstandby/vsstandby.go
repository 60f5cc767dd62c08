// Package vsstandby keeps a replica's standby VM on a vSphere host and
// datastore of the DR site: a registered VM that stays powered off, its
// networks and datastore mapped by the replication's explicit maps, whose
// newest Keep restore points are VM snapshots (points.go).
//
// Each run brings the standby to its VM's newest backup point ("replica
// from backup"). The first creates the VM as a restore to a new VM does
// (the vSphere connector's CreateVM, disks written whole). Every later
// run first reverts the standby to its newest point, so that what a
// killed run wrote above it goes, then writes only the spans whose chunks
// differ between the two points' disk maps, into the disks hot-added to
// the data mover (Connector.WriteExtents): a /folder PUT would replace
// every byte. Then it snapshots the new point and removes the oldest
// beyond Keep. A run killed at any instant leaves the standby at its last
// snapshot, which the next run reverts to.
//
// Failover (failover.go) starts the standby from a point; a planned
// failover (planned.go) first shuts the source down and brings its last
// writes onto the standby as a final point; a failback (failback.go)
// writes what differs on the DR VM's disks back onto the original VM.
package vsstandby

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/ranged"
	"github.com/coffer-backup/coffer/internal/replica"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
)

// Connector is the DR site's vSphere connection (*vsphere.Connector).
type Connector interface {
	Client() *vim25.Client
	CreateVM(ctx context.Context, cfg hypervisor.VMConfig, o hypervisor.NewVMOptions) (hypervisor.NewVM, error)
	WriteExtents(ctx context.Context, vm, file, journal string, src hypervisor.DiskSource) (ranged.Stats, error)
}

// Options say which standby a run keeps, and where.
type Options struct {
	// Name is the standby VM's name (the source's, with a suffix).
	Name string
	// Mark says whose standby it is ("replication/vm"): a run writes only
	// onto a VM that carries it.
	Mark string
	// Keep is how many points the standby keeps (at least 1).
	Keep int
	// Networks and Datastores map the source's to the DR site's: every
	// one the VM uses must be named.
	Networks, Datastores map[string]string
	// StateDir holds the write journals of runs under way.
	StateDir string
	Now      func() time.Time
	Log      *slog.Logger
}

// Result is what a run did.
type Result struct {
	Point    Point
	UpToDate bool
	Created  bool
	Pruned   []Point
}

// ErrOlderPoint refuses a backup point older than the standby's newest.
var ErrOlderPoint = errors.New("the backup point is older than the standby's newest point")

// Run brings the standby to backup point p of repository r.
func Run(ctx context.Context, conn Connector, r *repo.Repository, p *repo.Point, o Options) (*Result, error) {
	o = o.withDefaults()
	cfg, ds, err := mapPoint(ctx, conn.Client(), p, o)
	if err != nil {
		return nil, err
	}
	sb, err := findStandby(ctx, conn.Client(), o.Name)
	if err != nil {
		return nil, err
	}
	var ps []Point
	if sb != nil {
		if err := sb.check(o.Mark); err != nil {
			return nil, err
		}
		if ps, err = points(sb.vm); err != nil {
			return nil, err
		}
		if len(ps) == 0 {
			// A first run killed before its point: nothing to keep.
			o.Log.Warn("vsphere standby: removing a standby without a point (a first run did not end)", "vm", o.Name)
			if err := destroy(ctx, conn.Client(), sb.ref); err != nil {
				return nil, err
			}
			sb = nil
		}
	}
	if sb == nil {
		return create(ctx, conn, r, p, cfg, ds, o)
	}
	newest := ps[len(ps)-1]
	if newest.BackupPoint == p.ID.String() {
		// Reverted all the same: a start by hand may have written since.
		if err := revert(ctx, conn.Client(), newest); err != nil {
			return nil, err
		}
		pruned, err := prune(ctx, conn.Client(), ps, o.Keep)
		return &Result{Point: newest, UpToDate: true, Pruned: pruned}, err
	}
	if p.Time.Before(newest.SourceTime) {
		return nil, fmt.Errorf("%w: %s (%s) before %s (%s)", ErrOlderPoint, p.ID.Short(), p.Time.Format(time.RFC3339), newest.BackupPoint, newest.SourceTime.Format(time.RFC3339))
	}
	return update(ctx, conn, r, p, sb, ps, o)
}

func (o Options) withDefaults() Options {
	o.Keep = max(o.Keep, 1)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}

// create makes the standby as a restore to a new VM does, marks it, and
// takes its first point. A failed run removes the VM; a killed one
// leaves it marked and without a point, and the next run replaces it.
func create(ctx context.Context, conn Connector, r *repo.Repository, p *repo.Point, cfg hypervisor.VMConfig, ds string, o Options) (*Result, error) {
	nv, err := conn.CreateVM(ctx, cfg, hypervisor.NewVMOptions{Name: o.Name, Datastore: ds, Point: p.ID.String()})
	if err != nil {
		return nil, err
	}
	pt, err := fill(ctx, conn, r, p, nv, cfg, ds, o)
	if err != nil {
		return nil, errors.Join(err, nv.Abort(context.WithoutCancel(ctx)))
	}
	o.Log.Info("vsphere standby created", "vm", o.Name, "backup_point", pt.BackupPoint)
	return &Result{Point: pt, Created: true}, nil
}

// fill marks the new standby, writes its disks whole and takes point 1.
func fill(ctx context.Context, conn Connector, r *repo.Repository, p *repo.Point, nv hypervisor.NewVM, cfg hypervisor.VMConfig, ds string, o Options) (Point, error) {
	ref := types.ManagedObjectReference{Type: "VirtualMachine", Value: nv.Ref().ID}
	// Marked before a byte is written: a killed run leaves a VM the next
	// one knows as its own and replaces.
	if err := guard(ctx, conn.Client(), ref, o.Mark, p.Source.VMName); err != nil {
		return Point{}, err
	}
	pt := Point{Seq: 1, BackupPoint: p.ID.String(), SourceTime: p.Time, ReplicatedAt: o.Now().UTC(), Maps: map[string]string{}}
	for _, d := range p.Disks {
		if d.Kind == "memory" {
			continue
		}
		src, err := restore.OpenDisk(ctx, r, d, 64)
		if err != nil {
			return Point{}, err
		}
		if err := nv.WriteDisk(ctx, d.Key, src); err != nil {
			return Point{}, fmt.Errorf("disk %s: %w", d.Key, err)
		}
		pt.Maps[d.Key] = d.Map
		pt.BytesWritten += d.Size
	}
	if c, ok := nv.(hypervisor.Completer); ok {
		if err := c.Complete(ctx); err != nil {
			return Point{}, err
		}
	}
	sb, err := loadStandby(ctx, conn.Client(), ref)
	if err != nil {
		return Point{}, err
	}
	if pt.Devices, err = devicesByKey(cfg, sb, ds, o.Name); err != nil {
		return Point{}, err
	}
	return pt, takePoint(ctx, conn.Client(), ref, pt)
}

// devicesByKey finds the standby's disk device made for each recorded
// disk: CreateVM names the i-th disk's file after the VM.
func devicesByKey(cfg hypervisor.VMConfig, sb *standbyVM, ds, name string) (map[string]int32, error) {
	out := map[string]int32{}
	for i, d := range cfg.Disks {
		want := fmt.Sprintf("[%s] %s/%s_%d.vmdk", ds, name, name, i) // restoredevs.DiskFile
		for key, vd := range sb.diskFiles() {
			if b, ok := vd.Backing.(*types.VirtualDiskFlatVer2BackingInfo); ok && b.FileName == want {
				out[d.Key] = key
			}
		}
		if _, ok := out[d.Key]; !ok {
			return nil, fmt.Errorf("the standby %s has no disk %s for the recorded disk %s", name, want, d.Key)
		}
	}
	return out, nil
}

// update reverts the standby to its newest point, writes the spans that
// changed since, and snapshots the new point.
func update(ctx context.Context, conn Connector, r *repo.Repository, p *repo.Point, sb *standbyVM, ps []Point, o Options) (*Result, error) {
	c := conn.Client()
	newest := ps[len(ps)-1]
	if err := revert(ctx, c, newest); err != nil {
		return nil, err
	}
	sb, err := loadStandby(ctx, c, sb.ref) // the disks' files may change with the revert
	if err != nil {
		return nil, err
	}
	pt := Point{Seq: newest.Seq + 1, BackupPoint: p.ID.String(), SourceTime: p.Time, ReplicatedAt: o.Now().UTC(),
		Maps: map[string]string{}, Devices: newest.Devices}
	journal := filepath.Join(o.StateDir, "vsstandby", sb.ref.Value)
	// A journal of a killed run names pieces the revert undid.
	if err := os.RemoveAll(journal); err != nil {
		return nil, err
	}
	files := sb.diskFiles()
	for _, d := range p.Disks {
		if d.Kind == "memory" {
			continue
		}
		vd := files[newest.Devices[d.Key]]
		if vd == nil || vd.CapacityInBytes != d.Size && vd.CapacityInKB*1024 != d.Size {
			return nil, fmt.Errorf("the standby %s has no disk of %d bytes for disk %s: the source's disks changed; remove the standby VM for the next run to make it again", o.Name, d.Size, d.Key)
		}
		src, err := openChanged(ctx, r, d, newest.Maps[d.Key])
		if err != nil {
			return nil, err
		}
		file := vd.Backing.(types.BaseVirtualDeviceFileBackingInfo).GetVirtualDeviceFileBackingInfo().FileName
		st, err := conn.WriteExtents(ctx, sb.ref.Value, file, journal, src)
		if err != nil {
			return nil, fmt.Errorf("disk %s: %w", d.Key, err)
		}
		pt.Maps[d.Key] = d.Map
		pt.BytesWritten += st.Written
	}
	if err := takePoint(ctx, c, sb.ref, pt); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(journal); err != nil {
		return nil, err
	}
	pruned, err := prune(ctx, c, append(ps, pt), o.Keep)
	if err != nil {
		return nil, fmt.Errorf("point %d taken; pruning: %w", pt.Seq, err)
	}
	o.Log.Info("vsphere standby point taken", "vm", o.Name, "seq", pt.Seq, "backup_point", pt.BackupPoint, "bytes_written", pt.BytesWritten)
	return &Result{Point: pt, Pruned: pruned}, nil
}

// mapPoint is the point's VM configuration with its networks mapped
// (replica.MapNetworks), each mapped network found on the DR site, and
// the one datastore its disks map to.
func mapPoint(ctx context.Context, c *vim25.Client, p *repo.Point, o Options) (hypervisor.VMConfig, string, error) {
	cfg, err := replica.MapNetworks(p, o.Networks)
	if err != nil {
		return cfg, "", err
	}
	if cfg.Kind != "vsphere" {
		return cfg, "", fmt.Errorf("%w: a vSphere standby needs a vSphere VM's backup point, not a %q VM's", hypervisor.ErrUnsupported, cfg.Kind)
	}
	ds := ""
	for _, d := range cfg.Disks {
		to, ok := o.Datastores[d.Datastore]
		if !ok {
			return cfg, "", fmt.Errorf("datastore not mapped: disk %s is on %s, which the replication's storage map does not name", d.Name, d.Datastore)
		}
		if ds != "" && to != ds {
			return cfg, "", fmt.Errorf("%w: the disks map to datastores %s and %s; a vSphere standby keeps its disks on one", hypervisor.ErrUnsupported, ds, to)
		}
		ds = to
	}
	if err := networksExist(ctx, c, cfg); err != nil {
		return cfg, "", err
	}
	return cfg, ds, nil
}

// destroy removes a standby that never got a point.
func destroy(ctx context.Context, c *vim25.Client, ref types.ManagedObjectReference) error {
	task, err := object.NewVirtualMachine(c, ref).Destroy(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	return err
}
