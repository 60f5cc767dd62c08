package backupcmd_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"
)

// backupVM runs `coffer backup vm` with args and returns its point.
func backupVM(e *clitest.Env, args ...string) api.BackupPoint {
	e.T.Helper()
	var p api.BackupPoint
	out := e.Must(append(append([]string{"backup", "vm"}, args...), "--json")...)
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		e.T.Fatalf("backup vm %v: %v\n%s", args, err, out)
	}
	return p
}

// restoreBytes restores the one disk of a point to a file and returns its
// bytes.
func restoreBytes(e *clitest.Env, point string) []byte {
	e.T.Helper()
	out := filepath.Join(e.Dir, "restored-"+point+".raw")
	e.Must("restore", point, "--to", out)
	b, err := os.ReadFile(out)
	if err != nil {
		e.T.Fatal(err)
	}
	return b
}

// TestBackupLibvirtVMByName backs up a writing guest of a private
// libvirtd by name with `coffer backup vm --connection`: a full, then an
// incremental from libvirt's checkpoints, each taken while the guest is
// suspended and restoring byte for byte to its disk at that instant; the
// checkpoints are the chain of backups taken now (backup-vm@default), and
// a snapshot mode libvirt cannot take is refused with why.
func TestBackupLibvirtVMByName(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	g := clitest.StartLibvirtGuest(t, ctx)
	at := g.Wait("COFFER READY", 0)
	e := clitest.NewEnv(t)
	e.Must("init")
	e.Config(fmt.Sprintf(`
state-dir: %s
connections:
  - name: lv
    kind: libvirt
    options: {uri: "%s", state-dir: %s}
`, filepath.Join(e.Dir, "state"), g.D.URI, filepath.Join(g.D.Dir, "st")))
	backUp := func(truth string, args ...string) (api.BackupPoint, []byte) {
		t.Helper()
		g.Virsh("suspend", "web-1")
		defer g.Virsh("resume", "web-1")
		want := g.Image(t, filepath.Join(e.Dir, truth))
		return backupVM(e, append([]string{"--connection", "lv", "web-1"}, args...)...), want
	}
	full, want1 := backUp("truth-1.raw", "--mode", "full")
	if full.VM != "web-1" || full.Mode != "full" || full.Connection != "lv" {
		t.Fatalf("full: %+v", full)
	}
	g.Wait("COFFER WROTE", at)
	inc, want2 := backUp("truth-2.raw")
	if inc.Mode != "incremental" || inc.Parent != full.ID || inc.ReadBytes >= full.ReadBytes {
		t.Fatalf("incremental %+v after full %+v", inc, full)
	}
	if got := restoreBytes(e, full.ID); !bytes.Equal(got, want1) {
		t.Fatal("the full differs from the disk at its instant")
	}
	if got := restoreBytes(e, inc.ID); !bytes.Equal(got, want2) {
		t.Fatal("the incremental differs from the disk at its instant")
	}
	cps := strings.Fields(g.Virsh("checkpoint-list", "--name", "web-1"))
	for _, c := range cps {
		if !strings.HasPrefix(c, "coffer-backup_vm_default.") {
			t.Errorf("checkpoint %s is not of the chain of backups taken now", c)
		}
	}
	if len(cps) != 2 { // the full anchor and the latest incremental
		t.Fatalf("checkpoints %v", cps)
	}
	if out := e.Expect(command.ExitUsage, "backup", "vm", "--connection", "lv", "web-1", "--snapshot-mode", "with-memory"); !strings.Contains(out, "saves no memory state") {
		t.Fatalf("with-memory on libvirt: %s", out)
	}
}

