package vsphere

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/engine/enginetest"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/storagesnap"
)

// arrayScript is the site's exec storage provider of these tests: vcsim's
// datastores are local directories, so the "array" clones the directory
// of the datastore it is asked for into $SNAPS/<label>, and presents that
// copy. It follows the contract of docs/07-storage-integration.md.
const arrayScript = `#!/bin/sh
set -eu
snaps=%q
case "$COFFER_DATASTORE" in
%s
*) echo "no such datastore: $COFFER_DATASTORE" >&2; exit 2 ;;
esac
case "$1" in
create)
  test -n "$COFFER_FILES"
  mkdir "$snaps/$COFFER_LABEL.part"
  cp -a "$dir/." "$snaps/$COFFER_LABEL.part/"
  mv "$snaps/$COFFER_LABEL.part" "$snaps/$COFFER_LABEL" ;;
present) echo "$snaps/$COFFER_LABEL" ;;
list) ls "$snaps" ;;
delete) rm -rf "$snaps/$COFFER_LABEL" "$snaps/$COFFER_LABEL.part" ;;
*) exit 3 ;;
esac
`

// array writes the provider script for the simulator's datastores and
// returns the providers section naming them, and the directory the
// storage snapshots are made in.
func (s *sim) array(t testing.TB, conn string) (policy.StorageSnapshots, string) {
	dir := t.TempDir()
	snaps := filepath.Join(dir, "snaps")
	if err := os.Mkdir(snaps, 0o755); err != nil {
		t.Fatal(err)
	}
	var cases string
	p := policy.StorageProvider{Name: "array", Kind: "exec", Connections: []string{conn}}
	for name, d := range s.dsDirs {
		cases += fmt.Sprintf("'[%s]') dir=%q ;;\n", name, d)
		p.Datastores = append(p.Datastores, policy.VSphereDatastore(name))
	}
	script := filepath.Join(dir, "array.sh")
	if err := os.WriteFile(script, fmt.Appendf(nil, arrayScript, snaps, cases), 0o755); err != nil {
		t.Fatal(err)
	}
	p.Command = []string{script}
	return policy.StorageSnapshots{p}, snaps
}

// watchedStorage wraps the site's provider to check the group's order on
// the simulator: every VM under its coffer snapshot when the storage
// snapshot is taken, none while the disks are read. after, when set,
// runs once the storage snapshot exists (production writing on).
type watchedStorage struct {
	hypervisor.StorageSnapshotter
	s     *sim
	vms   []types.ManagedObjectReference
	after func()
	// asIs: the policy takes no VM snapshot (snapshot: as-is), so none
	// is expected at the storage snapshot either.
	asIs bool

	mu       sync.Mutex
	problems []string
	taken    int
	reads    int
}

func (w *watchedStorage) problem(f string, a ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.problems = append(w.problems, fmt.Sprintf(f, a...))
}

// underSnapshot counts the VMs that carry a coffer snapshot now.
func (w *watchedStorage) underSnapshot() int {
	n := 0
	for _, vm := range w.vms {
		if cofferSnapshot(w.s.vm(vm).Snapshot) != nil {
			n++
		}
	}
	return n
}

func (w *watchedStorage) SnapshotDatastore(ctx context.Context, ds, label string, disks []hypervisor.DiskInfo) (hypervisor.StorageSnapshot, error) {
	if n, want := w.underSnapshot(), len(w.vms); n != want && !w.asIs || n != 0 && w.asIs {
		w.problem("storage snapshot of %s taken with %d of %d VMs under their coffer snapshot (as-is: %v)", ds, n, want, w.asIs)
	}
	ss, err := w.StorageSnapshotter.SnapshotDatastore(ctx, ds, label, disks)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.taken++
	w.mu.Unlock()
	if w.after != nil {
		w.after()
	}
	return &watchedSnapshot{StorageSnapshot: ss, w: w}, nil
}

type watchedSnapshot struct {
	hypervisor.StorageSnapshot
	w *watchedStorage
}

