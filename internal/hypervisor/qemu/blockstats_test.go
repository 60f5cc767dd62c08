package qemu_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/iolatency"
	"github.com/coffer-backup/coffer/internal/qmp"
)

// adminCounters reads one disk's counters through the test's own monitor,
// independently of the session's.
func adminCounters(ctx context.Context, t *testing.T, adm *qmp.Client, dev string) iolatency.Counters {
	t.Helper()
	var stats []struct {
		Device string `json:"device"`
		Qdev   string `json:"qdev"`
		Stats  struct {
			RdOps  uint64 `json:"rd_operations"`
			WrOps  uint64 `json:"wr_operations"`
			RdTime int64  `json:"rd_total_time_ns"`
			WrTime int64  `json:"wr_total_time_ns"`
		} `json:"stats"`
	}
	if err := adm.Execute(ctx, "query-blockstats", nil, &stats); err != nil {
		t.Fatal(err)
	}
	for _, b := range stats {
		if b.Device == dev || strings.HasPrefix(b.Qdev, "/machine/peripheral/"+dev+"/") {
			return iolatency.Counters{Ops: b.Stats.RdOps + b.Stats.WrOps, Time: time.Duration(b.Stats.RdTime + b.Stats.WrTime)}
		}
	}
	t.Fatalf("query-blockstats has no device %s: %+v", dev, stats)
	return iolatency.Counters{}
}

// TestSessionDiskIOFromRealBlockstats reads a writing guest's disk
// counters through a backup session's monitor while the guest writes,
// and checks the latency the engine would compute: the readings lie
// between two the test takes on its own monitor, the guest's writes show
// in them, and the latency is their time delta over their operations
// delta.
func TestSessionDiskIOFromRealBlockstats(t *testing.T) {
	l := startLab(t, "")
	ctx := l.ctx
	s, err := l.conn.Snapshot(ctx, l.ref, hypervisor.SnapshotRequest{SessionID: "latency", Mode: hypervisor.CrashConsistent})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.WithoutCancel(ctx), false)
	st, ok := s.(hypervisor.IOStatser)
	if !ok {
		t.Fatal("a QEMU session reads no disk counters")
	}
	src := iolatency.VMDisks{VM: "web-1", Stats: st, Keys: []string{"vda"}}
	m := iolatency.NewMeter(src)
	before := adminCounters(ctx, t, l.admin, "vda")
	if _, ok, err := m.Sample(ctx); err != nil || ok {
		t.Fatalf("first sample: ok %v err %v, want only a baseline", ok, err)
	}
	first, err := src.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Two windows of the guest's writes to vda (16 writes each), under
	// the fleecing filter the session put there.
	mark := l.vm.Mark()
	for i := 0; i < 2; i++ {
		if mark, _, err = l.vm.WaitConsoleFrom(ctx, mark, "COFFER WROTE"); err != nil {
			t.Fatal(err)
		}
	}
	second, err := src.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lat, ok, err := m.Sample(ctx)
	if err != nil || !ok || lat <= 0 {
		t.Fatalf("meter after the guest wrote: %s %v %v", lat, ok, err)
	}
	after := adminCounters(ctx, t, l.admin, "vda")
	if before.Ops > first.Ops || first.Ops > second.Ops || second.Ops > after.Ops ||
		before.Time > first.Time || first.Time > second.Time || second.Time > after.Time {
		t.Fatalf("session readings %+v, %+v are not within the test monitor's %+v .. %+v", first, second, before, after)
	}
	if second.Ops-first.Ops < 16 {
		t.Fatalf("%d operations counted while the guest wrote two windows of 16 blocks", second.Ops-first.Ops)
	}
	want, ok := iolatency.Latency(first, second)
	if !ok || want != (second.Time-first.Time)/time.Duration(second.Ops-first.Ops) || want <= 0 {
		t.Fatalf("latency %s (%v) from %+v -> %+v", want, ok, first, second)
	}
	t.Logf("vda: %d operations, %s, %s each; the meter's interval: %s", second.Ops-first.Ops, second.Time-first.Time, want, lat)
}
