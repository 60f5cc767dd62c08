package fleetops

import (
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
)

func TestBootChoice(t *testing.T) {
	day := time.Date(2026, 11, 25, 0, 0, 0, 0, time.Local)
	var snaps []*repo.Point
	point := func(vm, pol string, at time.Time) *repo.Point {
		s := &repo.Point{ID: id.Random(), Time: at, Source: repo.Source{Kind: "qemu", VMName: vm}, Tags: map[string]string{"policy": pol}}
		snaps = append(snaps, s)
		return s
	}
	yesterday := point("web", "nightly", day.Add(-2*time.Hour))
	firstWeb := point("web", "nightly", day.Add(1*time.Hour))
	lastWeb := point("web", "nightly", day.Add(13*time.Hour))
	onlyDB := point("db", "nightly", day.Add(-26*time.Hour))
	point("web", "other", day.Add(20*time.Hour)) // another policy's point

	slot := day.Add(18 * time.Hour)
	latest := bootChoice(snaps, "nightly", "latest", slot)
	if len(latest) != 2 || latest[0] != lastWeb || latest[1] != onlyDB {
		t.Fatalf("latest: %v, want web's newest and db's only point", ids(latest))
	}
	first := bootChoice(snaps, "nightly", "first-of-day", slot)
	if len(first) != 1 || first[0] != firstWeb {
		t.Fatalf("first-of-day: %v, want web's first point of the day (db has none today)", ids(first))
	}
	if got := bootChoice(snaps, "nightly", "first-of-day", day.Add(-time.Hour)); len(got) != 1 || got[0] != yesterday {
		t.Fatalf("first-of-day of the day before: %v", ids(got))
	}
}

// TestBootChoiceInTheSchedulesZone: first-of-day is the day of the
// schedule's time zone: at 01:00 in Tokyo, a point made at 23:30 UTC
// (08:30 in Tokyo) is of that Tokyo day, the one at 14:00 UTC of the
// day before.
func TestBootChoiceInTheSchedulesZone(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	mk := func(at time.Time) *repo.Point {
		return &repo.Point{ID: id.Random(), Time: at, Source: repo.Source{Kind: "qemu", VMName: "web"}, Tags: map[string]string{"policy": "p"}}
	}
	before := mk(time.Date(2026, 11, 24, 14, 0, 0, 0, time.UTC))   // 23:00 on the 24th in Tokyo
	sameDay := mk(time.Date(2026, 11, 24, 23, 30, 0, 0, time.UTC)) // 08:30 on the 25th in Tokyo
	slot := time.Date(2026, 11, 25, 1, 0, 0, 0, tokyo)
	got := bootChoice([]*repo.Point{before, sameDay}, "p", "first-of-day", slot)
	if len(got) != 1 || got[0] != sameDay {
		t.Fatalf("first-of-day in Tokyo: %v, want the point of 08:30 Tokyo time", ids(got))
	}
}

func ids(snaps []*repo.Point) []string {
	var out []string
	for _, s := range snaps {
		out = append(out, s.Source.VMName+"@"+s.Time.Format(time.Kitchen))
	}
	return out
}
