package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// MountLoopFS makes a filesystem of the given type (xfs, btrfs, ext4) in
// a sparse image of size bytes in a temporary directory of the test's
// own, loop-mounts it and returns the mount point. Cleanup unmounts it
// (mount -o loop sets autoclear, so the loop device goes with it) on
// every path. Skips (fails in CI) without root, loop devices, the
// kernel's driver or the mkfs program.
func MountLoopFS(t testing.TB, fstype string, size int64, mkfsArgs ...string) string {
	t.Helper()
	RequireRoot(t)
	mkfs := RequireBinary(t, "mkfs."+fstype)
	RequireBinary(t, "mount")
	if fss, _ := os.ReadFile("/proc/filesystems"); !strings.Contains(string(fss), "\t"+fstype+"\n") {
		if Strict() {
			t.Fatalf("the kernel has no %s driver (/proc/filesystems)", fstype)
		}
		t.Skipf("the kernel has no %s driver", fstype)
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		if Strict() {
			t.Fatal("no loop devices (/dev/loop-control)")
		}
		t.Skip("no loop devices")
	}
	dir := t.TempDir()
	img := filepath.Join(dir, fstype+".img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{}, mkfsArgs...), img)
	if out, err := exec.Command(mkfs, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v %s", mkfs, args, err, out)
	}
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount %s: %v %s", img, err, out)
	}
	// Registered after TempDir's, so it runs first: unmount, then remove.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			held := HoldersOf(mnt) // before the lazy unmount hides them
			// A lazy unmount still frees the image once the last user
			// (a killed test's qemu-nbd) is gone.
			_ = exec.Command("umount", "-l", mnt).Run() // the error below reports the failure
			t.Errorf("umount %s: %v %s; open under it: %s", mnt, err, out, strings.Join(held, "; "))
		}
	})
	return mnt
}
