package vsinstant

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

const dsName = "coffer-instant-t1"

func startRecovery(t *testing.T, l *lab, ctx context.Context, state string) (*served, *Record) {
	t.Helper()
	s := serveExport(t, ctx, "app-instant")
	l.mountable(dsName, filepath.Join(s.dir, "export"))
	rec := NewRecord(state, "t1")
	rec.Dir = s.dir
	host, _, _ := strings.Cut(s.addr, ":")
	err := Start(ctx, l.client, s.cfg, rec, Options{NFSHost: host, NFSPath: "/", Datastore: dsName, Name: "app-instant"})
	if err != nil {
		t.Fatal(err)
	}
	return s, rec
}

// TestInstantRecoveryRunsFromTheExportThenMovesToProductionStorage: on
// vcsim, Start mounts the export as an NFS datastore of the host,
// registers the VM on the export's disks and powers it on; the VM's
// configuration file lands in the export. Commit relocates the VM to
// LocalDS_0 and unmounts the export; the VM runs on and the journal is
// gone.
func TestInstantRecoveryRunsFromTheExportThenMovesToProductionStorage(t *testing.T) {
	l := startLab(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	state := t.TempDir()
	s, rec := startRecovery(t, l, ctx, state)

	var vm mo.VirtualMachine
	ref := types.ManagedObjectReference{Type: "VirtualMachine", Value: rec.VM}
	if err := property.DefaultCollector(l.client).RetrieveOne(ctx, ref, []string{"runtime.powerState", "config.hardware.device", "datastore"}, &vm); err != nil {
		t.Fatal(err)
	}
	if vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
		t.Fatalf("the recovered VM is %s", vm.Runtime.PowerState)
	}
	var files []string
	for _, d := range object.VirtualDeviceList(vm.Config.Hardware.Device).SelectByType((*types.VirtualDisk)(nil)) {
		files = append(files, d.(*types.VirtualDisk).Backing.(types.BaseVirtualDeviceFileBackingInfo).GetVirtualDeviceFileBackingInfo().FileName)
	}
	want := "[" + dsName + "] app-instant/app-instant_0.vmdk,[" + dsName + "] app-instant/app-instant_1.vmdk"
	if strings.Join(files, ",") != want {
		t.Fatalf("the VM's disks are %v, want %s", files, want)
	}
	var ds mo.Datastore
	if err := property.DefaultCollector(l.client).RetrieveOne(ctx, vm.Datastore[0], []string{"info"}, &ds); err != nil {
		t.Fatal(err)
	}
	nas, ok := ds.Info.(*types.NasDatastoreInfo)
	if !ok || nas.Nas.RemoteHost != "127.0.0.1" || nas.Nas.RemotePath != "/" || nas.Nas.Type != "NFS" {
		t.Fatalf("the VM's datastore is not the NFS mount of the export: %#v", ds.Info)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "export", "app-instant", "app-instant.vmx")); err != nil {
		t.Fatalf("the VM's configuration is not in the export: %v", err)
	}
	if _, err := LoadRecord(state, "t1"); err != nil {
		t.Fatalf("no journal while the VM runs: %v", err)
	}

	if err := Commit(ctx, l.client, rec, "LocalDS_0"); err != nil {
		t.Fatal(err)
	}
	if l.datastore(dsName) {
		t.Error("the export is still mounted after the commit")
	}
	if err := property.DefaultCollector(l.client).RetrieveOne(ctx, ref, []string{"runtime.powerState", "datastore"}, &vm); err != nil {
		t.Fatal(err)
	}
	if vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn || len(vm.Datastore) != 1 || vm.Datastore[0].Value != "datastore-"+localDS(t, l) {
		t.Errorf("after the commit the VM is %s on %v", vm.Runtime.PowerState, vm.Datastore)
	}
	if _, err := LoadRecord(state, "t1"); err == nil {
		t.Error("the journal outlived the commit")
	}
}

func localDS(t *testing.T, l *lab) string {
	t.Helper()
	ref, err := object.NewSearchIndex(l.client).FindByInventoryPath(context.Background(), "/DC0/datastore/LocalDS_0")
	if err != nil || ref == nil {
		t.Fatalf("LocalDS_0: %v", err)
	}
	return strings.TrimPrefix(ref.Reference().Value, "datastore-")
}

// TestDiscardRemovesTheVMAndTheMount: discard powers the VM off,
// unregisters it and unmounts the export; nothing of the recovery is
// left in the vCenter, and a second discard finds nothing to do.
func TestDiscardRemovesTheVMAndTheMount(t *testing.T) {
	l := startLab(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	state := t.TempDir()
	_, rec := startRecovery(t, l, ctx, state)
	if !l.vm("app-instant") || !l.datastore(dsName) {
		t.Fatal("no VM or datastore after Start")
	}
	if err := Discard(ctx, l.client, rec); err != nil {
		t.Fatal(err)
	}
	if l.vm("app-instant") || l.datastore(dsName) {
		t.Fatalf("after discard: VM %v, datastore %v", l.vm("app-instant"), l.datastore(dsName))
	}
	if _, err := LoadRecord(state, "t1"); err == nil {
		t.Error("the journal outlived the discard")
	}
	if err := Discard(ctx, l.client, rec); err != nil {
		t.Errorf("a second discard: %v", err)
	}
}

// TestADatastoreThatIsNotTheExportIsRefused: when the mounted datastore
// does not show the export's disks (here vcsim's directory for it is
// empty; on vSphere, a mount of some other export), Start refuses before
// it makes a VM, unmounts it, and leaves no journal.
func TestADatastoreThatIsNotTheExportIsRefused(t *testing.T) {
	l := startLab(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	state := t.TempDir()
	s := serveExport(t, ctx, "app-instant")
	l.mountable(dsName, t.TempDir())
	rec := NewRecord(state, "t1")
	err := Start(ctx, l.client, s.cfg, rec, Options{NFSHost: "127.0.0.1", NFSPath: "/", Datastore: dsName, Name: "app-instant"})
	if err == nil || !strings.Contains(err.Error(), "not coffer's export") {
		t.Fatalf("Start on a foreign datastore: %v", err)
	}
	if l.vm("app-instant") || l.datastore(dsName) {
		t.Fatalf("after the refusal: VM %v, datastore %v", l.vm("app-instant"), l.datastore(dsName))
	}
	if _, err := LoadRecord(state, "t1"); err == nil {
		t.Error("a journal outlived the refusal")
	}
}
