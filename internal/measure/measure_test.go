package measure

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
)

// A real device (the test's temporary directory): every figure is
// measured, and the files are gone afterwards.
func TestDeviceMeasuresAndCleansUp(t *testing.T) {
	dir := t.TempDir()
	r, err := Device(context.Background(), DeviceOptions{Dir: dir, Size: 8 << 20, Streams: 4, Block: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if r.Read <= 0 || r.Write <= 0 || r.DuplexRead <= 0 || r.DuplexWrite <= 0 || r.Streams != 4 || r.Size != 8<<20 {
		t.Errorf("result %+v", r)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

func TestDeviceRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o600)
	for _, c := range []struct {
		o    DeviceOptions
		want string
	}{
		{DeviceOptions{Dir: filepath.Join(dir, "missing")}, "no such file"},
		{DeviceOptions{Dir: file}, "not a directory"},
		{DeviceOptions{Dir: dir, Streams: 300}, "streams"},
		{DeviceOptions{Dir: dir, Block: 100}, "block"},
		{DeviceOptions{Dir: dir, Size: 1 << 20, Streams: 4, Block: 1 << 20}, "less than one block per stream"},
		{DeviceOptions{Dir: dir, Size: 65 << 30}, "at most"},
	} {
		if _, err := Device(context.Background(), c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
}

// The pipeline at two levels: without compression the test data is
// stored whole (plus the seal), and zstd stores less.
func TestPipelineLevels(t *testing.T) {
	rs, err := Pipeline(context.Background(), PipelineOptions{Levels: []int{0, 1}, Bytes: 8 << 20, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Level != 0 || rs[1].Level != 1 {
		t.Fatalf("results %+v", rs)
	}
	if rs[0].StoredRatio < 1 || rs[0].StoredRatio > 1.01 {
		t.Errorf("no compression stored %.3f of the input", rs[0].StoredRatio)
	}
	// Three quarters text of a 512-word vocabulary and a quarter random:
	// well below 1, above the random quarter alone.
	if rs[1].StoredRatio < 0.25 || rs[1].StoredRatio > 0.8 {
		t.Errorf("zstd level 1 stored %.3f of the input", rs[1].StoredRatio)
	}
	for _, r := range rs {
		if r.Rate <= 0 || r.PerCore <= 0 || r.PerCore > r.Rate || r.Workers != 2 {
			t.Errorf("level %d: %+v", r.Level, r)
		}
	}
	if _, err := Pipeline(context.Background(), PipelineOptions{Levels: []int{20}}); err == nil || !strings.Contains(err.Error(), "level 20") {
		t.Errorf("level 20: %v", err)
	}
}

// Measurements go into the catalog and come back: the newest per device,
// and the newest pipeline run, with host and time.
func TestMeasurementsInTheCatalog(t *testing.T) {
	ctx := context.Background()
	cat, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "c.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	t0 := time.Date(2026, 11, 25, 22, 0, 0, 0, time.UTC)
	for i, rate := range []float64{100e6, 200e6} {
		if err := RecordDevice(ctx, cat, DeviceRecord{Device: "datastore:lab/ds1", Host: "h", At: t0.Add(time.Duration(i) * time.Hour),
			DeviceResult: DeviceResult{Dir: "/d", Streams: 4, Size: 1 << 20, Read: rate, Write: rate / 2, DuplexRead: rate / 4, DuplexWrite: rate / 8}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := RecordDevice(ctx, cat, DeviceRecord{Device: "repo:main", Host: "h2", At: t0, DeviceResult: DeviceResult{Read: 5}}); err != nil {
		t.Fatal(err)
	}
	if err := RecordPipeline(ctx, cat, PipelineRecord{Host: "h", At: t0, Results: []PipelineResult{{Level: 0, Rate: 9}, {Level: 3, Rate: 3}}}); err != nil {
		t.Fatal(err)
	}
	devs, p, err := Latest(ctx, cat, 100)
	if err != nil {
		t.Fatal(err)
	}
	d := devs["datastore:lab/ds1"]
	if len(devs) != 2 || d.Read != 200e6 || d.DuplexWrite != 25e6 || d.Host != "h" || !d.At.Equal(t0.Add(time.Hour)) || d.Streams != 4 {
		t.Errorf("devices %+v", devs)
	}
	if p == nil || len(p.Results) != 2 || p.Results[0].Level != 0 || p.Results[1].Rate != 3 {
		t.Fatalf("pipeline %+v", p)
	}
	// Level 1 was not measured: the next level above, 3, stands for it.
	if r, ok := p.Level(1); !ok || r.Level != 3 {
		t.Errorf("level 1: %+v %v", r, ok)
	}
	if _, ok := p.Level(9); ok {
		t.Errorf("level 9 found, none measured at or above it")
	}
}
