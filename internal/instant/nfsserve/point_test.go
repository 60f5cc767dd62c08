package nfsserve

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/backup/backuptest"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/restore"
)

// TestTheServedExtentIsTheRepositorysPoint backs an image up into a
// repository and serves the point's disk as instant recovery reads it
// (restore.OpenDisk, with nbdexport's chunk cache): through the NFS
// client library the flat extent equals the image byte for byte, holes
// included. A write through the export reads back, and the point, opened
// again from the repository, still reads as the image.
func TestTheServedExtentIsTheRepositorysPoint(t *testing.T) {
	ctx := context.Background()
	img := randomDisk(11, 3<<20)
	clear(img[1<<20 : 2<<20]) // a hole
	dir := t.TempDir()
	path := filepath.Join(dir, "disk.raw")
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	r := repotest.New(t, repo.InitOptions{ChunkSize: 64 << 10, PackSize: 256 << 10})
	snap := backuptest.BackupImage(t, r, path, backup.Options{Workers: 2})
	d := snap.Disks[0]
	dr, err := restore.OpenDisk(ctx, r, d, restore.CacheChunks(64<<20, d.ChunkSize))
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(filepath.Join(dir, "export"), "vm", filepath.Join(dir, "overlays"), []Disk{{Key: d.Key, Base: dr, Size: dr.Size()}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	target := mount(t, serve(t, e.FS))
	if got := readAll(t, target, "vm/vm_0-flat.vmdk"); !bytes.Equal(got, img) {
		t.Fatalf("the served extent (%d bytes) is not the point's disk (%d bytes)", len(got), len(img))
	}
	f, err := target.OpenFile("vm/vm_0-flat.vmdk", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(1<<20+100, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("written by the VM")); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	want := bytes.Clone(img)
	copy(want[1<<20+100:], "written by the VM")
	if got := readAll(t, target, "vm/vm_0-flat.vmdk"); !bytes.Equal(got, want) {
		t.Fatal("the write does not read back through the export")
	}
	again, err := restore.OpenDisk(ctx, r, d, restore.CacheChunks(64<<20, d.ChunkSize))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(img))
	if _, err := again.ReadAt(got, 0); err != nil && err != io.EOF || !bytes.Equal(got, img) {
		t.Fatalf("the point changed under the export's write: %v", err)
	}
}
