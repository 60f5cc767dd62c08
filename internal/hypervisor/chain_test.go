package hypervisor

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestChainLabel(t *testing.T) {
	a, b := ChainLabel("nightly@offsite"), ChainLabel("nightly@local")
	if !strings.HasPrefix(a, "nightly_offsite.") || a == b || strings.Contains(a, "-") || ChainLabel("") != ChainLabel("default") {
		t.Fatalf("labels %q %q", a, b)
	}
	if long := ChainLabel(strings.Repeat("x", 100) + "-@"); len(long) > 40 || strings.Contains(long, "-") {
		t.Fatalf("long label %q", long)
	}
}

func TestChainExpiry(t *testing.T) {
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	marks := []ChainMark{
		{Name: "own-old", Label: "own", Created: now.Add(-90 * day)},
		{Name: "fresh-full", Label: "fresh", Created: now.Add(-60 * day)}, // its newest mark is recent
		{Name: "fresh-inc", Label: "fresh", Created: now.Add(-1 * day)},
		{Name: "stale-full", Label: "stale", Created: now.Add(-60 * day)},
		{Name: "stale-inc", Label: "stale", Created: now.Add(-36 * day)},
	}
	got := ExpiryOf(0, func() time.Time { return now }).Expired(marks, "own")
	slices.Sort(got)
	if !slices.Equal(got, []string{"stale-full", "stale-inc"}) {
		t.Fatalf("expired %v", got)
	}
	if got := ExpiryOf(-1, func() time.Time { return now }).Expired(marks, "own"); got != nil {
		t.Fatalf("never expiring expired %v", got)
	}
	if got := ExpiryOf(12*time.Hour, func() time.Time { return now }).Expired(marks, "own"); len(got) != 4 {
		t.Fatalf("a half-day expiry expired %v", got)
	}
}