func (ws *watchedSnapshot) OpenDisk(ctx context.Context, vm hypervisor.VMRef, d hypervisor.DiskInfo) (hypervisor.DiskReader, error) {
	if n := ws.w.underSnapshot(); n != 0 {
		ws.w.problem("disk %s of %s read while %d VMs still carry a coffer snapshot", d.Name, vm.Name, n)
	}
	ws.w.mu.Lock()
	ws.w.reads++
	ws.w.mu.Unlock()
	return ws.StorageSnapshot.OpenDisk(ctx, vm, d)
}

// TestGroupDatastoreOnVSphere protects the VMs of one vSphere datastore
// with group: datastore, a full run then an incremental one: each run
// snapshots every VM, takes one storage snapshot through the exec
// provider, releases the VM snapshots before any disk is read, and reads
// the disks from the storage snapshot's copy of the datastore. Production
// writes on after the storage snapshot, so a point equal to the disk at
// the snapshot instant proves the read came from the storage snapshot.
func TestGroupDatastoreOnVSphere(t *testing.T) {
	ctx := context.Background()
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 3, DiskSize: 1 << 20})
	sh := newCBTShim(t, s)
	c := sh.connect(t, nil)
	r := newRepo(t)
	providers, snaps := s.array(t, "vc")
	state := filepath.Join(t.TempDir(), "state")
	for i, vm := range s.vms {
		sh.write(t, vm, 0, int64(i)*8192, bytes.Repeat([]byte{byte(i + 1)}, 96<<10))
	}
	atSnapshot := map[string][]byte{}
	round := 0
	w := &watchedStorage{StorageSnapshotter: storagesnap.For(providers, state, nil)["vc"], s: s, vms: s.vms}
	w.after = func() {
		for i, vm := range s.vms {
			atSnapshot[vm.Value] = sh.read(t, vm, 0)
			sh.write(t, vm, 0, 700<<10, bytes.Repeat([]byte{byte(0x40 + 8*round + i)}, 4<<10))
		}
	}
	cat := enginetest.NewCatalog()
	eng, err := engine.New(ctx, engine.Options{Config: &policy.Config{Limits: policy.Limits{Tasks: 4}, StorageSnapshots: providers},
		Catalog: cat, Connectors: map[string]hypervisor.Connector{"vc": c},
		StorageSnapshotters: map[string]hypervisor.StorageSnapshotter{"vc": w},
		OpenRepository:      func(context.Context, string) (*repo.Repository, error) { return r, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	kept := policy.Policy{Name: "zdb", Connection: "vc", Group: "datastore", KeepStorageSnapshots: 2}
	if _, err := eng.Run(ctx, kept); err == nil || !strings.Contains(err.Error(), "keep-storage-snapshots on vSphere connection vc") {
		t.Fatalf("keeping storage snapshots of a vSphere datastore: %v", err)
	}
	p := policy.Policy{Name: "vmfs", Connection: "vc", Group: "datastore"}
	for run, wantMode := range []string{"full", "incremental"} {
		round = run
		if run == 1 {
			for i, vm := range s.vms {
				sh.write(t, vm, 0, 300<<10, bytes.Repeat([]byte{byte(0x90 + i)}, 16<<10))
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
		if w.taken != run+1 || w.reads != (run+1)*len(s.vms) {
			t.Fatalf("run %d: %d storage snapshots and %d disk reads from them, want %d and %d", run, w.taken, w.reads, run+1, (run+1)*len(s.vms))
		}
		checkGroupEvents(t, cat, res.Job.ID, len(s.vms))
		checkPointsAtSnapshot(t, r, s.vms, atSnapshot, wantMode)
	}
	if len(w.problems) > 0 {
		t.Fatalf("order of the group: %v", w.problems)
	}
	assertNothingLeft(t, s, snaps, state)
}

// checkGroupEvents finds the job's one group-snapshot event for all VMs.
func checkGroupEvents(t *testing.T, cat *enginetest.Catalog, job int64, vms int) {
	t.Helper()
	evs, err := cat.ListEvents(context.Background(), catalog.EventFilter{JobID: job})
	if err != nil {
		t.Fatal(err)
	}
	groups := 0
	for _, e := range evs {
		if e.Kind == "group-snapshot" {
			groups++
			if fmt.Sprint(e.Fields["vms"]) != fmt.Sprint(vms) {
				t.Fatalf("group-snapshot event for %v VMs, want %d: %s", e.Fields["vms"], vms, e.Message)
			}
		}
	}
	if groups != 1 {
		t.Fatalf("%d group-snapshot events, want 1", groups)
	}
}

// checkPointsAtSnapshot restores each VM's newest point and compares it
// with the disk as it was when the storage snapshot was taken.
func checkPointsAtSnapshot(t *testing.T, r *repo.Repository, vms []types.ManagedObjectReference, want map[string][]byte, mode string) {
	t.Helper()
	points, err := r.Points(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, vm := range vms {
		var last *repo.Point
		for _, p := range points {
			if p.Source.VMID == vm.Value && (last == nil || p.Time.After(last.Time)) {
				last = p
			}
		}
		if last == nil || last.Mode != mode {
			t.Fatalf("VM %d: newest point %+v, want a %s one", i, last, mode)
		}
		if !bytes.Equal(restoreBytes(t, r, last), want[vm.Value]) {
			t.Fatalf("VM %d: the %s point does not restore to the disk at the storage snapshot", i, mode)
		}
	}
}

// assertNothingLeft: no VM carries a coffer snapshot, the array holds no
// snapshot, and no journal of either remains.
func assertNothingLeft(t *testing.T, s *sim, snaps, state string) {
	t.Helper()
	for i, vm := range s.vms {
		if cofferSnapshot(s.vm(vm).Snapshot) != nil {
			t.Fatalf("VM %d keeps a coffer snapshot", i)
		}
	}
	if left, _ := os.ReadDir(snaps); len(left) != 0 {
		t.Fatalf("storage snapshots left on the array: %v", left)
	}
	if js, _ := filepath.Glob(filepath.Join(state, "storage-snapshots", "*.json")); len(js) != 0 {
		t.Fatalf("storage snapshot journals left: %v", js)
	}
}

// TestGroupDatastoreAsIsOnVSphere: with snapshot: as-is, the running VMs
// of a group get no VM snapshot at all; the storage snapshot alone is
// their (crash-consistent) point, read from it.
func TestGroupDatastoreAsIsOnVSphere(t *testing.T) {
	ctx := context.Background()
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 2, DiskSize: 1 << 20})
	sh := newCBTShim(t, s)
	c := sh.connect(t, nil)
	r := newRepo(t)
	providers, snaps := s.array(t, "vc")
	state := filepath.Join(t.TempDir(), "state")
	atSnapshot := map[string][]byte{}
	w := &watchedStorage{StorageSnapshotter: storagesnap.For(providers, state, nil)["vc"], s: s, vms: s.vms, asIs: true}
	w.after = func() {
		for i, vm := range s.vms {
			atSnapshot[vm.Value] = sh.read(t, vm, 0)
			sh.write(t, vm, 0, 0, bytes.Repeat([]byte{byte(0x20 + i)}, 4<<10))
		}
	}
	for i, vm := range s.vms {
		sh.write(t, vm, 0, 64<<10, bytes.Repeat([]byte{byte(i + 1)}, 32<<10))
	}
	eng, err := engine.New(ctx, engine.Options{Config: &policy.Config{Limits: policy.Limits{Tasks: 4}, StorageSnapshots: providers},
		Catalog: enginetest.NewCatalog(), Connectors: map[string]hypervisor.Connector{"vc": c},
		StorageSnapshotters: map[string]hypervisor.StorageSnapshotter{"vc": w},
		OpenRepository:      func(context.Context, string) (*repo.Repository, error) { return r, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	res, err := eng.Run(ctx, policy.Policy{Name: "array-only", Connection: "vc", Group: "datastore", Snapshot: "as-is"})
	if err != nil || res.Job.TasksOK != len(s.vms) {
		t.Fatalf("%v %+v %+v", err, res.Job, res.Failed())
	}
	if w.taken != 1 || w.reads != len(s.vms) || len(w.problems) > 0 {
		t.Fatalf("%d storage snapshots, %d reads from them, problems: %v", w.taken, w.reads, w.problems)
	}
	checkPointsAtSnapshot(t, r, s.vms, atSnapshot, "full")
	assertNothingLeft(t, s, snaps, state)
}
