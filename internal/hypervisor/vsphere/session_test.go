package vsphere

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// setTools makes VMware Tools report running (or not) in a VM: vcsim
// only does so for container-backed VMs.
func (s *sim) setTools(ref types.ManagedObjectReference, running bool) {
	v := s.model.Map().Get(ref).(*simulator.VirtualMachine)
	s.model.Map().WithLock(s.model.Service.Context, v, func() {
		v.Guest.ToolsRunningStatus = string(types.VirtualMachineToolsRunningStatusGuestToolsNotRunning)
		if running {
			v.Guest.ToolsRunningStatus = string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)
		}
	})
}

// snapshots lists the names of a VM's snapshots and the tree nodes.
func (s *sim) snapshots(ref types.ManagedObjectReference) map[string]types.VirtualMachineSnapshotTree {
	out := map[string]types.VirtualMachineSnapshotTree{}
	vm := s.vm(ref)
	if vm.Snapshot == nil {
		return out
	}
	var walk func([]types.VirtualMachineSnapshotTree)
	walk = func(ts []types.VirtualMachineSnapshotTree) {
		for _, t := range ts {
			out[t.Name] = t
			walk(t.ChildSnapshotList)
		}
	}
	walk(vm.Snapshot.RootSnapshotList)
	return out
}

func journals(t *testing.T, c *Connector) []string {
	m, err := filepath.Glob(filepath.Join(journalDir(c.cfg.StateDir), "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSnapshotModes(t *testing.T) {
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 1})
	c := s.connect(t, nil)
	ctx := context.Background()
	ref := s.vms[0]
	s.setTools(ref, true)
	vmRef := hypervisor.VMRef{ID: ref.Value, Name: "vm-0000"}
	for _, tc := range []struct {
		mode             hypervisor.SnapshotMode
		snapshot         bool
		quiesced, memory bool
	}{
		{hypervisor.CrashConsistent, true, false, false},
		{hypervisor.Quiesced, true, true, false},
		{hypervisor.WithMemory, true, false, true},
		{hypervisor.Suspend, true, false, false},
		{hypervisor.AsIs, false, false, false},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			id := "t-" + string(tc.mode)
			sess, err := c.Snapshot(ctx, vmRef, hypervisor.SnapshotRequest{SessionID: id, Mode: tc.mode, Quiesce: hypervisor.QuiesceRequired})
			if err != nil {
				t.Fatal(err)
			}
			if got := sess.AchievedMode(); got != tc.mode {
				t.Fatalf("achieved %q, want %q (Tools running, VM powered on)", got, tc.mode)
			}
			snaps := s.snapshots(ref)
			node, ok := snaps[SnapshotPrefix+id]
			if ok != tc.snapshot || len(snaps) != map[bool]int{true: 1}[tc.snapshot] {
				t.Fatalf("snapshots %v", snaps)
			}
			if ok && (node.Quiesced != tc.quiesced || (node.State == types.VirtualMachinePowerStatePoweredOn) != tc.memory) {
				t.Fatalf("snapshot %+v", node)
			}
			if ps := s.vm(ref).Runtime.PowerState; ps != types.VirtualMachinePowerStatePoweredOn {
				t.Fatalf("VM left %s", ps)
			}
			if _, err := c.Snapshot(ctx, vmRef, hypervisor.SnapshotRequest{SessionID: id + "b", Mode: tc.mode}); !errors.Is(err, hypervisor.ErrTransient) {
				t.Fatalf("second session on the same VM: %v", err)
			}
			cfg := sess.Config()
			memStreams := 0 // a with-memory snapshot adds its .vmsn (memory_test.go)
			for _, d := range sess.Disks() {
				if d.Kind == hypervisor.KindMemory {
					memStreams++
				}
			}
			if cfg.Kind != "vsphere" || cfg.CPUs != 2 || cfg.MemoryMiB != 512 || len(cfg.Disks) != 1 ||
				len(sess.Disks())-memStreams != 1 || (memStreams == 1) != tc.memory {
				t.Fatalf("config %+v disks %+v", cfg, sess.Disks())
			}
			if tc.snapshot && len(journals(t, c)) != 1 {
				t.Fatalf("journal missing during the session")
			}
			if _, err := sess.Close(ctx, true); err != nil {
				t.Fatal(err)
			}
			if n := len(s.snapshots(ref)); n != 0 {
				t.Fatalf("%d snapshots after Close", n)
			}
			if j := journals(t, c); len(j) != 0 {
				t.Fatalf("journals after Close: %v", j)
			}
		})
	}
}

func TestQuiescePolicy(t *testing.T) {
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 1})
	c := s.connect(t, nil)
	ctx := context.Background()
	ref := s.vms[0]
	s.setTools(ref, false)
	vmRef := hypervisor.VMRef{ID: ref.Value, Name: "vm-0000"}
	_, err := c.Snapshot(ctx, vmRef, hypervisor.SnapshotRequest{SessionID: "q1", Mode: hypervisor.Quiesced, Quiesce: hypervisor.QuiesceRequired})
	if !errors.Is(err, hypervisor.ErrQuiesceFailed) {
		t.Fatalf("required quiesce without Tools: %v", err)
	}
	if len(s.snapshots(ref)) != 0 || len(journals(t, c)) != 0 {
		t.Fatal("failed quiesce left a snapshot or journal")
	}
	sess, err := c.Snapshot(ctx, vmRef, hypervisor.SnapshotRequest{SessionID: "q2", Mode: hypervisor.Quiesced, Quiesce: hypervisor.QuiesceFallback})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(ctx, false)
	if w := strings.Join(sess.Warnings(), "; "); !strings.Contains(w, "crash-consistent") {
		t.Fatalf("fallback without warning: %q", w)
	}
	if s.snapshots(ref)[SnapshotPrefix+"q2"].Quiesced {
		t.Fatal("fallback snapshot claims to be quiesced")
	}
	if got := sess.AchievedMode(); got != hypervisor.CrashConsistent {
		t.Fatalf("fallback session reports %q achieved", got)
	}
}

func TestQuiesceFaultFallsBack(t *testing.T) {
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 1})
	c := s.connect(t, nil)
	ctx := context.Background()
	ref := s.vms[0]
	s.setTools(ref, true)
	// The guest refuses to quiesce: the first CreateSnapshot call fails
	// with ApplicationQuiesceFault (once), the crash-consistent retry works.
	s.model.Service.AddFaultRule(&simulator.FaultInjectionRule{MethodName: "CreateSnapshot_Task", ObjectType: "*", ObjectName: "*",
		Probability: 1, FaultType: simulator.FaultTypeCustom, Fault: &types.ApplicationQuiesceFault{}, MaxCount: 1, Enabled: true})
	defer s.model.Service.ClearFaultRules()
	vmRef := hypervisor.VMRef{ID: ref.Value, Name: "vm-0000"}
	sess, err := c.Snapshot(ctx, vmRef, hypervisor.SnapshotRequest{SessionID: "qf", Mode: hypervisor.Quiesced, Quiesce: hypervisor.QuiesceFallback})
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(sess.Warnings(), "; "); !strings.Contains(w, "retried crash-consistent") {
		t.Fatalf("warnings %q", w)
	}
	if got := sess.AchievedMode(); got != hypervisor.CrashConsistent {
		t.Fatalf("session retried without quiescing reports %q achieved", got)
	}
	sess.Close(ctx, false)
	if len(s.snapshots(ref)) != 0 {
		t.Fatal("snapshot left")
	}
	_ = os.Getpid
}