// TestBackupVSphereVMByName backs up one VM of a vCenter simulator by name
// and then by ID through `coffer backup vm --connection`, while another VM
// is left alone: each point restores to the disk's bytes at its backup,
// and each is a job of kind backup-vm. vcsim has no changed block
// tracking, so both read the whole disk here; the incremental from CBT is
// TestBackupVMByNameThroughTheService's (internal/hypervisor/vsphere,
// whose shim stands in for ESXi's).
func TestBackupVSphereVMByName(t *testing.T) {
	srv := vclab.Start(t, 1, 1)
	lab := clitest.NewVCLab(t, srv)
	vm := lab.VMs[0]
	disk := lab.Disk(vm.Name)
	want1 := make([]byte, disk.Size)
	rand.Read(want1[:300<<10])
	lab.WriteFlat(disk, want1)
	e := clitest.NewEnv(t)
	e.Must("init")
	e.Config(lab.Connections(e))
	first := backupVM(e, "--connection", "vc", vm.Name, "--tag", "why=upgrade")
	if first.VM != vm.Name || first.Connection != "vc" || first.Mode != "full" || first.Tags["why"] != "upgrade" || first.Tags["policy"] != "" {
		t.Fatalf("first point %+v", first)
	}
	want2 := append([]byte(nil), want1...)
	copy(want2[1<<20:], bytes.Repeat([]byte("changed "), 4096))
	lab.WriteFlat(disk, want2)
	second := backupVM(e, "--connection", "vc", vm.Self.Value)
	if second.VM != vm.Name {
		t.Fatalf("second point %+v", second)
	}
	if got := restoreBytes(e, first.ID); !bytes.Equal(got, want1) {
		t.Fatal("the first point differs from the disk at its backup")
	}
	if got := restoreBytes(e, second.ID); !bytes.Equal(got, want2) {
		t.Fatal("the second point differs from the disk at its backup")
	}
	var points []api.BackupPoint
	if err := json.Unmarshal([]byte(e.Must("snapshots", "--json")), &points); err != nil || len(points) != 2 {
		t.Fatalf("points %+v %v", points, err)
	}
	var jobs []api.Job
	if err := json.Unmarshal([]byte(e.Must("jobs", "--json", "--kind", "backup-vm")), &jobs); err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].Status != "success" || jobs[1].Status != "success" || jobs[0].VM != vm.Name {
		t.Fatalf("jobs %+v: want 2 successful backup-vm jobs of %s", jobs, vm.Name)
	}
}

// TestBackupVMRefusesWhatItCannotFind: an unknown VM or connection is
// "not found" and says where to look; a VM named ambiguously is a usage
// error that says how to name it.
func TestBackupVMRefusesWhatItCannotFind(t *testing.T) {
	srv := vclab.Start(t, 1, 1)
	lab := clitest.NewVCLab(t, srv)
	e := clitest.NewEnv(t)
	e.Must("init")
	e.Config(lab.Connections(e))
	for _, c := range []struct {
		code int
		args []string
		want string
	}{
		{command.ExitNoRepo, []string{"--connection", "vc", "no-such-vm"}, `connection vc has no VM named or identified "no-such-vm" (` + "`coffer vms`"},
		{command.ExitNoRepo, []string{"--connection", "vx", "app-01"}, `no connection named "vx" in the configuration (it has vc)`},
		{command.ExitUsage, []string{"app-01"}, "coffer backup vm --connection NAME app-01"},
		{command.ExitUsage, []string{"--connection", "vc"}, "coffer backup vm --connection vc VM"},
		{command.ExitUsage, []string{"--connection", "vc", "app-01", "web-1"}, "one VM per backup"},
		{command.ExitUsage, []string{"--connection", "vc", "app-01", "--nbd-connections", "2"}, "options.nbd-connections"},
		{command.ExitUsage, []string{"--connection", "vc", "app-01", "--mode", "sometimes"}, "--mode must be full, incremental or differential"},
	} {
		if out := e.Expect(c.code, append([]string{"backup", "vm"}, c.args...)...); !strings.Contains(out, c.want) {
			t.Errorf("backup vm %v: want %q in\n%s", c.args, c.want, out)
		}
	}
	// A QMP socket is not a VM of a connection.
	sock := filepath.Join(e.Dir, "vm.qmp")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if out := e.Expect(command.ExitUsage, "backup", "vm", "--connection", "vc", sock); !strings.Contains(out, "drop --connection") {
		t.Errorf("a socket with --connection: %s", out)
	}
	if out := e.Must("snapshots"); strings.Contains(out, "app-01") {
		t.Fatalf("a refused backup left a point:\n%s", out)
	}
}
