package vsphere

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

func (c *Connector) runTask(ctx context.Context, timeout time.Duration, start func(context.Context) (*object.Task, error)) error {
	return c.runTaskResult(ctx, timeout, start, nil)
}

// runTaskResult starts a task and waits for it through the shared tracker,
// at most timeout. A task still running at the deadline is NOT cancelled:
// cancelling a snapshot creation is racy (vcsim even completes cancelled
// tasks), so coffer only stops waiting, reports ErrTransient, and keeps the
// journal; cleanup removes the snapshot once the creation has ended.
func (c *Connector) runTaskResult(ctx context.Context, timeout time.Duration, start func(context.Context) (*object.Task, error), res *types.AnyType) error {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t, err := start(tctx)
	if err != nil {
		return err
	}
	info, err := c.tasks.Wait(tctx, t.Reference())
	if err != nil {
		if tctx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("task %s did not finish within %s: %w", t.Reference().Value, timeout, hypervisor.ErrTransient)
		}
		return err
	}
	if res != nil {
		*res = info.Result
	}
	return nil
}

// removeNamed removes the VM snapshot called name, if it exists. When it
// does not, inFlight reports a snapshot creation still running on the VM
// (it may yet produce the snapshot, so its journal must be kept).
//
// mark, when set, must appear in the snapshot's description (the
// installation id coffer writes there): a snapshot that merely has the
// journalled name but was made by someone else is left alone.
func (c *Connector) removeNamed(ctx context.Context, vm *object.VirtualMachine, name, mark string, timeout time.Duration) (removed, inFlight bool, err error) {
	var m mo.VirtualMachine
	if err := property.DefaultCollector(c.client).RetrieveOne(ctx, vm.Reference(), []string{"snapshot", "recentTask"}, &m); err != nil {
		return false, false, err
	}
	node := findSnapshot(m.Snapshot, name)
	if node == nil {
		return false, c.snapshotTaskRunning(ctx, m.RecentTask, "createsnapshot"), nil
	}
	if mark != "" && !strings.Contains(node.Description, mark) {
		return false, false, fmt.Errorf("snapshot %s lacks coffer's installation id %s in its description; not removed", name, mark)
	}
	if c.snapshotTaskRunning(ctx, m.RecentTask, "removesnapshot", "snapshot.remove") {
		// An earlier removal (one that outlived its timeout) still runs:
		// a second one would fail or, on vcsim, crash the server.
		return false, true, nil
	}
	err = c.removeSnapshot(ctx, node.Snapshot, timeout)
	return err == nil, false, err
}

func (c *Connector) removeSnapshot(ctx context.Context, ref types.ManagedObjectReference, timeout time.Duration) error {
	return c.runTask(ctx, timeout, func(ctx context.Context) (*object.Task, error) {
		// consolidate=true folds the delta written during the backup back
		// into the base disk; removeChildren=false keeps anything a user
		// created on top of ours.
		res, err := methods.RemoveSnapshot_Task(ctx, c.client, &types.RemoveSnapshot_Task{
			This: ref, RemoveChildren: false, Consolidate: types.NewBool(true)})
		if err != nil {
			return nil, err
		}
		return object.NewTask(c.client, res.Returnval), nil
	})
}

// snapshotTaskRunning reports a queued or running task among tasks whose
// description id contains one of kinds (lower case).
func (c *Connector) snapshotTaskRunning(ctx context.Context, tasks []types.ManagedObjectReference, kinds ...string) bool {
	if len(tasks) == 0 {
		return false
	}
	var ts []mo.Task
	if err := property.DefaultCollector(c.client).Retrieve(ctx, tasks, []string{"info"}, &ts); err != nil {
		return true // cannot tell: keep the journal, a later run decides
	}
	for _, t := range ts {
		running := t.Info.State == types.TaskInfoStateQueued || t.Info.State == types.TaskInfoStateRunning
		id := strings.ToLower(t.Info.DescriptionId)
		for _, k := range kinds {
			if running && strings.Contains(id, k) {
				return true
			}
		}
	}
	return false
}

func findSnapshot(info *types.VirtualMachineSnapshotInfo, name string) *types.VirtualMachineSnapshotTree {
	if info == nil {
		return nil
	}
	var walk func([]types.VirtualMachineSnapshotTree) *types.VirtualMachineSnapshotTree
	walk = func(ts []types.VirtualMachineSnapshotTree) *types.VirtualMachineSnapshotTree {
		for i, t := range ts {
			if t.Name == name {
				return &ts[i]
			}
			if r := walk(t.ChildSnapshotList); r != nil {
				return r
			}
		}
		return nil
	}
	return walk(info.RootSnapshotList)
}

// Config implements hypervisor.Session.
func (s *session) Config() hypervisor.VMConfig { return s.cfg }

// Disks implements hypervisor.Session.
func (s *session) Disks() []hypervisor.DiskSnapshot { return s.disks }

// Warnings implements hypervisor.Session.
func (s *session) Warnings() []string { return s.warnings }

// Notes says how each opened disk is read (the route its bytes take),
// for the task log.
func (s *session) Notes() []string { return s.notes }

