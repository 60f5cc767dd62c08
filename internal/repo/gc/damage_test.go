package gc_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/gc"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/verify"
	"github.com/coffer-backup/coffer/internal/store"
)

// breakChunk flips a byte of the stored copy of a chunk of s's first disk
// (its first span) and records the copy as broken, as verify --read-data
// does when it finds one.
func breakChunk(t *testing.T, r *repo.Repository, dir string, s *repo.Point, size int64) (id.ID, index.Location) {
	t.Helper()
	ctx := context.Background()
	ids, err := backup.PreviousIDs(ctx, r, s, "0", size)
	if err != nil {
		t.Fatal(err)
	}
	victim := ids[0]
	loc, err := r.Locate(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	name := loc.Pack.String()
	path := filepath.Join(dir, "repo", "data", name[:2], name)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, int64(loc.Offset)+16); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, int64(loc.Offset)+16); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := r.RecordDamage(ctx, []repo.BadChunk{{Chunk: victim, Pack: loc.Pack, Offset: loc.Offset, Detail: "test", Points: []string{s.ID.String()}}}); err != nil {
		t.Fatal(err)
	}
	return victim, loc
}

// TestGCKeepsTheGoodCopyOfABrokenChunk: after verify recorded a chunk's copy
// as broken and a backup stored the chunk again, the index has two copies
// of it. gc keeps one copy of a duplicated chunk: it must keep the good
// one, whichever sorts first. (It used to keep the first copy in pack ID
// order: half the time the broken one, and the chunk was lost again.) The
// broken copy's record is dropped once its pack is gone.
func TestGCKeepsTheGoodCopyOfABrokenChunk(t *testing.T) {
	ctx := context.Background()
	// Pack IDs are random: set up until the broken copy's pack sorts
	// before the good copy's, the order that used to lose the chunk (1 in
	// 2 per attempt).
	for attempt := 0; ; attempt++ {
		if attempt == 40 {
			t.Fatal("the broken copy never sorted first in 40 attempts")
		}
		r, dir := setup(t)
		data := randomBytes(3 << 20)
		img := filepath.Join(dir, "a.img")
		image(t, img, data)
		s1 := backupFile(t, r, nil, img, "a")
		victim, broken := breakChunk(t, r, dir, s1, int64(len(data)))
		s2 := backupFile(t, r, nil, img, "a") // stores the chunk again
		good, err := r.Locate(ctx, victim)
		if err != nil || good.Pack == broken.Pack {
			t.Fatalf("the second backup did not store the broken chunk again: %v %+v", err, good)
		}
		if bytes.Compare(broken.Pack[:], good.Pack[:]) > 0 {
			continue
		}
		if err := r.DeletePoint(ctx, s1); err != nil { // s1's other chunks are s2's too
			t.Fatal(err)
		}
		if _, err := gc.Run(ctx, r, gc.Options{RepackThreshold: 0.01}); err != nil {
			t.Fatal(err)
		}
		if err := r.ReloadIndex(ctx); err != nil {
			t.Fatal(err)
		}
		if loc, err := r.Locate(ctx, victim); err != nil || loc != good {
			t.Fatalf("after gc the chunk is at %+v (%v), want its good copy %+v", loc, err, good)
		}
		if _, err := r.Store().Stat(ctx, "data/"+broken.Pack.String()); err == nil {
			t.Fatalf("the pack of the broken copy (repacked) is still there")
		}
		if d := r.Damage(); len(d) != 0 {
			t.Fatalf("the damage record still lists %+v although the broken copy is gone and a good one stored", d)
		}
		mustVerify(t, r)
		checkRestores(t, r, s2, data, dir)
		return
	}
}

// TestGCKeepsThePackOfABrokenChunkWithoutAGoodCopy: a referenced chunk whose
// only copy is recorded broken keeps its pack however dead the rest is:
// repacking would copy bytes known bad to a place the record does not name
// (the next backup would then deduplicate against them), and deleting it
// would throw away what a salvage might still read. Verify still reports
// the loss afterwards, and gc does not fail on it.
func TestGCKeepsThePackOfABrokenChunkWithoutAGoodCopy(t *testing.T) {
	ctx := context.Background()
	r, dir := setup(t)
	data := randomBytes(3 << 20)
	img := filepath.Join(dir, "a.img")
	image(t, img, data)
	s1 := backupFile(t, r, nil, img, "a")
	// A point of a one-span image keeps the first chunk referenced; once
	// s1 is forgotten, the rest of that chunk's pack is dead. It is backed
	// up before the damage is recorded: afterwards it would store the
	// chunk again.
	cs := r.Config().ChunkSize
	one := filepath.Join(dir, "one.img")
	image(t, one, data[:cs])
	s3 := backupFile(t, r, nil, one, "one")
	victim, broken := breakChunk(t, r, dir, s1, int64(len(data)))
	ids, err := backup.PreviousIDs(ctx, r, s3, "0", int64(cs))
	if err != nil || ids[0] != victim {
		t.Fatalf("the one-span point does not use the broken chunk: %v", err)
	}
	if err := r.DeletePoint(ctx, s1); err != nil {
		t.Fatal(err)
	}
	if _, err := gc.Run(ctx, r, gc.Options{RepackThreshold: 0.01}); err != nil {
		t.Fatalf("gc with a broken chunk and no good copy: %v", err)
	}
	if _, err := r.Store().Stat(ctx, "data/"+broken.Pack.String()); err != nil {
		t.Fatalf("the pack holding the only (broken) copy of a referenced chunk was removed: %v", err)
	}
	if err := r.ReloadIndex(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := verify.Run(ctx, r, verify.Options{ReadData: true, NoRecord: true})
	if err != nil || !rep.DataLoss() {
		t.Fatalf("verify after gc no longer reports the lost chunk: %v %+v", err, rep)
	}
	if _, err := r.Store().Stat(ctx, "gc/plan"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("gc left its plan: %v", err)
	}
}
