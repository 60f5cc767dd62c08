package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
)

// TestConsoleUsageTrend: the server records a repository's usage each
// time it computes its statistics; with one sample the dashboard says
// there is not enough history for a trend. Given a history (samples of
// the past 36 hours recorded in the catalog, growing at a rate chosen so
// that the repository's configured capacity is reached at noon 100 days
// after the server's own sample), the dashboard and the repositories page
// show the trend and that day as the estimated full date.
func TestConsoleUsageTrend(t *testing.T) {
	ctx := context.Background()
	l := newLab(t)
	img := l.ext4Image("web-disk", map[string][]byte{"etc/motd": []byte("usage\n")})
	l.coffer("init")
	l.coffer("backup", "disk", img, "--name", "files")
	var st api.Stats
	if err := json.Unmarshal([]byte(l.coffer("stats", "--json")), &st); err != nil || st.StoredBytes == 0 {
		t.Fatalf("stats: %+v %v", st, err)
	}
	capacityKiB := (4*st.StoredBytes + 1023) / 1024
	capacity := capacityKiB * 1024
	l.config(fmt.Sprintf("maintenance: {capacity: {default: %dKiB}}\n", capacityKiB))
	l.start()
	c := l.chrome()
	c.firstRun()

	// The server's first sample, taken as it starts: no trend yet.
	c.open("/ui/")
	c.waitText("#repos", "not enough history")
	c.waitText("#repos", "1 sample(s)")
	var u api.RepositoryUsage
	token := l.adminToken()
	if code := l.get(token, "/api/v1/repositories/default/usage", &u); code != 200 || len(u.Samples) != 1 ||
		u.Samples[0].StoredBytes != st.StoredBytes || u.Samples[0].CapacityBytes != capacity || u.HasTrend {
		t.Fatalf("the server's usage (%d): %+v; stats said %d stored, the configuration %d", code, u, st.StoredBytes, capacity)
	}
	own := u.Samples[0]

	// A history that reaches the capacity at noon, 100 days on.
	d := own.At.Local().AddDate(0, 0, 100)
	full := time.Date(d.Year(), d.Month(), d.Day(), 12, 0, 0, 0, time.Local)
	perSecond := float64(capacity-own.StoredBytes) / full.Sub(own.At).Seconds()
	cat, err := catalogopen.Open(ctx, l.vars["COFFER_CATALOG"])
	if err != nil {
		t.Fatal(err)
	}
	points, err := cat.ListBackupPoints(ctx, catalog.BackupPointFilter{Limit: 1})
	if err != nil || len(points) != 1 {
		t.Fatalf("the catalog's points: %+v %v", points, err)
	}
	usage, ok := catalog.UsageOf(cat)
	if !ok {
		t.Fatal("the SQLite catalog keeps no usage")
	}
	for k := 1; k <= 12; k++ {
		back := time.Duration(k) * 3 * time.Hour
		if err := usage.AddUsageSample(ctx, catalog.UsageSample{Repository: points[0].Repository, At: own.At.Add(-back),
			StoredBytes: own.StoredBytes - int64(perSecond*back.Seconds()), CapacityBytes: capacity}); err != nil {
			t.Fatal(err)
		}
	}
	_ = cat.Close()

	want := full.Format("2006-01-02")
	c.open("/ui/")
	c.waitText("#repos .estimated-full", want)
	c.waitText("#repos .trend", "/day")
	c.waitText("#repos .estimate", "least-squares line through 13 samples")
	c.shot("dashboard-usage")
	c.open("/ui/repositories")
	c.waitText("main .estimated-full", want)
	c.run(chromedp.WaitVisible("main svg.spark"))
	c.shot("repositories-usage")
}
