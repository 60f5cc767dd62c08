package fake

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

var _ hypervisor.Connector = (*Connector)(nil)

func readAll(t *testing.T, s hypervisor.Session) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, d := range s.Disks() {
		r, err := s.OpenDisk(context.Background(), d.Key)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, r.Size())
		if _, err := r.ReadAt(buf, 0); err != nil {
			t.Fatal(err)
		}
		out[d.Key] = buf
	}
	return out
}

func TestDeterministicFleet(t *testing.T) {
	ctx := context.Background()
	o := Options{Seed: 42, VMs: 20, Hosts: 3, Datastores: 5, MaxDisks: 3}
	a, _ := New(o).Inventory(ctx)
	b, _ := New(o).Inventory(ctx)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different fleets")
	}
	c, _ := New(Options{Seed: 43, VMs: 20, Hosts: 3, Datastores: 5, MaxDisks: 3}).Inventory(ctx)
	if reflect.DeepEqual(a, c) {
		t.Fatal("different seeds, same fleet")
	}
	x, y := New(o), New(o)
	sx, err := x.Snapshot(ctx, a[3].VMRef, hypervisor.SnapshotRequest{SessionID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	sy, _ := y.Snapshot(ctx, a[3].VMRef, hypervisor.SnapshotRequest{SessionID: "t1"})
	if !reflect.DeepEqual(readAll(t, sx), readAll(t, sy)) {
		t.Fatal("same seed, different disk contents")
	}
}

func TestSnapshotFreezesAndTracksChanges(t *testing.T) {
	ctx := context.Background()
	c := New(Options{Seed: 1, VMs: 1, DiskSize: 2 << 20, MaxDisks: 2})
	vms, _ := c.Inventory(ctx)
	vm := vms[0]
	s1, err := c.Snapshot(ctx, vm.VMRef, hypervisor.SnapshotRequest{SessionID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	before := readAll(t, s1)
	c.Write(vm.Name, 3)
	if !reflect.DeepEqual(before, readAll(t, s1)) {
		t.Fatal("writes after the snapshot changed its contents")
	}
	if got := c.Objects(vm.Name); len(got) != 1 || got[0] != "coffer-a" {
		t.Fatalf("objects = %v", got)
	}
	tokens, err := s1.Close(ctx, true)
	if err != nil || len(tokens) != len(vm.Disks) {
		t.Fatalf("close: %v %v", tokens, err)
	}
	if len(c.Objects(vm.Name)) != 0 {
		t.Fatal("snapshot not removed by Close")
	}
	c.Write(vm.Name, 2)
	s2, _ := c.Snapshot(ctx, vm.VMRef, hypervisor.SnapshotRequest{SessionID: "b", Since: tokens})
	after := readAll(t, s2)
	for _, d := range s2.Disks() {
		if d.Changes != "incremental" {
			t.Fatalf("disk %s: changes %q", d.Key, d.Changes)
		}
		r, _ := s2.OpenDisk(ctx, d.Key)
		ext, ok, _ := r.Changed(ctx)
		if !ok || len(ext) == 0 || len(ext) > 5 {
			t.Fatalf("disk %s changed %v %v, want at most the 5 written blocks", d.Key, ext, ok)
		}
		// Everything outside the change set equals the first snapshot.
		old, cur := before[d.Key], after[d.Key]
		for _, e := range ext {
			copy(old[e.Offset:e.Offset+e.Length], cur[e.Offset:e.Offset+e.Length])
		}
		if !bytes.Equal(old, cur) {
			t.Fatalf("disk %s changed outside its change set", d.Key)
		}
	}
	// A failed backup rolls tracking back: the next one still diffs
	// against the first token and sees all writes since.
	if _, err := s2.Close(ctx, false); err != nil {
		t.Fatal(err)
	}
	c.Write(vm.Name, 1)
	s3, _ := c.Snapshot(ctx, vm.VMRef, hypervisor.SnapshotRequest{SessionID: "c", Since: tokens})
	for _, d := range s3.Disks() {
		r, _ := s3.OpenDisk(ctx, d.Key)
		if ext, ok, _ := r.Changed(ctx); !ok || len(ext) == 0 {
			t.Fatalf("rolled-back generation lost changes: %v %v", ext, ok)
		}
	}
	s3.Close(ctx, true)
	// An unknown token means a full read with a warning.
	s4, _ := c.Snapshot(ctx, vm.VMRef, hypervisor.SnapshotRequest{SessionID: "d", Since: map[string]string{"disk-0": "999"}})
	if d := s4.Disks()[0]; d.Changes != "full" || d.ChangeWarning == "" {
		t.Fatalf("unknown token: %+v", d)
	}
	s4.Close(ctx, true)
	if n := c.Counters(); n.OpenSessions != 0 || n.Creates != 4 || n.Removes != 4 {
		t.Fatalf("counters %+v", n)
	}
}

func TestCrashLeftoversAndForeignObjects(t *testing.T) {
	ctx := context.Background()
	c := New(Options{Seed: 2, VMs: 3})
	vms, _ := c.Inventory(ctx)
	s, _ := c.Snapshot(ctx, vms[0].VMRef, hypervisor.SnapshotRequest{SessionID: "x"})
	c.AddForeign(vms[0].Name, "nightly-by-admin")
	c.AddLeftover(vms[1].Name, "coffer-old")
	live, _ := c.Snapshot(ctx, vms[2].VMRef, hypervisor.SnapshotRequest{SessionID: "live"})
	_ = s
	c.Crash()
	if p := c.Peaks(); p.Now != 0 {
		t.Fatalf("%d still in flight after crash", p.Now)
	}
	if _, err := live.Close(ctx, true); !errors.Is(err, errGone) {
		t.Fatalf("close after crash: %v", err)
	}
	got, err := c.CleanupLeftovers(ctx)
	if err != nil || len(got) != 3 {
		t.Fatalf("cleanup = %+v, %v", got, err)
	}
	if o := c.Objects(vms[0].Name); !reflect.DeepEqual(o, []string{"nightly-by-admin"}) {
		t.Fatalf("foreign object touched: %v", o)
	}
	if got, _ := c.CleanupLeftovers(ctx); len(got) != 0 {
		t.Fatalf("second cleanup found %v", got)
	}
}

func TestGaugeAndLatency(t *testing.T) {
	ctx := context.Background()
	c := New(Options{Seed: 3, VMs: 6, Hosts: 1, Datastores: 1,
		SnapshotCreate: Latency{Min: time.Millisecond, Max: 2 * time.Millisecond}})
	c.TrackGroup("all", func(hypervisor.VM) bool { return true })
	vms, _ := c.Inventory(ctx)
	var wg sync.WaitGroup
	var sessions []hypervisor.Session
	var mu sync.Mutex
	for _, vm := range vms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := c.Snapshot(ctx, vm.VMRef, hypervisor.SnapshotRequest{SessionID: vm.ID})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			sessions = append(sessions, s)
			mu.Unlock()
		}()
	}
	wg.Wait()
	p := c.Peaks()
	if p.Total != 6 || p.MaxHost() != 6 || p.MaxDatastore() != 6 || p.Group["all"] != 6 || p.Now != 6 {
		t.Fatalf("peaks %+v", p)
	}
	for _, s := range sessions {
		s.Close(ctx, true)
	}
	if p := c.Peaks(); p.Now != 0 {
		t.Fatalf("%d in flight after closing all", p.Now)
	}
}

func TestFaults(t *testing.T) {
	ctx := context.Background()
	c := New(Options{Seed: 4, VMs: 2})
	vms, _ := c.Inventory(ctx)
	c.FailVM(vms[0].Name, hypervisor.ErrTransient, 1)
	if _, err := c.Snapshot(ctx, vms[0].VMRef, hypervisor.SnapshotRequest{SessionID: "1"}); !errors.Is(err, hypervisor.ErrTransient) {
		t.Fatalf("first call: %v", err)
	}
	s, err := c.Snapshot(ctx, vms[0].VMRef, hypervisor.SnapshotRequest{SessionID: "2"})
	if err != nil {
		t.Fatalf("second call: %v", err)
	}
	s.Close(ctx, true)
	c.HangVM(vms[1].Name, false)
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := c.Snapshot(tctx, vms[1].VMRef, hypervisor.SnapshotRequest{SessionID: "3"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hang: %v", err)
	}
	c.ClearFaults(vms[1].Name)
	c.FailReads(vms[1].Name, errors.New("disk gone"))
	s, _ = c.Snapshot(ctx, vms[1].VMRef, hypervisor.SnapshotRequest{SessionID: "4"})
	r, _ := s.OpenDisk(ctx, "disk-0")
	if _, err := r.ReadAt(make([]byte, 10), 0); err == nil {
		t.Fatal("injected read failure not reported")
	}
	s.Close(ctx, false)
	if _, err := c.Snapshot(ctx, vms[1].VMRef, hypervisor.SnapshotRequest{Mode: hypervisor.WithMemory}); !errors.Is(err, hypervisor.ErrUnsupported) {
		t.Fatalf("with-memory: %v", err)
	}
	if c.Peaks().Now != 0 || c.Counters().OpenSessions != 0 {
		t.Fatal("failed calls left sessions in flight")
	}
}

func TestStorageSnapshotHoldsVMSnapshotInstant(t *testing.T) {
	ctx := context.Background()
	c := New(Options{Seed: 5, VMs: 4, Datastores: 1})
	vms, _ := c.Inventory(ctx)
	s, _ := c.Snapshot(ctx, vms[0].VMRef, hypervisor.SnapshotRequest{SessionID: "g"})
	want := readAll(t, s)
	c.Write(vms[0].Name, 5) // after the VM snapshot: goes to the delta
	ss, err := c.StorageSnapshotter().SnapshotDatastore(ctx, "ds-001", "coffer-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r0, _ := s.OpenDisk(ctx, "disk-0")
	if _, err := r0.ReadAt(make([]byte, 1), 0); err == nil {
		t.Fatal("read from a released VM snapshot succeeded")
	}
	r, err := ss.OpenDisk(ctx, vms[0].VMRef, vms[0].Disks[0])
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, r.Size())
	r.ReadAt(got, 0)
	if !bytes.Equal(got, want["disk-0"]) {
		t.Fatal("storage snapshot does not hold the VM snapshot instant")
	}
	s.Close(ctx, true)
	ss.Delete(ctx)
	if n := c.Counters(); n.StorageTaken != 1 || n.StorageFreed != 1 || n.OpenSessions != 0 {
		t.Fatalf("counters %+v", n)
	}
}
