package guestvm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/qmp"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestGuestBootsAndWrites boots the workload guest, lets it write, then
// checks the disk image offline after a clean shutdown.
func TestGuestBootsAndWrites(t *testing.T) {
	testutil.RequireBinary(t, "qemu-system-x86_64")
	qemuImg := testutil.RequireBinary(t, "qemu-img")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	img, err := Build(ctx)
	if err != nil {
		if err == ErrNoAssets && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	dir := t.TempDir()
	disk := filepath.Join(dir, "vda.qcow2")
	if out, err := exec.Command(qemuImg, "create", "-q", "-f", "qcow2", disk, "32M").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	vm, err := Start(ctx, img, Options{Name: "t1", Dir: dir, Mode: "write", Base: 32, Interval: 20 * time.Millisecond,
		Disks: []Disk{{ID: "vda", Path: disk, Format: "qcow2"}}, GuestAgent: true})
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Kill()
	if _, err := vm.WaitConsole(ctx, "COFFER READY"); err != nil {
		t.Fatalf("%v\n%s", err, vm.Console())
	}
	ga, err := qmp.DialGuestAgent(ctx, vm.QGAPath)
	if err != nil {
		t.Fatalf("guest agent: %v\n%s", err, vm.Console())
	}
	st, err := ga.FreezeStatus(ctx)
	ga.Close()
	if err != nil || st != "thawed" {
		t.Fatalf("fsfreeze status %q %v", st, err)
	}
	c, err := qmp.Dial(ctx, vm.TestQMP)
	if err != nil {
		t.Fatal(err)
	}
	c.Execute(ctx, "quit", nil, nil)
	<-vm.Exited()
	raw := filepath.Join(dir, "vda.raw")
	if out, err := exec.Command(qemuImg, "convert", "-O", "raw", disk, raw).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	f, _ := os.Open(raw)
	defer f.Close()
	fi, _ := f.Stat()
	rep, err := CheckDisk(f, fi.Size())
	if err != nil || rep.Base != 32 {
		t.Fatalf("check: %+v %v", rep, err)
	}
	t.Logf("guest disk: %+v", rep)
}
