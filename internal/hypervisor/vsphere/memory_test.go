package vsphere

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
)

// memoryImage is what ESXi would have written for a VM's with-memory
// snapshots: the .vmsn and, when vmem is not nil, a separate .vmem.
type memoryImage struct {
	vmsn, vmem []byte
}

// setMemoryImage registers the memory image of the VM's with-memory
// snapshots (those taken from now on and those still present).
func (sh *cbtShim) setMemoryImage(vm types.ManagedObjectReference, img memoryImage) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.memory[vm.Value] = img
}

// snapshotFiles maps "[ds] path" of every .vmsn/.vmem the VM's layoutEx
// names for a snapshot to the registered bytes.
func (sh *cbtShim) snapshotFiles(vm types.ManagedObjectReference, img memoryImage) map[string][]byte {
	out := map[string][]byte{}
	v := sh.simVM(vm)
	sh.s.model.Map().WithLock(sh.s.model.Service.Context, v, func() {
		names := map[int32]string{}
		for _, f := range v.LayoutEx.File {
			names[f.Key] = f.Name
		}
		for _, e := range v.LayoutEx.Snapshot {
			if n, ok := names[e.DataKey]; ok && e.DataKey >= 0 {
				out[n] = img.vmsn
			}
			if n, ok := names[e.MemoryKey]; ok && e.MemoryKey >= 0 && img.vmem != nil {
				out[n] = img.vmem
			}
		}
	})
	return out
}

// serveMemory answers a GET or HEAD of a registered VM's snapshot file
// from the registered image, with ranges; everything else (and a file of a
// removed snapshot) goes on to vcsim.
func (sh *cbtShim) serveMemory(w http.ResponseWriter, r *http.Request) bool {
	p, ok := strings.CutPrefix(r.URL.Path, "/folder/")
	if !ok || (r.Method != http.MethodGet && r.Method != http.MethodHead) ||
		(!strings.HasSuffix(p, ".vmsn") && !strings.HasSuffix(p, ".vmem")) {
		return false
	}
	name := "[" + r.URL.Query().Get("dsName") + "] " + p
	sh.mu.Lock()
	var data []byte
	found := false
	for vm, img := range sh.memory {
		if b, ok := sh.snapshotFiles(types.ManagedObjectReference{Type: "VirtualMachine", Value: vm}, img)[name]; ok {
			data, found = b, true
		}
	}
	sh.mu.Unlock()
	if !found {
		return false
	}
	http.ServeContent(w, r, filepath.Base(p), time.Time{}, bytes.NewReader(data))
	return true
}

// addVMEM gives every with-memory snapshot of a VM registered with a .vmem
// image the .vmem file ESXi writes next to the .vmsn (vcsim lists none),
// before the layout is read. The empty local file keeps vcsim's storage
// refresh from dropping the entry; removing the snapshot deletes it.
func (sh *cbtShim) addVMEM(t testing.TB) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for id, img := range sh.memory {
		if img.vmem == nil {
			continue
		}
		v := sh.simVM(types.ManagedObjectReference{Type: "VirtualMachine", Value: id})
		sh.s.model.Map().WithLock(sh.s.model.Service.Context, v, func() {
			names := map[int32]string{}
			next := int32(0)
			for _, f := range v.LayoutEx.File {
				names[f.Key] = f.Name
				next = max(next, f.Key+1)
			}
			for i, e := range v.LayoutEx.Snapshot {
				tree := findSnapshotRef(v.Snapshot, e.Key)
				if e.MemoryKey >= 0 || tree == nil || tree.State != types.VirtualMachinePowerStatePoweredOn {
					continue
				}
				name := strings.TrimSuffix(names[e.DataKey], ".vmsn") + ".vmem"
				ds, p := splitDSPath(name)
				if err := os.WriteFile(filepath.Join(sh.s.dsDirs[ds], p), nil, 0o600); err != nil {
					t.Errorf("shim: %v", err)
					return
				}
				v.LayoutEx.File = append(v.LayoutEx.File, types.VirtualMachineFileLayoutExFileInfo{Key: next, Name: name,
					Type: string(types.VirtualMachineFileLayoutExFileTypeSnapshotMemory), Accessible: types.NewBool(true)})
				v.LayoutEx.Snapshot[i].MemoryKey = next
				next++
			}
		})
	}
}

