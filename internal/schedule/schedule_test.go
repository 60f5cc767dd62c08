package schedule

import (
	"strings"
	"testing"
	"time"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := Zone(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// runs lists a schedule's runs from `from` (exclusive) to `to`, in UTC.
func runs(t *testing.T, spec, zoneName string, from, to time.Time) []string {
	t.Helper()
	sc, err := Parse(spec, zoneName)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for at := sc.Next(from); !at.IsZero() && at.Before(to); at = sc.Next(at) {
		out = append(out, at.UTC().Format("01-02 15:04"))
		if len(out) > 500 {
			t.Fatal("too many runs")
		}
	}
	return out
}

func utc(month time.Month, day, hour, minute int) time.Time {
	return time.Date(2026, month, day, hour, minute, 0, 0, time.UTC)
}

// TestDaylightSaving2026: the 2026 transitions of Europe/Berlin (March
// 29 02:00 CET -> 03:00 CEST, October 25 03:00 CEST -> 02:00 CET, both
// at 01:00 UTC) and America/New_York (March 8 02:00 EST -> 03:00 EDT at
// 07:00 UTC, November 1 02:00 EDT -> 01:00 EST at 06:00 UTC). A run in a
// skipped hour runs once, at the jump; an hour that repeats runs once,
// in its first pass. Times below are UTC.
func TestDaylightSaving2026(t *testing.T) {
	for _, c := range []struct {
		name, spec, zone string
		from, to         time.Time
		want             []string
	}{
		{"berlin spring: 02:30 runs at the jump", "30 2 * * *", "Europe/Berlin", utc(3, 27, 12, 0), utc(3, 31, 0, 0),
			[]string{"03-28 01:30", "03-29 01:00", "03-30 00:30"}},
		{"berlin spring: a skipped run and the jump's own are one", "0 2,3 * * *", "Europe/Berlin", utc(3, 28, 12, 0), utc(3, 30, 0, 0),
			[]string{"03-29 01:00"}},
		{"berlin spring: every quarter hour", "*/15 * * * *", "Europe/Berlin", utc(3, 29, 0, 20), utc(3, 29, 1, 31),
			[]string{"03-29 00:30", "03-29 00:45", "03-29 01:00", "03-29 01:15", "03-29 01:30"}},
		{"berlin autumn: 02:30 runs once", "30 2 * * *", "Europe/Berlin", utc(10, 23, 12, 0), utc(10, 27, 0, 0),
			[]string{"10-24 00:30", "10-25 00:30", "10-26 01:30"}},
		{"berlin autumn: hourly runs the repeated hour once", "0 * * * *", "Europe/Berlin", utc(10, 24, 22, 30), utc(10, 25, 4, 30),
			[]string{"10-24 23:00", "10-25 00:00", "10-25 02:00", "10-25 03:00", "10-25 04:00"}},
		{"berlin autumn: 03:00 comes once, after the repeat", "0 3 * * *", "Europe/Berlin", utc(10, 24, 12, 0), utc(10, 26, 12, 0),
			[]string{"10-25 02:00", "10-26 02:00"}},
		{"new york spring: 02:30 runs at the jump", "30 2 * * *", "America/New_York", utc(3, 7, 0, 0), utc(3, 10, 0, 0),
			[]string{"03-07 07:30", "03-08 07:00", "03-09 06:30"}},
		{"new york autumn: 01:30 runs once", "30 1 * * *", "America/New_York", utc(10, 31, 0, 0), utc(11, 3, 0, 0),
			[]string{"10-31 05:30", "11-01 05:30", "11-02 06:30"}},
		{"new york autumn: every 20 minutes", "*/20 * * * *", "America/New_York", utc(11, 1, 5, 10), utc(11, 1, 7, 30),
			[]string{"11-01 05:20", "11-01 05:40", "11-01 07:00", "11-01 07:20"}},
		{"@every counts elapsed time", "@every 1h", "Europe/Berlin", utc(10, 25, 0, 0), utc(10, 25, 3, 30),
			[]string{"10-25 01:00", "10-25 02:00", "10-25 03:00"}},
		{"UTC has no change", "0 12 * * *", "UTC", utc(3, 28, 0, 0), utc(3, 30, 0, 0),
			[]string{"03-28 12:00", "03-29 12:00"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := runs(t, c.spec, c.zone, c.from, c.to)
			if strings.Join(got, ", ") != strings.Join(c.want, ", ") {
				t.Fatalf("runs of %q in %s:\n got %v\nwant %v", c.spec, c.zone, got, c.want)
			}
		})
	}
}

// TestNextFromTheSecondPass: asked during the repeated hour's second
// pass, the next run is past it, not again inside it.
func TestNextFromTheSecondPass(t *testing.T) {
	sc, err := Parse("30 2 * * *", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	secondPass := time.Date(2026, 10, 25, 1, 10, 0, 0, time.UTC) // 02:10 CET
	if got, want := sc.Next(secondPass), time.Date(2026, 10, 26, 1, 30, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("Next(02:10 CET) = %s, want %s", got.UTC(), want)
	}
	firstPass := time.Date(2026, 10, 25, 0, 10, 0, 0, time.UTC) // 02:10 CEST
	if got, want := sc.Next(firstPass), time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("Next(02:10 CEST) = %s, want %s", got.UTC(), want)
	}
}

// TestWholeYearNeverRepeatsAWallTime: over 2026 in both zones, for
// several schedules, the runs rise strictly and no wall-clock time runs
// twice; every day has its daily run.
func TestWholeYearNeverRepeatsAWallTime(t *testing.T) {
	for _, zn := range []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe"} {
		loc := zone(t, zn)
		for _, spec := range []string{"30 2 * * *", "0 * * * *", "*/7 1-3 * * *", "0 1 * * 0"} {
			sc, err := Parse(spec, zn)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			from := time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
			prev := from
			for at := sc.Next(from); at.Year() == 2026; at = sc.Next(at) {
				if !at.After(prev) {
					t.Fatalf("%s %q: %s after %s", zn, spec, at, prev)
				}
				wall := at.In(loc).Format("2006-01-02 15:04")
				if seen[wall] {
					t.Fatalf("%s %q: wall time %s runs twice", zn, spec, wall)
				}
				seen[wall] = true
				prev = at
			}
			if spec == "30 2 * * *" && len(seen) != 365 {
				t.Fatalf("%s %q: %d daily runs in 2026, want 365", zn, spec, len(seen))
			}
		}
	}
}

// TestZoneErrors: an unknown zone and a zone written into the cron text
// are refused with what to write instead.
func TestZoneErrors(t *testing.T) {
	for _, c := range []struct{ spec, zone, want string }{
		{"0 2 * * *", "Europe/Berln", `timezone "Europe/Berln" is not a known time zone (an IANA name like Europe/Berlin`},
		{"0 2 * * *", "../etc/passwd", `timezone "../etc/passwd" is not a known time zone`},
		{"CRON_TZ=Europe/Berlin 0 2 * * *", "", "write it in timezone: (like timezone: Europe/Berlin)"},
		{"0 2 * *", "", "expected exactly 5 fields"},
	} {
		if _, err := Parse(c.spec, c.zone); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q, %q) = %v, want an error with %q", c.spec, c.zone, err, c.want)
		}
	}
	if loc, err := Zone(""); err != nil || loc != time.Local {
		t.Fatalf("the default zone is %v (%v), want the server's", loc, err)
	}
}
