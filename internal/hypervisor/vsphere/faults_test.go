package vsphere

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// deadPID returns the id of a process that has exited.
func deadPID(t *testing.T) int {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true(1):", err)
	}
	return cmd.Process.Pid
}

// orphanJournals makes the journals look like those of a killed coffer.
func orphanJournals(t *testing.T, c *Connector) {
	pid := deadPID(t)
	for _, p := range journals(t, c) {
		b, _ := os.ReadFile(p)
		var st journalState
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		st.PID = pid
		b, _ = json.Marshal(st)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func (s *sim) userSnapshot(t *testing.T, ref types.ManagedObjectReference, name string) {
	task, err := object.NewVirtualMachine(s.client, ref).CreateSnapshot(context.Background(), name, "", false, false)
	if err == nil {
		err = task.Wait(context.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotCreateFails(t *testing.T) {
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 1})
	c := s.connect(t, nil)
	ctx := context.Background()
	ref := s.vms[0]
	vm := hypervisor.VMRef{ID: ref.Value, Name: "vm-0000"}
	s.model.Service.AddFaultRule(&simulator.FaultInjectionRule{MethodName: "CreateSnapshot_Task", ObjectType: "*", ObjectName: "*",
		Probability: 1, FaultType: simulator.FaultTypeInsufficientResourcesFault, MaxCount: 1, Enabled: true})
	defer s.model.Service.ClearFaultRules()
	if _, err := c.Snapshot(ctx, vm, hypervisor.SnapshotRequest{SessionID: "f1", Mode: hypervisor.CrashConsistent}); err == nil {
		t.Fatal("snapshot succeeded despite the fault")
	}
	if len(s.snapshots(ref)) != 0 || len(journals(t, c)) != 0 {
		t.Fatal("failed creation left a snapshot or a journal")
	}
	sess, err := c.Snapshot(ctx, vm, hypervisor.SnapshotRequest{SessionID: "f2", Mode: hypervisor.CrashConsistent})
	if err != nil {
		t.Fatalf("VM stays claimed after a failure: %v", err)
	}
	sess.Close(ctx, false)
}

// TestRemovalFailsThenCleanup: the removal fails, the journal stays; after
// the process is gone, cleanup removes exactly coffer's journalled
// snapshot and leaves a user's snapshot and a coffer-named one it did not
// record alone.
func TestRemovalFailsThenCleanup(t *testing.T) {
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 2})
	var state string
	c := s.connect(t, func(cfg *Config) { state = cfg.StateDir })
	ctx := context.Background()
	a, b := s.vms[0], s.vms[1]
	s.userSnapshot(t, b, "nightly")
	s.userSnapshot(t, b, SnapshotPrefix+"made-by-someone-else")

	s.model.Service.AddFaultRule(&simulator.FaultInjectionRule{MethodName: "RemoveSnapshot_Task", ObjectType: "*", ObjectName: "*",
		Probability: 1, FaultType: simulator.FaultTypeInvalidState, Enabled: true})
	sess, err := c.Snapshot(ctx, hypervisor.VMRef{ID: a.Value, Name: "vm-0000"}, hypervisor.SnapshotRequest{SessionID: "r1", Mode: hypervisor.CrashConsistent})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Close(ctx, true); err == nil {
		t.Fatal("Close reported success although the removal failed")
	}
	// A session that was never closed: the process is killed mid-backup.
	if _, err := c.Snapshot(ctx, hypervisor.VMRef{ID: b.Value, Name: "vm-0001"}, hypervisor.SnapshotRequest{SessionID: "k1", Mode: hypervisor.CrashConsistent}); err != nil {
		t.Fatal(err)
	}
	s.model.Service.ClearFaultRules()
	if n := len(journals(t, c)); n != 2 {
		t.Fatalf("%d journals, want 2", n)
	}
	// In this process: the failed removal is retried, the open session
	// k1 is left alone.
	lo, err := c.CleanupLeftovers(ctx)
	if err != nil || len(lo) != 1 || lo[0].Name != SnapshotPrefix+"r1" {
		t.Fatalf("in-process cleanup: %+v %v", lo, err)
	}
	// With its leftover gone, the VM can be backed up again by this process.
	again, err := c.Snapshot(ctx, hypervisor.VMRef{ID: a.Value, Name: "vm-0000"}, hypervisor.SnapshotRequest{SessionID: "r2", Mode: hypervisor.CrashConsistent})
	if err != nil {
		t.Fatalf("snapshot after the cleanup of a failed removal: %v", err)
	}
	if _, err := again.Close(ctx, true); err != nil {
		t.Fatal(err)
	}
	// Then the process "dies" with k1 open: the next coffer removes it.
	orphanJournals(t, c)
	c2 := s.connect(t, func(cfg *Config) { cfg.StateDir = state })
	lo, err = c2.CleanupLeftovers(ctx)
	if err != nil || len(lo) != 1 || lo[0].Name != SnapshotPrefix+"k1" {
		t.Fatalf("cleanup: %+v %v", lo, err)
	}
	if n := len(s.snapshots(a)); n != 0 {
		t.Fatalf("VM a keeps %d snapshots", n)
	}
	left := s.snapshots(b)
	if len(left) != 2 || left["nightly"].Name == "" || left[SnapshotPrefix+"made-by-someone-else"].Name == "" {
		t.Fatalf("cleanup touched other snapshots: %v", left)
	}
	if n := len(journals(t, c2)); n != 0 {
		t.Fatalf("%d journals after cleanup", n)
	}
}

// TestSnapshotTaskHangs: creation takes longer than its timeout. Snapshot
// returns a transient error at the timeout; the journal survives while the
// creation runs, and cleanup removes the snapshot it produces.
func TestSnapshotTaskHangs(t *testing.T) {
	simMu.Lock()
	defer simMu.Unlock()
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 1})
	var state string
	c := s.connect(t, func(cfg *Config) {
		state = cfg.StateDir
		cfg.Timeouts.SnapshotCreate = 200 * time.Millisecond
	})
	simulator.TaskDelay.MethodDelay = map[string]int{"CreateSnapshotEx": hungTaskMillis, "LockHandoff": 0}
	defer func() { simulator.TaskDelay.MethodDelay = nil }()
	ctx := context.Background()
	ref := s.vms[0]
	_, err := c.Snapshot(ctx, hypervisor.VMRef{ID: ref.Value, Name: "vm-0000"}, hypervisor.SnapshotRequest{SessionID: "h1", Mode: hypervisor.CrashConsistent})
	if !errors.Is(err, hypervisor.ErrTransient) {
		t.Fatalf("hung creation: %v", err)
	}
	if running := s.runningTasks(t, ref); len(running) != 1 {
		t.Fatalf("Snapshot returned with tasks %v running: the timeout was not what ended it", running)
	}
	if n := len(journals(t, c)); n != 1 {
		t.Fatalf("%d journals while the creation may still complete", n)
	}
	orphanJournals(t, c)
	c2 := s.connect(t, func(cfg *Config) { cfg.StateDir = state })
	if lo, err := c2.CleanupLeftovers(ctx); err != nil || len(lo) != 1 || lo[0].Action == "removed" {
		t.Fatalf("cleanup during the creation: %+v %v", lo, err)
	}
	if len(journals(t, c2)) != 1 {
		t.Fatal("journal dropped while the creation was running")
	}
	waitTasks(t, s, ref)
	lo, err := c2.CleanupLeftovers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.snapshots(ref)); n != 0 || len(journals(t, c2)) != 0 {
		t.Fatalf("after the task ended: %d snapshots, cleanup %+v", n, lo)
	}
}