func findSnapshotRef(info *types.VirtualMachineSnapshotInfo, ref types.ManagedObjectReference) *types.VirtualMachineSnapshotTree {
	if info == nil {
		return nil
	}
	var walk func([]types.VirtualMachineSnapshotTree) *types.VirtualMachineSnapshotTree
	walk = func(ts []types.VirtualMachineSnapshotTree) *types.VirtualMachineSnapshotTree {
		for i := range ts {
			if ts[i].Snapshot == ref {
				return &ts[i]
			}
			if r := walk(ts[i].ChildSnapshotList); r != nil {
				return r
			}
		}
		return nil
	}
	return walk(info.RootSnapshotList)
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// memoryStreams returns the point's memory streams by key.
func memoryStreams(p *repo.Point) map[string]repo.Disk {
	out := map[string]repo.Disk{}
	for _, d := range p.Disks {
		if d.Kind == hypervisor.KindMemory {
			out[d.Key] = d
		}
	}
	return out
}

// TestBackupWithMemory backs up a running VM in with-memory mode twice:
// first with the memory state in the .vmsn alone (what vcsim lays out),
// then with a .vmsn and a .vmem (what ESXi lays out). Each point holds the
// files as memory streams that restore to exactly the image of its
// snapshot, the disk restores byte-identical, and no snapshot is left.
func TestBackupWithMemory(t *testing.T) {
	s, sh, c, r, ref, vm := oneVMLab(t, 4<<20)
	sh.write(t, ref, 0, 0, bytes.Repeat([]byte{0x5a}, 200<<10))
	img1 := memoryImage{vmsn: randomBytes(t, 3<<20+12345)}
	sh.setMemoryImage(ref, img1)
	p1 := runBackupMode(t, r, c, vm, hypervisor.WithMemory)
	disk1 := sh.read(t, ref, 0)

	sh.write(t, ref, 0, 1<<20, bytes.Repeat([]byte{0xa5}, 8<<10))
	img2 := memoryImage{vmsn: randomBytes(t, 4099), vmem: randomBytes(t, 1<<20+7)}
	sh.setMemoryImage(ref, img2)
	p2 := runBackupMode(t, r, c, vm, hypervisor.WithMemory)
	disk2 := sh.read(t, ref, 0)

	for i, tc := range []struct {
		p    *repo.Point
		img  memoryImage
		disk []byte
	}{{p1, img1, disk1}, {p2, img2, disk2}} {
		if tc.p.SnapshotModeAchieved != string(hypervisor.WithMemory) {
			t.Fatalf("point %d: achieved %q", i+1, tc.p.SnapshotModeAchieved)
		}
		mem := memoryStreams(tc.p)
		want := map[string][]byte{memoryVMSNKey: tc.img.vmsn}
		if tc.img.vmem != nil {
			want[memoryVMEMKey] = tc.img.vmem
		}
		if len(mem) != len(want) || len(tc.p.Disks) != len(want)+1 {
			t.Fatalf("point %d: %d streams, memory streams %v, want %d", i+1, len(tc.p.Disks), mem, len(want))
		}
		for key, b := range want {
			d := mem[key]
			ext := "." + strings.TrimPrefix(d.Format, "vmware-")
			if d.Size != int64(len(b)) || !strings.HasSuffix(d.Name, ext) || d.Mode != "full" {
				t.Fatalf("point %d: stream %s: %+v (want %d bytes, a %s file)", i+1, key, d, len(b), ext)
			}
			if got := restoreDisk(t, r, tc.p, d); !bytes.Equal(got, b) {
				t.Fatalf("point %d: stream %s restores to %d bytes that differ from the %d-byte image", i+1, key, len(got), len(b))
			}
		}
		for _, d := range tc.p.Disks {
			if d.Kind == hypervisor.KindDisk && !bytes.Equal(restoreDisk(t, r, tc.p, d), tc.disk) {
				t.Fatalf("point %d: disk %s does not restore to the disk at its snapshot", i+1, d.Name)
			}
		}
		if tc.p.SnapshotMode != string(hypervisor.WithMemory) {
			t.Fatalf("point %d: snapshot mode %q", i+1, tc.p.SnapshotMode)
		}
	}
	// The memory streams are always read in full; the disk still goes
	// incrementally, and the point's mode follows its disks.
	if p2.Mode != "incremental" {
		t.Fatalf("second point's mode is %q, want incremental", p2.Mode)
	}
	for _, d := range p2.Disks {
		if d.Kind == hypervisor.KindDisk && d.Mode != "incremental" {
			t.Fatalf("second point: disk %s read %s %v", d.Name, d.Mode, p2.Warnings)
		}
	}
	if n := len(s.snapshots(ref)); n != 0 {
		t.Fatalf("%d snapshots left on the VM", n)
	}
}

// TestWithMemoryPoweredOff: a powered-off VM has no memory to save, so a
// with-memory backup takes a plain snapshot, stores no memory stream and
// records crash-consistent as achieved, with a warning; suspend, which
// has nothing to suspend, likewise.
func TestWithMemoryPoweredOff(t *testing.T) {
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 1, PoweredOff: true})
	sh := newCBTShim(t, s)
	c, r, ref := sh.connect(t, nil), newRepo(t), s.vms[0]
	sh.setMemoryImage(ref, memoryImage{vmsn: randomBytes(t, 1000), vmem: randomBytes(t, 1000)})
	for _, mode := range []hypervisor.SnapshotMode{hypervisor.WithMemory, hypervisor.Suspend} {
		p := runBackupMode(t, r, c, hypervisor.VMRef{ID: ref.Value, Name: "vm-0000"}, mode)
		if len(memoryStreams(p)) != 0 || len(p.Disks) != 1 {
			t.Fatalf("powered-off VM, %s: streams %+v", mode, p.Disks)
		}
		if p.SnapshotMode != string(mode) || p.SnapshotModeAchieved != string(hypervisor.CrashConsistent) ||
			!strings.Contains(strings.Join(p.Warnings, ";"), "poweredOff") {
			t.Fatalf("powered-off VM, %s: recorded %q achieved %q, warnings %v", mode, p.SnapshotMode, p.SnapshotModeAchieved, p.Warnings)
		}
		if len(s.snapshots(ref)) != 0 {
			t.Fatal("snapshot left on the VM")
		}
		if ps := s.vm(ref).Runtime.PowerState; ps != types.VirtualMachinePowerStatePoweredOff {
			t.Fatalf("%s left the VM %s", mode, ps)
		}
	}
}

