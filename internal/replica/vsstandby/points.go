package vsstandby

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// A standby's restore points are VM snapshots named pointPrefix+seq,
// each described by its Point record (JSON, in the snapshot's
// description): the standby VM carries its own record, and nothing on the
// DR worker's disks has to agree with it.
const pointPrefix = "coffer-point-"

// Point is one restore point of a vSphere standby.
type Point struct {
	Seq int `json:"seq"`
	// BackupPoint is the repository point the standby equalled when the
	// snapshot was taken; SourceTime its instant.
	BackupPoint string    `json:"backup_point"`
	SourceTime  time.Time `json:"source_time"`
	// ReplicatedAt is when the run that made the point began.
	ReplicatedAt time.Time `json:"replicated_at"`
	// Maps are the disk maps written, by disk key: the next run writes
	// the spans that differ from them.
	Maps map[string]string `json:"maps"`
	// Devices are the standby's disk device keys, by the source's disk key.
	Devices map[string]int32 `json:"devices"`
	// BytesWritten is what the run that made the point wrote: the
	// changed spans; for the first point, its disks' sizes.
	BytesWritten int64 `json:"bytes_written"`
	// Final: a planned failover took the point after it shut the source
	// down and wrote what differed from BackupPoint (SourceTime is then
	// the shutdown's); Maps are empty, so the next run writes every span.
	Final bool `json:"final,omitempty"`

	// Snapshot is the point's VM snapshot.
	Snapshot types.ManagedObjectReference `json:"-"`
}

// SnapshotName is the name of the snapshot of point seq.
func SnapshotName(seq int) string { return fmt.Sprintf("%s%06d", pointPrefix, seq) }

// points reads the standby's points from its snapshot tree, oldest
// first. Snapshots coffer did not name are left alone.
func points(vm mo.VirtualMachine) ([]Point, error) {
	if vm.Snapshot == nil {
		return nil, nil
	}
	var out []Point
	var walk func([]types.VirtualMachineSnapshotTree) error
	walk = func(ts []types.VirtualMachineSnapshotTree) error {
		for _, t := range ts {
			if strings.HasPrefix(t.Name, pointPrefix) {
				var p Point
				if err := json.Unmarshal([]byte(t.Description), &p); err != nil {
					return fmt.Errorf("the standby's snapshot %s: its record: %w", t.Name, err)
				}
				p.Snapshot = t.Snapshot
				out = append(out, p)
			}
			if err := walk(t.ChildSnapshotList); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(vm.Snapshot.RootSnapshotList); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Point) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// takePoint snapshots the standby (powered off: no memory, no quiescing)
// as point p.
func takePoint(ctx context.Context, c *vim25.Client, vm types.ManagedObjectReference, p Point) error {
	desc, err := json.Marshal(p)
	if err != nil {
		return err
	}
	task, err := object.NewVirtualMachine(c, vm).CreateSnapshot(ctx, SnapshotName(p.Seq), string(desc), false, false)
	if err != nil {
		return fmt.Errorf("snapshot point %d: %w", p.Seq, err)
	}
	if err := task.Wait(ctx); err != nil {
		return fmt.Errorf("snapshot point %d: %w", p.Seq, err)
	}
	return nil
}

// revert brings the standby's disks back to point p's snapshot: what a
// killed run wrote above it goes, and a failover starts from it.
func revert(ctx context.Context, c *vim25.Client, p Point) error {
	res, err := methods.RevertToSnapshot_Task(ctx, c, &types.RevertToSnapshot_Task{This: p.Snapshot, SuppressPowerOn: types.NewBool(true)})
	if err != nil {
		return fmt.Errorf("revert to point %d: %w", p.Seq, err)
	}
	if err := object.NewTask(c, res.Returnval).Wait(ctx); err != nil {
		return fmt.Errorf("revert to point %d: %w", p.Seq, err)
	}
	return nil
}

// prune removes the oldest points beyond keep, consolidating each into
// the next (vSphere merges its delta): the newer points keep their bytes.
func prune(ctx context.Context, c *vim25.Client, ps []Point, keep int) ([]Point, error) {
	var pruned []Point
	for len(ps) > keep {
		res, err := methods.RemoveSnapshot_Task(ctx, c, &types.RemoveSnapshot_Task{This: ps[0].Snapshot, RemoveChildren: false, Consolidate: types.NewBool(true)})
		if err == nil {
			err = object.NewTask(c, res.Returnval).Wait(ctx)
		}
		if err != nil {
			return pruned, fmt.Errorf("remove point %d: %w", ps[0].Seq, err)
		}
		pruned, ps = append(pruned, ps[0]), ps[1:]
	}
	return pruned, nil
}
