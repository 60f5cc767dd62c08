package vsphere

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmware/govmomi/object"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
)

// restoreLab restores a point's disks as a new VM named name through c, as
// `coffer restore vm` does: create the VM, write each disk, and delete the
// VM again when a disk fails.
func restoreLab(t *testing.T, r *repo.Repository, c *Connector, snap *repo.Point, name string) (*newVM, error) {
	t.Helper()
	ctx := context.Background()
	var cfg hypervisor.VMConfig
	if err := json.Unmarshal(snap.VMConfig, &cfg); err != nil {
		t.Fatal(err)
	}
	nv, err := c.CreateVM(ctx, cfg, hypervisor.NewVMOptions{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range snap.Disks {
		if d.Kind != hypervisor.KindDisk {
			continue
		}
		src, err := restore.OpenDisk(ctx, r, d, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := nv.WriteDisk(ctx, d.Key, src); err != nil {
			if aerr := nv.Abort(ctx); aerr != nil {
				t.Fatalf("abort after %v: %v", err, aerr)
			}
			return nv.(*newVM), err
		}
	}
	return nv.(*newVM), nil
}

// restoredFlat reads the restored VM's one disk from the shared datastore.
func (l *hostLab) restoredFlat(t *testing.T, nv *newVM) []byte {
	t.Helper()
	if len(nv.disks) != 1 {
		t.Fatalf("%d disks", len(nv.disks))
	}
	for _, loc := range nv.disks {
		flat, _ := flatExtent(loc.Descriptor)
		b, err := os.ReadFile(filepath.Join(l.s.dsDirs[loc.Datastore], flat))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return nil
}

// goneWithoutTrace: no VM named name is registered and its directory is
// not on the datastore.
func (l *hostLab) goneWithoutTrace(t *testing.T, c *Connector, name string) {
	t.Helper()
	vms, err := c.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, vm := range vms {
		if vm.Name == name {
			t.Fatalf("VM %s is still registered after the failed restore", name)
		}
	}
	if _, err := os.Stat(filepath.Join(l.s.dsDirs["LocalDS_0"], name)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the failed restore left %s on the datastore: %v", name, err)
	}
}

// checkUploads: the restore sent the whole disk to want's /folder service
// and not one byte to other's.
func checkUploads(t *testing.T, want, other *endpointProxy, size int, what string) {
	t.Helper()
	if n := other.folderUploaded.Load(); n != 0 {
		t.Fatalf("%s: %d bytes uploaded through the other endpoint; want none", what, n)
	}
	if n := want.folderUploaded.Load(); n != int64(size) {
		t.Fatalf("%s: %d bytes uploaded, want the disk's %d", what, n, size)
	}
}

// TestRestoreUploadsToTheHost: a restore through vCenter sends the disk to
// the /folder service of the host the new VM is registered on, in a PUT
// that carries a one-time ticket vCenter issued for exactly that PUT;
// vCenter's /folder is sent nothing, and the task log names the route.
func TestRestoreUploadsToTheHost(t *testing.T) {
	l := startHostLab(t, 8<<20)
	c := l.connect(t, nil)
	r := newRepo(t)
	snap, _, err := backupLab(t, l, r, c)
	if err != nil {
		t.Fatal(err)
	}
	vcBefore, hostBefore := l.vc.folderRequests.Load(), l.host.used
	nv, err := restoreLab(t, r, c, snap, "vm-0000-restored")
	if err != nil {
		t.Fatal(err)
	}
	l.logRoutes(t, "restore, read-from: host, tickets")
	checkUploads(t, l.host, l.vc, len(l.data), "restore")
	if n := l.vc.folderRequests.Load(); n != vcBefore {
		t.Fatalf("vCenter's /folder had %d requests during the restore", n-vcBefore)
	}
	if !bytes.Equal(l.restoredFlat(t, nv), l.data) {
		t.Fatal("the restored disk differs from the backed-up one")
	}
	if l.host.refused.Load() != 0 || l.host.used != hostBefore+1 {
		t.Fatalf("host: %d uploads with a valid unused ticket, %d refused", l.host.used-hostBefore, l.host.refused.Load())
	}
	if len(nv.notes) != 1 || !strings.Contains(nv.notes[0], "written to ESXi host "+l.hostName) ||
		!strings.Contains(nv.notes[0], "service tickets") || len(nv.warnings) != 0 {
		t.Fatalf("notes %q, warnings %q", nv.notes, nv.warnings)
	}

	// Onto the powered-off original: its disk is uploaded to its host.
	ctx := context.Background()
	task, err := object.NewVirtualMachine(l.s.client, l.vm).PowerOff(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.flatOnDisk, bytes.Repeat([]byte{0xde}, len(l.data)), 0o600); err != nil {
		t.Fatal(err)
	}
	var cfg hypervisor.VMConfig
	if err := json.Unmarshal(snap.VMConfig, &cfg); err != nil {
		t.Fatal(err)
	}
	orig, err := c.CreateVM(ctx, cfg, hypervisor.NewVMOptions{ReplaceExisting: true})
	if err != nil {
		t.Fatal(err)
	}
	src, err := restore.OpenDisk(ctx, r, snap.Disks[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := orig.WriteDisk(ctx, snap.Disks[0].Key, src); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(l.flatOnDisk)
	if err != nil || !bytes.Equal(got, l.data) {
		t.Fatalf("the original's disk does not hold the backed-up bytes (%v)", err)
	}
	checkUploads(t, l.host, l.vc, 2*len(l.data), "restore onto the original")
	if n := orig.(*newVM).notes; len(n) != 1 || !strings.Contains(n[0], "written to ESXi host "+l.hostName) {
		t.Fatalf("onto the original: notes %q", n)
	}
}

// TestRestoreRefusedByTheHost: a host that refuses the upload's ticket
// fails the restore with host-only, saying why, and leaves neither the
// new VM nor its files; with read-from: host the disk goes through
// vCenter instead, with a warning that names the refusal. A vCenter that
// will not issue the ticket is the same.
func TestRestoreRefusedByTheHost(t *testing.T) {
	l := startHostLab(t, 4<<20)
	r := newRepo(t)
	snap, _, err := backupLab(t, l, r, l.connect(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	l.host.refusePutTickets.Store(true)

	strict := l.connect(t, func(c *Config) { c.ReadFrom = ReadFromHostOnly })
	_, err = restoreLab(t, r, strict, snap, "strict")
	if err == nil || !strings.Contains(err.Error(), "host-only") || !strings.Contains(err.Error(), "401") {
		t.Fatalf("host-only, ticket refused: %v", err)
	}
	t.Logf("host-only, ticket refused: %v", err)
	l.goneWithoutTrace(t, strict, "strict")
	if n := l.vc.folderUploaded.Load(); n != 0 {
		t.Fatalf("host-only sent %d bytes through vCenter", n)
	}

	c := l.connect(t, nil)
	nv, err := restoreLab(t, r, c, snap, "fallback")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(l.restoredFlat(t, nv), l.data) {
		t.Fatal("the restored disk differs")
	}
	checkUploads(t, l.vc, l.host, len(l.data), "fallback") // refused PUTs never reach the host
	if len(nv.warnings) != 1 || !strings.Contains(nv.warnings[0], "written through vCenter, not to its ESXi host") || !strings.Contains(nv.warnings[0], "401") {
		t.Fatalf("warnings %q", nv.warnings)
	}
	if len(nv.notes) != 1 || !strings.Contains(nv.notes[0], "the host could not be used") {
		t.Fatalf("notes %q", nv.notes)
	}
	// vCenter issues no upload ticket; the host would take one.
	l.host.refusePutTickets.Store(false)
	l.vc.denyPutTickets.Store(true)
	vcUploaded, hostRequests := l.vc.folderUploaded.Load(), l.host.folderRequests.Load()
	strict = l.connect(t, func(c *Config) { c.ReadFrom = ReadFromHostOnly })
	_, err = restoreLab(t, r, strict, snap, "denied")
	if err == nil || !strings.Contains(err.Error(), "host-only") || !strings.Contains(err.Error(), "no service ticket for httpPut") ||
		!strings.Contains(err.Error(), "Permission") {
		t.Fatalf("host-only, no ticket from vCenter: %v", err)
	}
	t.Logf("host-only, no ticket: %v", err)
	l.goneWithoutTrace(t, strict, "denied")
	if l.vc.folderUploaded.Load() != vcUploaded || l.host.folderRequests.Load() != hostRequests {
		t.Fatal("the restore without a ticket sent something")
	}
}
