package schedule

import (
	"testing"
	"time"
)

// FuzzParse: whatever the text and the zone, Parse returns a schedule or
// an error without panicking, and a schedule's runs rise strictly from
// any instant, even across the zone's changes.
func FuzzParse(f *testing.F) {
	for _, s := range []struct{ spec, zone string }{
		{"0 22 * * *", ""}, {"30 2 * * *", "Europe/Berlin"}, {"*/15 * * * *", "America/New_York"},
		{"@daily", "UTC"}, {"@every 6h", "Asia/Tokyo"}, {"0 1 * * 0", "Australia/Lord_Howe"},
		{"CRON_TZ=UTC 0 1 * * *", ""}, {"0 0 31 2 *", "UTC"}, {"@every -1s", ""}, {"0-59/0 * * * *", ""},
	} {
		f.Add(s.spec, s.zone, int64(1774742400)) // 2026-03-29 00:00 UTC
	}
	f.Fuzz(func(t *testing.T, spec, zoneName string, unix int64) {
		sc, err := Parse(spec, zoneName)
		if err != nil {
			return
		}
		from := time.Unix(unix%(1<<33), 0) // within a few centuries of 1970
		prev := from
		for range 50 {
			at := sc.Next(prev)
			if at.IsZero() {
				return
			}
			if !at.After(prev) {
				t.Fatalf("%q in %q: Next(%s) = %s, not after", spec, zoneName, prev, at)
			}
			prev = at
		}
	})
}
