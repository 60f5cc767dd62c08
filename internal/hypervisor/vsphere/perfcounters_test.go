package vsphere

import (
	"context"
	"slices"
	"testing"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/performance"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/types"
)

// TestVcsimDiskLatencyCounters records what vcsim's PerformanceManager
// gives for a VM's disk latency, which is why coffer does not read
// vSphere latency for latency-control yet (docs/04-policies-and-server.md):
// it lists the counters SIOC-like control would average (the VM's
// datastore.totalReadLatency.average and totalWriteLatency.average,
// weighted by numberReadAveraged and numberWriteAveraged, per datastore),
// but answers them with zeros only; only the maxTotalLatency counters
// carry values, replayed from a recording whatever the VM does. When
// this test fails, vcsim serves more: a latency source can be built and
// tested against it.
func TestVcsimDiskLatencyCounters(t *testing.T) {
	simulator.Test(func(ctx context.Context, c *vim25.Client) {
		vm, err := find.NewFinder(c).VirtualMachine(ctx, "DC0_H0_VM0")
		if err != nil {
			t.Fatal(err)
		}
		m := performance.NewManager(c)
		counters, err := m.CounterInfoByKey(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := m.AvailableMetric(ctx, vm.Reference(), 20)
		if err != nil {
			t.Fatal(err)
		}
		name := func(id int32) string {
			ci, ok := counters[id]
			if !ok {
				return "" // vcsim lists one counter it does not describe (govmomi issue 2835)
			}
			return ci.GroupInfo.GetElementDescription().Key + "." + ci.NameInfo.GetElementDescription().Key + "." + string(ci.RollupType)
		}
		averages := []string{"datastore.totalReadLatency.average", "datastore.totalWriteLatency.average",
			"datastore.numberReadAveraged.average", "datastore.numberWriteAveraged.average"}
		var query []types.PerfMetricId
		for _, id := range ids {
			if n := name(id.CounterId); slices.Contains(averages, n) || n == "disk.maxTotalLatency.latest" {
				query = append(query, id)
			}
		}
		if len(query) != len(averages)+1 {
			t.Fatalf("vcsim lists %d of the disk latency counters for a VM: %v", len(query), query)
		}
		res, err := m.Query(ctx, []types.PerfQuerySpec{{Entity: vm.Reference(), MetricId: query, IntervalId: 20, MaxSample: 100}})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range res[0].(*types.PerfEntityMetric).Value {
			s := v.(*types.PerfMetricIntSeries)
			n := name(s.Id.CounterId)
			nonzero := slices.ContainsFunc(s.Value, func(x int64) bool { return x != 0 })
			t.Logf("%s[%s]: %d nonzero samples of 100", n, s.Id.Instance, len(slices.DeleteFunc(slices.Clone(s.Value), func(x int64) bool { return x == 0 })))
			if slices.Contains(averages, n) == nonzero {
				t.Fatalf("vcsim now answers %s[%s] with %v: build vSphere's latency source on it", n, s.Id.Instance, s.Value)
			}
		}
	})
}
