package backup_test

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
)

// TestPreviousMapReadsAnyOrder checks the previous point's IDs read from
// its stored disk map a few blocks at a time: every span's ID is right
// whatever the order of the questions (in span order as a feeder asks,
// spread over more blocks than are kept, as long runs of unchanged spans
// make it, and at random), a span past the end is an error, and a map of
// another geometry is not used.
func TestPreviousMapReadsAnyOrder(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t, repo.InitOptions{})
	cs := r.Config().ChunkSize
	n := 6*4096 + 123 // seven disk map blocks, the last one short
	ids := make([]id.ID, n)
	for i := range ids {
		binary.LittleEndian.PutUint64(ids[i][:], uint64(i)+1)
	}
	size := int64(n) * int64(cs)
	w, err := r.NewWriter(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	name, err := w.WriteDiskMap(ctx, size, cs, ids, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	point := &repo.Point{Disks: []repo.Disk{{Key: "0", Size: size, ChunkSize: cs, Map: name}}}
	prev, err := backup.PreviousMap(ctx, r, point, "0", size)
	if err != nil || prev == nil || prev.Len() != n {
		t.Fatalf("previous map: %v, %v", prev, err)
	}
	check := func(how string, i int) {
		t.Helper()
		if x, err := prev.At(ctx, i); err != nil || x != ids[i] {
			t.Fatalf("%s: span %d reads %x, %v", how, i, x[:8], err)
		}
	}
	for i := range n {
		check("in order", i)
	}
	for i := 0; i < 4096; i += 97 { // one span of every block in turn, then further on
		for b := 6; b >= 0; b-- {
			if j := b*4096 + i; j < n {
				check("across blocks", j)
			}
		}
	}
	for range 300 {
		check("at random", rand.IntN(n))
	}
	if _, err := prev.At(ctx, n); err == nil {
		t.Fatal("a span past the end read")
	}
	for _, other := range []int64{size - 1, size + int64(cs)} {
		if p, err := backup.PreviousMap(ctx, r, point, "0", other); p != nil || err != nil {
			t.Fatalf("map of %d bytes used for a disk of %d: %v", size, other, err)
		}
	}
}
