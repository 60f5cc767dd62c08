package storagesnap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// A datastore too full for a snapshot: below min-free the snapshot is
// refused before anything is created; with the check off, the filesystem
// fills up while the snapshot is being made, and the partial snapshot and
// its journal are deleted with a clear reason. (A clone itself draws on
// the metadata reserve XFS and btrfs keep, and was seen to succeed on a
// full filesystem of either; what runs out is the first allocation of the
// snapshot, its probe file or directory, which is the path shown here.) Both refusals let a policy
// fall back to per-VM backups, production's disks are untouched, and once
// space is freed the next snapshot works.
func TestReflinkDatastoreTooFullForASnapshot(t *testing.T) {
	mnt := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	root := filepath.Join(mnt, "vms")
	state := t.TempDir()
	disks := datastore(t, root, 0x11)
	ctx := context.Background()
	nothingLeft := func(what, label string) {
		t.Helper()
		if _, err := os.Stat(filepath.Join(root, SnapDir, label)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: the snapshot directory is left: %v", what, err)
		}
		if _, err := os.Stat(journalPath(state, label)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: the journal is left: %v", what, err)
		}
	}

	// Below the default min-free (5%): refused, nothing created.
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		t.Fatal(err)
	}
	total, free := int64(st.Blocks)*st.Bsize, int64(st.Bavail)*st.Bsize
	filler := filepath.Join(mnt, "filler")
	allocate(t, filler, free-total*3/100)
	_, err := Create(ctx, reflinkProvider(), root, state, "coffer-job1-vms-1", disks)
	if !errors.Is(err, hypervisor.ErrStorageUnsupported) || !strings.Contains(err.Error(), "min-free 5% (the default)") {
		t.Fatalf("below min-free: %v, want a refusal naming min-free", err)
	}
	nothingLeft("below min-free", "coffer-job1-vms-1")

	// With the check off, the datastore fills up during the snapshot.
	p := reflinkProvider()
	p.MinFree = "0"
	fillUp(t, mnt)
	_, err = Create(ctx, p, root, state, "coffer-job1-vms-2", disks)
	if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, hypervisor.ErrStorageUnsupported) || !strings.Contains(err.Error(), "filled up") {
		t.Fatalf("full datastore: %v, want ENOSPC named as the datastore filling up", err)
	}
	t.Logf("full datastore: %v", err)
	nothingLeft("full datastore", "coffer-job1-vms-2")
	for _, d := range disks { // production's disks still hold their data
		if out := run(t, "qemu-io", "-f", d.Format, "-r", "-c", "read -P 0x11 0 1M", d.Path); strings.Contains(out, "Pattern verification failed") {
			t.Fatalf("%s changed: %s", d.Path, out)
		}
	}

	// Space freed: the next snapshot is taken and holds the disks.
	fillers, _ := filepath.Glob(filepath.Join(mnt, "fill*"))
	for _, f := range fillers {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	ss, err := Create(ctx, reflinkProvider(), root, state, "coffer-job1-vms-3", disks)
	if err != nil {
		t.Fatalf("after freeing space: %v", err)
	}
	for _, d := range disks {
		readsPattern(t, ss, d, 0x11)
	}
	if err := ss.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	nothingLeft("after delete", "coffer-job1-vms-3")
}

// allocate makes a file of n bytes of reserved space.
func allocate(t *testing.T, path string, n int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, n); err != nil {
		t.Fatalf("fallocate %d bytes: %v", n, err)
	}
}

// fillUp takes the filesystem's last free blocks: a file written until
// ENOSPC, then small files until not even one can be created.
func fillUp(t *testing.T, mnt string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(mnt, "fill-rest"), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for _, size := range []int{64 << 10, 4 << 10} {
		for {
			if _, err := f.Write(buf[:size]); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
		}
	}
	f.Close()
	for i := 0; ; i++ {
		err := os.WriteFile(filepath.Join(mnt, fmt.Sprintf("fill-%d", i)), buf[:4<<10], 0o600)
		if errors.Is(err, syscall.ENOSPC) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if i > 100_000 {
			t.Fatal("the filesystem never filled up")
		}
	}
}
