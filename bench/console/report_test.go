package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseCaches(t *testing.T) {
	for in, want := range map[string][]cacheMode{
		"cold": {cold}, "warm": {warm}, "cold,warm": {cold, warm}, "warm, cold": {warm, cold}, "cold,cold": {cold},
	} {
		got, err := parseCaches(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseCaches(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "hot", "cold,"} {
		if _, err := parseCaches(in); err == nil || !strings.Contains(err.Error(), "cold") {
			t.Errorf("parseCaches(%q): %v, want an error saying what to write", in, err)
		}
	}
}

// TestStats: medians and p95s by nearest rank, bytes by median, and the
// ratio of the p95 of usable to the page's target.
func TestStats(t *testing.T) {
	msd := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	r := pageResult{page: consolePage{name: "tasks", target: listTarget}, samples: map[cacheMode][]sample{cold: {
		{ttfb: msd(50), fcp: msd(300), usable: msd(400), complete: msd(400), bytes: 1000, requests: 6},
		{ttfb: msd(10), fcp: msd(100), usable: msd(200), complete: msd(250), bytes: 1000, requests: 6},
		{ttfb: msd(30), fcp: msd(900), usable: msd(1500), complete: msd(1500), bytes: 1200, requests: 7},
		{ttfb: msd(20), fcp: msd(200), usable: msd(300), complete: msd(300), bytes: 1000, requests: 6},
		{ttfb: msd(40), fcp: msd(250), usable: msd(350), complete: msd(350), bytes: 1100, requests: 6},
	}}}
	got := r.stats(cold)
	want := pageStats{ttfb50: msd(30), fcp50: msd(250), fcp95: msd(900), usable50: msd(350), usable95: msd(1500),
		complete50: msd(350), bytes: 1000, requests: 6, ratio: 1}
	if got != want {
		t.Fatalf("stats:\n got %+v\nwant %+v", got, want)
	}
}
