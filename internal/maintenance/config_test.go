package maintenance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/policy"
)

func load(t *testing.T, doc string) (*Config, *policy.Config, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := config.Load(p)
	if err != nil {
		return nil, nil, err
	}
	eng, err := policy.Decode(f)
	if err != nil {
		return nil, nil, err
	}
	c, err := Decode(f)
	return c, eng, err
}

const engine = `
connections: [{name: lab, kind: fake}]
repositories:
  - {name: main, location: /srv/main}
  - {name: offsite, location: s3://b/p}
policies:
  - {name: nightly, connection: lab, repository: main, retention: {keep-daily: 7}}
  - {name: other, connection: lab}
`

func TestConfigResolvesJobs(t *testing.T) {
	c, eng, err := load(t, engine+`
maintenance:
  takeover-after: 10s
  windows: [{name: night, start: "22:00", end: "06:00", days: [mon, tue]}]
  repositories:
    - repository: main
      window: night
      gc: {schedule: "0 2 * * *"}
      verify: {schedule: "0 3 * * *", read-data-period: 7d, window: always}
      forget: {schedule: "0 1 * * *", policies: [nightly]}
      copy: [{to: offsite, schedule: "0 4 * * *", immutable-for: 30d}]
      catalog-export: {schedule: "30 0 * * *", keep: 14, history: true}
`)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := c.Jobs(eng)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]Job{}
	for _, j := range jobs {
		names[j.Name] = j
	}
	if x := names["main/catalog-export"]; x.Kind != "catalog-export" || x.KeepExports != 14 || !x.History || x.Window == nil {
		t.Fatalf("catalog-export job: %+v", x)
	}
	if len(jobs) != 5 || names["main/gc"].Window == nil || names["main/verify"].Window != nil ||
		names["main/verify"].ReadDataPeriod != 7*24*time.Hour || names["main/copy:offsite"].ImmutableFor != 30*24*time.Hour ||
		names["main/forget"].Policies[0] != "nightly" {
		t.Fatalf("jobs: %+v", jobs)
	}
	if d := c.WithDefaults(); time.Duration(d.TakeoverAfter) != 10*time.Second || d.RepositoryFull != DefaultRepositoryFull {
		t.Fatalf("defaults: %+v", d)
	}
}