// AchievedMode implements hypervisor.Session.
func (s *session) AchievedMode() hypervisor.SnapshotMode { return s.achieved }

// OpenDisk implements hypervisor.Session.
func (s *session) OpenDisk(ctx context.Context, key string) (hypervisor.DiskReader, error) {
	if m, ok := s.mem[key]; ok {
		return s.openMemory(ctx, m)
	}
	loc, ok := s.locs[key]
	if !ok {
		return nil, fmt.Errorf("vsphere: no disk %s: %w", key, hypervisor.ErrNotFound)
	}
	var ds hypervisor.DiskSnapshot
	for _, d := range s.disks {
		if d.Key == key {
			ds = d
		}
	}
	if s.req.Mode != hypervisor.AsIs && s.snap == nil {
		// Released for storage-level protection: the engine reads the data
		// from the storage snapshot and the change set, fetched at
		// snapshot time, from here.
		return &diskReader{ctx: ctx, s: s, key: key, data: releasedDisk{}, size: loc.Size, changes: ds.Changes, changed: s.changed[key]}, nil
	}
	data, err := s.c.transport.OpenDisk(ctx, loc)
	if err != nil {
		return nil, err
	}
	route := "with the " + s.c.transport.Name() + " transport"
	if r, ok := data.(*routedDisk); ok {
		route = r.route
		if r.warning != "" {
			s.warn("%s", r.warning)
		}
	}
	s.notes = append(s.notes, fmt.Sprintf("disk %s read %s", ds.Name, route))
	return &diskReader{ctx: ctx, s: s, key: key, data: data, size: loc.Size, changes: ds.Changes, changed: s.changed[key]}, nil
}

// Release implements hypervisor.Session: the VM snapshot goes now, the
// journal and tracking bookkeeping stay until Close.
func (s *session) Release(ctx context.Context) error {
	if s.snap == nil {
		return nil
	}
	if s.removeTried {
		// A first removal failed or outlived its timeout and may still
		// be running: look before starting another.
		vm := object.NewVirtualMachine(s.c.client, types.ManagedObjectReference{Type: "VirtualMachine", Value: s.ref.ID})
		_, inFlight, err := s.c.removeNamed(ctx, vm, s.j.Snapshot, s.c.stateID, s.to.SnapshotRemove)
		if err != nil {
			return fmt.Errorf("vsphere: remove snapshot %s of %s: %w", s.j.Snapshot, s.ref.Name, err)
		}
		if inFlight {
			return fmt.Errorf("vsphere: removal of snapshot %s of %s still running: %w", s.j.Snapshot, s.ref.Name, hypervisor.ErrTransient)
		}
		s.snap = nil
		return nil
	}
	s.removeTried = true
	if err := s.c.removeSnapshot(ctx, *s.snap, s.to.SnapshotRemove); err != nil {
		return fmt.Errorf("vsphere: remove snapshot %s of %s: %w", s.j.Snapshot, s.ref.Name, err)
	}
	s.snap = nil
	return nil
}

// Close implements hypervisor.Session. A failed removal keeps the journal,
// so CleanupLeftovers retries it; the tokens were fixed at snapshot time
// (the snapshot disks' changeIds), so they are valid whether or not the
// removal succeeded.
func (s *session) Close(ctx context.Context, ok bool) (map[string]string, error) {
	if s.closed {
		return s.tokens(ok), nil
	}
	if err := s.Release(ctx); err != nil {
		// The journal stays and the session stops counting as live, so
		// CleanupLeftovers (in this process or the next) retries.
		s.setLive(false)
		return nil, err
	}
	s.closed = true
	s.setLive(false)
	s.c.unclaim(s.ref.ID)
	if s.j != nil && !s.j.Suspended {
		if err := s.j.remove(); err != nil {
			return nil, err
		}
	}
	return s.tokens(ok), nil
}

func (s *session) tokens(ok bool) map[string]string {
	if !ok {
		return nil
	}
	out := map[string]string{}
	for _, d := range s.disks {
		if d.NewToken != "" {
			out[d.Key] = d.NewToken
		}
	}
	return out
}

// liveSnapshots holds the snapshot names of this process's open sessions
// (all connectors), so cleanup can also act on this process's own
// abandoned journals (timed-out creations, failed removals) without
// touching a session still in use.
var liveSnapshots sync.Map

func (s *session) setLive(on bool) {
	if s.j == nil {
		return
	}
	if on {
		liveSnapshots.Store(s.j.Snapshot, true)
	} else {
		liveSnapshots.Delete(s.j.Snapshot)
	}
}

func isLive(snapshot string) bool {
	_, ok := liveSnapshots.Load(snapshot)
	return ok
}

// releasedDisk is the data of a disk whose VM snapshot was released: it
// is in the storage snapshot now, not here.
type releasedDisk struct{}

func (releasedDisk) ReadAt([]byte, int64) (int, error) {
	return 0, errors.New("vsphere: session released; read the storage snapshot instead")
}

func (releasedDisk) Close() error { return nil }
