package backup_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/repo"
)

// TestLyingChangeTrackingIsReadAgain backs up an incremental whose change
// tracking says nothing changed although data did: the sampled spans
// differ, the disk map the first pass streamed is dropped, and the point
// comes from a full read that restores the image as it is now.
func TestLyingChangeTrackingIsReadAgain(t *testing.T) {
	r := newRepo(t, repo.InitOptions{})
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	makeImage(t, img, 32<<20)
	d, src := diskOf(t, img)
	vm := repo.Source{Kind: "disk", VMName: "liar"}
	s1 := run(t, r, backup.Request{Source: vm, Disks: []backup.Disk{d}})
	src.Close()
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	for off := int64(0); off < 3<<20; off += 64 << 10 { // every span of the random MiBs
		writeAt(t, f, []byte("behind the tracker's back"), off)
	}
	f.Close()
	d, src = diskOf(t, img)
	defer src.Close()
	d.Previous, err = backup.PreviousMap(context.Background(), r, s1, "0", d.Size)
	if err != nil {
		t.Fatal(err)
	}
	d.ChangedValid, d.ChangeToken, d.Mode = true, "token", "incremental"
	// Sample every allocated span, so the lie is found for sure.
	s2 := runWith(t, r, backup.Request{Source: vm, Parent: s1, Disks: []backup.Disk{d}}, backup.Options{ChangeCheckSpans: 1 << 10})
	got := s2.Disks[0]
	if got.ChangeCheckDiffer == 0 || got.ChangeToken != "" || !strings.Contains(got.Warning, "change tracking missed changes") {
		t.Fatalf("lie not caught: %d of %d sampled spans differ, token %q, warning %q", got.ChangeCheckDiffer, got.ChangeCheckSpans, got.ChangeToken, got.Warning)
	}
	if want := int(d.Size+int64(r.Config().ChunkSize)-1) / r.Config().ChunkSize; s2.ChunksTotal != want {
		t.Fatalf("point has %d spans, want %d", s2.ChunksTotal, want)
	}
	out := filepath.Join(dir, "out.img")
	restoreTo(t, r, s2, out)
	if sum(t, out) != sum(t, img) {
		t.Fatal("the point of a distrusted incremental restores wrong")
	}
}
