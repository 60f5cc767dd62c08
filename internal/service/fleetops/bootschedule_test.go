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

func ids(snaps []*repo.Point) []string {
	var out []string
	for _, s := range snaps {
		out = append(out, s.Source.VMName+"@"+s.Time.Format(time.Kitchen))
	}
	return out
}
