package replicacmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	hvall "github.com/coffer-backup/coffer/internal/hypervisor/all"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"
	"github.com/coffer-backup/coffer/internal/testutil/vcmover"
)

// withMover makes this process's vsphere connections to lab find the
// disks hot-added to the data mover mover as vcsim keeps them
// (vclab.MoverDevices): the configuration cannot name a device finder.
func withMover(t *testing.T, lab *vclab.Lab, mover string) {
	k, _ := hvall.Lookup("vsphere")
	t.Cleanup(func() { hvall.Register("vsphere", k) })
	test := k
	test.Open = func(ctx context.Context, cfg hvall.Config) (hypervisor.Connector, error) {
		return vsphere.New(ctx, vsphere.Config{URL: lab.SDK, User: "coffer", Password: vclab.Password, Thumbprint: lab.Thumbprint,
			StateDir: filepath.Join(cfg.StateDir, "vsphere", cfg.Name), TaskPoll: 20 * time.Millisecond, DataMoverVM: mover,
			MoverDevices: vcmover.MoverDevices{L: lab, Mover: mover}})
	}
	hvall.Register("vsphere", test)
}

// TestVSpherePlannedFailoverThenFailback runs a plan of one standby on a
// vSphere DR site (vcsim) through the command line. The source, running,
// writes a block after its last backup; `coffer failover planned`
// replicates that backup, powers the source off, brings the block onto
// the standby and starts it: the standby's disk is the source's as it
// stopped. The DR VM writes a block; `coffer failover failback` writes
// it, and only its 64 KiB, onto the original, which then equals the DR
// VM and runs, with the standby powered off. The run history shows the
// steps.
func TestVSpherePlannedFailoverThenFailback(t *testing.T) {
	srv := vclab.Start(t, 1, 0)
	lab := clitest.NewVCLab(t, srv)
	ctx := context.Background()
	const size = 4 << 20
	lab.CreateVMWith(ctx, vclab.VM{Name: "web-01", Controller: "pvscsi", DiskSize: size, NIC: "vmxnet3"})
	lab.CreateVMWith(ctx, vclab.VM{Name: "coffer-mover", Controller: "pvscsi", DiskSize: 1 << 20})
	withMover(t, lab.Lab, "coffer-mover")
	e := clitest.NewEnv(t)
	e.Must("init")
	conns := strings.Replace(lab.Connections(e), "thumbprint:", "data-mover-vm: coffer-mover, thumbprint:", 1)
	e.Config(conns + `replications:
  - {name: web-vs, vms: [web-01], connection: vc, storage: {LocalDS_0: LocalDS_0}, networks: {"VM Network": DC0_DVPG0}}
failover-plans:
  - {name: shop, replication: web-vs, groups: [{vms: [{name: web-01}]}]}
`)
	src := lab.Disk("web-01")
	img := bytes.Repeat([]byte{0xee}, size)
	lab.WriteFlat(src, img)
	e.Must("backup", "vm", "--connection", "vc", "web-01")
	vm := vmNamed(t, lab, "web-01")
	lab.Power(vm, true)
	copy(img[1<<20:], "written by the source after its last backup")
	lab.WriteFlat(src, img)

	var run api.FailoverRun
	if err := json.Unmarshal([]byte(e.Must("failover", "planned", "shop", "--json")), &run); err != nil || !run.Passed {
		t.Fatalf("planned failover: %+v %v", run, err)
	}
	var steps []string
	for _, s := range run.Steps {
		steps = append(steps, s.Name)
	}
	if got, want := strings.Join(steps, " "), "shutdown final-replication failover ready"; got != want {
		t.Fatalf("steps %q, want %q", got, want)
	}
	if st := vmNamed(t, lab, "web-01").Runtime.PowerState; st != types.VirtualMachinePowerStatePoweredOff {
		t.Fatalf("the source is %s", st)
	}
	standby := lab.Disk("web-01-standby")
	if !bytes.Equal(lab.ReadFlat(standby), img) {
		t.Fatal("the standby's disk is not the source's as it shut down")
	}

	dr := lab.ReadFlat(standby)
	copy(dr[3<<20:], "written at the DR site")
	lab.WriteFlat(standby, dr)
	if err := json.Unmarshal([]byte(e.Must("failover", "failback", "shop", "--json")), &run); err != nil || !run.Passed ||
		len(run.Failback) != 1 || run.Failback[0].BytesWritten != 64<<10 {
		t.Fatalf("failback: %+v %v", run, err)
	}
	if !bytes.Equal(lab.ReadFlat(src), dr) {
		t.Fatal("the original's disk differs from the DR VM's after the failback")
	}
	if st := vmNamed(t, lab, "web-01").Runtime.PowerState; st != types.VirtualMachinePowerStatePoweredOn {
		t.Fatalf("the original is %s after the failback", st)
	}
	if st := vmNamed(t, lab, "web-01-standby").Runtime.PowerState; st != types.VirtualMachinePowerStatePoweredOff {
		t.Fatalf("the standby is %s after the failback", st)
	}
	var runs api.FailoverPlanRuns
	if err := json.Unmarshal([]byte(e.Must("failover", "runs", "shop", "--json")), &runs); err != nil {
		t.Fatal(err)
	}
	if len(runs.Standbys) != 1 || runs.Standbys[0].FailedOver {
		t.Fatalf("standbys after the failback: %+v", runs.Standbys)
	}
	found := false
	for _, r := range runs.Runs {
		for _, s := range r.Steps {
			found = found || (r.Kind == "failback" && s.Name == "switch-back" && s.Error == "")
		}
	}
	if !found {
		t.Fatalf("no failback run with its switch-back step: %+v", runs.Runs)
	}
}

func vmNamed(t *testing.T, lab *clitest.VCLab, name string) mo.VirtualMachine {
	t.Helper()
	var vms []mo.VirtualMachine
	lab.Retrieve(context.Background(), "VirtualMachine", []string{"name", "runtime.powerState"}, &vms)
	for _, vm := range vms {
		if vm.Name == name {
			return vm
		}
	}
	t.Fatalf("no VM %s", name)
	return mo.VirtualMachine{}
}