// refusingTransport stands in for a hot-add or VDDK transport, which
// reads disks only.
type refusingTransport struct{}

func (refusingTransport) Name() string { return "refusing" }
func (refusingTransport) OpenDisk(context.Context, DiskLocation) (DiskData, error) {
	return nil, errors.New("this transport reads disks only")
}

// TestMemorySessionStreams checks the session directly: the memory files
// are read over the datastore service whatever transport is configured,
// the reader reports the whole file and never a change set, and the
// stream is gone with the snapshot once the session is released.
func TestMemorySessionStreams(t *testing.T) {
	_, sh, _, _, ref, vm := oneVMLab(t, 1<<20)
	c := sh.connect(t, func(cfg *Config) { cfg.Transport = refusingTransport{} })
	img := randomBytes(t, 3<<20+12345)
	sh.setMemoryImage(ref, memoryImage{vmsn: img})
	ctx := context.Background()
	sess, err := c.Snapshot(ctx, vm, hypervisor.SnapshotRequest{SessionID: "mem1", Mode: hypervisor.WithMemory})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(ctx, false)
	var mem []hypervisor.DiskSnapshot
	for _, d := range sess.Disks() {
		if d.Kind == hypervisor.KindMemory {
			mem = append(mem, d)
		}
	}
	if len(mem) != 1 || mem[0].Key != memoryVMSNKey || mem[0].Format != "vmware-vmsn" || mem[0].Changes != "full" ||
		!strings.HasPrefix(mem[0].Path, "[") || mem[0].Name != filepath.Base(mem[0].Path[strings.Index(mem[0].Path, "] ")+2:]) {
		t.Fatalf("memory streams %+v", mem)
	}
	rd, err := sess.OpenDisk(ctx, memoryVMSNKey)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	all, _ := rd.Allocated(ctx)
	_, ok, _ := rd.Changed(ctx)
	if rd.Size() != int64(len(img)) || ok || len(all) != 1 || all[0] != (hypervisor.Extent{Offset: 0, Length: int64(len(img))}) {
		t.Fatalf("size %d allocated %v change set %v", rd.Size(), all, ok)
	}
	got := make([]byte, len(img))
	if n, err := rd.ReadAt(got, 0); n != len(img) || err != nil || !bytes.Equal(got, img) {
		t.Fatalf("read %d bytes, %v; equal %v", n, err, bytes.Equal(got, img))
	}
	tail := make([]byte, 100)
	if n, err := rd.ReadAt(tail, int64(len(img))-10); n != 10 || err == nil || !bytes.Equal(tail[:10], img[len(img)-10:]) {
		t.Fatalf("read across the end: %d bytes, %v", n, err)
	}
	for _, d := range sess.Disks() {
		if d.Kind == hypervisor.KindDisk {
			if _, err := sess.OpenDisk(ctx, d.Key); err == nil {
				t.Fatal("a disk was opened without the configured transport")
			}
		}
	}
	if err := sess.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sess.OpenDisk(ctx, memoryVMSNKey); err == nil {
		t.Fatal("memory stream opened after its snapshot was released")
	}
}

