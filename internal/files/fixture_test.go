package files

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/testutil"
)

// srcFile describes one file of the source tree the images are built from.
type srcFile struct {
	path string // relative, slash-separated
	data []byte // nil for directories and symlinks
	mode os.FileMode
	link string
	dir  bool
}

var fixtureTime = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

// sourceTree writes a tree with the cases single-file restore must get
// right: nesting, empty and multi-MiB files, odd modes, symlinks, and
// non-ASCII names. flat puts everything at the top level (ntfscp cannot
// create directories).
func sourceTree(t testing.TB, flat bool) (string, []srcFile) {
	dir := t.TempDir()
	big := make([]byte, 3<<20+17)
	_, _ = rand.Read(big)
	files := []srcFile{
		{path: "hello.txt", data: []byte("hello from inside the image\n"), mode: 0o644},
		{path: "empty", data: []byte{}, mode: 0o600},
		{path: "big.bin", data: big, mode: 0o640},
		{path: "run.sh", data: []byte("#!/bin/sh\necho hi\n"), mode: 0o755},
		{path: "résumé-日本.txt", data: []byte("unicode names\n"), mode: 0o644},
	}
	if !flat {
		files = append(files,
			srcFile{path: "etc", dir: true, mode: 0o755},
			srcFile{path: "etc/app", dir: true, mode: 0o750},
			srcFile{path: "etc/app/config.yaml", data: []byte("key: value\n"), mode: 0o600},
			srcFile{path: "etc/motd", data: []byte(strings.Repeat("welcome\n", 1000)), mode: 0o644},
			srcFile{path: "home", dir: true, mode: 0o755},
			srcFile{path: "home/deep", dir: true, mode: 0o700},
			srcFile{path: "home/deep/notes.txt", data: []byte("deep\n"), mode: 0o644},
			srcFile{path: "link-to-motd", link: "etc/motd"},
			srcFile{path: "abs-link", link: "/etc/app/config.yaml"},
		)
	}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.path))
		switch {
		case f.dir:
			if err := os.MkdirAll(p, f.mode); err != nil {
				t.Fatal(err)
			}
			_ = os.Chmod(p, f.mode)
		case f.link != "":
			if err := os.Symlink(f.link, p); err != nil {
				t.Fatal(err)
			}
		default:
			if err := os.WriteFile(p, f.data, f.mode); err != nil {
				t.Fatal(err)
			}
			_ = os.Chmod(p, f.mode)
		}
	}
	if os.Geteuid() == 0 {
		_ = os.Lchown(filepath.Join(dir, "hello.txt"), 1234, 5678)
		if !flat {
			_ = os.Lchown(filepath.Join(dir, "etc/app"), 42, 43)
		}
	}
	// Times last, deepest first, so creating children does not reset them.
	for i := len(files) - 1; i >= 0; i-- {
		if files[i].link == "" {
			_ = os.Chtimes(filepath.Join(dir, filepath.FromSlash(files[i].path)), fixtureTime, fixtureTime)
		}
	}
	return dir, files
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	testutil.RequireBinary(t, name)
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func sparseFile(t testing.TB, path string, size int64) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// makeExt4 builds an ext4 filesystem image from a tree (mkfs.ext4 -d).
func makeExt4(t testing.TB, tree string, sizeMiB int) string {
	img := filepath.Join(t.TempDir(), "ext4.img")
	run(t, "mkfs.ext4", "-q", "-F", "-d", tree, img, fmt.Sprintf("%dM", sizeMiB))
	return img
}

