package filestest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/testutil"
)

// XFS builds an XFS image with a protofile (xfsprogs needs >= 300 MiB).
// A protofile cannot name files with spaces, and mkfs.xfs 6.1 writes
// symlink targets that do not fit in the inode without the v5 block
// header (a kernel refuses those): use XFSByKernel for either.
func XFS(t testing.TB, tree string, files []File) string {
	img := filepath.Join(t.TempDir(), "xfs.img")
	SparseFile(t, img, 320<<20)
	var proto strings.Builder
	proto.WriteString("/dev/null\n0 0\nd--755 0 0\n")
	depth := 0
	var stack []string
	for _, f := range files {
		parent := filepath.Dir(f.Path)
		for len(stack) > 0 && stack[len(stack)-1] != parent {
			proto.WriteString("$\n")
			stack = stack[:len(stack)-1]
			depth--
		}
		name := filepath.Base(f.Path)
		uid, gid := Owner(f.Path)
		switch {
		case f.Dir:
			fmt.Fprintf(&proto, "%s d--%o %d %d\n", name, f.Mode.Perm(), uid, gid)
			stack = append(stack, f.Path)
			depth++
		case f.Link != "":
			fmt.Fprintf(&proto, "%s l--777 %d %d %s\n", name, uid, gid, f.Link)
		case f.FIFO:
			fmt.Fprintf(&proto, "%s p--%o %d %d\n", name, f.Mode.Perm(), uid, gid)
		default:
			fmt.Fprintf(&proto, "%s ---%o %d %d %s\n", name, f.Mode.Perm(), uid, gid, filepath.Join(tree, filepath.FromSlash(f.Path)))
		}
	}
	for ; depth >= 0; depth-- {
		proto.WriteString("$\n")
	}
	pf := filepath.Join(t.TempDir(), "proto")
	if err := os.WriteFile(pf, []byte(proto.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	Run(t, "mkfs.xfs", "-q", "-f", "-p", pf, img)
	return img
}

// XFSByKernel makes an XFS image with mkfs.xfs (blockSize bytes a block)
// and fills it through the kernel's own XFS driver on a loop mount: the
// on-disk forms are those a guest writes (v5 remote symlink blocks with
// their header and CRC, names with spaces, FIFOs). Needs root, loop
// devices and XFS support in the kernel.
func XFSByKernel(t testing.TB, blockSize int, files []File) string {
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "mount")
	if fss, _ := os.ReadFile("/proc/filesystems"); !strings.Contains(string(fss), "\txfs\n") {
		if testutil.Strict() {
			t.Fatal("the kernel has no XFS driver (/proc/filesystems)")
		}
		t.Skip("the kernel has no XFS driver")
	}
	img := filepath.Join(t.TempDir(), "xfs.img")
	SparseFile(t, img, 320<<20)
	Run(t, "mkfs.xfs", "-q", "-f", "-b", "size="+strconv.Itoa(blockSize), img)
	mnt := t.TempDir()
	Run(t, "mount", "-o", "loop", img, mnt)
	mounted := true
	unmount := func() {
		if mounted {
			mounted = false
			if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
				t.Errorf("umount %s: %v %s", mnt, err, out)
			}
		}
	}
	t.Cleanup(unmount)
	Write(t, mnt, files)
	unmount() // writes everything back to the image
	return img
}

// XFSBlocks asks xfs_db where the data of path lives in an XFS image:
// the byte offset and length of each extent.
func XFSBlocks(t testing.TB, img, path string) [][2]int64 {
	t.Helper()
	geo := Run(t, "xfs_db", "-r", "-c", "sb 0", "-c", "print blocksize agblocks", img)
	var bs, agblocks int64
	for _, line := range strings.Split(geo, "\n") {
		if k, v, ok := strings.Cut(line, " = "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			switch strings.TrimSpace(k) {
			case "blocksize":
				bs = n
			case "agblocks":
				agblocks = n
			}
		}
	}
	out := Run(t, "xfs_db", "-r", "-c", "path "+path, "-c", "bmap", img)
	var extents [][2]int64
	for _, line := range strings.Split(out, "\n") {
		// data offset 0 startblock 30 (0/30) count 2 flag 0
		var off, start, ag, agbno, count, flag int64
		if n, _ := fmt.Sscanf(line, "data offset %d startblock %d (%d/%d) count %d flag %d", &off, &start, &ag, &agbno, &count, &flag); n == 6 {
			extents = append(extents, [2]int64{(ag*agblocks + agbno) * bs, count * bs})
		}
	}
	if bs == 0 || len(extents) == 0 {
		t.Fatalf("xfs_db found no blocks for %s:\n%s%s", path, geo, out)
	}
	return extents
}

// SymlinkTarget is a symlink target of n bytes in which every position
// differs from its neighbours', so a piece read from the wrong offset
// shows.
func SymlinkTarget(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "d%03d/", i%1000)
	}
	return b.String()[:n]
}
