package vsphere

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

const moverName = "coffer-mover"

// addMover creates the data-mover VM (a pvscsi controller and a system
// disk of its own) next to the lab's VM.
func (l *hostLab) addMover(t testing.TB) types.ManagedObjectReference {
	t.Helper()
	ctx := context.Background()
	s := l.s
	var dcs []mo.Datacenter
	if err := s.pc().Retrieve(ctx, s.find(ctx, "Datacenter"), []string{"vmFolder"}, &dcs); err != nil {
		t.Fatal(err)
	}
	folder, pool := dcs[0].VmFolder, s.find(ctx, "ResourcePool")[0]
	task, err := object.NewFolder(s.client, folder).CreateVM(ctx, s.vmSpec(moverName, "LocalDS_0", 1, 1<<20), object.NewResourcePool(s.client, pool), nil)
	if err != nil {
		t.Fatal(err)
	}
	info, err := task.WaitForResult(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.Result.(types.ManagedObjectReference)
}

// simulatedDevices plays the data mover's OS: vcsim attaches no real
// device, so the "block device" of an attached disk is the flat extent
// of its backing file on the simulator's datastore directory (a local
// directory here). It only answers for a disk the data mover really has
// at that moment, as a guest only sees a disk once it is attached.
type simulatedDevices struct {
	l     *hostLab
	mover types.ManagedObjectReference
	seen  []AttachedDisk
	fail  error
}

func (f *simulatedDevices) Device(ctx context.Context, d AttachedDisk) (string, error) {
	if f.fail != nil {
		return "", f.fail
	}
	devs, err := (&Connector{client: f.l.s.client}).devicesOf(ctx, f.mover)
	if err != nil {
		return "", err
	}
	as := attachedAs(devs, d.File)
	if len(as) != 1 {
		return "", fmt.Errorf("%s is not attached to the data mover", d.File)
	}
	if m := as[0].dev.Backing.(*types.VirtualDiskFlatVer2BackingInfo).DiskMode; m != string(types.VirtualDiskModeIndependent_nonpersistent) {
		return "", fmt.Errorf("%s is attached %s; it must be independent-nonpersistent", d.File, m)
	}
	f.seen = append(f.seen, d)
	ds, path := splitDSPath(d.File)
	flat, _ := flatExtent(path)
	return filepath.Join(f.l.s.dsDirs[ds], flat), nil
}

// moverDisks are the files backing the data mover's disks.
func (l *hostLab) moverDisks(t testing.TB, mover types.ManagedObjectReference) []string {
	devs, err := (&Connector{client: l.s.client}).devicesOf(context.Background(), mover)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range devs {
		if vd, ok := d.(*types.VirtualDisk); ok {
			out = append(out, vd.Backing.(*types.VirtualDiskFlatVer2BackingInfo).FileName)
		}
	}
	return out
}

func (l *hostLab) hotAddConnector(t *testing.T, state string) (*Connector, *simulatedDevices) {
	mover := l.moverRef(t)
	c := l.connect(t, func(c *Config) {
		c.DataMoverVM = moverName
		if state != "" {
			c.StateDir = state
		}
	})
	f := &simulatedDevices{l: l, mover: mover}
	c.transport.(*HotAdd).Devices = f
	return c, f
}

func (l *hostLab) moverRef(t testing.TB) types.ManagedObjectReference {
	ref, err := (&Connector{client: l.s.client}).vmByName(context.Background(), moverName)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// TestHotAddReadsTheSnapshotDisk: with a data-mover VM the disk is
// attached to it (independent-nonpersistent, backed by the snapshot's base
// file), read as a local device, and detached; no byte crosses a /folder
// service, the base file is intact, no journal stays.
func TestHotAddReadsTheSnapshotDisk(t *testing.T) {
	l := startHostLab(t, 4<<20)
	mover := l.addMover(t)
	before := l.moverDisks(t, mover)
	c, f := l.hotAddConnector(t, "")
	r := newRepo(t)
	snap, notes, err := backupLab(t, l, r, c)
	if err != nil {
		t.Fatal(err)
	}
	l.logRoutes(t, "hot-add")
	if !bytes.Equal(restoreBytes(t, r, snap), l.data) {
		t.Fatal("the restored disk differs")
	}
	if len(f.seen) != 1 || f.seen[0].File != "[LocalDS_0] vm-0000/disk.vmdk" {
		t.Fatalf("devices looked for: %+v", f.seen)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "by hot-add: attached to data-mover VM "+moverName) {
		t.Fatalf("notes %q", notes)
	}
	if l.vc.folderBytes.Load() != 0 || l.host.folderBytes.Load() != 0 {
		t.Fatalf("/folder bytes: vCenter %d, host %d", l.vc.folderBytes.Load(), l.host.folderBytes.Load())
	}
	if after := l.moverDisks(t, mover); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("data mover's disks %v, before %v", after, before)
	}
	checkIntactAndClean(t, l, c.cfg.StateDir)
}

func checkIntactAndClean(t *testing.T, l *hostLab, state string) {
	t.Helper()
	if b, err := os.ReadFile(l.flatOnDisk); err != nil || !bytes.Equal(b, l.data) {
		t.Fatalf("the VM's base disk after detaching: %v", err)
	}
	if js, _ := filepath.Glob(filepath.Join(hotAddDir(state), "*.json")); len(js) != 0 {
		t.Fatalf("hot-add journals left: %v", js)
	}
	if vm := l.s.vm(l.vm); cofferSnapshot(vm.Snapshot) != nil {
		t.Fatal("coffer's snapshot is left")
	}
}

// TestHotAddDetachesWhenTheDeviceDoesNotShow: a disk attached whose
// device never appears fails the backup, and is detached on that path.
func TestHotAddDetachesWhenTheDeviceDoesNotShow(t *testing.T) {
	l := startHostLab(t, 1<<20)
	mover := l.addMover(t)
	before := l.moverDisks(t, mover)
	c, f := l.hotAddConnector(t, "")
	f.fail = errors.New("no /dev/disk/by-id/wwn-0x6000c29 device")
	_, _, err := backupLab(t, l, newRepo(t), c)
	if err == nil || !strings.Contains(err.Error(), "attached to "+moverName+", but its device") {
		t.Fatalf("backup: %v", err)
	}
	if after := l.moverDisks(t, mover); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("data mover's disks %v, before %v", after, before)
	}
	checkIntactAndClean(t, l, c.cfg.StateDir)
}

// TestHotAddRefusesTheMoverItself: the data mover cannot back itself up
// by hot-add; the error says so and nothing is attached.
func TestHotAddRefusesTheMoverItself(t *testing.T) {
	l := startHostLab(t, 1<<20)
	mover := l.addMover(t)
	c, _ := l.hotAddConnector(t, "")
	sess, err := c.Snapshot(context.Background(), hypervisor.VMRef{ID: mover.Value, Name: moverName},
		hypervisor.SnapshotRequest{SessionID: "self", Mode: hypervisor.CrashConsistent})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sess.OpenDisk(context.Background(), sess.Disks()[0].Key)
	if !errors.Is(err, hypervisor.ErrUnsupported) {
		t.Fatalf("hot-adding the mover's own disk: %v", err)
	}
	if _, err := sess.Close(context.Background(), false); err != nil {
		t.Fatal(err)
	}
}