// TestWithMemoryEmptyVMSN: vcsim's own empty .vmsn (no image registered)
// is a memory stream of 0 bytes, which backs up and restores as such.
func TestWithMemoryEmptyVMSN(t *testing.T) {
	_, _, c, r, _, vm := oneVMLab(t, 1<<20)
	p := runBackupMode(t, r, c, vm, hypervisor.WithMemory)
	d, ok := memoryStreams(p)[memoryVMSNKey]
	if !ok || d.Size != 0 || len(restoreDisk(t, r, p, d)) != 0 {
		t.Fatalf("streams %+v", p.Disks)
	}
}

func TestSnapshotMemoryFiles(t *testing.T) {
	snap := types.ManagedObjectReference{Type: "VirtualMachineSnapshot", Value: "snapshot-7"}
	other := types.ManagedObjectReference{Type: "VirtualMachineSnapshot", Value: "snapshot-3"}
	files := []types.VirtualMachineFileLayoutExFileInfo{{Key: 0, Name: "[ds1] vm/vm.vmx"},
		{Key: 4, Name: "[ds1] vm/vm-Snapshot2.vmsn"}, {Key: 5, Name: "[ds2] snaps/vm-Snapshot2.vmem"},
		{Key: 6, Name: "[ds1] vm/vm-Snapshot1.vmsn"}, {Key: 7, Name: "no-datastore.vmsn"}}
	layout := func(data, mem int32) *types.VirtualMachineFileLayoutEx {
		return &types.VirtualMachineFileLayoutEx{File: files, Snapshot: []types.VirtualMachineFileLayoutExSnapshotLayout{
			{Key: other, DataKey: 6, MemoryKey: -1}, {Key: snap, DataKey: data, MemoryKey: mem}}}
	}
	got, err := snapshotMemoryFiles(layout(4, 5), snap)
	want := []memoryStream{{memoryVMSNKey, "vmware-vmsn", "[ds1] vm/vm-Snapshot2.vmsn"}, {memoryVMEMKey, "vmware-vmem", "[ds2] snaps/vm-Snapshot2.vmem"}}
	if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("data and memory: %+v %v", got, err)
	}
	if got, err := snapshotMemoryFiles(layout(0, -1), snap); err != nil || len(got) != 1 || got[0].file != "[ds1] vm/vm.vmx" {
		t.Fatalf("file key 0 is a key like any other: %+v %v", got, err)
	}
	for name, l := range map[string]*types.VirtualMachineFileLayoutEx{
		"no layout": nil, "no files": layout(-1, -1), "unknown key": layout(4, 9), "not a datastore path": layout(7, -1),
		"snapshot missing": {File: files, Snapshot: []types.VirtualMachineFileLayoutExSnapshotLayout{{Key: other, DataKey: 6, MemoryKey: -1}}},
	} {
		if got, err := snapshotMemoryFiles(l, snap); err == nil {
			t.Errorf("%s: %+v without an error", name, got)
		}
	}
}
