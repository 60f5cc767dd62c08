package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/metrics"
	"github.com/coffer-backup/coffer/internal/notify"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/fleetops"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
)

// overlapFleet has VMs that two policies with different RPOs select
// (both-*: nightly's 26h and hourly's 2h), VMs of one policy each, a
// policy without an rpo (held to the default day) and a VM no policy
// selects. Its points are tagged with the policy that made them, as a
// run tags them.
const overlapFleet = `connections:
  - name: kvm
    kind: qemu
    options: {sockets: ["/nonexistent/qmp.sock"]}
policies:
  - name: nightly
    connection: kvm
    rpo: 26h
    select: {names: ["web-*", "both-*"]}
  - name: hourly
    connection: kvm
    rpo: 2h
    select: {names: ["db-*", "both-*"]}
  - name: weekly
    connection: kvm
    select: {names: ["arch-*"]}
notifications:
  targets:
    - name: chat
      webhook: {url: "%s"}
`

// fillOverlapFleet writes the fleet's inventory and points into the
// catalog: each VM's newest point its age before now, made by the policy
// named.
func fillOverlapFleet(t *testing.T, cat catalog.Catalog, now time.Time) {
	t.Helper()
	ctx := context.Background()
	vms := map[string]struct {
		age    time.Duration // 0: no point
		policy string
	}{
		"web-within": {time.Hour, "nightly"}, "web-outside": {30 * time.Hour, "nightly"}, "web-nopoint": {},
		"db-within": {time.Hour, "hourly"}, "db-outside": {3 * time.Hour, "hourly"},
		// Within nightly's 26h, which made its point, outside hourly's
		// 2h: judged policy by policy, with only hourly's own points
		// counting for hourly, it was within both.
		"both-3h": {3 * time.Hour, "nightly"},
		"both-1h": {time.Hour, "hourly"},
		// weekly sets no rpo: the default day holds.
		"arch-outside": {30 * time.Hour, "weekly"}, "arch-within": {time.Hour, "weekly"},
		"lone-nopolicy": {time.Hour, ""},
	}
	var inv []catalog.VMRecord
	var points []catalog.BackupPoint
	for name, v := range vms {
		inv = append(inv, catalog.VMRecord{ID: "id-" + name, Name: name, Disks: []catalog.DiskRecord{{Key: "0", Size: 1 << 30}}})
		if v.age == 0 {
			continue
		}
		for i, age := range []time.Duration{v.age, v.age + 48*time.Hour} { // the newest counts
			points = append(points, catalog.BackupPoint{Repository: "r", ID: []string{"p-", "old-"}[i] + name, Time: now.Add(-age),
				Connection: "kvm", VMID: "id-" + name, VMName: name, Mode: "full", Tags: map[string]string{"policy": v.policy}})
		}
	}
	if err := cat.ReplaceInventory(ctx, "kvm", now, inv); err != nil {
		t.Fatal(err)
	}
	if err := cat.PutBackupPoints(ctx, points); err != nil {
		t.Fatal(err)
	}
}

