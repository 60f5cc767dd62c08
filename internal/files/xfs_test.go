package files

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
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

// patchedImage serves an image with some byte ranges replaced.
type patchedImage struct {
	base io.ReaderAt
	at   []int64
	bufs [][]byte
}

func (p patchedImage) ReadAt(b []byte, off int64) (int, error) {
	n, err := p.base.ReadAt(b, off)
	for i, buf := range p.bufs {
		from, to := max(off, p.at[i]), min(off+int64(n), p.at[i]+int64(len(buf)))
		if from < to {
			copy(b[from-off:to-off], buf[from-p.at[i]:to-p.at[i]])
		}
	}
	return n, err
}

// setXFSCRC stores the checksum xfsCRCOK checks.
func setXFSCRC(b []byte, off int) {
	binary.LittleEndian.PutUint32(b[off:], 0)
	binary.LittleEndian.PutUint32(b[off:], crc32.Checksum(b, castagnoli))
}

// FuzzXFSSymlink mutates the inode and the blocks of kernel-written
// remote symlinks: (offset, xor) pairs over the inode's bytes followed by
// the blocks' bytes. With the high bit of which set, the checksums are
// fixed up afterwards, so the mutations reach the parsing behind them.
// Unmutated, every target must come back exactly.
func FuzzXFSSymlink(f *testing.F) {
	files := symlinkFiles()
	img := filestest.XFSByKernel(f, 1024, files)
	type link struct {
		ino    uint64
		target string
		at     []int64 // inode, then extents
		sizes  []int64
	}
	var links []link
	file, err := os.Open(img)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { file.Close() })
	fi, _ := file.Stat()
	d, err := Open(file, fi.Size())
	if err != nil {
		f.Fatal(err)
	}
	root, err := d.Root()
	if err != nil {
		f.Fatal(err)
	}
	x := root.(guarded).fsys.(*xfsFS)
	for _, n := range symlinkLengths[3:] { // the remote ones
		p := fmt.Sprintf("/links/len-%04d", n)
		e, err := root.Stat(p)
		if err != nil || e.Link != filestest.SymlinkTarget(n) {
			f.Fatalf("%s: %+v %v", p, e, err)
		}
		off, err := x.symlinks.inodeOffset(e.Ino)
		if err != nil {
			f.Fatal(err)
		}
		l := link{ino: e.Ino, target: e.Link, at: []int64{off}, sizes: []int64{x.symlinks.inodeSize}}
		for _, ext := range filestest.XFSBlocks(f, img, p) {
			l.at, l.sizes = append(l.at, ext[0]), append(l.sizes, ext[1])
		}
		links = append(links, l)
	}
	f.Add(uint8(0), []byte{})
	f.Add(uint8(4), []byte{})
	f.Add(uint8(0x80), []byte{79, 0, 0, 0, 0x02})                         // extent count, checksum fixed
	f.Add(uint8(0x81), []byte{63, 0, 0, 0, 0x01})                         // size
	f.Add(uint8(0x82), []byte{176 + 15, 0, 0, 0, 0x03})                   // first extent's block count
	f.Add(uint8(0x83), []byte{176 + 9, 0, 0, 0, 0x40})                    // first extent's start block
	f.Add(uint8(0x84), []byte{0x0b, 0x02, 0, 0, 0x01})                    // the block's piece length (512+11)
	f.Add(uint8(0x04), []byte{0x00, 0x02, 0, 0, 0xff})                    // the block's magic, checksum left wrong
	f.Add(uint8(0x82), []byte{0x07, 0x02, 0, 0, 0x08, 82, 0, 0, 0, 0x20}) // piece offset, attribute fork offset
	f.Fuzz(func(t *testing.T, which uint8, muts []byte) {
		l := links[int(which&0x7f)%len(links)]
		p := patchedImage{base: x.symlinks.r, at: l.at}
		var total int64
		for i, at := range l.at {
			buf := make([]byte, l.sizes[i])
			if _, err := x.symlinks.r.ReadAt(buf, at); err != nil {
				t.Fatal(err)
			}
			p.bufs = append(p.bufs, buf)
			total += l.sizes[i]
		}
		for i := 0; i+5 <= len(muts) && i < 5*32; i += 5 {
			off := int64(binary.LittleEndian.Uint32(muts[i:])) % total
			for j := range p.bufs {
				if off < int64(len(p.bufs[j])) {
					p.bufs[j][off] ^= muts[i+4]
					break
				}
				off -= int64(len(p.bufs[j]))
			}
		}
		if which&0x80 != 0 {
			setXFSCRC(p.bufs[0], 100)
			for _, b := range p.bufs[1:] {
				setXFSCRC(b, 12)
			}
		}
		s := *x.symlinks
		s.r = p
		got, err := s.target(l.ino)
		if len(muts) == 0 && (err != nil || got != l.target) {
			t.Fatalf("unmutated %d-byte target: %d bytes, %v", len(l.target), len(got), err)
		}
		if err == nil && (len(got) == 0 || len(got) > 1024) {
			t.Fatalf("a %d-byte target", len(got))
		}
	})
}
