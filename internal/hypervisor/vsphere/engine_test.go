package vsphere

import (
	"bytes"
	"context"
	"testing"

	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/engine/enginetest"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// TestEngineRunsVSpherePolicy protects a small fleet through the job
// engine twice: every VM gets a full point, then an incremental one that
// restores to the disk's bytes at its snapshot; no snapshot is left.
func TestEngineRunsVSpherePolicy(t *testing.T) {
	ctx := context.Background()
	s := startSim(t, simOptions{Hosts: 2, Datastores: 3, VMs: 9, DiskSize: 1 << 20})
	sh := newCBTShim(t, s)
	c := sh.connect(t, nil)
	r := newRepo(t)
	for i, vm := range s.vms {
		sh.write(t, vm, 0, int64(i)*4096, bytes.Repeat([]byte{byte(i + 1)}, 64<<10))
	}
	eng, err := engine.New(ctx, engine.Options{Config: &policy.Config{Limits: policy.Limits{Tasks: 4, PerDatastore: 2}},
		Catalog: enginetest.NewCatalog(), Connectors: map[string]hypervisor.Connector{"vc": c},
		OpenRepository: func(context.Context, string) (*repo.Repository, error) { return r, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	p := policy.Policy{Name: "fleet", Connection: "vc"}
	for run, wantMode := range []string{"full", "incremental"} {
		if run == 1 {
			for i, vm := range s.vms {
				sh.write(t, vm, 0, 512<<10, bytes.Repeat([]byte{byte(0x80 + i)}, 8<<10))
			}
		}
		res, err := eng.Run(ctx, p)
		if err != nil || res.Job.TasksOK != len(s.vms) {
			t.Fatalf("run %d: %v %+v %+v", run, err, res.Job, res.Failed())
		}
		for _, tk := range res.Tasks {
			if tk.Mode != wantMode {
				t.Fatalf("run %d: %s backed up %s, want %s (%v)", run, tk.VMName, tk.Mode, wantMode, tk.Warnings)
			}
		}
	}
	snaps, err := r.Points(ctx, nil)
	if err != nil || len(snaps) != 2*len(s.vms) {
		t.Fatalf("%d points, %v", len(snaps), err)
	}
	for i, vm := range s.vms {
		if len(s.snapshots(vm)) != 0 {
			t.Fatalf("VM %d keeps a snapshot", i)
		}
		want := sh.read(t, vm, 0)
		var last *repo.Point
		for _, p := range snaps {
			if p.Source.VMID == vm.Value && (last == nil || p.Time.After(last.Time)) {
				last = p
			}
		}
		if last == nil || last.Mode != "incremental" || !bytes.Equal(restoreBytes(t, r, last), want) {
			t.Fatalf("VM %d: latest point does not restore to its disk", i)
		}
	}
}
