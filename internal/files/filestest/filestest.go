// Package filestest builds real filesystem images for the tests of
// single-file access (internal/files, and `coffer files` in internal/cli):
// source trees with the cases that must come back right, and images made
// from them by the filesystems' own tools (mkfs.ext4 -d, mkfs.xfs, mtools,
// ntfs-3g) or, where only a kernel writes the on-disk form, by the kernel.
package filestest

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/testutil"
)

// File is one entry of a source tree.
type File struct {
	Path string // relative, slash-separated
	Data []byte // nil for directories, symlinks and FIFOs
	Mode os.FileMode
	Link string // symlink target
	Dir  bool
	FIFO bool
}

// Time is the mtime of every file and directory of a source tree.
var Time = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

// SourceTree writes a tree with the cases single-file restore must get
// right: nesting, empty and multi-MiB files, odd modes, symlinks, and
// non-ASCII names. flat puts only regular files, all at the top level.
func SourceTree(t testing.TB, flat bool) (string, []File) {
	big := make([]byte, 3<<20+17)
	_, _ = rand.Read(big)
	files := []File{
		{Path: "hello.txt", Data: []byte("hello from inside the image\n"), Mode: 0o644},
		{Path: "empty", Data: []byte{}, Mode: 0o600},
		{Path: "big.bin", Data: big, Mode: 0o640},
		{Path: "run.sh", Data: []byte("#!/bin/sh\necho hi\n"), Mode: 0o755},
		{Path: "résumé-日本.txt", Data: []byte("unicode names\n"), Mode: 0o644},
	}
	if !flat {
		files = append(files,
			File{Path: "etc", Dir: true, Mode: 0o755},
			File{Path: "etc/app", Dir: true, Mode: 0o750},
			File{Path: "etc/app/config.yaml", Data: []byte("key: value\n"), Mode: 0o600},
			File{Path: "etc/motd", Data: []byte(strings.Repeat("welcome\n", 1000)), Mode: 0o644},
			File{Path: "home", Dir: true, Mode: 0o755},
			File{Path: "home/deep", Dir: true, Mode: 0o700},
			File{Path: "home/deep/notes.txt", Data: []byte("deep\n"), Mode: 0o644},
			File{Path: "link-to-motd", Link: "etc/motd"},
			File{Path: "abs-link", Link: "/etc/app/config.yaml"},
		)
	}
	return Tree(t, files), files
}

// Tree writes files into a new directory and returns it. Directories
// must come before their contents. hello.txt and etc/app get owners of
// their own when running as root (the owner checks look for them).
func Tree(t testing.TB, files []File) string {
	dir := t.TempDir()
	Write(t, dir, files)
	return dir
}

// Write creates files under dir, times last.
func Write(t testing.TB, dir string, files []File) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		var err error
		switch {
		case f.Dir:
			if err = os.MkdirAll(p, f.Mode); err == nil {
				err = os.Chmod(p, f.Mode)
			}
		case f.Link != "":
			err = os.Symlink(f.Link, p)
		case f.FIFO:
			err = syscall.Mkfifo(p, uint32(f.Mode.Perm()))
		default:
			if err = os.WriteFile(p, f.Data, f.Mode); err == nil {
				err = os.Chmod(p, f.Mode)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 && (f.Path == "hello.txt" || f.Path == "etc/app") {
			uid, gid := Owner(f.Path)
			_ = os.Lchown(p, uid, gid)
		}
	}
	// Deepest first, so creating children does not reset a parent's time.
	for i := len(files) - 1; i >= 0; i-- {
		if files[i].Link == "" {
			_ = os.Chtimes(filepath.Join(dir, filepath.FromSlash(files[i].Path)), Time, Time)
		}
	}
}

// Owner is the uid and gid a source tree gives a path (0 for most).
func Owner(path string) (uid, gid int) {
	switch path {
	case "hello.txt":
		return 1234, 5678
	case "etc/app":
		return 42, 43
	}
	return 0, 0
}

