package catalogtest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

func testMedia(t *testing.T, open Opener) {
	ctx := context.Background()
	c := mustOpen(t, open)
	now := time.Now().UTC().Truncate(time.Microsecond)
	vol := func(bc, pool string) catalog.MediaVolume {
		return catalog.MediaVolume{Barcode: bc, Library: "/vtl", Pool: pool, MediaSet: "set1", BlockSize: 262144,
			Labelled: now, Written: now.Add(time.Minute), ProtectedUntil: now.Add(time.Hour), Full: bc == "A1", WORM: bc == "B2"}
	}
	seg := func(bc, point string, first, last int64, end bool) catalog.MediaSegment {
		return catalog.MediaSegment{Barcode: bc, Session: "s1", Stream: 2, Point: point, VM: "web", Repository: "r1",
			PointTime: now.Add(-time.Hour), FirstSeq: first, LastSeq: last, Bytes: (last - first + 1) * 100, End: end,
			Extents: []catalog.MediaExtent{{Pos: 5, Count: last - first + 1}}}
	}
	// One point spanning two volumes of one pool, another on the second.
	a := []catalog.MediaSegment{seg("A1", "p1", 0, 9, false)}
	b := []catalog.MediaSegment{seg("B2", "p1", 10, 12, true), seg("B2", "p2", 0, 3, true)}
	b[1].Stream = 3
	if err := c.ReplaceMediaVolume(ctx, vol("A1", "weekly"), a); err != nil {
		t.Fatal(err)
	}
	if err := c.ReplaceMediaVolume(ctx, vol("B2", "weekly"), b); err != nil {
		t.Fatal(err)
	}
	if err := c.ReplaceMediaVolume(ctx, vol("C3", "monthly"), nil); err != nil {
		t.Fatal(err)
	}
	got, err := c.ListMediaSegments(ctx, catalog.MediaSegmentFilter{Point: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []catalog.MediaSegment{a[0], b[0]}; !reflect.DeepEqual(got, want) {
		t.Fatalf("segments of p1:\n%+v\nwant\n%+v", got, want)
	}
	vols, err := c.ListMediaVolumes(ctx, "weekly")
	if err != nil {
		t.Fatal(err)
	}
	wantA, wantB := vol("A1", "weekly"), vol("B2", "weekly")
	wantA.Segments, wantB.Segments = 1, 2
	if !reflect.DeepEqual(vols, []catalog.MediaVolume{wantA, wantB}) {
		t.Fatalf("volumes of weekly:\n%+v", vols)
	}
	// A new index of B2 replaces its segments; a relabel forgets them.
	if err := c.ReplaceMediaVolume(ctx, vol("B2", "weekly"), b[1:]); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.ListMediaSegments(ctx, catalog.MediaSegmentFilter{Barcode: "B2"}); len(got) != 1 || got[0].Point != "p2" {
		t.Fatalf("B2 after its new index: %+v", got)
	}
	if err := c.DeleteMediaVolume(ctx, "A1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.ListMediaSegments(ctx, catalog.MediaSegmentFilter{Point: "p1"}); len(got) != 0 {
		t.Fatalf("p1 after its volumes went: %+v", got)
	}
	if all, _ := c.ListMediaVolumes(ctx, ""); len(all) != 2 {
		t.Fatalf("volumes: %+v", all)
	}
	if err := c.ReplaceMediaVolume(ctx, vol("D4", "weekly"), a); err == nil {
		t.Fatal("a segment of another volume was recorded")
	}
}
