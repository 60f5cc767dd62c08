package backup_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
)

// recordingReader remembers every read it serves.
type recordingReader struct {
	io.ReaderAt
	mu    sync.Mutex
	reads map[int64]int
}

func (r *recordingReader) ReadAt(p []byte, off int64) (int, error) {
	r.mu.Lock()
	r.reads[off] = len(p)
	r.mu.Unlock()
	return r.ReaderAt.ReadAt(p, off)
}

// Consecutive spans are fetched with one source read of up to ReadBatch
// bytes; a hole or a span that need not be read ends a run; the point
// restores exactly; and every byte wanted is read exactly once.
func TestReadsAreBatched(t *testing.T) {
	r := newRepo(t, repo.InitOptions{ChunkSize: 256 << 10})
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	makeImage(t, img, 32<<20)
	d, src := diskOf(t, img)
	defer src.Close()
	// Pretend the image has a hole over [1 MiB + 256 KiB, 2 MiB): the
	// allocated data before it is 1.25 MiB, two runs (1 MiB + 256 KiB).
	d.Allocated = []hypervisor.Extent{{Offset: 0, Length: 1<<20 + 256<<10}, {Offset: 2 << 20, Length: d.Size - 2<<20}}
	rec := &recordingReader{ReaderAt: src, reads: map[int64]int{}}
	d.Reader = rec
	ctx := context.Background()
	w, err := r.NewWriter(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := backup.Run(ctx, w, backup.Request{Source: repo.Source{Kind: "disk", VMName: "b"}, Disks: []backup.Disk{d}},
		backup.Options{ReadBatch: 1 << 20})
	if cerr := w.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]int{0: 1 << 20, 1 << 20: 256 << 10}
	for off := int64(2 << 20); off < d.Size; off += 1 << 20 {
		want[off] = 1 << 20
	}
	if len(rec.reads) != len(want) {
		t.Fatalf("%d reads, want %d: %v", len(rec.reads), len(want), rec.reads)
	}
	for off, n := range want {
		if rec.reads[off] != n {
			t.Fatalf("read at %d: %d bytes, want %d (all reads: %v)", off, rec.reads[off], n, rec.reads)
		}
	}
	if wantRead := d.Size - 3<<18; snap.BytesRead != wantRead {
		t.Fatalf("bytes read %d, want %d", snap.BytesRead, wantRead)
	}
	out := filepath.Join(dir, "out.img")
	restoreTo(t, r, snap, out)
	// The restored image is the source with the pretend hole as zeros.
	got, err1 := os.ReadFile(out)
	exp, err2 := os.ReadFile(img)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	clear(exp[1<<20+256<<10 : 2<<20])
	if !bytes.Equal(got, exp) {
		t.Fatal("restored image differs from the source (with the hole as zeros)")
	}
}
