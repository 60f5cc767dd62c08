package bootverify

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/vmconfig"
	"github.com/coffer-backup/coffer/internal/qmp"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// vsphereConfig is a recorded vSphere configuration with disks.
func vsphereConfig(firmware string, disks []vmconfig.Disk, nics ...string) hypervisor.VMConfig {
	native, _ := json.Marshal(vmconfig.Native{GuestID: "otherLinux64Guest", BIOSUUID: "42031a5e-7c3b-4d2e-9f10-0a1b2c3d4e5f", Disks: disks})
	cfg := hypervisor.VMConfig{Kind: "vsphere", Name: "app", CPUs: 2, MemoryMiB: 256, Firmware: firmware, Native: native}
	for _, n := range nics {
		cfg.NICs = append(cfg.NICs, hypervisor.NICConfig{Key: "4000", Model: n})
	}
	return cfg
}

// fullHost emulates every device the mapping uses, with OVMF.
func fullHost() hostQEMU {
	h := hostQEMU{devices: map[string]bool{}, efi: efiFirmware{code: "/fw/CODE.fd", vars: "/fw/VARS.fd"}, cpus: 2, memoryMB: 4096}
	for _, d := range []string{"pvscsi", "mptsas1068", "scsi-hd", "ahci", "ide-hd", "nvme", "nvme-ns", "vmxnet3", "e1000"} {
		h.devices[d] = true
	}
	return h
}

// TestPlanVSphereCannotVerify: each configuration local QEMU cannot boot
// as VMware does gets its reason, as a CannotVerifyError; an exec probe,
// which no vSphere point can answer, is a plain unsupported request.
func TestPlanVSphereCannotVerify(t *testing.T) {
	pv := []vmconfig.Disk{{Key: "2000", Controller: vmconfig.PVSCSI}}
	http := []Probe{{Kind: ProbeHTTP, Port: 80, Path: "/", Status: 200}}
	noOVMF := fullHost()
	noOVMF.efi = efiFirmware{}
	noPVSCSI := fullHost()
	delete(noPVSCSI.devices, "pvscsi")
	for _, c := range []struct {
		name   string
		cfg    hypervisor.VMConfig
		host   hostQEMU
		probes []Probe
		want   string
	}{
		{"lsilogic", vsphereConfig("bios", []vmconfig.Disk{{Key: "2000", Controller: vmconfig.LSILogic}}), fullHost(), nil, "LSI Logic Parallel"},
		{"buslogic data disk", vsphereConfig("bios", append(pv, vmconfig.Disk{Key: "2001", Controller: vmconfig.BusLogic, Bus: 1})), fullHost(), nil, "disk 2001 is on a BusLogic"},
		{"sata port 6", vsphereConfig("bios", []vmconfig.Disk{{Key: "16000", Controller: vmconfig.SATA, Unit: 6}}), fullHost(), nil, "ports 0 to 5"},
		{"ide 2:0", vsphereConfig("bios", []vmconfig.Disk{{Key: "3000", Controller: vmconfig.IDE, Bus: 2}}), fullHost(), nil, "channels 0 and 1"},
		{"unknown controller", vsphereConfig("bios", []vmconfig.Disk{{Key: "9", Controller: "VirtualFancyController"}}), fullHost(), nil, `"VirtualFancyController"`},
		{"efi without ovmf", vsphereConfig("efi", pv), noOVMF, nil, "install the ovmf package"},
		{"efi from pvscsi", vsphereConfig("efi", pv), fullHost(), nil, "from disk 2000 on a VMware Paravirtual SCSI controller"},
		{"efi from lsi sas", vsphereConfig("efi", []vmconfig.Disk{{Key: "2000", Controller: vmconfig.LSILogicSAS}}), fullHost(), nil, "LSI Logic SAS controller"},
		{"qemu lacks pvscsi", vsphereConfig("bios", pv), noPVSCSI, nil, "lacks the pvscsi device"},
		{"older point", vsphereConfig("bios", nil), fullHost(), nil, "back the VM up again"},
		{"probe without nic", vsphereConfig("bios", pv), fullHost(), http, "no network adapter"},
		{"probe on vmxnet2", vsphereConfig("bios", pv, "VirtualVmxnet2"), fullHost(), http, "none of its adapters (VirtualVmxnet2)"},
	} {
		_, err := planVSphere(c.cfg, c.host, c.probes)
		var cv *CannotVerifyError
		if !errors.As(err, &cv) || !strings.Contains(cv.Reason, c.want) || !strings.HasPrefix(err.Error(), "cannot verify locally: ") {
			t.Errorf("%s: %v, want cannot verify locally: ...%s...", c.name, err, c.want)
		}
	}
	_, err := planVSphere(vsphereConfig("bios", pv, "VirtualVmxnet3"), fullHost(), []Probe{{Kind: ProbeExec, Command: []string{"true"}}})
	var cv *CannotVerifyError
	if errors.As(err, &cv) || !errors.Is(err, hypervisor.ErrUnsupported) || !strings.Contains(err.Error(), "VMware Tools") {
		t.Errorf("exec probe: %v", err)
	}
}

