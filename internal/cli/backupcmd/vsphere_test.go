package backupcmd_test

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmware/govmomi/vim25/soap"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"
)

// TestVSphereConnection lists the VMs of an in-process vCenter simulator
// through a `kind: vsphere` connection: TLS verified by a pinned
// thumbprint, the password read from a file; a wrong thumbprint is refused.
func TestVSphereConnection(t *testing.T) {
	srv := vclab.Start(t, 2, 3)

	e := clitest.NewEnv(t)
	pw := filepath.Join(e.Dir, "vc.password")
	os.WriteFile(pw, []byte("s3cret\n"), 0o600)
	sdk := url.URL{Scheme: srv.URL.Scheme, Host: srv.URL.Host, Path: srv.URL.Path}
	conf := func(thumb string) string {
		return fmt.Sprintf("connections:\n  - name: vc\n    kind: vsphere\n    options: {url: %q, user: coffer, password-file: %q, thumbprint: %q}\n",
			sdk.String(), pw, thumb)
	}
	e.Config(conf(soap.ThumbprintSHA256(srv.Certificate())))
	vms := clitest.VMsJSON(t, e)
	if len(vms) != 3 {
		t.Fatalf("%d VMs: %+v", len(vms), vms)
	}
	for _, vm := range vms {
		if vm.Connection != "vc" || vm.Host == "" || len(vm.Datastores) != 1 || vm.ProvisionedBytes == 0 {
			t.Fatalf("vm %+v", vm)
		}
	}
	// A wrong thumbprint fails the listing: the VMs of the last one are
	// shown, with the error.
	e.Config(conf(strings.Repeat("AB:", 31) + "AB"))
	out := e.Expect(command.ExitPartial, "vms")
	if !strings.Contains(out, "thumbprint") {
		t.Fatalf("wrong thumbprint: %s", out)
	}
	for _, vm := range vms {
		if !strings.Contains(out, vm.VM) {
			t.Fatalf("the last listing's %s is not shown after a failed one:\n%s", vm.VM, out)
		}
	}
}

// TestVSphereRestoreVM backs up a vCenter simulator's VM with `coffer run`
// through a `kind: vsphere` connection, restores the point as a new VM
// with `coffer restore vm --connection`, and reads the new VM's disk back
// from the datastore: byte-identical. Restoring onto the original needs
// the confirmation flag, is refused while the VM runs, and once it is
// powered off puts the backed-up bytes back over damaged ones.
func TestVSphereRestoreVM(t *testing.T) {
	srv := vclab.Start(t, 1, 1)
	lab := clitest.NewVCLab(t, srv)
	vm := lab.VMs[0]
	orig := lab.Disk(vm.Name)
	want := make([]byte, orig.Size)
	rand.Read(want[:256<<10])
	copy(want[orig.Size-100<<10:], bytes.Repeat([]byte("end of disk "), 8000))
	lab.WriteFlat(orig, want)

	e := clitest.NewEnv(t)
	e.Must("init")
	lab.BackUp(e, vm.Name, "")

	res := lab.RestoreLatest(e)
	if res.VM != vm.Name+"-restored" || len(res.Disks) != 1 || res.Started {
		t.Fatalf("restore: %+v", res)
	}
	if got := lab.ReadFlat(lab.Disk(res.VM)); !bytes.Equal(got, want) {
		t.Fatal("the new VM's disk differs from the original's at backup time")
	}
	// The restore's log names the route of the disk's bytes: the
	// simulator's host has no address coffer can reach, so vCenter's
	// datastore service, and the result warns of the detour.
	if j := e.JobOf("restore-vm"); !clitest.LogHas(j, "written through vCenter's datastore service (the host could not be used)") {
		t.Errorf("the restore's log does not name the route: %+v", j.Events)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "written through vCenter, not to its ESXi host") {
		t.Errorf("restore warnings %q", res.Warnings)
	}
	if out := e.Expect(command.ExitFailure, "restore", "vm", "latest", "--connection", "vc"); !strings.Contains(out, "exists") {
		t.Fatalf("second restore under the same name: %s", out)
	}
	if out := e.Expect(command.ExitFailure, "restore", "vm", "latest", "--connection", "vc", "--name", "never-started", "--resume"); !strings.Contains(out, "no broken restore") {
		t.Fatalf("--resume of a restore that never ran: %s", out)
	}

	damaged := bytes.Repeat([]byte{0xde}, int(orig.Size))
	lab.WriteFlat(orig, damaged)
	if out := e.Expect(command.ExitUsage, "restore", "vm", "latest", "--connection", "vc", "--onto-original"); !strings.Contains(out, "--yes-overwrite-original") {
		t.Fatalf("onto the original without confirmation: %s", out)
	}
	lab.Power(vm, true)
	if out := e.Expect(command.ExitFailure, "restore", "vm", "latest", "--connection", "vc", "--onto-original", "--yes-overwrite-original"); !strings.Contains(out, "running") {
		t.Fatalf("onto the running original: %s", out)
	}
	if got := lab.ReadFlat(orig); !bytes.Equal(got, damaged) {
		t.Fatal("the running VM's disk was written")
	}
	lab.Power(vm, false)
	e.Must("restore", "vm", "latest", "--connection", "vc", "--onto-original", "--yes-overwrite-original")
	if got := lab.ReadFlat(orig); !bytes.Equal(got, want) {
		t.Fatal("the original's disk does not hold the backed-up bytes")
	}
}
