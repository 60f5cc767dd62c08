package qemu

import (
	"slices"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

func TestBitmapNames(t *testing.T) {
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	name := newBitmapName("nightly@offsite", true, "abcd1234", at)
	m, full, ok := bitmapMark(name)
	if !ok || !full || m.Label != hypervisor.ChainLabel("nightly@offsite") || !m.Created.Equal(at) {
		t.Fatalf("%s parsed as %+v full=%v ok=%v", name, m, full, ok)
	}
	if m, full, ok := bitmapMark("coffer-inc-abcd1234-" + "dn4rh7s1wugm"); !ok || full || m.Label != "" {
		t.Fatalf("a bitmap from before chains parsed as %+v full=%v ok=%v", m, full, ok)
	}
	for _, other := range []string{"coffer-abcd1234-frozen", "admin", "coffer-x.1-full-t-notbase36!", "coffer-x.1-snap-t-1"} {
		if _, _, ok := bitmapMark(other); ok {
			t.Errorf("%q taken for a tracking bitmap", other)
		}
	}
}

func TestSupersededBitmaps(t *testing.T) {
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	name := func(chain string, full bool, age time.Duration) string {
		return newBitmapName(chain, full, "t", now.Add(-age))
	}
	var (
		aFull    = name("a", true, 48*time.Hour)
		aOldInc  = name("a", false, 24*time.Hour)
		aNewInc  = name("a", false, 0)
		aNewFull = name("a", true, 0)
		bFull    = name("b", true, 10*24*time.Hour)
		cFull    = name("c", true, 50*24*time.Hour)
		cInc     = name("c", false, 40*24*time.Hour)
		legacy   = "coffer-inc-t-" + "dn4rh7s1wugm"
	)
	disk := []bitmapInfo{{Name: aFull}, {Name: aOldInc}, {Name: bFull}, {Name: cFull}, {Name: cInc},
		{Name: legacy}, {Name: "admin-backup"}, {Name: "coffer-t-stray"}}
	expiry := hypervisor.ChainExpiry{Now: now, After: 35 * 24 * time.Hour}
	for _, c := range []struct {
		what, newBitmap, old string
		want                 []string
	}{
		// An incremental keeps its chain's full anchor; chain c is unused
		// past the expiry; chain b and the administrator's bitmap stay.
		{"incremental", aNewInc, aOldInc, []string{aOldInc, cFull, cInc, "coffer-t-stray"}},
		{"full", aNewFull, "", []string{aFull, aOldInc, cFull, cInc, "coffer-t-stray"}},
		// The first incremental after an upgrade drops the label-less
		// bitmap it read from.
		{"after upgrade", aNewInc, legacy, []string{aOldInc, legacy, cFull, cInc, "coffer-t-stray"}},
	} {
		got := supersededBitmaps(append(disk, bitmapInfo{Name: c.newBitmap}), c.newBitmap, c.old, expiry)
		slices.Sort(got)
		slices.Sort(c.want)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: removes %v, want %v", c.what, got, c.want)
		}
	}
	if got := supersededBitmaps(disk, aNewInc, aOldInc, hypervisor.ChainExpiry{Now: now}); slices.Contains(got, cFull) {
		t.Errorf("expiry 0 (never) removed another chain's bitmap: %v", got)
	}
}