// TestPlanVSphereWithinHost: CPUs and memory as recorded, within what the
// host has, said in the evidence; the first adapter QEMU emulates carries
// the probes; the recorded boot disk gets bootindex 0.
func TestPlanVSphereWithinHost(t *testing.T) {
	cfg := vsphereConfig("bios", []vmconfig.Disk{{Key: "2000", Controller: vmconfig.PVSCSI}, {Key: "2001", Controller: vmconfig.PVSCSI, Unit: 1}},
		"VirtualVmxnet2", "VirtualE1000")
	cfg.CPUs, cfg.MemoryMiB = 16, 65536
	native, _ := json.Marshal(vmconfig.Native{Disks: []vmconfig.Disk{{Key: "2000", Controller: vmconfig.PVSCSI},
		{Key: "2001", Controller: vmconfig.PVSCSI, Unit: 1}}, BootDisk: "2001"})
	cfg.Native = native
	m, err := planVSphere(cfg, fullHost(), []Probe{{Kind: ProbeTCP, Port: 22}})
	if err != nil {
		t.Fatal(err)
	}
	if m.cpus != 2 || m.memoryMB != 2048 || m.nic != "e1000" || m.bootDisk != "2001" ||
		!strings.Contains(m.evidence["cpus"], "recorded 16") || !strings.Contains(m.evidence["memory_mib"], "recorded 65536") {
		t.Fatalf("plan: %+v", m)
	}
	dir := t.TempDir()
	args, err := m.args(qemu.LaunchSpec{Dir: dir, Name: "x", Disks: map[string]qemu.LaunchDisk{
		"2000": {Path: filepath.Join(dir, "a.qcow2"), Format: "qcow2"}, "2001": {Path: filepath.Join(dir, "b.qcow2"), Format: "qcow2"}}})
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(args, " ")
	if strings.Count(line, "pvscsi,id=") != 1 || !strings.Contains(line, "scsi-id=1,lun=0,drive=coffer-disk-2001,bootindex=0") ||
		strings.Contains(line, "coffer-disk-2000,bootindex") {
		t.Fatalf("command line: %s", line)
	}
}

// TestVSphereMachinesStart: the command line of every controller QEMU
// can present as VMware does, and of EFI when this host has OVMF, is one
// this host's QEMU starts, with each disk attached to a device.
func TestVSphereMachinesStart(t *testing.T) {
	testutil.RequireBinary(t, qemuBinary)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := probeHost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	disks := []vmconfig.Disk{
		{Key: "2000", Controller: vmconfig.PVSCSI}, {Key: "2001", Controller: vmconfig.PVSCSI, Unit: 3},
		{Key: "1000", Controller: vmconfig.LSILogicSAS, Bus: 1, Unit: 2},
		{Key: "16000", Controller: vmconfig.SATA, Unit: 5},
		{Key: "3001", Controller: vmconfig.IDE, Bus: 1, Unit: 1},
		{Key: "31000", Controller: vmconfig.NVMe}, {Key: "31001", Controller: vmconfig.NVMe, Unit: 1},
	}
	firmwares := []string{"bios"}
	if h.efi.code != "" {
		firmwares = append(firmwares, "efi")
	} else {
		t.Log("no OVMF on this host: EFI is not started")
	}
	for _, fw := range firmwares {
		cfg := vsphereConfig(fw, disks, "VirtualVmxnet3")
		if fw == "efi" {
			// OVMF boots from NVMe, not from the SCSI controllers
			// (efiCanBootFrom); the SCSI disks stay as data disks.
			native, _ := json.Marshal(vmconfig.Native{Disks: disks, BootDisk: "31000"})
			cfg.Native = native
		}
		m, err := planVSphere(cfg, h, []Probe{{Kind: ProbeTCP, Port: 22}})
		if err != nil {
			t.Fatal(err)
		}
		dir, err := os.MkdirTemp("", "bv-") // short: QEMU's socket paths
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		spec := qemu.LaunchSpec{Dir: dir, Name: "coffer-bootverify-app", Disks: map[string]qemu.LaunchDisk{}}
		for _, d := range disks {
			p := filepath.Join(dir, d.Key+".raw")
			if err := os.WriteFile(p, make([]byte, 1<<20), 0o600); err != nil {
				t.Fatal(err)
			}
			spec.Disks[d.Key] = qemu.LaunchDisk{Path: p, Format: "raw"}
		}
		args, err := m.args(spec)
		if err != nil {
			t.Fatal(err)
		}
		port, err := qemu.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		iso := qemu.IsolateArgs(args, qemu.IsolateSpec{Forward: map[int]int{22: port}, NIC: m.nic})
		pid, err := qemu.Launch(ctx, iso.Args, spec)
		if err != nil {
			t.Fatalf("%s: %v\n%s", fw, err, strings.Join(iso.Args, " "))
		}
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
		cl, err := qmp.Dial(ctx, spec.QMPPath())
		if err != nil {
			t.Fatal(err)
		}
		var blocks []struct {
			Device string `json:"device"`
			QDev   string `json:"qdev"`
		}
		if err := cl.Execute(ctx, "query-block", nil, &blocks); err != nil {
			t.Fatal(err)
		}
		attached := map[string]bool{}
		for _, b := range blocks {
			attached[b.Device] = b.QDev != ""
		}
		for _, d := range disks {
			if !attached["coffer-disk-"+d.Key] {
				t.Errorf("%s: disk %s (%s) is not attached to a device: %+v", fw, d.Key, d.Controller, blocks)
			}
		}
		_ = cl.Execute(ctx, "quit", nil, nil)
		cl.Close()
	}
}
