package vsphere

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/backup/backuptest"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
)

// TestMovedDiskReadInFull: after the disk's file moved (a storage
// vMotion, say), the previous changeId is not trusted: the next point is a
// full read with a warning, and it restores byte-identical.
func TestMovedDiskReadInFull(t *testing.T) {
	s, sh, c, r, ref, vm := oneVMLab(t, 2<<20)
	sh.write(t, ref, 0, 0, bytes.Repeat([]byte{7}, 64<<10))
	runBackup(t, r, c, vm)

	// Move the disk's files to another folder and point the VM at them.
	_, oldFlat := sh.diskFile(t, ref, 0)
	newDir := filepath.Join(filepath.Dir(filepath.Dir(oldFlat)), "moved")
	os.MkdirAll(newDir, 0o755)
	for _, f := range []string{oldFlat, strings.TrimSuffix(oldFlat, "-flat.vmdk") + ".vmdk"} {
		if err := os.Rename(f, filepath.Join(newDir, filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
	}
	v := sh.simVM(ref)
	s.model.Map().WithLock(s.model.Service.Context, v, func() {
		b := shimDisks(v.Config.Hardware.Device)[0].Backing.(*types.VirtualDiskFlatVer2BackingInfo)
		ds, _, _ := strings.Cut(strings.TrimPrefix(b.FileName, "["), "]")
		b.FileName = "[" + ds + "] moved/" + filepath.Base(strings.TrimSuffix(oldFlat, "-flat.vmdk")+".vmdk")
	})
	sh.write(t, ref, 0, 1<<20, bytes.Repeat([]byte{9}, 4096))
	want := sh.read(t, ref, 0)
	p := runBackup(t, r, c, vm)
	if p.Mode != "full" || !strings.Contains(strings.Join(p.Warnings, ";"), "disk moved") {
		t.Fatalf("after a move: mode %s, warnings %v", p.Mode, p.Warnings)
	}
	if !bytes.Equal(restoreBytes(t, r, p), want) {
		t.Fatal("the point after the move does not restore to the disk")
	}
}

// TestResizedDiskReadInFull: a disk grown since the last backup is read in
// full with a warning, and the point restores to the new size and bytes.
func TestResizedDiskReadInFull(t *testing.T) {
	s, sh, c, r, ref, vm := oneVMLab(t, 2<<20)
	sh.write(t, ref, 0, 0, bytes.Repeat([]byte{3}, 64<<10))
	runBackup(t, r, c, vm)

	const grown = 3 << 20
	_, flat := sh.diskFile(t, ref, 0)
	if err := os.Truncate(flat, grown); err != nil {
		t.Fatal(err)
	}
	v := sh.simVM(ref)
	s.model.Map().WithLock(s.model.Service.Context, v, func() {
		d := shimDisks(v.Config.Hardware.Device)[0]
		d.CapacityInKB, d.CapacityInBytes = grown/1024, grown
	})
	sh.write(t, ref, 0, grown-8192, bytes.Repeat([]byte{4}, 8192))
	want := sh.read(t, ref, 0)
	p := runBackup(t, r, c, vm)
	if p.Mode != "full" || !strings.Contains(strings.Join(p.Warnings, ";"), "resized") {
		t.Fatalf("after growing the disk: mode %s, warnings %v", p.Mode, p.Warnings)
	}
	if got := restoreBytes(t, r, p); len(got) != grown || !bytes.Equal(got, want) {
		t.Fatalf("the point after the resize restores %d bytes, not the disk's %d", len(got), len(want))
	}
}

// TestDifferential: a differential point asks CBT for the changes since
// the last full point's changeId (not the previous point's), and restores
// byte-identical.
func TestDifferential(t *testing.T) {
	_, sh, c, r, ref, vm := oneVMLab(t, 2<<20)
	backupMode := func(mode string) *repo.Point {
		p, err := backuptest.BackupVM(t, r, c, backup.VMRequest{Connection: "vc", VM: vm, Mode: mode,
			SnapshotMode: hypervisor.CrashConsistent})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	sh.write(t, ref, 0, 0, bytes.Repeat([]byte{1}, 64<<10))
	full := backupMode("full")
	sh.write(t, ref, 0, 256<<10, bytes.Repeat([]byte{2}, 4096))
	inc := backupMode("incremental")
	sh.write(t, ref, 0, 1<<20, bytes.Repeat([]byte{3}, 4096))
	want := sh.read(t, ref, 0)
	diff := backupMode("differential")
	if full.Mode != "full" || inc.Mode != "incremental" || diff.Mode != "differential" {
		t.Fatalf("modes %s %s %s", full.Mode, inc.Mode, diff.Mode)
	}
	// Both later writes, since the full: more than the incremental read.
	if diff.BytesRead < 2*4096 || diff.BytesRead <= inc.BytesRead {
		t.Fatalf("differential read %d bytes, incremental %d", diff.BytesRead, inc.BytesRead)
	}
	if !bytes.Equal(restoreBytes(t, r, diff), want) {
		t.Fatal("the differential point does not restore to the disk")
	}
}
