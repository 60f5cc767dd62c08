package diskmap

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/local"
)

func write(t testing.TB, key *crypto.Key, size int64, chunk int, ids []id.ID) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, key, size, chunk)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ids {
		if err := w.Add(x); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	st, _ := local.Create(t.TempDir())
	m0, _ := crypto.NewMasterKey()
	key, _ := crypto.NewKey(m0)
	ctx := context.Background()
	const chunk = 1 << 20
	size := int64(9000*chunk - 123) // 9000 spans, the last one short
	ids := make([]id.ID, ChunkCount(size, chunk))
	for i := range ids {
		if i%3 != 0 {
			ids[i] = id.Random()
		}
	}
	if _, err := store.Put(ctx, st, "maps/x", write(t, key, size, chunk, ids), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := Open(ctx, st, key, "maps/x")
	if err != nil {
		t.Fatal(err)
	}
	if m.Count() != 9000 || m.SpanLength(8999) != chunk-123 || m.SpanLength(0) != chunk {
		t.Fatalf("geometry: count %d last %d", m.Count(), m.SpanLength(8999))
	}
	for _, i := range []uint64{0, 4095, 4096, 8191, 8999, 17} {
		got, err := m.Get(ctx, i)
		if err != nil || got != ids[i] {
			t.Fatalf("Get(%d) = %v, %v", i, got.Short(), err)
		}
	}
	all, err := m.All(ctx)
	if err != nil || len(all) != len(ids) {
		t.Fatal(err)
	}
	for i := range all {
		if all[i] != ids[i] {
			t.Fatalf("All()[%d] differs", i)
		}
	}
	// Ranges inside a block, across block boundaries, to the end and past it.
	for _, r := range [][2]uint64{{0, 1}, {17, 4095}, {4095, 4097}, {4000, 8999}, {8191, 9000}, {8999, 12000}, {9000, 9001}} {
		next := r[0]
		err := m.IterateRange(ctx, r[0], r[1], func(i uint64, x id.ID) error {
			if i != next || x != ids[i] {
				t.Fatalf("IterateRange(%d, %d): span %d (%s), want span %d", r[0], r[1], i, x.Short(), next)
			}
			next++
			return nil
		})
		if err != nil || next != min(r[1], 9000) && r[0] < 9000 {
			t.Fatalf("IterateRange(%d, %d) stopped at %d: %v", r[0], r[1], next, err)
		}
	}
}

func TestWrongCountRefused(t *testing.T) {
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, crypto.Null(), 10<<20, 1<<20)
	_ = w.Add(id.Random())
	if err := w.Finish(); err == nil {
		t.Fatal("incomplete disk map accepted")
	}
}

func reader(b []byte) func(off, n int64) ([]byte, error) {
	return func(off, n int64) ([]byte, error) {
		if off < 0 || n < 0 || off+n > int64(len(b)) {
			return nil, store.ErrInvalidRange
		}
		return b[off : off+n], nil
	}
}

func TestDamage(t *testing.T) {
	key := crypto.Null()
	raw := write(t, key, 5<<20, 1<<20, []id.ID{{}, id.Random(), {}, {}, id.Random()})
	for i := 0; i < len(raw); i += 7 {
		bad := append([]byte(nil), raw...)
		bad[i] ^= 0x08
		m, err := parse(reader(bad), int64(len(bad)), key)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, store.ErrInvalidRange) {
				t.Fatalf("flip at %d: unexpected error %v", i, err)
			}
			continue
		}
		// The header is not authenticated: a flip in its magic or version
		// is tolerated but reported (the footer proves the map readable);
		// its reserved bytes (10-15) are unused. Any other flip must be
		// caught when blocks are read.
		if i < 10 {
			if m.HeaderDamaged() == nil {
				t.Fatalf("flip at header byte %d not reported", i)
			}
			continue
		}
		m.key, m.name = key, "x"
		m.readAt = func(_ context.Context, off, n int64, _ []byte) ([]byte, error) { return reader(bad)(off, n) }
		_, err = m.All(context.Background())
		if err == nil && i >= headerSize {
			t.Fatalf("flip at byte %d of %d went unnoticed", i, len(raw))
		}
	}
	if _, err := parse(reader(raw[:len(raw)-1]), int64(len(raw)-1), key); err == nil {
		t.Fatal("truncated map accepted")
	}
}

func FuzzParse(f *testing.F) {
	key := crypto.Null()
	f.Add(write(f, key, 3<<20, 1<<20, []id.ID{id.Random(), {}, id.Random()}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parse(reader(b), int64(len(b)), key)
		if err == nil && m.Count() != ChunkCount(m.DiskSize(), m.ChunkSize()) {
			t.Fatal("inconsistent map accepted")
		}
	})
}