// hungTaskMillis is how long a "hung" vcsim task runs: far beyond the
// connector's 200 ms timeouts, so the task is still running while the
// tests check what the timeout left behind, however busy the machine.
const hungTaskMillis = 4000

// runningTasks lists the names of the VM's tasks that have not ended.
func (s *sim) runningTasks(t *testing.T, ref types.ManagedObjectReference) []string {
	var vm mo.VirtualMachine
	if err := s.pc().RetrieveOne(context.Background(), ref, []string{"recentTask"}, &vm); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tk := range vm.RecentTask {
		var task mo.Task
		if err := s.pc().RetrieveOne(context.Background(), tk, []string{"info"}, &task); err != nil {
			t.Fatal(err)
		}
		if st := task.Info.State; st == types.TaskInfoStateQueued || st == types.TaskInfoStateRunning {
			out = append(out, task.Info.Name)
		}
	}
	return out
}

// waitTasks waits for every task of the VM to end (through the tasks
// themselves, not by sleeping).
func waitTasks(t *testing.T, s *sim, ref types.ManagedObjectReference) {
	var vm mo.VirtualMachine
	if err := s.pc().RetrieveOne(context.Background(), ref, []string{"recentTask"}, &vm); err != nil {
		t.Fatal(err)
	}
	for _, tk := range vm.RecentTask {
		object.NewTask(s.client, tk).Wait(context.Background()) // its outcome does not matter here
	}
}

