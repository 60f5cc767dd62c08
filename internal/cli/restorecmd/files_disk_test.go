package restorecmd_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/files/filestest"
)

// spaced is a tree under /top whose names have spaces: every volume of the
// multi-partition disk below carries it.
var spaced = []filestest.File{
	{Path: "top", Dir: true, Mode: 0o755},
	{Path: "top/a dir", Dir: true, Mode: 0o755},
	{Path: "top/a dir/sibling.txt", Data: []byte("next to the sub dir\n"), Mode: 0o644},
	{Path: "top/a dir/sub dir", Dir: true, Mode: 0o750},
	{Path: "top/a dir/sub dir/deep file.txt", Data: []byte("deep, with spaces\n"), Mode: 0o600},
}

var symlinkLengths = []int{5, 336, 337, 800, 1023}

// multiPartitionDisk builds a GPT disk with ext4 (1), XFS (2), FAT32 (3)
// and NTFS (4). ext4 also holds three FIFOs under /pipes; XFS, made by the
// kernel, holds symlinks in both forms under /links and two long symlinks
// under /damaged whose blocks are then damaged, and /odd/file, whose inode
// is given a format no reader knows.
func multiPartitionDisk(t *testing.T) string {
	ext4Tree, _ := filestest.SourceTree(t, false)
	filestest.Write(t, ext4Tree, append(spaced,
		filestest.File{Path: "pipes", Dir: true, Mode: 0o755},
		filestest.File{Path: "pipes/p1", FIFO: true, Mode: 0o644},
		filestest.File{Path: "pipes/p2", FIFO: true, Mode: 0o644},
		filestest.File{Path: "pipes/p3", FIFO: true, Mode: 0o644},
	))
	xfsFiles := append([]filestest.File{}, spaced...)
	xfsFiles = append(xfsFiles, filestest.File{Path: "links", Dir: true, Mode: 0o755}, filestest.File{Path: "damaged", Dir: true, Mode: 0o755})
	for _, n := range symlinkLengths {
		xfsFiles = append(xfsFiles, filestest.File{Path: fmt.Sprintf("links/len-%d", n), Link: filestest.SymlinkTarget(n)})
	}
	xfsFiles = append(xfsFiles,
		filestest.File{Path: "damaged/one", Link: filestest.SymlinkTarget(900)},
		filestest.File{Path: "damaged/two", Link: filestest.SymlinkTarget(1000)},
		filestest.File{Path: "odd", Dir: true, Mode: 0o755},
		filestest.File{Path: "odd/file", Data: []byte("x"), Mode: 0o644},
		filestest.File{Path: "odd/dir", Dir: true, Mode: 0o755},
		filestest.File{Path: "odd/dir/inside", Data: []byte("y"), Mode: 0o644})
	xfsImg := filestest.XFSByKernel(t, 1024, xfsFiles)
	// An inode format the XFS library only logs a warning about, each time
	// it parses the inode (xfs_db writes it with a valid checksum), for a
	// file and a directory.
	for _, p := range []string{"/odd/file", "/odd/dir"} {
		filestest.Run(t, "xfs_db", "-x", "-c", "path "+p, "-c", "write core.format 4", xfsImg)
	}
	raw, err := os.ReadFile(xfsImg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/damaged/one", "/damaged/two"} {
		raw[filestest.XFSBlocks(t, xfsImg, p)[0][0]+200] ^= 0x01
	}
	if err := os.WriteFile(xfsImg, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	flat, flatFiles := filestest.SourceTree(t, true)
	withSpace := filestest.File{Path: "with space.txt", Data: []byte("ntfs, spaced\n"), Mode: 0o644}
	filestest.Write(t, flat, []filestest.File{withSpace})
	return filestest.Partitioned(t, true,
		filestest.Ext4(t, ext4Tree, 32),
		xfsImg,
		filestest.FAT(t, filestest.Tree(t, spaced)),
		filestest.NTFS(t, flat, append(flatFiles, withSpace)))
}

// TestFilesMultiPartitionDisk runs `coffer files` on a backed-up GPT disk
// with four filesystems: paths below a volume (with spaces) work for ls,
// get and find alike; XFS symlinks come back in both forms; what cannot be
// extracted is listed, each reason once, with exit code 6.
func TestFilesMultiPartitionDisk(t *testing.T) {
	e := clitest.NewEnv(t)
	img := multiPartitionDisk(t)
	e.Must("init")
	e.Must("backup", "disk", img, "--name", "gpt")
	if out := e.Must("files", "ls", "latest", "/"); out != "1\n2\n3\n4\n" {
		t.Fatalf("ls /: %q", out)
	}
	for _, vol := range []string{"1", "2", "3"} {
		t.Run("volume "+vol, func(t *testing.T) {
			dir := "/" + vol + "/top/a dir"
			if out := e.Must("files", "ls", "latest", dir); out != "sibling.txt\nsub dir\n" {
				t.Fatalf("ls %s: %q", dir, out)
			}
			dst := filepath.Join(e.Dir, "file"+vol)
			e.Must("files", "get", "latest", dir+"/sibling.txt", "--to", dst)
			wantFile(t, filepath.Join(dst, "sibling.txt"), "next to the sub dir\n")
			dst = filepath.Join(e.Dir, "tree"+vol)
			e.Must("files", "get", "latest", dir, "--to", dst)
			wantFile(t, filepath.Join(dst, "a dir", "sibling.txt"), "next to the sub dir\n")
			wantFile(t, filepath.Join(dst, "a dir", "sub dir", "deep file.txt"), "deep, with spaces\n")
			found := strings.Split(strings.TrimSpace(e.Must("files", "find", "latest", "*", "--under", "/"+vol+"/top")), "\n")
			sort.Strings(found)
			want := []string{"/" + vol + "/top", dir, dir + "/sibling.txt", dir + "/sub dir", dir + "/sub dir/deep file.txt"}
			if strings.Join(found, "|") != strings.Join(want, "|") {
				t.Fatalf("find under /%s/top: %q, want %q", vol, found, want)
			}
		})
	}
	dst := filepath.Join(e.Dir, "ntfs")
	e.Must("files", "get", "latest", "/4/with space.txt", "/4/hello.txt", "--to", dst)
	wantFile(t, filepath.Join(dst, "with space.txt"), "ntfs, spaced\n")
	wantFile(t, filepath.Join(dst, "hello.txt"), "hello from inside the image\n")

	t.Run("xfs symlinks", func(t *testing.T) {
		dst := filepath.Join(e.Dir, "links")
		e.Must("files", "get", "latest", "/2/links", "--to", dst)
		for _, n := range symlinkLengths {
			got, err := os.Readlink(filepath.Join(dst, "links", fmt.Sprintf("len-%d", n)))
			if err != nil || got != filestest.SymlinkTarget(n) {
				t.Errorf("%d-byte symlink came back as %d bytes, %v", n, len(got), err)
			}
		}
	})
	t.Run("skips", func(t *testing.T) {
		out := e.Expect(command.ExitPartial, "files", "get", "latest", "/2/damaged", "/1/pipes", "/1/hello.txt", "--to", filepath.Join(e.Dir, "skips"))
		wantFile(t, filepath.Join(e.Dir, "skips", "hello.txt"), "hello from inside the image\n")
		for _, want := range []string{
			"extracted 1 file(s), 2 dir(s), 0 link(s)",
			"skipped 5 entries:\n",
			"  symlink target unreadable: symlink block fails its checksum (2 entries):\n    /2/damaged/one\n    /2/damaged/two\n",
			"  named pipe (FIFO): not extracted (3 entries):\n    /1/pipes/p1\n    /1/pipes/p2\n    /1/pipes/p3\n",
			"coffer: 5 entries skipped (listed above); everything else was extracted\n",
		} {
			if strings.Count(out, want) != 1 {
				t.Errorf("output has %q %d times, want once:\n%s", want, strings.Count(out, want), out)
			}
		}
		if n := strings.Count(out, "checksum"); n != 1 {
			t.Errorf("the checksum warning is printed %d times:\n%s", n, out)
		}
		out = e.Expect(command.ExitPartial, "files", "get", "latest", "/1/pipes", "--to", filepath.Join(e.Dir, "skips-json"), "--json")
		var res struct {
			Files    int
			Skipped  []struct{ Path, Reason string }
			Warnings []any
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("--json: %v\n%s", err, out)
		}
		if len(res.Skipped) != 3 || res.Skipped[0].Path != "/1/pipes/p1" || res.Skipped[0].Reason != "named pipe (FIFO): not extracted" || res.Warnings == nil {
			t.Fatalf("--json: %+v", res)
		}
		// The library's warning about /odd/file's inode comes up each time
		// it parses the inode: printed once, with its count.
		out = e.Expect(command.ExitPartial, "files", "get", "latest", "/2/odd", "--to", filepath.Join(e.Dir, "odd"))
		if n := strings.Count(out, "XFS_DINODE_FMT_UUID"); n != 1 || !regexp.MustCompile(`warning: xfs: not support XFS_DINODE_FMT_UUID \([2-9]\d* times\)\n`).MatchString(out) ||
			!strings.Contains(out, "skipped 2 entries:\n") || !strings.Contains(out, "  unreadable: XFS inode with its data in a form this reader does not know (damaged?) (1 entry):\n    /2/odd/file\n") ||
			!regexp.MustCompile(`\n  cannot list directory: [^\n]*\(1 entry\):\n    /2/odd/dir\n`).MatchString(out) {
			t.Errorf("the library's warning should come once with its count, and the file and directory be skipped:\n%s", out)
		}
		// find goes past the directory it cannot list, and says so.
		code, found, errOut := e.Run("files", "find", "latest", "*", "--under", "/2/odd")
		if code != command.ExitPartial || found != "/2/odd\n/2/odd/dir\n/2/odd/file\n" || !strings.Contains(errOut, "    /2/odd/dir\n") ||
			!strings.Contains(errOut, "coffer: 1 entry skipped (listed above); everything else was searched") {
			t.Errorf("find under /2/odd: exit %d\n%s%s", code, found, errOut)
		}
		out = e.Expect(command.ExitPartial, "files", "find", "latest", "*", "--under", "/2/odd", "--json")
		var findRes struct {
			Entries  []struct{ Path string }
			Skipped  []struct{ Path, Reason string }
			Warnings []struct {
				Message string
				Count   int
			}
		}
		if err := json.Unmarshal([]byte(out), &findRes); err != nil || len(findRes.Entries) != 3 || len(findRes.Skipped) != 1 ||
			findRes.Skipped[0].Path != "/2/odd/dir" || len(findRes.Warnings) != 1 || findRes.Warnings[0].Count < 2 {
			t.Errorf("find --json: %+v %v\n%s", findRes, err, out)
		}
		// ls shows a symlink whose target is unreadable, and why.
		if out := e.Must("files", "ls", "-l", "latest", "/2/damaged"); !strings.Contains(out, "one -> ? (symlink target unreadable: symlink block fails its checksum)") {
			t.Errorf("ls -l /2/damaged:\n%s", out)
		}
		// A zip skips the same entries the same way.
		out = e.Expect(command.ExitPartial, "files", "get", "latest", "/2/damaged", "--zip", filepath.Join(e.Dir, "damaged.zip"))
		if !strings.Contains(out, "/2/damaged/two") {
			t.Fatalf("zip: %s", out)
		}
	})
}

func wantFile(t *testing.T, path, content string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || string(got) != content {
		t.Errorf("%s: %q, %v; want %q", path, got, err, content)
	}
}