// makeXFS builds an XFS image with a protofile (xfsprogs needs >= 300 MiB).
func makeXFS(t testing.TB, tree string, files []srcFile) string {
	img := filepath.Join(t.TempDir(), "xfs.img")
	sparseFile(t, img, 320<<20)
	var proto strings.Builder
	proto.WriteString("/dev/null\n0 0\nd--755 0 0\n")
	depth := 0
	var stack []string
	for _, f := range files {
		parent := filepath.Dir(f.path)
		for len(stack) > 0 && stack[len(stack)-1] != parent {
			proto.WriteString("$\n")
			stack = stack[:len(stack)-1]
			depth--
		}
		name := filepath.Base(f.path)
		uid, gid := 0, 0
		if f.path == "hello.txt" {
			uid, gid = 1234, 5678
		}
		if f.path == "etc/app" {
			uid, gid = 42, 43
		}
		switch {
		case f.dir:
			fmt.Fprintf(&proto, "%s d--%o %d %d\n", name, f.mode.Perm(), uid, gid)
			stack = append(stack, f.path)
			depth++
		case f.link != "":
			fmt.Fprintf(&proto, "%s l--777 %d %d %s\n", name, uid, gid, f.link)
		default:
			fmt.Fprintf(&proto, "%s ---%o %d %d %s\n", name, f.mode.Perm(), uid, gid, filepath.Join(tree, filepath.FromSlash(f.path)))
		}
	}
	for ; depth >= 0; depth-- {
		proto.WriteString("$\n")
	}
	pf := filepath.Join(t.TempDir(), "proto")
	if err := os.WriteFile(pf, []byte(proto.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, "mkfs.xfs", "-q", "-f", "-p", pf, img)
	return img
}

// makeFAT builds a FAT32 image and copies the tree in with mtools.
func makeFAT(t testing.TB, tree string) string {
	img := filepath.Join(t.TempDir(), "fat.img")
	sparseFile(t, img, 64<<20)
	run(t, "mkfs.vfat", "-F", "32", img)
	entries, _ := os.ReadDir(tree)
	for _, e := range entries {
		if e.Type()&os.ModeSymlink != 0 {
			continue // FAT has no symlinks
		}
		run(t, "mcopy", "-s", "-m", "-i", img, filepath.Join(tree, e.Name()), "::")
	}
	return img
}

// makeNTFS builds an NTFS image and copies the (flat) tree in with ntfscp.
func makeNTFS(t testing.TB, tree string, files []srcFile) string {
	img := filepath.Join(t.TempDir(), "ntfs.img")
	sparseFile(t, img, 64<<20)
	run(t, "mkntfs", "-q", "-F", "-f", img)
	for _, f := range files {
		if f.dir || f.link != "" {
			continue
		}
		run(t, "ntfscp", "-q", img, filepath.Join(tree, f.path), f.path)
	}
	return img
}

// partitioned assembles a whole-disk image with a GPT (or MBR) table and
// the given filesystem images at 1 MiB-aligned partitions.
func partitioned(t testing.TB, gpt bool, parts ...string) string {
	disk := filepath.Join(t.TempDir(), "disk.img")
	var total int64 = 1 << 20
	var sizes []int64
	for _, p := range parts {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		sz := (fi.Size() + 1<<20 - 1) &^ (1<<20 - 1)
		sizes = append(sizes, sz)
		total += sz
	}
	total += 2 << 20 // backup GPT
	sparseFile(t, disk, total)
	if gpt {
		args := []string{"-o"}
		for i, sz := range sizes {
			args = append(args, "-n", fmt.Sprintf("%d:0:+%dM", i+1, sz>>20))
		}
		run(t, "sgdisk", append(args, disk)...) // no -q: it silently writes nothing here
	} else {
		var script strings.Builder
		script.WriteString("label: dos\n")
		start := int64(2048)
		for _, sz := range sizes {
			fmt.Fprintf(&script, "start=%d, size=%d, type=83\n", start, sz/512)
			start += sz / 512
		}
		cmd := exec.Command("sfdisk", "-q", disk)
		cmd.Stdin = strings.NewReader(script.String())
		testutil.RequireBinary(t, "sfdisk")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sfdisk: %v %s", err, out)
		}
	}
	off := int64(1 << 20)
	for i, p := range parts {
		run(t, "dd", "if="+p, "of="+disk, "bs=1M", fmt.Sprintf("seek=%d", off>>20), "conv=notrunc,sparse", "status=none")
		off += sizes[i]
	}
	return disk
}
