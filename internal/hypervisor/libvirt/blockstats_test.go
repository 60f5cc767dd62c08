package libvirt_test

import (
	"context"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/iolatency"
)

// adminCounters reads vda's counters through the test's own connection,
// independently of the session's.
func (l *lab) adminCounters(t *testing.T) iolatency.Counters {
	t.Helper()
	_, n, err := l.admin.DomainBlockStatsFlags(l.dom, "vda", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	params, _, err := l.admin.DomainBlockStatsFlags(l.dom, "vda", n, 0)
	if err != nil {
		t.Fatal(err)
	}
	v := map[string]int64{}
	for _, p := range params {
		if i, ok := p.Value.I.(int64); ok {
			v[p.Field] = i
		}
	}
	return iolatency.Counters{Ops: uint64(v["rd_operations"] + v["wr_operations"]), Time: time.Duration(v["rd_total_times"] + v["wr_total_times"])}
}

// checkBlockStats reads the writing guest's disk counters through a
// backup session while the guest writes, as latency-control does: the
// readings lie between two the test takes on its own connection, the
// guest's writes show in them, and the meter's latency is their time
// delta over their operations delta.
func (l *lab) checkBlockStats(t *testing.T) {
	s, err := l.conn.Snapshot(l.ctx, l.ref, hypervisor.SnapshotRequest{SessionID: "latency", Mode: hypervisor.CrashConsistent})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.WithoutCancel(l.ctx), false)
	st, ok := s.(hypervisor.IOStatser)
	if !ok {
		t.Fatal("a libvirt session reads no disk counters")
	}
	src := iolatency.VMDisks{VM: domName, Stats: st, Keys: []string{"vda"}}
	m := iolatency.NewMeter(src)
	before := l.adminCounters(t)
	if _, ok, err := m.Sample(l.ctx); err != nil || ok {
		t.Fatalf("first sample: ok %v err %v, want only a baseline", ok, err)
	}
	first, err := src.Read(l.ctx)
	if err != nil {
		t.Fatal(err)
	}
	l.waitWrites(2) // two windows of the guest's writes to vda, under the backup job
	second, err := src.Read(l.ctx)
	if err != nil {
		t.Fatal(err)
	}
	lat, ok, err := m.Sample(l.ctx)
	if err != nil || !ok || lat <= 0 {
		t.Fatalf("meter after the guest wrote: %s %v %v", lat, ok, err)
	}
	after := l.adminCounters(t)
	if before.Ops > first.Ops || first.Ops > second.Ops || second.Ops > after.Ops ||
		before.Time > first.Time || first.Time > second.Time || second.Time > after.Time {
		t.Fatalf("session readings %+v, %+v are not within the test connection's %+v .. %+v", first, second, before, after)
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