// TestConfigErrors: every problem of the section is reported at once,
// each naming where it is and what to do.
func TestConfigErrors(t *testing.T) {
	c, eng, err := load(t, engine+`
maintenance:
  repository-full: 120
  takeover-after: 1s
  capacity: {nowhere: 1TiB}
  windows:
    - {name: night, start: "25:00", end: "06:00", days: [caturday]}
    - {name: early, start: "01:00", end: "05:00"}
  repositories:
    - repository: main
      gc: {schedule: "every night"}
      verify: {schedule: "0 3 * * *", read-data-period: 1h}
      forget: {schedule: "@daily", policies: [other]}
      copy: [{to: main, schedule: "@daily"}, {schedule: "@daily"}]
    - repository: offsite
      window: early
      verify: {schedule: "0 * * * *", read-data-period: 1d}
      catalog-export: {schedule: "@daily", keep: -1}
    - repository: elsewhere
      gc: {schedule: "@daily", window: day}
`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Jobs(eng)
	if err == nil {
		t.Fatal("a bad section was accepted")
	}
	for _, want := range []string{
		"repository-full 120", "takeover-after 1s", `capacity: unknown repository "nowhere"`,
		`window night: start: "25:00" is not a time of day`, `"caturday" is not a weekday`,
		`gc: schedule "every night"`, "no run falls within read-data-period 1h",
		"forget: policy other has no retention", "a repository cannot be copied into itself", "copy: to is missing",
		`unknown repository "elsewhere"`, `unknown window "day"`,
		"its window keeps 20 of the 24 runs of each read-data-period from starting",
		"catalog-export: keep -1",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
	// Unknown keys are refused by name, with the closest known key.
	if _, _, err := load(t, "maintenance:\n  repositories:\n    - repository: main\n      gc: {shedule: \"@daily\"}\n"); err == nil ||
		!strings.Contains(err.Error(), "schedule") {
		t.Fatalf("unknown key: %v", err)
	}
}

func TestWindowOpen(t *testing.T) {
	w := &Window{Name: "night", Start: "22:00", End: "06:00", Days: []string{"friday"}}
	at := func(day, h, m int) time.Time { return time.Date(2026, 11, day, h, m, 0, 0, time.UTC) } // Nov 27 2026 is a Friday
	for _, c := range []struct {
		t    time.Time
		open bool
		end  time.Time
	}{
		{at(27, 21, 59), false, time.Time{}},
		{at(27, 22, 0), true, at(28, 6, 0)},
		{at(28, 5, 59), true, at(28, 6, 0)}, // Saturday morning: Friday's opening
		{at(28, 6, 0), false, time.Time{}},
		{at(28, 22, 30), false, time.Time{}}, // Saturday night: no opening
	} {
		open, end := w.Open(c.t)
		if open != c.open || !end.Equal(c.end) {
			t.Errorf("Open(%s) = %v %s, want %v %s", c.t, open, end, c.open, c.end)
		}
	}
}

// TestShareRotation: the runs of a period get the shares 1..N once each,
// whatever the period's alignment, so together they read every pack.
func TestShareRotation(t *testing.T) {
	sc := mustCron(t, "0 3 * * *")
	week := 7 * 24 * time.Hour
	start := periodStart(week, time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	seen := map[int]bool{}
	for tm := sc.Next(start.Add(-time.Nanosecond)); tm.Before(start.Add(week)); tm = sc.Next(tm) {
		num, den := Share(sc, week, tm)
		if den != 7 || seen[num] || num < 1 || num > 7 {
			t.Fatalf("run at %s: share %d of %d (seen %v)", tm, num, den, seen)
		}
		seen[num] = true
	}
	if len(seen) != 7 {
		t.Fatalf("shares %v", seen)
	}
	if n := RunsPerPeriod(mustCron(t, "@every 6h"), 24*time.Hour, start); n != 4 {
		t.Fatalf("runs per day of @every 6h: %d", n)
	}
}

// TestTimezoneAndMissed: a job's timezone: and missed: are read, and a
// bad zone or missed value is refused naming the job and what to write.
func TestTimezoneAndMissed(t *testing.T) {
	c, eng, err := load(t, engine+`
maintenance:
  windows: [{name: night, start: "22:00", end: "06:00", timezone: America/New_York}]
  repositories:
    - repository: main
      gc: {schedule: "30 2 * * *", timezone: Europe/Berlin, missed: skip}
      verify: {schedule: "0 3 * * *", window: night}
`)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := c.Jobs(eng)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].Missed != MissedSkip || jobs[0].Zone != "Europe/Berlin" || jobs[1].Missed != MissedRunOnce {
		t.Fatalf("jobs: %+v", jobs)
	}
	// 02:30 in Berlin on the day its clocks skip 02:00-03:00 is the jump.
	if got, want := jobs[0].Schedule.Next(time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC)), time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("next gc %s, want %s", got.UTC(), want)
	}
	if open, _ := jobs[1].Window.Open(time.Date(2026, 11, 27, 3, 30, 0, 0, time.UTC)); !open { // 22:30 in New York
		t.Fatal("the New York window is closed at 22:30 New York time")
	}
	c, eng, err = load(t, engine+`
maintenance:
  windows: [{name: night, start: "22:00", end: "06:00", timezone: Mars/Olympus}]
  repositories:
    - repository: main
      gc: {schedule: "30 2 * * *", timezone: Europe/Berln}
      verify: {schedule: "0 3 * * *", missed: twice}
      forget: {schedule: "CRON_TZ=UTC 0 1 * * *", keep: {keep-last: 3}}
policies:
  - {name: tz, connection: lab, schedule: "0 1 * * *", timezone: Asia/Tokio, verify-boot: {schedule: "@daily", timezone: X/Y}}
`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Jobs(eng)
	for _, want := range []string{
		`window night: timezone "Mars/Olympus" is not a known time zone`,
		`repository main: gc: timezone "Europe/Berln" is not a known time zone (an IANA name like Europe/Berlin`,
		`repository main: verify: missed "twice": run-once (a run missed while every server was down runs once at start) or skip`,
		`forget: schedule "CRON_TZ=UTC 0 1 * * *": a zone in the schedule is not read here: write it in timezone:`,
		`policy tz: verify-boot: timezone "X/Y" is not a known time zone`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
	if err := eng.Validate(); err == nil || !strings.Contains(err.Error(), `timezone "Asia/Tokio" is not a known time zone`) {
		t.Errorf("policy timezone: %v", err)
	}
}

// TestWindowAcrossDaylightSaving: a window's times are its zone's wall
// times on the days the clocks change: an opening in the skipped hour
// opens at the jump, one in the repeated hour at its first pass.
func TestWindowAcrossDaylightSaving(t *testing.T) {
	w := &Window{Name: "night", Start: "02:30", End: "05:00", Timezone: "Europe/Berlin"}
	u := func(m time.Month, d, h, mi int) time.Time { return time.Date(2026, m, d, h, mi, 0, 0, time.UTC) }
	if got := w.NextOpen(u(3, 28, 12, 0)); !got.Equal(u(3, 29, 1, 0)) {
		t.Fatalf("opens %s on March 29, want the jump at 01:00 UTC", got.UTC())
	}
	if got := w.NextOpen(u(10, 24, 12, 0)); !got.Equal(u(10, 25, 0, 30)) {
		t.Fatalf("opens %s on October 25, want 02:30 CEST (00:30 UTC)", got.UTC())
	}
	if open, end := w.Open(u(10, 25, 1, 45)); !open || !end.Equal(u(10, 25, 4, 0)) {
		t.Fatalf("at 02:45 CET: open %v until %s, want open until 05:00 CET", open, end.UTC())
	}
}
