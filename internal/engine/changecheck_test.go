package engine

import (
	"context"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
)

// TestPolicyChangeCheck: a policy's change-check is the number of
// unchanged spans of each disk its incrementals read to check change
// tracking, and the points they make are exact.
func TestPolicyChangeCheck(t *testing.T) {
	e := newEnv(t, fake.Options{Seed: 31, VMs: 2, DiskSize: 2 << 20}, nil, nil) // 32 chunks of 64 KiB per disk
	vms, _ := e.fake.Inventory(context.Background())
	p := testPolicy("checked")
	p.ChangeCheck = 3
	e.run(p) // full
	for _, vm := range vms {
		e.fake.Write(vm.Name, 1)
	}
	truth := map[string]map[string][]byte{}
	for _, vm := range vms {
		truth[vm.Name] = e.current(vm)
	}
	res := e.run(p)
	for _, tk := range res.Tasks {
		if tk.Mode != "incremental" {
			t.Fatalf("%s: %s, want incremental", tk.VMName, tk.Mode)
		}
		s := e.checkRestores(tk.BackupPointID, truth[tk.VMName])
		for _, d := range s.Disks {
			if d.ChangeCheckSpans != 3 || d.ChangeCheckDiffer != 0 {
				t.Fatalf("%s disk %s: %d spans checked, %d differ; want 3, 0", tk.VMName, d.Key, d.ChangeCheckSpans, d.ChangeCheckDiffer)
			}
		}
	}
}
