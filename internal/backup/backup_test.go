package backup_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/restore"
)

func newRepo(t *testing.T, o repo.InitOptions) *repo.Repository { return repotest.New(t, o) }

// makeImage writes a sparse image: random data, compressible text, a run of
// explicit zeros, holes, and a repeated block (intra-disk dedup).
func makeImage(t *testing.T, path string, size int64) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	rnd := make([]byte, 3<<20)
	_, _ = rand.Read(rnd)
	text := bytes.Repeat([]byte("all work and no play makes jack a dull boy\n"), 50000)
	writeAt(t, f, rnd, 0)
	writeAt(t, f, text, 5<<20)
	writeAt(t, f, make([]byte, 2<<20), 9<<20) // explicit zeros, allocated
	writeAt(t, f, rnd[:1<<20], 20<<20)        // duplicate of the first MiB
	writeAt(t, f, []byte("tail"), size-4)     // last, short span
}

func writeAt(t *testing.T, f *os.File, b []byte, off int64) {
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func diskOf(t *testing.T, path string) (backup.Disk, *backup.FileSource) {
	src, err := backup.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	alloc, err := src.Allocated()
	if err != nil {
		t.Fatal(err)
	}
	return backup.Disk{Key: "0", Name: filepath.Base(path), Reader: src, Size: src.Size(), Allocated: alloc, Mode: "full"}, src
}

func run(t *testing.T, r *repo.Repository, req backup.Request) *repo.Point {
	t.Helper()
	return runWith(t, r, req, backup.Options{})
}

func runWith(t *testing.T, r *repo.Repository, req backup.Request, o backup.Options) *repo.Point {
	t.Helper()
	ctx := context.Background()
	o.Progress = &backup.Progress{}
	w, err := r.NewWriter(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := backup.Run(ctx, w, req, o)
	if cerr := w.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func sum(t *testing.T, path string) [32]byte {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

func restoreTo(t *testing.T, r *repo.Repository, snap *repo.Point, path string) restore.Stats {
	t.Helper()
	st, err := restore.ToFile(context.Background(), r, snap, snap.Disks[0], path, restore.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestBackupRestoreIncrementalCompare(t *testing.T) {
	for _, enc := range []bool{true, false} {
		// The image's layout below is drawn in 1 MiB spans.
		r := newRepo(t, repo.InitOptions{NoEncryption: !enc, ChunkSize: 1 << 20})
		dir := t.TempDir()
		img := filepath.Join(dir, "disk.img")
		const size = 64<<20 + 12345
		makeImage(t, img, size)
		d, src := diskOf(t, img)
		src1 := repo.Source{Kind: "disk", VMName: "vm1"}
		s1 := run(t, r, backup.Request{Source: src1, Mode: "full", Disks: []backup.Disk{d}})
		src.Close()
		if s1.Disks[0].BytesRead > 16<<20 {
			t.Fatalf("read %d bytes of a mostly sparse image", s1.Disks[0].BytesRead)
		}
		if s1.ChunksNew != 7 { // 3 random + 3 text + tail; the duplicate is deduplicated
			t.Fatalf("stored %d new chunks, want 7", s1.ChunksNew)
		}
		out := filepath.Join(dir, "restored.img")
		restoreTo(t, r, s1, out)
		if sum(t, out) != sum(t, img) {
			t.Fatal("restored image differs")
		}
		// Modify 3 spans; the next backup, without change tracking, must
		// store only those and still restore byte-identical.
		f, _ := os.OpenFile(img, os.O_RDWR, 0)
		writeAt(t, f, []byte("changed"), 100)
		writeAt(t, f, []byte("changed"), 6<<20+7)
		writeAt(t, f, []byte("new data in a hole"), 40<<20)
		f.Close()
		d, src = diskOf(t, img)
		prev, err := backup.PreviousMap(context.Background(), r, s1, "0", d.Size)
		if err != nil || prev == nil || prev.Len() == 0 {
			t.Fatalf("previous IDs: %v", err)
		}
		d.Previous, d.Mode = prev, "compared"
		s2 := run(t, r, backup.Request{Source: src1, Mode: "incremental", Parent: s1, Disks: []backup.Disk{d}})
		src.Close()
		if s2.ChunksNew != 3 {
			t.Fatalf("incremental stored %d chunks, want 3", s2.ChunksNew)
		}
		out2 := filepath.Join(dir, "restored2.img")
		restoreTo(t, r, s2, out2)
		if sum(t, out2) != sum(t, img) {
			t.Fatal("incremental point does not restore to the current image")
		}
		// The first point is still complete on its own.
		if err := os.Remove(out); err != nil {
			t.Fatal(err)
		}
		restoreTo(t, r, s1, out)
		if sum(t, out) == sum(t, img) {
			t.Fatal("first point changed after the second backup")
		}
	}
}

func TestChangedBlocksSkipReads(t *testing.T) {
	r := newRepo(t, repo.InitOptions{})
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	makeImage(t, img, 32<<20)
	d, src := diskOf(t, img)
	s1 := run(t, r, backup.Request{Source: repo.Source{Kind: "disk", VMName: "x"}, Disks: []backup.Disk{d}})
	src.Close()
	f, _ := os.OpenFile(img, os.O_RDWR, 0)
	writeAt(t, f, []byte("cbt"), 5<<20+10)
	f.Close()
	d, src = diskOf(t, img)
	defer src.Close()
	d.Previous, _ = backup.PreviousMap(context.Background(), r, s1, "0", d.Size)
	d.Changed, d.ChangedValid = []hypervisor.Extent{{Offset: 5<<20 + 10, Length: 3}}, true
	s2 := run(t, r, backup.Request{Source: repo.Source{Kind: "disk", VMName: "x"}, Parent: s1, Disks: []backup.Disk{d}})
	checked := s2.Disks[0].ChangeCheckSpans // unchanged spans read to check change tracking
	if checked != backup.DefaultChangeCheckSpans || s2.Disks[0].ChangeCheckDiffer != 0 {
		t.Fatalf("change tracking's check read %d spans, %d differ", checked, s2.Disks[0].ChangeCheckDiffer)
	}
	// Spans are read where allocated only, and the image has holes: at
	// most the changed span and the checked ones.
	if s2.BytesRead > int64((1+checked)*r.Config().ChunkSize) || s2.ChunksNew != 1 {
		t.Fatalf("read %d bytes, stored %d chunks; want at most the one changed span and the %d checked", s2.BytesRead, s2.ChunksNew, checked)
	}
	out := filepath.Join(dir, "out.img")
	restoreTo(t, r, s2, out)
	if sum(t, out) != sum(t, img) {
		t.Fatal("CBT point restores wrong")
	}
}

func TestShrinkingSourceFails(t *testing.T) {
	r := newRepo(t, repo.InitOptions{})
	img := filepath.Join(t.TempDir(), "disk.img")
	makeImage(t, img, 16<<20)
	d, src := diskOf(t, img)
	defer src.Close()
	if err := os.Truncate(img, 4<<20); err != nil {
		t.Fatal(err)
	}
	d.Allocated = nil
	ctx := context.Background()
	w, _ := r.NewWriter(ctx, "test")
	_, err := backup.Run(ctx, w, backup.Request{Source: repo.Source{Kind: "disk", VMName: "s"}, Disks: []backup.Disk{d}}, backup.Options{})
	_ = w.Close(ctx)
	if !errors.Is(err, backup.ErrSourceChanged) {
		t.Fatalf("err = %v, want ErrSourceChanged", err)
	}
	snaps, _ := r.Points(ctx, nil)
	if len(snaps) != 0 {
		t.Fatal("a snapshot was written for a failed backup")
	}
}

func TestRandomAccessReader(t *testing.T) {
	r := newRepo(t, repo.InitOptions{})
	img := filepath.Join(t.TempDir(), "disk.img")
	makeImage(t, img, 24<<20+100)
	d, src := diskOf(t, img)
	s := run(t, r, backup.Request{Source: repo.Source{Kind: "disk", VMName: "r"}, Disks: []backup.Disk{d}})
	src.Close()
	dr, err := restore.OpenDisk(context.Background(), r, s.Disks[0], 3)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(img)
	rng := mrand.New(mrand.NewPCG(1, 2))
	for range 300 {
		off := rng.Int64N(int64(len(want)))
		n := rng.IntN(3 << 20)
		got := make([]byte, n)
		k, err := dr.ReadAt(got, off)
		exp := want[off:min(off+int64(n), int64(len(want)))]
		if k != len(exp) || !bytes.Equal(got[:k], exp) || (k < n && err != io.EOF) {
			t.Fatalf("ReadAt(%d, %d) = %d, %v", off, n, k, err)
		}
	}
}