// TestCleanupNeedsInstallationMark: a journal naming a snapshot that lacks
// this installation's id in its description (someone else's "coffer-x")
// never leads to its removal.
func TestCleanupNeedsInstallationMark(t *testing.T) {
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 1})
	c := s.connect(t, nil)
	ref := s.vms[0]
	s.userSnapshot(t, ref, SnapshotPrefix+"forged")
	j := newJournal(c.cfg.StateDir, journalState{SessionID: "forged", StateID: c.stateID, PID: deadPID(t),
		VM: ref.Value, VMName: "vm-0000", Snapshot: SnapshotPrefix + "forged"})
	if err := j.save(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CleanupLeftovers(context.Background()); err == nil {
		t.Fatal("cleanup did not report the unmarked snapshot")
	}
	if len(s.snapshots(ref)) != 1 || len(journals(t, c)) != 1 {
		t.Fatal("an unmarked snapshot was removed or its journal dropped")
	}
}

// TestOneCofferSnapshotPerVM: a second coffer (another process or
// installation, here another connector with its own state directory) is
// refused with a transient error while the first one's snapshot exists,
// and succeeds once it is gone.
func TestOneCofferSnapshotPerVM(t *testing.T) {
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 1})
	ctx := context.Background()
	vm := hypervisor.VMRef{ID: s.vms[0].Value, Name: "vm-0000"}
	first, err := s.connect(t, nil).Snapshot(ctx, vm, hypervisor.SnapshotRequest{SessionID: "one", Mode: hypervisor.CrashConsistent})
	if err != nil {
		t.Fatal(err)
	}
	other := s.connect(t, nil)
	if _, err := other.Snapshot(ctx, vm, hypervisor.SnapshotRequest{SessionID: "two", Mode: hypervisor.CrashConsistent}); !errors.Is(err, hypervisor.ErrTransient) {
		t.Fatalf("second coffer snapshot on one VM: %v", err)
	}
	if n := len(s.snapshots(s.vms[0])); n != 1 {
		t.Fatalf("%d snapshots", n)
	}
	if _, err := first.Close(ctx, true); err != nil {
		t.Fatal(err)
	}
	second, err := other.Snapshot(ctx, vm, hypervisor.SnapshotRequest{SessionID: "two", Mode: hypervisor.CrashConsistent})
	if err != nil {
		t.Fatal(err)
	}
	second.Close(ctx, true)
}

// TestRemovalTaskHangs: the snapshot removal outlives its timeout. Close
// reports a transient error at the timeout and keeps the journal; a
// cleanup while that removal still runs does not start a second one, and
// once it has ended nothing is left.
func TestRemovalTaskHangs(t *testing.T) {
	simMu.Lock()
	defer simMu.Unlock()
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 1})
	c := s.connect(t, func(cfg *Config) { cfg.Timeouts.SnapshotRemove = 200 * time.Millisecond })
	ctx := context.Background()
	ref := s.vms[0]
	sess, err := c.Snapshot(ctx, hypervisor.VMRef{ID: ref.Value, Name: "vm-0000"}, hypervisor.SnapshotRequest{SessionID: "rh", Mode: hypervisor.CrashConsistent})
	if err != nil {
		t.Fatal(err)
	}
	simulator.TaskDelay.MethodDelay = map[string]int{"RemoveSnapshot": hungTaskMillis, "LockHandoff": 0}
	defer func() { simulator.TaskDelay.MethodDelay = nil }()
	if _, err := sess.Close(ctx, true); !errors.Is(err, hypervisor.ErrTransient) {
		t.Fatalf("hung removal: %v", err)
	}
	if running := s.runningTasks(t, ref); len(running) != 1 {
		t.Fatalf("Close returned with tasks %v running: the timeout was not what ended it", running)
	}
	if n := len(journals(t, c)); n != 1 {
		t.Fatalf("%d journals after a removal that did not finish", n)
	}
	// Closing again (as the engine does after a failed Release) must not
	// start a second removal.
	if _, err := sess.Close(ctx, true); !errors.Is(err, hypervisor.ErrTransient) {
		t.Fatalf("second Close while the removal runs: %v", err)
	}
	lo, err := c.CleanupLeftovers(ctx)
	if err != nil || len(lo) != 1 || lo[0].Action == "removed" || len(journals(t, c)) != 1 {
		t.Fatalf("cleanup while the removal runs: %+v %v", lo, err)
	}
	waitTasks(t, s, ref)
	if _, err := c.CleanupLeftovers(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(s.snapshots(ref)); n != 0 || len(journals(t, c)) != 0 {
		t.Fatalf("after the removal ended: %d snapshots, %d journals", n, len(journals(t, c)))
	}
}
