package offload

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/testutil"
)

// sparseFile writes a 64 MiB file with data at 0 (8 MiB) and at 40 MiB
// (4 MiB), holes elsewhere: a restored disk's shape.
func sparseFile(t *testing.T, path string) []byte {
	t.Helper()
	want := make([]byte, 64<<20)
	_, _ = rand.Read(want[:8<<20])
	_, _ = rand.Read(want[40<<20 : 44<<20])
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(want[:8<<20], 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(want[40<<20:44<<20], 40<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(int64(len(want))); err != nil {
		t.Fatal(err)
	}
	return want
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

func allocated(t *testing.T, path string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

func sameAs(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from its source", path)
	}
}

// On a reflink filesystem the copy is a clone: the same bytes, and no
// new space taken (the extents are shared).
func TestCopyIsACloneOnAReflinkFilesystem(t *testing.T) {
	mnt := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	src := filepath.Join(mnt, "disk.raw")
	want := sparseFile(t, src)
	before := freeBytes(t, mnt)
	st, err := CopyFile(context.Background(), src, filepath.Join(mnt, "copy.raw"), CopyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Method != Cloned || !st.Method.Offloaded() || st.DataBytes != 12<<20 {
		t.Fatalf("stats %+v, want a clone of 12 MiB of data", st)
	}
	sameAs(t, filepath.Join(mnt, "copy.raw"), want)
	if took := before - freeBytes(t, mnt); took > 1<<20 {
		t.Fatalf("the clone took %d bytes of space: its extents are not shared", took)
	}

	// With the offload off, the same filesystem gets a real copy.
	before = freeBytes(t, mnt)
	st, err = CopyFile(context.Background(), src, filepath.Join(mnt, "copied.raw"), CopyOptions{NoOffload: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Method != Copied || st.DataBytes != 12<<20 {
		t.Fatalf("stats %+v without offload, want copied, 12 MiB of data", st)
	}
	sameAs(t, filepath.Join(mnt, "copied.raw"), want)
	if took := before - freeBytes(t, mnt); took < 12<<20 {
		t.Fatalf("a copy without offload took %d bytes of space, less than its 12 MiB of data", took)
	}
}

// Without reflinks the data extents are copied, in the kernel on one
// filesystem and by coffer across two, and the holes stay holes.
func TestCopyKeepsHolesWithoutReflinks(t *testing.T) {
	ext4 := testutil.MountLoopFS(t, "ext4", 256<<20)
	other := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=0")
	src := filepath.Join(ext4, "disk.raw")
	want := sparseFile(t, src)
	for _, c := range []struct {
		dst  string
		want Method
	}{
		{filepath.Join(ext4, "copy.raw"), KernelCopied},
		{filepath.Join(other, "copy.raw"), Copied},
	} {
		st, err := CopyFile(context.Background(), src, c.dst, CopyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if st.Method != c.want || st.Method.Offloaded() || st.DataBytes != 12<<20 {
			t.Fatalf("%s: stats %+v, want %s of 12 MiB", c.dst, st, c.want)
		}
		sameAs(t, c.dst, want)
		if a := allocated(t, c.dst); a > 13<<20 {
			t.Fatalf("%s: %d bytes allocated for 12 MiB of data: holes were filled", c.dst, a)
		}
	}
}

// eachWayOfBuilding runs f with copies built unnamed (O_TMPFILE) and, as
// on a filesystem without it, under a partial name.
func eachWayOfBuilding(t *testing.T, f func(t *testing.T)) {
	for _, named := range []bool{false, true} {
		t.Run(map[bool]string{false: "unnamed", true: "partial name"}[named], func(t *testing.T) {
			tmpfileUnsupported = named
			defer func() { tmpfileUnsupported = false }()
			f(t)
		})
	}
}

// A target that exists is refused without overwrite and left as it was;
// with overwrite it is replaced. Nothing else is left in the directory.
func TestCopyOntoAnExistingTarget(t *testing.T) {
	eachWayOfBuilding(t, func(t *testing.T) {
		dir := t.TempDir()
		src, dst := filepath.Join(dir, "disk.raw"), filepath.Join(dir, "copy.raw")
		want := sparseFile(t, src)
		if err := os.WriteFile(dst, []byte("keep me"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := CopyFile(context.Background(), src, dst, CopyOptions{}); !errors.Is(err, ErrTargetExists) {
			t.Fatalf("copy onto an existing file: %v, want ErrTargetExists", err)
		}
		sameAs(t, dst, []byte("keep me"))
		if _, err := CopyFile(context.Background(), src, dst, CopyOptions{Overwrite: true}); err != nil {
			t.Fatal(err)
		}
		sameAs(t, dst, want)
		other := filepath.Join(dir, "new.raw")
		if _, err := CopyFile(context.Background(), src, other, CopyOptions{}); err != nil {
			t.Fatal(err)
		}
		sameAs(t, other, want)
		if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) != 3 {
			t.Fatalf("files left: %v", names)
		}
	})
}

// A filesystem that fills up during the copy fails it with ENOSPC, and
// nothing is left: no target, no temporary file.
func TestCopyOntoAFullFilesystem(t *testing.T) {
	small := testutil.MountLoopFS(t, "ext4", 64<<20)
	src := filepath.Join(t.TempDir(), "disk.raw")
	sparseFile(t, src)
	// Leave 4 MiB free for 12 MiB of data.
	filler, err := os.Create(filepath.Join(small, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer filler.Close()
	if err := unix.Fallocate(int(filler.Fd()), 0, 0, freeBytes(t, small)-4<<20); err != nil {
		t.Fatal(err)
	}
	eachWayOfBuilding(t, func(t *testing.T) {
		_, err := CopyFile(context.Background(), src, filepath.Join(small, "copy.raw"), CopyOptions{})
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("copy of 12 MiB onto 4 MiB free: %v, want ENOSPC", err)
		}
		names, _ := filepath.Glob(filepath.Join(small, "*"))
		if len(names) != 2 { // filler and lost+found
			t.Fatalf("left on the full filesystem: %v", names)
		}
	})
}
