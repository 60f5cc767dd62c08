package engine

import (
	"context"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
	"github.com/coffer-backup/coffer/internal/id"
)

// A quiesced policy with the fallback records, per VM, what its snapshot
// really was: quiesced where the guest agent answered, crash-consistent
// where it did not. Task, catalog point and manifest agree, VM by VM and
// in group mode (where the read comes from a storage snapshot).
func TestPointsRecordAchievedSnapshotMode(t *testing.T) {
	for _, group := range []string{"", "datastore"} {
		t.Run("group="+group, func(t *testing.T) {
			e := newEnv(t, fake.Options{Seed: 11, VMs: 8, DiskSize: 128 << 10}, nil, nil)
			vms, _ := e.fake.Inventory(context.Background())
			agent := map[string]bool{}
			for _, vm := range vms {
				agent[vm.Name] = vm.GuestAgent
			}
			p := testPolicy("quiet")
			p.Group = group
			p.Snapshot, p.Quiesce = string(hypervisor.Quiesced), string(hypervisor.QuiesceFallback)
			res := e.run(p)
			if res.Job.Status != catalog.StatusSuccess || len(res.Tasks) != len(vms) {
				t.Fatalf("job %s, %d tasks: %s", res.Job.Status, len(res.Tasks), res.Job.Error)
			}
			points, err := e.cat.ListBackupPoints(context.Background(), catalog.BackupPointFilter{})
			if err != nil {
				t.Fatal(err)
			}
			byID := map[string]catalog.BackupPoint{}
			for _, pt := range points {
				byID[pt.ID] = pt
			}
			fallbacks := 0
			for _, tk := range res.Tasks {
				want := string(hypervisor.Quiesced)
				if !agent[tk.VMName] {
					want = string(hypervisor.CrashConsistent)
					fallbacks++
				}
				if tk.SnapshotMode != "quiesced" || tk.SnapshotModeAchieved != want {
					t.Errorf("task %s: requested %q achieved %q, want quiesced/%s", tk.VMName, tk.SnapshotMode, tk.SnapshotModeAchieved, want)
				}
				pt := byID[tk.BackupPointID]
				if pt.SnapshotMode != "quiesced" || pt.SnapshotModeAchieved != want {
					t.Errorf("catalog point of %s: %+v, want quiesced/%s", tk.VMName, pt, want)
				}
				x, err := id.Parse(tk.BackupPointID)
				if err != nil {
					t.Fatal(err)
				}
				s, err := e.repo.LoadPoint(context.Background(), x)
				if err != nil {
					t.Fatal(err)
				}
				if s.SnapshotMode != "quiesced" || s.SnapshotModeAchieved != want {
					t.Errorf("manifest of %s: requested %q achieved %q, want quiesced/%s", tk.VMName, s.SnapshotMode, s.SnapshotModeAchieved, want)
				}
			}
			if fallbacks == 0 || fallbacks == len(vms) {
				t.Fatalf("%d of %d VMs without an agent: the test needs both kinds", fallbacks, len(vms))
			}
			e.noLeaks()
		})
	}
}
