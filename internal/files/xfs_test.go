package files

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/files/filestest"
)

// symlinkLengths cover targets in the inode (up to 336 bytes with 512-byte
// inodes), just past it, across a 1 KiB block's payload (968 bytes after
// the 56-byte header) and the maximum, 1023 bytes.
var symlinkLengths = []int{1, 60, 336, 337, 600, 968, 969, 1023}

func symlinkFiles() []filestest.File {
	files := []filestest.File{{Path: "links", Dir: true, Mode: 0o755}}
	for _, n := range symlinkLengths {
		files = append(files, filestest.File{Path: fmt.Sprintf("links/len-%04d", n), Link: filestest.SymlinkTarget(n)})
	}
	return files
}

// TestXFSSymlinkForms reads symlinks written by the kernel's XFS driver in
// both forms, in the inode ("local") and in blocks with the v5 header
// ("remote", two blocks for long targets with 1 KiB blocks), then damages
// one remote block and expects that symlink, and only it, to be skipped.
func TestXFSSymlinkForms(t *testing.T) {
	for _, bs := range []int{1024, 4096} {
		t.Run(fmt.Sprint(bs), func(t *testing.T) {
			files := symlinkFiles()
			img := filestest.XFSByKernel(t, bs, files)
			// xfs_db (xfsprogs) tells which form each symlink took, so the
			// test knows it covers both and the multi-block case.
			local := filestest.Run(t, "xfs_db", "-r", "-c", "path /links/len-0336", "-c", "print core.format", img)
			remote := filestest.Run(t, "xfs_db", "-r", "-c", "path /links/len-0337", "-c", "print core.format", img)
			if !strings.Contains(local, "(local)") || !strings.Contains(remote, "(extents)") {
				t.Fatalf("symlink forms: 336 bytes %q, 337 bytes %q", local, remote)
			}
			longest := filestest.XFSBlocks(t, img, "/links/len-1023")
			if bs == 1024 && longest[0][1] < 2048 {
				t.Fatalf("a 1023-byte target in 1 KiB blocks should take two: %v", longest)
			}
			r, size := throughRepository(t, img)
			d, err := Open(r, size)
			if err != nil {
				t.Fatal(err)
			}
			root, err := d.Root()
			if err != nil {
				t.Fatal(err)
			}
			checkTree(t, root, "", files, keeps{links: true, dirs: true})
			out := t.TempDir()
			st, err := Extract(context.Background(), root, []string{"/links"}, out)
			if err != nil || st.Links != len(symlinkLengths) || len(st.Skipped) != 0 {
				t.Fatalf("extract: %+v %v", st, err)
			}
			for _, n := range symlinkLengths {
				if got, err := os.Readlink(filepath.Join(out, "links", fmt.Sprintf("len-%04d", n))); err != nil || got != filestest.SymlinkTarget(n) {
					t.Errorf("extracted %d-byte symlink: %d bytes, %v", n, len(got), err)
				}
			}
			if w := d.Warnings(); len(w) != 0 {
				t.Errorf("warnings: %v", w)
			}

			// One flipped byte in the 600-byte target's block.
			raw, err := os.ReadFile(img)
			if err != nil {
				t.Fatal(err)
			}
			raw[filestest.XFSBlocks(t, img, "/links/len-0600")[0][0]+100] ^= 0x20
			damaged := filepath.Join(t.TempDir(), "damaged.img")
			if err := os.WriteFile(damaged, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			r, size = throughRepository(t, damaged)
			d, _ = Open(r, size)
			root, err = d.Root()
			if err != nil {
				t.Fatal(err)
			}
			st, err = Extract(context.Background(), root, []string{"/links"}, t.TempDir())
			if err != nil || st.Links != len(symlinkLengths)-1 || len(st.Skipped) != 1 ||
				st.Skipped[0].Path != "/links/len-0600" || !strings.Contains(st.Skipped[0].Reason, "checksum") {
				t.Fatalf("extract with a damaged symlink block: %+v %v", st, err)
			}
		})
	}
}
