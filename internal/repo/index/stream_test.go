package index

import (
	"context"
	"errors"
	"sort"
	"testing"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/store"
)

// TestStreamedSegmentScansBack: a segment written entry by entry through
// CreateSegment reads back with Scan, in order, across several blocks; a
// flipped byte in a block stops the scan with ErrFormat.
func TestStreamedSegmentScansBack(t *testing.T) {
	st, key := setup(t)
	ctx := context.Background()
	want := randomEntries(2*BlockEntries + 100)
	sort.Slice(want, func(i, j int) bool { return want[i].ID.Less(want[j].ID) })
	out, err := CreateSegment(ctx, st, key, len(want), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range want {
		if err := out.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	seg, err := out.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if seg.Count() != uint64(len(want)) || len(seg.f.rows) != 3 {
		t.Fatalf("segment of %d entries in %d blocks, want %d in 3", seg.Count(), len(seg.f.rows), len(want))
	}
	var got []Entry
	if err := seg.Scan(ctx, st, key, func(e Entry) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("scanned %d entries, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	raw, err := store.Get(ctx, st, ObjectName(seg.ID), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	raw[seg.f.rows[1].offset+10] ^= 1
	if _, err := store.Put(ctx, st, ObjectName(seg.ID), raw, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	n := 0
	err = seg.Scan(ctx, st, key, func(Entry) error { n++; return nil })
	if !errors.Is(err, ErrFormat) || n != BlockEntries {
		t.Fatalf("scan of a corrupt second block: %v after %d entries, want ErrFormat after %d", err, n, BlockEntries)
	}
}

// TestScanSegmentsSkipsDamagedBlocks: ScanSegments yields every entry of
// every segment, segment after segment; a damaged block is reported with
// its segment and number and skipped whole, or stops the scan when no one
// asked to hear about damage.
func TestScanSegmentsSkipsDamagedBlocks(t *testing.T) {
	st, key := setup(t)
	ctx := context.Background()
	var segs []*Segment
	var all [][]Entry
	for range 2 {
		want := randomEntries(2*BlockEntries + 10)
		sort.Slice(want, func(i, j int) bool { return want[i].ID.Less(want[j].ID) })
		out, err := CreateSegment(ctx, st, key, len(want), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range want {
			if err := out.Add(e); err != nil {
				t.Fatal(err)
			}
		}
		seg, err := out.Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		segs, all = append(segs, seg), append(all, want)
	}
	bad := segs[0]
	raw, err := store.Get(ctx, st, ObjectName(bad.ID), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	raw[bad.f.rows[1].offset+10] ^= 1
	if _, err := store.Put(ctx, st, ObjectName(bad.ID), raw, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// Expected: segment 0 without its second block, then all of segment 1.
	want := append(append(append([]Entry(nil), all[0][:BlockEntries]...), all[0][2*BlockEntries:]...), all[1]...)
	var got []Entry
	var reported []int
	err = ScanSegments(ctx, st, key, segs, func(e Entry) error { got = append(got, e); return nil },
		func(seg id.ID, block int, err error) {
			if seg != bad.ID || !errors.Is(err, ErrFormat) {
				t.Errorf("damage reported in segment %s: %v", seg.Short(), err)
			}
			reported = append(reported, block)
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(reported) != 1 || reported[0] != 1 {
		t.Fatalf("damaged blocks reported: %v, want [1]", reported)
	}
	if len(got) != len(want) {
		t.Fatalf("scanned %d entries, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	n := 0
	err = ScanSegments(ctx, st, key, segs, func(Entry) error { n++; return nil }, nil)
	if !errors.Is(err, ErrFormat) || n != BlockEntries {
		t.Fatalf("scan without a damage handler: %v after %d entries, want ErrFormat after %d", err, n, BlockEntries)
	}
}
