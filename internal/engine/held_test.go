package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
	"github.com/coffer-backup/coffer/internal/policy"
)

// Units a previous leader granted (Hold) occupy their pools, the
// worker's included, until released: the engine grants only what is left
// of the worker's slots, and no unit of a held VM starts before its hold
// is released.
func TestHeldUnitsOccupyTheirPools(t *testing.T) {
	e, rr, hostOf := fleetEnv(t, "vsphere", fake.Options{Seed: 41, VMs: 4, DiskSize: 64 << 10}, policy.Limits{Tasks: 10})
	vms, err := e.fake.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pools := []string{GlobalPool, workerKey("w1")}
	// Held before the engine knows the worker, as on a takeover.
	releaseA := e.eng.Hold(Held{Pools: pools, Connection: "lab", VMID: vms[0].ID})
	releaseB := e.eng.Hold(Held{Pools: pools, Connection: "lab", VMID: "a VM of another policy"})
	if err := e.eng.SetWorkers([]Worker{{Name: "w1", Slots: 2, Reach: Reach{Connections: []string{"lab"}}}}); err != nil {
		t.Fatal(err)
	}
	job, err := e.eng.Start(context.Background(), testPolicy("after-takeover"))
	if err != nil {
		t.Fatal(err)
	}
	queued := func(n int) []string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			e.eng.disp.mu.Lock()
			var why []string
			for _, u := range e.eng.disp.queue {
				why = append(why, u.waiting)
			}
			running := e.eng.disp.running
			e.eng.disp.mu.Unlock()
			if len(why) == n && running == 0 {
				return why
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d units queued and %d running, want %d queued and none running", len(why), running, n)
			}
			time.Sleep(5 * time.Millisecond) // a poll's pace, not a synchronisation
		}
	}
	queued(len(vms)) // both of w1's slots are held: nothing starts
	if len(rr.attempts()) != 0 {
		t.Fatal("a unit started while the worker's slots were all held")
	}
	releasedB := time.Now()
	releaseB()
	releaseB() // a second release changes nothing
	for range len(vms) - 1 {
		if vm := <-rr.done; vm == vms[0].Name {
			t.Fatalf("%s started while its VM was held", vm)
		}
	}
	why := queued(1)
	if !strings.Contains(why[0], "previous leader") {
		t.Fatalf("the held VM's unit waits because %q", why[0])
	}
	releasedA := time.Now()
	releaseA()
	res, err := job.Wait()
	if err != nil || res.Job.Status != catalog.StatusSuccess {
		t.Fatalf("job: %v, %+v", err, res)
	}
	runs := rr.attempts()
	var early []attemptRun
	for _, r := range runs {
		if r.start.Before(releasedB) {
			t.Errorf("%s started before any slot was released", r.vm)
		}
		if r.vm == vms[0].Name && r.start.Before(releasedA) {
			t.Errorf("%s started before its VM's hold was released", r.vm)
		}
		if r.start.Before(releasedA) {
			early = append(early, r)
		}
	}
	// One slot of w1 was free while A was held.
	if p := peaks(early, hostOf); p[workerKey("w1")] > 1 {
		t.Errorf("w1 ran %d units at once with one of its 2 slots held", p[workerKey("w1")])
	}
	for _, s := range e.eng.Slots() {
		if s.InUse != 0 {
			t.Errorf("pool %s has %d slots in use after the job and the holds", s.Key, s.InUse)
		}
	}
	e.noLeaks()
}
