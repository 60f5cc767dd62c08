package vsstandby

import (
	"context"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/backup/backuptest"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"
	"github.com/coffer-backup/coffer/internal/testutil/vcmover"
)

var _ Connector = (*vsphere.Connector)(nil)

const (
	moverName = "coffer-mover"
	diskSize  = 4 << 20
)

// lab is a vcsim vCenter with a source VM (web-01: one disk, one adapter
// on "VM Network"), the DR worker's data-mover VM, a connector to it
// through the hot-add transport, and a repository.
type lab struct {
	t    *testing.T
	l    *vclab.Lab
	conn *vsphere.Connector
	r    *repo.Repository
	src  types.ManagedObjectReference
	snap *snapshotData
}

func newLab(t *testing.T) *lab {
	t.Helper()
	snap := &snapshotData{t: t, saved: map[string]map[string][]byte{}}
	srv := vclab.StartHooked(t, "", nil, 1, 0, vclab.Hooks{BeforeCall: snap.call})
	l := vclab.New(t, srv)
	snap.l = l
	ctx := context.Background()
	l.CreateVMWith(ctx, vclab.VM{Name: "web-01", Controller: "pvscsi", DiskSize: diskSize, NIC: "vmxnet3"})
	l.CreateVMWith(ctx, vclab.VM{Name: moverName, Controller: "pvscsi", DiskSize: 1 << 20})
	conn, err := vsphere.New(ctx, vsphere.Config{URL: l.SDK, User: "coffer", Password: vclab.Password, Thumbprint: l.Thumbprint,
		StateDir: t.TempDir(), TaskPoll: 20 * time.Millisecond, DataMoverVM: moverName, MoverDevices: vcmover.MoverDevices{L: l, Mover: moverName}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return &lab{t: t, l: l, conn: conn, r: repotest.New(t, repo.InitOptions{}), src: l.VMs[1].Self, snap: snap}
}

// backup writes data into the source's disk at off (as its guest would),
// backs the VM up, and returns the point and the disk's bytes then.
func (b *lab) backup(writes map[int64][]byte) (*repo.Point, []byte) {
	b.t.Helper()
	d := b.l.Disk("web-01")
	cur := b.l.ReadFlat(d)
	cur = append(cur, make([]byte, diskSize-len(cur))...) // vcsim creates it empty
	for off, data := range writes {
		copy(cur[off:], data)
	}
	b.l.WriteFlat(d, cur)
	p, err := backuptest.BackupVM(b.t, b.r, b.conn, backup.VMRequest{Connection: "vc", VM: hypervisor.VMRef{ID: b.src.Value, Name: "web-01"},
		SnapshotMode: hypervisor.CrashConsistent, Quiesce: hypervisor.QuiesceFallback})
	if err != nil {
		b.t.Fatal(err)
	}
	return p, cur
}

// standby reads the standby VM's properties.
func (b *lab) standby(name string) mo.VirtualMachine {
	b.t.Helper()
	var vms []mo.VirtualMachine
	b.l.Retrieve(context.Background(), "VirtualMachine", []string{"name", "config", "runtime.powerState", "snapshot"}, &vms)
	for _, vm := range vms {
		if vm.Name == name {
			return vm
		}
	}
	b.t.Fatalf("no VM %s", name)
	return mo.VirtualMachine{}
}

// snapshotData plays the part of ESXi's snapshots that vcsim lacks:
// vcsim makes no delta disks, so its snapshot keeps no bytes and its
// revert brings none back. Before vcsim takes a CreateSnapshot_Task, the
// VM's flat extents are copied aside under the snapshot's name; before
// a RevertToSnapshot_Task, they are copied back; a RemoveSnapshot_Task
// drops them. What a test reads of a point is what the disks held when
// coffer took its snapshot.
type snapshotData struct {
	t     *testing.T
	l     *vclab.Lab
	mu    sync.Mutex
	saved map[string]map[string][]byte // "vm/snapshot" -> flat path -> bytes
}

func (s *snapshotData) call(r *http.Request, method string) bool {
	switch method {
	case "CreateSnapshot_Task", "RevertToSnapshot_Task", "RemoveSnapshot_Task":
	default:
		return true
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.t.Error(err)
		return false
	}
	m, err := simulator.UnmarshalBody(types.TypeFunc(), body)
	if err != nil {
		s.t.Error(err)
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch req := m.Body.(type) {
	case *types.CreateSnapshot_Task:
		vm := s.vmName(req.This)
		files := map[string][]byte{}
		for _, d := range s.l.Disks(vm) {
			files[d.Path] = s.l.ReadFlat(d)
		}
		s.saved[vm+"/"+req.Name] = files
	case *types.RevertToSnapshot_Task:
		for path, b := range s.saved[s.snapshotKey(req.This)] {
			if err := os.WriteFile(path, b, 0o600); err != nil {
				s.t.Error(err)
			}
		}
	case *types.RemoveSnapshot_Task:
		delete(s.saved, s.snapshotKey(req.This))
	}
	return true
}

// point is what the disks of VM vm held at its snapshot name.
func (s *snapshotData) point(vm, name string) map[string][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saved[vm+"/"+name]
}

func (s *snapshotData) vmName(ref types.ManagedObjectReference) string {
	var vms []mo.VirtualMachine
	s.l.Retrieve(context.Background(), "VirtualMachine", []string{"name"}, &vms)
	for _, vm := range vms {
		if vm.Self == ref {
			return vm.Name
		}
	}
	return ""
}

// snapshotKey finds the VM and the name of a snapshot in the trees.
func (s *snapshotData) snapshotKey(ref types.ManagedObjectReference) string {
	var vms []mo.VirtualMachine
	s.l.Retrieve(context.Background(), "VirtualMachine", []string{"name", "snapshot"}, &vms)
	var find func(vm string, ts []types.VirtualMachineSnapshotTree) string
	find = func(vm string, ts []types.VirtualMachineSnapshotTree) string {
		for _, t := range ts {
			if t.Snapshot == ref {
				return vm + "/" + t.Name
			}
			if k := find(vm, t.ChildSnapshotList); k != "" {
				return k
			}
		}
		return ""
	}
	for _, vm := range vms {
		if vm.Snapshot != nil {
			if k := find(vm.Name, vm.Snapshot.RootSnapshotList); k != "" {
				return k
			}
		}
	}
	return ""
}
