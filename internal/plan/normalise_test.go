package plan

import (
	"context"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
)

// vm-a recorded alone twice (load 1) and beside vm-b and vm-c once, the
// three over the same 10 s (load 3), each reading 100 MB:
//
//	            snapshot  remove  setup  transfer  attempt  fixed = attempt − transfer
//	load 1         2        1      0.5      3         9        6
//	load 3         4        2      1        6        18       12
//
// The fixed costs per VM, 6, 6 and 12 at loads 1, 1 and 3, fit T(N) =
// 6·(1 + σ(N−1)) with σ = 1/2 (or κ = 1/6: the same factor 2 at 3 in
// flight), exactly; the transfers per byte, 3 and 6 s per 100 MB, the
// same. At 3 in flight every cost is twice its cost alone, so vm-a's
// samples taken alone agree: a snapshot of 2 s with no deviation, where
// the raw samples 2, 2 and 4 s give a mean of 2.67 s and a deviation of
// 1.15 s, the concurrency counted as the VM's own variance. Planned
// from that history, three VMs at 3 in flight take 2 × (2 + 0.5 + 3 +
// 2.5 + 1) = 18 s, the other work being 9 − 2 − 1 − 0.5 − 3 = 2.5 s
// alone; one at a time, 3 × 9 = 27 s.
func TestRecordedCostsAreTakenAlone(t *testing.T) {
	cat := openCatalog(t)
	t0 := time.Date(2026, 11, 20, 22, 0, 0, 0, time.UTC)
	alone := recordedVM{"vm-a", "incremental", 0, 10 * time.Second, 100e6, 50e6, 2, 1, 0.5, 9, 3}
	recordRun(t, cat, t0, []recordedVM{alone})
	recordRun(t, cat, t0.Add(time.Hour), []recordedVM{alone})
	var three []recordedVM
	for _, id := range []string{"vm-a", "vm-b", "vm-c"} {
		three = append(three, recordedVM{id, "incremental", 0, 10 * time.Second, 100e6, 50e6, 4, 2, 1, 18, 6})
	}
	recordRun(t, cat, t0.Add(2*time.Hour), three)
	h, err := ReadHistory(context.Background(), cat, "nightly", 10)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := h.CostGrowth()
	tg, _ := h.TransferGrowth()
	if !near(g.Factor(3), 2, 1e-9) || !near(tg.Factor(3), 2, 1e-9) || !near(g.Base, 6, 1e-9) || g.Spread > 1e-9 {
		t.Fatalf("fits %+v and %+v, want a factor 2 at 3 in flight, base 6, no spread", g, tg)
	}
	for _, id := range []string{"vm-a", "vm-b", "vm-c"} {
		v := h.VMs["lab/"+id]
		for name, c := range map[string]struct{ got, want Dist }{
			"snapshot": {v.Snapshot, Fixed(2)}, "remove": {v.Release, Fixed(1)}, "setup": {v.Setup, Fixed(0.5)},
			"other": {v.Other, Fixed(2.5)}, "transfer": {v.Transfer["incremental"], Fixed(3)},
		} {
			if !near(c.got.Mean, c.want.Mean, 1e-9) || c.got.StdDev > 1e-9 {
				t.Errorf("%s's %s alone: %+v, want %v s without deviation", id, name, c.got, c.want.Mean)
			}
		}
	}
	var targets []Target
	for _, id := range []string{"vm-a", "vm-b", "vm-c"} {
		targets = append(targets, Target{"lab", hypervisor.VM{VMRef: hypervisor.VMRef{ID: id, Name: id}, Datastores: []string{"ds1"}}})
	}
	for _, c := range []struct {
		tasks int
		want  time.Duration
	}{{3, 18 * time.Second}, {1, 27 * time.Second}} {
		in, _ := BuildInput(Sources{Config: &policy.Config{Limits: policy.Limits{Tasks: c.tasks}},
			Policy: policy.Policy{Name: "nightly", Mode: "incremental"}, Targets: targets, History: h, Measured: Measurements{Pipeline: 1e9}})
		p, err := Predict(in)
		if err != nil {
			t.Fatal(err)
		}
		if p.P50 != c.want || p.P90 != c.want {
			t.Errorf("%d in flight: P50 %s, P90 %s, want %s", c.tasks, p.P50, p.P90, c.want)
		}
	}
}
