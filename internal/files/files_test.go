package files

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/backup/backuptest"
	"github.com/coffer-backup/coffer/internal/files/filestest"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/restore"
)

// throughRepository backs an image up into a fresh repository and returns
// a random-access reader over the backup point's disk: file access is
// tested the way coffer uses it.
func throughRepository(t *testing.T, img string) (io.ReaderAt, int64) {
	t.Helper()
	ctx := context.Background()
	r := repotest.New(t, repo.InitOptions{})
	snap := backuptest.BackupImage(t, r, img, backup.Options{})
	dr, err := restore.OpenDisk(ctx, r, snap.Disks[0], 16)
	if err != nil {
		t.Fatal(err)
	}
	return dr, dr.Size()
}

// what a filesystem preserves, for comparisons.
type keeps struct {
	owner, mode, mtime, links, dirs bool
}

func checkTree(t *testing.T, fsys FS, prefix string, files []filestest.File, k keeps) {
	t.Helper()
	for _, f := range files {
		if f.Dir && !k.dirs || f.Link != "" && !k.links {
			continue
		}
		p := prefix + "/" + f.Path
		e, err := fsys.Stat(p)
		if err != nil {
			t.Errorf("stat %s: %v", p, err)
			continue
		}
		switch {
		case f.Dir:
			if !e.IsDir() {
				t.Errorf("%s: not a directory", p)
			}
		case f.Link != "":
			if e.Mode&fs.ModeSymlink == 0 || e.Link != f.Link {
				t.Errorf("%s: link %q mode %v, want -> %q", p, e.Link, e.Mode, f.Link)
			}
			continue
		default:
			rc, err := fsys.Open(p)
			if err != nil {
				t.Errorf("open %s: %v", p, err)
				continue
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, f.Data) || e.Size != int64(len(f.Data)) {
				t.Errorf("%s: %d bytes (size %d), err %v; want %d bytes", p, len(got), e.Size, err, len(f.Data))
			}
		}
		if k.mode && e.Mode.Perm() != f.Mode.Perm() {
			t.Errorf("%s: mode %v, want %v", p, e.Mode.Perm(), f.Mode.Perm())
		}
		if k.mtime && !f.Dir && !e.MTime.Equal(filestest.Time) {
			t.Errorf("%s: mtime %v, want %v", p, e.MTime, filestest.Time)
		}
		if k.owner && os.Geteuid() == 0 {
			if wantUID, _ := filestest.Owner(f.Path); e.UID != wantUID {
				t.Errorf("%s: uid %d, want %d", p, e.UID, wantUID)
			}
		}
	}
}

func TestExt4BareFilesystem(t *testing.T) {
	tree, files := filestest.SourceTree(t, false)
	r, size := throughRepository(t, filestest.Ext4(t, tree, 32))
	d, err := Open(r, size)
	if err != nil {
		t.Fatal(err)
	}
	if v := d.Volumes(); len(v) != 1 || v[0].Name != "0" || v[0].Type != TypeExt4 {
		t.Fatalf("volumes %+v", v)
	}
	root, err := d.Root()
	if err != nil {
		t.Fatal(err)
	}
	checkTree(t, root, "", files, keeps{owner: true, mode: true, mtime: true, links: true, dirs: true})
}

// spacedFiles have names with spaces (a protofile cannot name them, so
// they go to the ext4 and FAT volumes); FAT drops trailing spaces, ext4
// also gets names that begin and end with one.
var spacedFiles = []filestest.File{
	{Path: "a dir", Dir: true, Mode: 0o755},
	{Path: "a dir/sibling.txt", Data: []byte("sibling\n"), Mode: 0o644},
	{Path: "a dir/sub dir", Dir: true, Mode: 0o700},
	{Path: "a dir/sub dir/deep file.txt", Data: []byte("deep\n"), Mode: 0o600},
}

var edgeSpacedFiles = append([]filestest.File{
	{Path: " edge ", Dir: true, Mode: 0o755},
	{Path: " edge / file ", Data: []byte("edges\n"), Mode: 0o644},
}, spacedFiles...)

