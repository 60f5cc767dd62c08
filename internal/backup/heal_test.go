package backup_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/verify"
)

// TestBackupHealsRecordedDamage: once verify has recorded a chunk as
// broken, the next incremental reads its span again although change
// tracking says nothing changed, stores the chunk again, and every point
// that used it (the old one included) restores and verifies clean.
func TestBackupHealsRecordedDamage(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t, repo.InitOptions{})
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	makeImage(t, img, 32<<20)
	d, src := diskOf(t, img)
	s1 := run(t, r, backup.Request{Source: repo.Source{Kind: "disk", VMName: "x"}, Disks: []backup.Disk{d}})
	src.Close()
	ids, err := backup.PreviousIDs(ctx, r, s1, "0", d.Size)
	if err != nil {
		t.Fatal(err)
	}
	victim := ids[0] // the first span holds random data
	loc, err := r.Locate(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.RecordDamage(ctx, []repo.BadChunk{{Chunk: victim, Pack: loc.Pack, Offset: loc.Offset, Detail: "test"}}); err != nil {
		t.Fatal(err)
	}
	rep, err := verify.Run(ctx, r, verify.Options{NoRecord: true})
	if err != nil || !rep.DataLoss() {
		t.Fatalf("verify does not report the recorded damage: %v %+v", err, rep)
	}

	// Change tracking says nothing changed: without the record, the whole
	// disk would be reused from s1 without reading anything.
	d, src = diskOf(t, img)
	defer src.Close()
	d.Previous, d.Changed, d.ChangedValid = backup.IDList(ids), []hypervisor.Extent{}, true
	// (Without change tracking's self-check, which would read spans of
	// its own.)
	s2 := runWith(t, r, backup.Request{Source: repo.Source{Kind: "disk", VMName: "x"}, Parent: s1, Disks: []backup.Disk{d}},
		backup.Options{ChangeCheckSpans: -1})
	uses := 0 // the image repeats its first MiB further on
	for _, x := range ids {
		if x == victim {
			uses++
		}
	}
	if s2.BytesRead != int64(uses*r.Config().ChunkSize) || s2.ChunksNew != 1 {
		t.Fatalf("read %d bytes and stored %d chunk(s): want exactly the %d span(s) of the damaged chunk, stored once", s2.BytesRead, s2.ChunksNew, uses)
	}
	rep, err = verify.Run(ctx, r, verify.Options{ReadData: true, NoRecord: true})
	if err != nil || !rep.OK() {
		t.Fatalf("after the healing backup: %v %+v", err, rep)
	}
	for _, s := range []*repo.Point{s1, s2} {
		out := filepath.Join(dir, "out-"+s.ID.Short())
		restoreTo(t, r, s, out)
		if sum(t, out) != sum(t, img) {
			t.Fatalf("point %s restores wrong after healing", s.ID.Short())
		}
	}
}