// Run runs a tool and fails the test with its output if it fails.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	testutil.RequireBinary(t, name)
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// SparseFile creates a file of size bytes that takes no space.
func SparseFile(t testing.TB, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// Ext4 builds an ext4 filesystem image from a tree (mkfs.ext4 -d; it
// copies FIFOs and device nodes too).
func Ext4(t testing.TB, tree string, sizeMiB int) string {
	img := filepath.Join(t.TempDir(), "ext4.img")
	Run(t, "mkfs.ext4", "-q", "-F", "-d", tree, img, fmt.Sprintf("%dM", sizeMiB))
	return img
}

// FAT builds a FAT32 image and copies the tree in with mtools (FAT has no
// symlinks or special files: those are left out).
func FAT(t testing.TB, tree string) string {
	img := filepath.Join(t.TempDir(), "fat.img")
	SparseFile(t, img, 64<<20)
	Run(t, "mkfs.vfat", "-F", "32", img)
	entries, _ := os.ReadDir(tree)
	for _, e := range entries {
		if !e.Type().IsRegular() && !e.IsDir() {
			continue
		}
		Run(t, "mcopy", "-s", "-m", "-i", img, filepath.Join(tree, e.Name()), "::")
	}
	return img
}

// NTFS builds an NTFS image holding the directories and regular files of
// a tree, with their times (NTFS keeps no POSIX modes or owners here,
// and the tree's symlinks and FIFOs are left out). ntfscp copies files
// only, so the image is mounted with ntfs-3g (FUSE, as root) to make
// directories too: the same driver that writes NTFS on Linux hosts.
func NTFS(t testing.TB, tree string, files []File) string {
	img := filepath.Join(t.TempDir(), "ntfs.img")
	SparseFile(t, img, 64<<20)
	Run(t, "mkntfs", "-q", "-F", "-f", img)
	mnt := t.TempDir()
	Run(t, "ntfs-3g", img, mnt)
	mounted := true
	t.Cleanup(func() {
		if mounted {
			_ = exec.Command("umount", mnt).Run()
		}
	})
	var kept []File
	for _, f := range files {
		if f.Dir || f.Link == "" && !f.FIFO {
			kept = append(kept, File{Path: f.Path, Data: f.Data, Dir: f.Dir, Mode: f.Mode})
		}
	}
	Write(t, mnt, kept)
	Run(t, "umount", mnt) // ntfs-3g writes everything out before it lets go
	mounted = false
	return img
}

// Partitioned assembles a whole-disk image with a GPT (or MBR) table and
// the given filesystem images at 1 MiB-aligned partitions.
func Partitioned(t testing.TB, gpt bool, parts ...string) string {
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
	SparseFile(t, disk, total)
	if gpt {
		args := []string{"-o"}
		for i, sz := range sizes {
			args = append(args, "-n", fmt.Sprintf("%d:0:+%dM", i+1, sz>>20))
		}
		Run(t, "sgdisk", append(args, disk)...) // no -q: it silently writes nothing here
	} else {
		var script strings.Builder
		script.WriteString("label: dos\n")
		start := int64(2048)
		for _, sz := range sizes {
			fmt.Fprintf(&script, "start=%d, size=%d, type=83\n", start, sz/512)
			start += sz / 512
		}
		testutil.RequireBinary(t, "sfdisk")
		cmd := exec.Command("sfdisk", "-q", disk)
		cmd.Stdin = strings.NewReader(script.String())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sfdisk: %v %s", err, out)
		}
	}
	off := int64(1 << 20)
	for i, p := range parts {
		Run(t, "dd", "if="+p, "of="+disk, "bs=1M", fmt.Sprintf("seek=%d", off>>20), "conv=notrunc,sparse", "status=none")
		off += sizes[i]
	}
	return disk
}
