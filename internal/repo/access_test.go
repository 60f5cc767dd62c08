package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/store"
)

// claimChunks claims plains as new chunks in writer w.
func claimChunks(t *testing.T, w *Writer, plains [][]byte) ([]id.ID, []*Pending) {
	t.Helper()
	var ids []id.ID
	var ps []*Pending
	for _, plain := range plains {
		x := w.Repository().Key().NewHasher().Sum(plain)
		p, owner, err := w.Claim(context.Background(), x)
		if err != nil || !owner {
			t.Fatalf("claim %s: owner=%v %v", x.Short(), owner, err)
		}
		ids, ps = append(ids, x), append(ps, p)
	}
	return ids, ps
}

// addChunks seals the claimed plains into one stream of w and ends the
// session, which indexes them.
func addChunks(t *testing.T, w *Writer, plains [][]byte, ids []id.ID, ps []*Pending) {
	t.Helper()
	ctx := context.Background()
	enc, err := w.Repository().NewEncoder()
	if err != nil {
		t.Fatal(err)
	}
	st := w.NewStream()
	for i, plain := range plains {
		sealed, _ := enc.Encode(nil, plain)
		if err := st.Add(ctx, ids[i], sealed, len(plain), ps[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// storeChunks stores plains as new chunks in one session of w.
func storeChunks(t *testing.T, w *Writer, plains [][]byte) []id.ID {
	t.Helper()
	ids, ps := claimChunks(t, w, plains)
	addChunks(t, w, plains, ids, ps)
	return ids
}

// TestAccessReadsWhatTheWriterStored goes through the API the layers above
// the repository use: a pack range read into the caller's buffer holds the
// blob ReadBlob returns and decodes to the stored plaintext, a disk map
// opens by name, and the index totals count a chunk two sessions stored
// at once only once.
func TestAccessReadsWhatTheWriterStored(t *testing.T) {
	ctx := context.Background()
	r, _ := newTestRepo(t, Options{})
	plains := [][]byte{bytes.Repeat([]byte("a"), 5000), bytes.Repeat([]byte("bc"), 7000), []byte("short")}
	// Two sessions that both claim a chunk before either indexes it each
	// store it.
	w1, err := r.NewWriter(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	w2, err := r.NewWriter(ctx, "two")
	if err != nil {
		t.Fatal(err)
	}
	ids, ps := claimChunks(t, w1, plains)
	ids2, ps2 := claimChunks(t, w2, plains[:1])
	addChunks(t, w1, plains, ids, ps)
	addChunks(t, w2, plains[:1], ids2, ps2)
	if err := r.ReloadIndex(ctx); err != nil {
		t.Fatal(err)
	}

	dec, err := r.NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	var buf []byte
	for i, x := range ids {
		loc, err := r.Locate(ctx, x)
		if err != nil {
			t.Fatal(err)
		}
		blob, err := r.ReadBlob(ctx, loc)
		if err != nil {
			t.Fatal(err)
		}
		buf = append(buf[:0], make([]byte, loc.Length)...)
		if err := r.ReadPackRange(ctx, loc.Pack, int64(loc.Offset), buf); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, blob) {
			t.Fatalf("chunk %d: ReadPackRange and ReadBlob disagree", i)
		}
		plain, err := dec.Decode(nil, buf, x, int(loc.RawLength))
		if err != nil || !bytes.Equal(plain, plains[i]) {
			t.Fatalf("chunk %d decodes to %d bytes (%v), stored %d", i, len(plain), err, len(plains[i]))
		}
	}

	tot, err := r.IndexTotals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var raw int64
	for _, p := range plains {
		raw += int64(len(p))
	}
	if tot.Chunks != int64(len(plains)) || tot.RawBytes != raw || tot.Segments != 2 || tot.SealedBytes <= 0 {
		t.Fatalf("index totals %+v, want %d chunks of %d bytes in 2 segments", tot, len(plains), raw)
	}

	w3, err := r.NewWriter(ctx, "map")
	if err != nil {
		t.Fatal(err)
	}
	name, err := w3.WriteDiskMap(ctx, 3*4096, 4096, ids, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w3.Close(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := r.OpenDiskMap(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.All(ctx)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Fatalf("disk map holds %v (%v), want %v", got, err, ids)
	}
}

// TestReadPackRangePastTheEnd fails with the pack named rather than
// returning a short buffer.
func TestReadPackRangePastTheEnd(t *testing.T) {
	ctx := context.Background()
	r, _ := newTestRepo(t, Options{})
	w, err := r.NewWriter(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	x := storeChunks(t, w, [][]byte{[]byte("data")})[0]
	loc, err := r.Locate(ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	err = r.ReadPackRange(ctx, loc.Pack, int64(loc.Offset), make([]byte, 1<<20))
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(loc.Pack.String())) {
		t.Fatalf("read past the end of pack %s: %v", loc.Pack, err)
	}
}

// TestIsDamaged classifies what reading damaged objects returns, and
// nothing else.
func TestIsDamaged(t *testing.T) {
	ctx := context.Background()
	r, st := newTestRepo(t, Options{})
	w, err := r.NewWriter(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	x := storeChunks(t, w, [][]byte{bytes.Repeat([]byte("z"), 3000)})[0]
	loc, err := r.Locate(ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	blob, err := r.ReadBlob(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := r.NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	blob[len(blob)/2] ^= 1
	_, corrupt := dec.Decode(nil, blob, x, int(loc.RawLength))
	if _, err := store.Put(ctx, st, "maps/garbage", []byte("not a disk map at all, long enough to parse"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	_, badMap := r.OpenDiskMap(ctx, "maps/garbage")
	_, missing := r.Locate(ctx, id.Random())
	_, notFound := r.OpenDiskMap(ctx, "maps/absent")

	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"flipped bit in a chunk", corrupt, true},
		{"garbage disk map", badMap, true},
		{"chunk missing from the index", missing, true},
		{"wrapped corrupt chunk", fmt.Errorf("restore: %w", corrupt), true},
		{"absent object", notFound, false},
		{"other error", errors.New("connection reset"), false},
		{"no error", nil, false},
	} {
		if got := IsDamaged(c.err); got != c.want {
			t.Errorf("%s: IsDamaged(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
