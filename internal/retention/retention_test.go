package retention

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func hourlyItems(n int, start time.Time) []Item {
	items := make([]Item, n)
	for i := range items {
		items[i] = Item{ID: fmt.Sprint(i), Time: start.Add(time.Duration(i) * time.Hour)}
	}
	return items
}

func kept(ds []Decision) map[string]bool {
	m := map[string]bool{}
	for _, d := range ds {
		if d.Keep {
			m[d.ID] = true
		}
	}
	return m
}

func TestKeepLast(t *testing.T) {
	items := hourlyItems(10, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	k := kept(Apply(Policy{Last: 3}, items, time.UTC))
	if len(k) != 3 || !k["9"] || !k["8"] || !k["7"] {
		t.Fatalf("kept %v, want the 3 newest", k)
	}
}

func TestDailyKeepsNewestOfEachDay(t *testing.T) {
	// 72 hourly points over three days: daily=2 keeps 23:00 of the last two days.
	items := hourlyItems(72, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	ds := Apply(Policy{Daily: 2}, items, time.UTC)
	k := kept(ds)
	if len(k) != 2 || !k["71"] || !k["47"] {
		t.Fatalf("kept %v, want 71 and 47", k)
	}
}

func TestGFSCombination(t *testing.T) {
	// One point per day for 400 days.
	start := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	items := make([]Item, 400)
	for i := range items {
		items[i] = Item{ID: fmt.Sprint(i), Time: start.AddDate(0, 0, i)}
	}
	ds := Apply(Policy{Daily: 7, Weekly: 4, Monthly: 12, Yearly: 2}, items, time.UTC)
	k := kept(ds)
	// 7 dailies, plus older weekly/monthly/yearly representatives; overlaps are counted once.
	for i := 393; i < 400; i++ {
		if !k[fmt.Sprint(i)] {
			t.Fatalf("daily point %d not kept", i)
		}
	}
	if !k["364"] { // 2025-12-31: newest of year 2025 and of month 2025-12
		t.Fatalf("yearly/monthly representative 2025-12-31 not kept")
	}
	if len(k) < 7+4 || len(k) > 7+4+12+2 {
		t.Fatalf("kept %d points, outside the GFS bounds", len(k))
	}
	if k["0"] {
		t.Fatal("the oldest point survived although no rule reaches it")
	}
}

func TestProtectedAlwaysKept(t *testing.T) {
	items := hourlyItems(5, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	items[0].Protected = true
	k := kept(Apply(Policy{Last: 1}, items, time.UTC))
	if !k["0"] || !k["4"] || len(k) != 2 {
		t.Fatalf("kept %v", k)
	}
}

func TestWithin(t *testing.T) {
	items := hourlyItems(48, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	k := kept(Apply(Policy{Within: 5 * time.Hour}, items, time.UTC))
	if len(k) != 6 {
		t.Fatalf("kept %d, want 6 (newest and the 5 hours before it)", len(k))
	}
}

func TestEmptyPolicyKeepsEverything(t *testing.T) {
	items := hourlyItems(4, time.Now())
	if len(kept(Apply(Policy{}, items, time.UTC))) != 4 {
		t.Fatal("empty policy removed points")
	}
}

func TestTimeZoneChangesDayBoundaries(t *testing.T) {
	// 23:30 UTC and 00:30 UTC next day are the same day in UTC-2.
	loc := time.FixedZone("UTC-2", -2*3600)
	items := []Item{
		{ID: "a", Time: time.Date(2026, 1, 1, 23, 30, 0, 0, time.UTC)},
		{ID: "b", Time: time.Date(2026, 1, 2, 0, 30, 0, 0, time.UTC)},
	}
	if n := len(kept(Apply(Policy{Daily: 5}, items, loc))); n != 1 {
		t.Fatalf("kept %d in UTC-2, want 1", n)
	}
	if n := len(kept(Apply(Policy{Daily: 5}, items, time.UTC))); n != 2 {
		t.Fatalf("kept %d in UTC, want 2", n)
	}
}

func TestNewestBootVerifiedPointIsKept(t *testing.T) {
	items := hourlyItems(10, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	items[2].BootVerified = true
	items[5].BootVerified = true
	ds := Apply(Policy{Last: 2}, items, time.UTC)
	k := kept(ds)
	// The two newest, and 5 (the newest proven to boot); not 2, an older
	// proof that 5 makes redundant.
	if len(k) != 3 || !k["9"] || !k["8"] || !k["5"] {
		t.Fatalf("kept %v, want 9, 8 and 5", k)
	}
	for _, d := range ds {
		if d.ID == "5" && (len(d.Reasons) != 1 || d.Reasons[0] != "newest boot-verified") {
			t.Fatalf("point 5 kept for %v, want newest boot-verified", d.Reasons)
		}
	}
}

// Verdicts keeps exactly what Apply keeps, for random points and rules.
func TestVerdictsAreApplysWithoutReasons(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 17))
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for trial := range 200 {
		var items []Item
		at := start
		for i := range 20 + r.IntN(200) {
			at = at.Add(time.Duration(r.IntN(30*60)) * time.Minute)
			items = append(items, Item{ID: fmt.Sprint(i), Time: at, Protected: r.IntN(50) == 0, BootVerified: r.IntN(20) == 0})
		}
		p := Policy{Last: r.IntN(4), Hourly: r.IntN(30), Daily: r.IntN(10), Weekly: r.IntN(6), Monthly: r.IntN(14),
			Yearly: r.IntN(3), Within: time.Duration(r.IntN(72)) * time.Hour}
		want, got := Apply(p, items, loc), Verdicts(p, items, loc)
		for i := range want {
			if got[i].ID != want[i].ID || got[i].Keep != want[i].Keep {
				t.Fatalf("trial %d, policy %+v: item %s: Verdicts keeps %v, Apply %v (%v)", trial, p, want[i].ID, got[i].Keep, want[i].Keep, want[i].Reasons)
			}
		}
	}
}
