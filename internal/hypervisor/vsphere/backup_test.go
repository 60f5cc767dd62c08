package vsphere

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/backup/backuptest"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/vmware/govmomi/vim25/types"
)

func newRepo(t *testing.T) *repo.Repository { return repotest.New(t, repo.InitOptions{}) }

// oneVMLab starts a simulator with one VM (vm-0000, one disk of diskSize)
// behind the CBT shim, a connector that talks through the shim, and a
// repository: what the backup and change-tracking tests start from.
func oneVMLab(t *testing.T, diskSize int64) (*sim, *cbtShim, *Connector, *repo.Repository, types.ManagedObjectReference, hypervisor.VMRef) {
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 1, DiskSize: diskSize})
	sh := newCBTShim(t, s)
	ref := s.vms[0]
	return s, sh, sh.connect(t, nil), newRepo(t), ref, hypervisor.VMRef{ID: ref.Value, Name: "vm-0000"}
}

func runBackup(t *testing.T, r *repo.Repository, c hypervisor.Connector, vm hypervisor.VMRef) *repo.Point {
	t.Helper()
	return runBackupMode(t, r, c, vm, hypervisor.CrashConsistent)
}

// runBackupMode backs vm up with the given snapshot mode.
func runBackupMode(t *testing.T, r *repo.Repository, c hypervisor.Connector, vm hypervisor.VMRef, mode hypervisor.SnapshotMode) *repo.Point {
	t.Helper()
	snap, err := backuptest.BackupVM(t, r, c, backup.VMRequest{Connection: "vc", VM: vm,
		SnapshotMode: mode, Quiesce: hypervisor.QuiesceFallback})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func restoreBytes(t *testing.T, r *repo.Repository, s *repo.Point) []byte {
	t.Helper()
	if len(s.Disks) != 1 {
		t.Fatalf("%d disks in point", len(s.Disks))
	}
	return restoreDisk(t, r, s, s.Disks[0])
}

// restoreDisk writes one stream of a point (a disk or a memory state) to
// a file, as `coffer restore` does, and returns its bytes.
func restoreDisk(t *testing.T, r *repo.Repository, s *repo.Point, d repo.Disk) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "disk.raw")
	if _, err := restore.ToFile(context.Background(), r, s, d, out, restore.FileOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBackupFullIncrementalReset backs a VM up through the datastore HTTPS
// transport with CBT answered by the shim: a full, two incrementals, then a
// CBT reset forcing a full read with a warning. Every point restores to
// exactly the bytes the disk held at its snapshot.
func TestBackupFullIncrementalReset(t *testing.T) {
	s, sh, c, r, ref, vm := oneVMLab(t, 4<<20)
	pattern := func(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }

	sh.write(t, ref, 0, 0, pattern(300<<10, 0x11))
	sh.write(t, ref, 0, 3<<20, pattern(64<<10, 0x22))
	p1 := runBackup(t, r, c, vm)
	want1 := sh.read(t, ref, 0)
	if p1.Mode != "full" || p1.Disks[0].ChangeToken == "" {
		t.Fatalf("first point: mode %s token %q", p1.Mode, p1.Disks[0].ChangeToken)
	}
	// CBT was enabled by this backup; its changeId "*" query already
	// limits the full read to the allocated (written) areas.
	if p1.BytesRead >= 1<<20 {
		t.Fatalf("first point read %d bytes of a 4 MiB disk with 364 KiB written", p1.BytesRead)
	}

	sh.write(t, ref, 0, 100<<10, pattern(8<<10, 0x33))
	sh.write(t, ref, 0, 2<<20, pattern(4<<10, 0x44))
	sh.write(t, ref, 0, (4<<20)-512, pattern(512, 0x55)) // last sector
	q := sh.Queries()
	p2 := runBackup(t, r, c, vm)
	want2 := sh.read(t, ref, 0)
	if p2.Mode != "incremental" || sh.Queries() == q {
		t.Fatalf("second point: mode %s, %d CBT queries, warnings %v", p2.Mode, sh.Queries()-q, p2.Warnings)
	}

	sh.write(t, ref, 0, 1<<20, pattern(1<<10, 0x66))
	p3 := runBackup(t, r, c, vm)
	want3 := sh.read(t, ref, 0)
	if p3.Mode != "incremental" {
		t.Fatalf("third point: %s %v", p3.Mode, p3.Warnings)
	}

	sh.reset(t, ref, 0)
	sh.write(t, ref, 0, 5<<10, pattern(1<<10, 0x77))
	p4 := runBackup(t, r, c, vm)
	want4 := sh.read(t, ref, 0)
	if p4.Mode != "full" || !strings.Contains(strings.Join(p4.Warnings, ";"), "read in full") {
		t.Fatalf("after a CBT reset: mode %s warnings %v", p4.Mode, p4.Warnings)
	}

	for i, tc := range []struct {
		p    *repo.Point
		want []byte
	}{{p1, want1}, {p2, want2}, {p3, want3}, {p4, want4}} {
		if got := restoreBytes(t, r, tc.p); !bytes.Equal(got, tc.want) {
			t.Fatalf("point %d (%s) does not restore to the disk at its snapshot", i+1, tc.p.Mode)
		}
	}
	if len(s.snapshots(ref)) != 0 {
		t.Fatal("snapshots left on the VM")
	}
	t.Logf("4 points, %d QueryChangedDiskAreas calls answered by the shim", sh.Queries())
}
