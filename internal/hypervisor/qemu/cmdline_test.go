package qemu

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// A libvirt-style command line (JSON -blockdev), a -drive disk, a NIC with
// a MAC, an fd-passed chardev and coffer's own monitor.
func TestRelaunchArgs(t *testing.T) {
	native, _ := json.Marshal(nativeConfig{
		CmdLine: []string{"/nonexistent/qemu-system-x86_64", "-name", "guest=web-1,debug-threads=on", "-uuid", "6b1d3c0e-0000-4000-8000-000000000001",
			"-daemonize", "-pidfile", "/run/libvirt/web-1.pid", "-m", "2048",
			"-blockdev", `{"driver":"file","filename":"/vm/web-1.qcow2","node-name":"libvirt-1-storage","auto-read-only":true}`,
			"-blockdev", `{"node-name":"libvirt-1-format","read-only":false,"driver":"qcow2","file":"libvirt-1-storage","l2-cache-size":1048576}`,
			"-device", "virtio-blk-pci,drive=libvirt-1-format,id=virtio-disk0",
			"-drive", "file=/vm/data,,1.raw,format=raw,if=virtio,id=data",
			"-add-fd", "set=3,fd=41",
			"-netdev", "tap,fd=30,id=hostnet0", "-device", "virtio-net-pci,netdev=hostnet0,id=net0,mac=52:54:00:12:34:56",
			"-netdev", `{"type":"tap","fd":"31","vhost":true,"vhostfd":"32","id":"hostnet1"}`, "-device", "virtio-net-pci,netdev=hostnet1,id=net1",
			"-netdev", "user,id=usernet",
			"-chardev", "socket,id=charmonitor,fd=27,server=on,wait=off", "-mon", "chardev=charmonitor,id=monitor,mode=control",
			"-serial", "stdio", "-no-reboot"},
		Disks: []blockDisk{{ID: "virtio-disk0", Node: "libvirt-1-format", Format: "qcow2", File: "/vm/web-1.qcow2"},
			{ID: "data", Node: "#block123", Format: "raw", File: "/vm/data,1.raw"}},
	})
	spec := LaunchSpec{Dir: "/r", Name: "web-1-restored", UUID: "new-uuid", StopOnError: true, NewMAC: func() string { return "02:00:00:00:00:01" },
		Disks: map[string]LaunchDisk{"virtio-disk0": {Path: "/r/virtio-disk0.raw", Format: "raw"}, "data": {Path: "/r/data.qcow2", Format: "qcow2"}}}
	rl, err := RelaunchArgs(native, spec)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rl.Args, " ")
	for _, want := range []string{
		"qemu-system-x86_64 -name web-1-restored -uuid new-uuid -m 2048",
		`"filename":"/r/virtio-disk0.raw"`,
		`"driver":"raw"`,
		"virtio-blk-pci,drive=libvirt-1-format,id=virtio-disk0,rerror=stop,werror=stop",
		"file=/r/data.qcow2,format=qcow2,if=virtio,id=data,rerror=stop,werror=stop",
		"mac=02:00:00:00:00:01",
		"socket,id=charmonitor,server=on,wait=off,path=/r/charmonitor.sock",
		"-serial file:/r/console.log",
		"-netdev user,id=hostnet0,restrict=on -device virtio-net-pci,netdev=hostnet0",
		"-netdev user,id=hostnet1,restrict=on -device virtio-net-pci,netdev=hostnet1,id=net1",
		"-netdev user,id=usernet",
		"-chardev socket,id=coffer-relaunch-mon,path=/r/qmp.sock,server=on,wait=off -mon chardev=coffer-relaunch-mon,mode=control -pidfile /r/qemu.pid -daemonize",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("relaunch lacks %q:\n%s", want, got)
		}
	}
	for _, gone := range []string{"/vm/web-1.qcow2", "/vm/data", "l2-cache-size", "/run/libvirt", "52:54:00:12:34:56", "fd=27",
		"fd=30", "vhostfd", "-add-fd", "tap"} {
		if strings.Contains(got, gone) {
			t.Errorf("relaunch still has %q:\n%s", gone, got)
		}
	}
	if len(rl.Warnings) != 2 || !strings.Contains(rl.Warnings[0], "hostnet0 (tap)") || !strings.Contains(rl.Warnings[1], "hostnet1 (tap)") {
		t.Errorf("warnings: %q", rl.Warnings)
	}
	if n := rl.Nodes["virtio-disk0"]; len(n) != 2 || n[0] != "libvirt-1-format" || n[1] != "libvirt-1-storage" {
		t.Errorf("nodes: %v", rl.Nodes)
	}
	if _, err := RelaunchArgs(native, LaunchSpec{Dir: "/r", Disks: map[string]LaunchDisk{"data": {}}}); err == nil {
		t.Error("a disk without a new file was accepted")
	}
	if _, err := RelaunchArgs([]byte(`{}`), spec); err == nil {
		t.Error("an empty recorded configuration was accepted")
	}
}

func FuzzParseOpts(f *testing.F) {
	f.Add("driver=file,filename=a,,b,node-name=x")
	f.Add("socket,id=m,fd=3")
	f.Fuzz(func(t *testing.T, s string) {
		o := parseOpts(s)
		if again := parseOpts(o.String()); again.String() != o.String() {
			t.Fatalf("not stable: %q -> %q -> %q", s, o.String(), again.String())
		}
	})
}

// A storage daemon's point has disks but no guest: restoring it as a VM is
// refused before any disk is written, with the way out in the message.
func TestStorageDaemonIsNotRelaunched(t *testing.T) {
	native, _ := json.Marshal(nativeConfig{
		CmdLine: []string{"/usr/bin/qemu-storage-daemon", "--blockdev", "driver=file,node-name=f0,filename=/d/db.qcow2",
			"--blockdev", "driver=qcow2,node-name=disk0,file=f0", "--export", "type=nbd,id=db,node-name=disk0,writable=on"},
		Disks: []blockDisk{{ID: "db", Node: "disk0", Format: "qcow2", File: "/d/db.qcow2"}},
	})
	err := Relaunchable(native)
	if !errors.Is(err, hypervisor.ErrUnsupported) || !strings.Contains(err.Error(), "coffer restore") {
		t.Fatalf("Relaunchable(storage daemon) = %v", err)
	}
	if _, err := RelaunchArgs(native, LaunchSpec{Disks: map[string]LaunchDisk{"db": {Path: "/r/db.raw", Format: "raw"}}}); err == nil {
		t.Fatal("RelaunchArgs relaunched a storage daemon")
	}
}
