package servercmd_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

// TestScheduledMediaCopiesRotateGFSSets runs `coffer server` on a clock
// the test drives across the turn of a month and a week, with a media
// copy to a virtual tape library every day at 05:00 UTC that keeps 2
// daily, 2 weekly and 2 monthly media sets. Monday 30 November's run
// goes to that week's set, Tuesday 1 December's to December's, the 2nd's
// to its day's, and Monday 7 December's to the next week's: each run is
// scheduled, claimed, run, recorded and notified, each set is a pool of
// its own with its own cartridge, and each set's volume is protected
// for its level's periods.
func TestScheduledMediaCopiesRotateGFSSets(t *testing.T) {
	e := clitest.NewEnv(t)
	lib := filepath.Join(e.Dir, "vtl")
	e.Must("init")
	e.Must("media", "vtl", "create", lib, "--slots", "8", "--capacity", "64MiB")
	for i := range 8 { // a set each run: their volumes are protected in real time, which the test's clock does not move
		e.Must("media", "vtl", "add", lib, fmt.Sprintf("CFR%03dL8", i+1), "--slot", fmt.Sprint(i+1))
	}
	engine := fmt.Sprintf(`
media-libraries: [{name: tapes, kind: vtl, directory: %q}]
connections:
  - {name: lab, kind: fake, options: {seed: 4, vms: 2, hosts: 1, datastores: 1, disk-size: 64KiB}}
policies:
  - {name: nightly, connection: lab}
`, lib)
	e.Config(engine)
	e.Must("run", "nightly") // the points to copy, before the server holds the catalog
	l, _ := startLife(t, e, engine+`
maintenance:
  repositories:
    - repository: default
      media-copy:
        - {library: tapes, pool: off, schedule: "0 5 * * *", timezone: UTC, media-sets: {daily: 2, weekly: 2, monthly: 2}}
`, time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC))
	day := 24 * time.Hour
	want := map[string]time.Duration{}
	for _, c := range []struct {
		slot time.Time
		set  string
		keep time.Duration
	}{
		{time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC), "off-weekly-2026-W49", 2 * 7 * day},
		{time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC), "off-monthly-2026-12", 2 * 31 * day},
		{time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC), "off-daily-2026-12-02", 2 * day},
	} {
		j := l.runAt("media-copy", c.slot)
		t.Logf("job %d ran the media copy of %s", j.ID, c.slot)
		want[c.set] = c.keep
	}
	// Skip to Monday: the runs of 3 to 6 December happen on the way.
	for d := 3; d <= 6; d++ {
		l.runAt("media-copy", time.Date(2026, 12, d, 5, 0, 0, 0, time.UTC))
	}
	for d := 3; d <= 6; d++ {
		want[fmt.Sprintf("off-daily-2026-12-%02d", d)] = 2 * day
	}
	l.runAt("media-copy", time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC))
	want["off-weekly-2026-W50"] = 2 * 7 * day
	l.claimed("maintenance/default/media-copy:tapes/off", time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC))
	vols, err := l.cat.ListMediaVolumes(l.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	pools := map[string]catalog.MediaVolume{}
	for _, v := range vols {
		if _, twice := pools[v.Pool]; twice {
			t.Errorf("set %s has two volumes", v.Pool)
		}
		pools[v.Pool] = v
	}
	for set, keep := range want {
		v, ok := pools[set]
		if !ok {
			t.Errorf("no volume of set %s: %+v", set, vols)
			continue
		}
		if got := v.ProtectedUntil.Sub(v.Written); got < keep-time.Minute || got > keep+time.Minute {
			t.Errorf("set %s (volume %s) is protected for %s after it was written, want %s", set, v.Barcode, got, keep)
		}
	}
	if err := l.server.Stop(); err != nil {
		t.Fatalf("server after SIGTERM: %v", err)
	}
}