func TestGPTWithXFSFATNTFSAndExt4(t *testing.T) {
	tree, files := filestest.SourceTree(t, false)
	img := filestest.Partitioned(t, true, filestest.XFS(t, tree, files), filestest.FAT(t, filestest.Tree(t, spacedFiles)),
		filestest.NTFS(t, tree, files), filestest.Ext4(t, filestest.Tree(t, edgeSpacedFiles), 8))
	r, size := throughRepository(t, img)
	d, err := Open(r, size)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, v := range d.Volumes() {
		types[v.Name] = v.Type
	}
	if types["1"] != TypeXFS || types["2"] != TypeFAT || types["3"] != TypeNTFS || types["4"] != TypeExt4 {
		t.Fatalf("volumes %v", types)
	}
	root, err := d.Root()
	if err != nil {
		t.Fatal(err)
	}
	top, err := root.ReadDir("/")
	if err != nil || len(top) != 4 {
		t.Fatalf("root lists %v, %v", top, err)
	}
	t.Run("xfs", func(t *testing.T) {
		checkTree(t, root, "/1", files, keeps{owner: true, mode: true, links: true, dirs: true})
	})
	t.Run("fat32", func(t *testing.T) {
		checkTree(t, root, "/2", spacedFiles, keeps{mtime: true, dirs: true})
	})
	t.Run("ntfs", func(t *testing.T) {
		checkTree(t, root, "/3", files, keeps{mtime: true, dirs: true})
	})
	t.Run("ext4", func(t *testing.T) {
		checkTree(t, root, "/4", edgeSpacedFiles, keeps{owner: true, mode: true, mtime: true, dirs: true})
	})
	checkReachable(t, root)
}

// checkReachable lists the whole tree the way `files ls` does and checks
// that every path it shows resolves to the same entry with Stat (what
// `files get` starts from) and that Find under every directory (`files
// find --under`) reports exactly what the listing holds below it.
func checkReachable(t *testing.T, fsys FS) {
	t.Helper()
	var listed []Entry
	var list func(dir string)
	list = func(dir string) {
		es, err := fsys.ReadDir(dir)
		if err != nil {
			t.Errorf("list %s: %v", dir, err)
			return
		}
		for _, e := range es {
			listed = append(listed, e)
			if e.IsDir() {
				list(e.Path)
			}
		}
	}
	list("/")
	if len(listed) < 5 {
		t.Fatalf("listing holds only %d entries", len(listed))
	}
	for _, e := range listed {
		got, err := fsys.Stat(e.Path)
		if err != nil || got.Path != e.Path || got.Name != e.Name || got.Mode.Type() != e.Mode.Type() {
			t.Errorf("listed %q (%v) resolves to %q %q (%v), %v", e.Path, e.Mode.Type(), got.Path, got.Name, got.Mode.Type(), err)
			continue
		}
		if !e.IsDir() {
			continue
		}
		want := []string{e.Path}
		for _, below := range listed {
			if strings.HasPrefix(below.Path, e.Path+"/") {
				want = append(want, below.Path)
			}
		}
		var found []string
		skips, err := Find(context.Background(), fsys, e.Path, "*", func(f Entry) error { found = append(found, f.Path); return nil })
		sort.Strings(want)
		sort.Strings(found)
		if err != nil || len(skips) != 0 || strings.Join(found, "|") != strings.Join(want, "|") {
			t.Errorf("find under %q: %q, skipped %v, %v; the listing holds %q", e.Path, found, skips, err, want)
		}
	}
}

func TestMBRExt4(t *testing.T) {
	tree, files := filestest.SourceTree(t, false)
	img := filestest.Partitioned(t, false, filestest.Ext4(t, tree, 16), filestest.Ext4(t, tree, 16))
	r, size := throughRepository(t, img)
	d, err := Open(r, size)
	if err != nil {
		t.Fatal(err)
	}
	root, err := d.Root()
	if err != nil {
		t.Fatal(err)
	}
	checkTree(t, root, "/2", files, keeps{owner: true, mode: true, mtime: true, links: true, dirs: true})
	checkReachable(t, root)
}