// TestHealthAgreesWithProtectionSummary: the health monitor judges the
// fleet as the console's protection summary does. Its VM counts, its VMs
// outside their RPO by policy and its rpo-missed notifications name the
// VMs that the summary and the attention listing judge outside their RPO
// (the strictest of their policies' RPOs), on a fleet where judging
// policy by policy disagreed: a VM two policies select, within the RPO of
// the one that made its point and outside the other's.
func TestHealthAgreesWithProtectionSummary(t *testing.T) {
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer hook.Close()
	e := newConfEnv(t, fmt.Sprintf(overlapFleet, hook.URL))
	m := metrics.New()
	s := e.service(func(c *service.Config) { c.Metrics = m })
	defer s.Close()
	cat := e.openCatalog()
	now := time.Now()
	fillOverlapFleet(t, cat, now)

	sum, err := servicetest.Protection(e.ctx, s, api.ProtectionSummaryInput{})
	if err != nil {
		t.Fatal(err)
	}
	// What the fleet was built to hold: both-3h outside (hourly's 2h),
	// arch-outside outside (the default day).
	same(t, "summary", []int{sum.Total, sum.WithinRPO, sum.OutsideRPO, sum.NoPoint, sum.NoPolicy}, []int{10, 4, 4, 1, 1})
	inv, err := servicetest.ListVMs(e.ctx, s, api.ListVMsInput{Order: fleetops.OrderAttention, Attention: true})
	if err != nil {
		t.Fatal(err)
	}
	outside := map[string]api.VM{}
	byPolicy := map[string]int{"nightly": 0, "hourly": 0, "weekly": 0}
	for _, v := range inv.VMs {
		if v.Protection != api.ProtectionOutsideRPO {
			continue
		}
		outside[v.VM] = v
		for _, p := range v.Policies {
			byPolicy[p]++
		}
	}
	if _, ok := outside["both-3h"]; !ok || len(outside) != sum.OutsideRPO {
		t.Fatalf("the listing's VMs outside their RPO %v, the summary's count %d", slices.Sorted(maps.Keys(outside)), sum.OutsideRPO)
	}

	mon, err := fleetops.Ops{Service: s}.HealthMonitor(e.ctx, nil, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second check tells nothing new
		if err := mon.Check(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	fams := scrape(t, m)
	for standing, want := range map[string]int{api.ProtectionWithinRPO: sum.WithinRPO, api.ProtectionOutsideRPO: sum.OutsideRPO,
		api.ProtectionNoPoint: sum.NoPoint, api.ProtectionNoPolicy: sum.NoPolicy} {
		if got, _ := value(t, fams, "coffer_inventory_vms", map[string]string{"protection": standing}); int(got) != want {
			t.Errorf("coffer_inventory_vms{protection=%q} = %v, the summary counts %d", standing, got, want)
		}
	}
	for p, want := range byPolicy {
		if got, _ := value(t, fams, "coffer_vms_outside_rpo", map[string]string{"policy": p}); int(got) != want {
			t.Errorf("coffer_vms_outside_rpo{policy=%q} = %v, the listing has %d of its VMs outside their RPO", p, got, want)
		}
	}
	// A VM's last good backup by the policy that made it, from the
	// catalog's aggregate.
	if got, _ := value(t, fams, "coffer_backup_last_success_timestamp_seconds",
		map[string]string{"connection": "kvm", "vm": "both-3h", "policy": "nightly"}); !near(got, float64(now.Add(-3*time.Hour).UnixNano())/1e9) {
		t.Errorf("both-3h's last success by nightly: %v", got)
	}

	missed := recordedEvents(t, cat)["rpo-missed"]
	if len(missed) != len(outside) {
		t.Errorf("%d rpo-missed events, %d VMs outside their RPO", len(missed), len(outside))
	}
	for _, rec := range missed {
		var ev notify.Event
		if err := json.Unmarshal(rec.Data, &ev); err != nil {
			t.Fatal(err)
		}
		vm, ok := outside[ev.Labels[notify.LabelVM]]
		if !ok {
			t.Errorf("rpo-missed for %s, which the listing does not judge outside its RPO", ev.Labels[notify.LabelVM])
			continue
		}
		// The policy named is the one whose RPO the VM is held to.
		if ev.RPO == nil || float64(ev.RPO.RPOSeconds) != vm.RPOSeconds || !slices.Contains(vm.Policies, ev.Labels[notify.LabelPolicy]) ||
			ev.RPO.LastGoodPoint != vm.LastPointID[:min(16, len(vm.LastPointID))] {
			t.Errorf("rpo-missed for %s: policy %q, %+v; the listing: policies %v, RPO %vs, newest point %s", vm.VM,
				ev.Labels[notify.LabelPolicy], ev.RPO, vm.Policies, vm.RPOSeconds, vm.LastPointID)
		}
	}
	if ev := eventOf(t, missed, "both-3h"); ev == nil || ev.Labels[notify.LabelPolicy] != "hourly" {
		t.Errorf("both-3h's rpo-missed does not name hourly, whose 2h it misses: %+v", ev)
	}
}

// TestHealthAgreesWithProtectionSummaryOnPostgres runs it on a PostgreSQL
// catalog.
func TestHealthAgreesWithProtectionSummaryOnPostgres(t *testing.T) {
	onPostgres(t, map[string]func(*testing.T){"Agree": TestHealthAgreesWithProtectionSummary})
}

// eventOf is the recorded event about the VM named, nil if none.
func eventOf(t *testing.T, events []catalog.NotificationEvent, vm string) *notify.Event {
	t.Helper()
	for _, rec := range events {
		var ev notify.Event
		if err := json.Unmarshal(rec.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Labels[notify.LabelVM] == vm {
			return &ev
		}
	}
	return nil
}