func TestExtractZipFind(t *testing.T) {
	tree, files := filestest.SourceTree(t, false)
	r, size := throughRepository(t, filestest.Ext4(t, tree, 32))
	d, _ := Open(r, size)
	root, err := d.Root()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	out := t.TempDir()
	st, err := Extract(ctx, root, []string{"/etc", "/hello.txt", "/link-to-motd"}, out)
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 3 || st.Dirs != 2 || st.Links != 1 || len(st.Skipped) != 0 {
		t.Fatalf("extract stats %+v", st)
	}
	for _, f := range files {
		if !strings.HasPrefix(f.Path, "etc/") && f.Path != "hello.txt" {
			continue
		}
		p := filepath.Join(out, filepath.FromSlash(f.Path))
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != f.Mode.Perm() {
			t.Errorf("extracted %s mode %v, want %v", f.Path, fi.Mode().Perm(), f.Mode.Perm())
		}
		if !fi.IsDir() {
			got, _ := os.ReadFile(p)
			if !bytes.Equal(got, f.Data) || !fi.ModTime().Equal(filestest.Time) {
				t.Errorf("extracted %s: content or mtime differs", f.Path)
			}
		}
	}
	if link, _ := os.Readlink(filepath.Join(out, "link-to-motd")); link != "etc/motd" {
		t.Errorf("symlink -> %q", link)
	}
	// Zip of a tree.
	var buf bytes.Buffer
	if _, err := Zip(ctx, root, []string{"/etc"}, &buf); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "etc/,etc/app/,etc/app/config.yaml,etc/motd" {
		t.Fatalf("zip holds %v", names)
	}
	// Tar of the same tree: the same names, contents, modes, owners, times
	// and the link.
	buf.Reset()
	if st, err := Tar(ctx, root, []string{"/etc", "/link-to-motd"}, &buf); err != nil || st.Files != 2 || st.Links != 1 || st.Dirs != 2 {
		t.Fatalf("tar: %+v %v", st, err)
	}
	want := map[string]filestest.File{}
	for _, f := range files {
		want[f.Path] = f
	}
	tr := tar.NewReader(&buf)
	names = names[:0]
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Typeflag == tar.TypeSymlink {
			if h.Linkname != "etc/motd" {
				t.Errorf("tar symlink -> %q", h.Linkname)
			}
			continue
		}
		f, ok := want[strings.TrimSuffix(h.Name, "/")]
		if !ok {
			continue
		}
		if fs.FileMode(h.Mode).Perm() != f.Mode.Perm() || !h.ModTime.Equal(filestest.Time) {
			t.Errorf("tar %s: mode %o mtime %v", h.Name, h.Mode, h.ModTime)
		}
		if h.Typeflag == tar.TypeReg {
			got, _ := io.ReadAll(tr)
			if !bytes.Equal(got, f.Data) {
				t.Errorf("tar %s: content differs", h.Name)
			}
		}
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "etc/,etc/app/,etc/app/config.yaml,etc/motd,link-to-motd" {
		t.Fatalf("tar holds %v", names)
	}
	// Find by name and by path pattern.
	var found []string
	_, _ = Find(ctx, root, "/", "*.txt", func(e Entry) error { found = append(found, e.Path); return nil })
	sort.Strings(found)
	if strings.Join(found, ",") != "/hello.txt,/home/deep/notes.txt,/résumé-日本.txt" {
		t.Fatalf("find *.txt = %v", found)
	}
}

func TestUnknownAndDamaged(t *testing.T) {
	junk := filepath.Join(t.TempDir(), "junk.img")
	filestest.SparseFile(t, junk, 8<<20)
	f, _ := os.Open(junk)
	defer f.Close()
	d, err := Open(f, 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Root(); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "no readable filesystem") {
		t.Fatalf("blank disk: %v", err)
	}
	// Corrupt every structure of an ext4 image in turn: errors, no panics.
	tree, _ := filestest.SourceTree(t, false)
	raw, _ := os.ReadFile(filestest.Ext4(t, tree, 8))
	for off := 1024; off < len(raw) && off < 600<<10; off += 4096 * 7 {
		bad := append([]byte(nil), raw...)
		for i := off; i < off+64 && i < len(bad); i++ {
			bad[i] ^= 0x5a
		}
		exerciseImage(bytes.NewReader(bad), int64(len(bad)))
	}
}

// exerciseImage reads everything it can and never panics.
func exerciseImage(r io.ReaderAt, size int64) {
	d, err := Open(r, size)
	if err != nil {
		return
	}
	root, err := d.Root()
	if err != nil {
		return
	}
	budget := 500
	_, _ = Walk(context.Background(), root, "/", func(e Entry) error {
		if budget--; budget < 0 {
			return errors.New("enough")
		}
		if e.Mode.IsRegular() && e.Size < 8<<20 {
			if rc, err := root.Open(e.Path); err == nil {
				_, _ = io.Copy(io.Discard, io.LimitReader(rc, 1<<20))
				rc.Close()
			}
		}
		return nil
	})
}

// FuzzFilesystems corrupts real images built by the real tools: the input
// is a list of (offset, xor) mutations, which reaches deep structures with
// small inputs.
func FuzzFilesystems(f *testing.F) {
	tree, files := filestest.SourceTree(f, false)
	images := [][]byte{}
	for _, p := range []string{filestest.Ext4(f, tree, 8), filestest.FAT(f, tree), filestest.NTFS(f, tree, files), filestest.XFS(f, tree, files)} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		images = append(images, b)
	}
	f.Add(uint8(0), []byte{0x38, 0x04, 0, 0, 0xff})
	f.Add(uint8(1), []byte{0x52, 0, 0, 0, 0x01, 0x00, 0x40, 0, 0, 0x80})
	f.Add(uint8(2), []byte{0x30, 0, 0, 0, 0x10})
	f.Add(uint8(3), []byte{0x04, 0, 0, 0, 0x0f})
	f.Fuzz(func(t *testing.T, which uint8, muts []byte) {
		img := append([]byte(nil), images[int(which)%len(images)]...)
		for i := 0; i+5 <= len(muts) && i < 5*64; i += 5 {
			off := int(binary.LittleEndian.Uint32(muts[i:])) % len(img)
			img[off] ^= muts[i+4]
		}
		exerciseImage(bytes.NewReader(img), int64(len(img)))
	})
}
