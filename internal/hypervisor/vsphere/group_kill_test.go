package vsphere

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/engine/enginetest"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/storagesnap"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestKilledGroupLeavesNothing runs a group: datastore job in a child
// process and SIGKILLs it at two points: while its storage snapshot is
// taken (every VM under its coffer snapshot), and in the middle of the
// reads (one VM read, the next one opening). The next start on the same
// state directory leaves no VM snapshot and no storage snapshot.
func TestKilledGroupLeavesNothing(t *testing.T) {
	for _, at := range []string{"storage-snapshot", "mid-read"} {
		t.Run(at, func(t *testing.T) {
			s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 3, DiskSize: 1 << 20})
			providers, snaps := s.array(t, "vc")
			state := filepath.Join(t.TempDir(), "state")
			prov, _ := json.Marshal(providers)
			testutil.KillAtPoint(t, "TestGroupKillChild", "KILL_AT="+at, "KILL_URL="+s.url.String(), "KILL_THUMB="+s.thumb,
				"KILL_STATE="+state, "KILL_PROVIDERS="+string(prov))
			under := 0
			for _, vm := range s.vms {
				if cofferSnapshot(s.vm(vm).Snapshot) != nil {
					under++
				}
			}
			if want := map[string]int{"storage-snapshot": 3, "mid-read": 0}[at]; under != want {
				t.Fatalf("%d VMs under a coffer snapshot at the kill, want %d", under, want)
			}
			if held, _ := os.ReadDir(snaps); len(held) != 1 {
				t.Fatalf("the array holds %d snapshots at the kill, want the job's one", len(held))
			}

			// The next start: the connector's and the providers' cleanup.
			ctx := context.Background()
			c := s.connect(t, func(cfg *Config) { cfg.StateDir = state })
			if _, err := c.CleanupLeftovers(ctx); err != nil {
				t.Fatal(err)
			}
			left, err := storagesnap.For(providers, state, nil)["vc"].(hypervisor.StorageCleaner).CleanupLeftovers(ctx)
			if err != nil || len(left) != 1 || left[0].Kind != "storage-snapshot" {
				t.Fatalf("storage leftovers removed: %+v, %v", left, err)
			}
			assertNothingLeft(t, s, snaps, state)
			if js, _ := filepath.Glob(filepath.Join(journalDir(state), "*.json")); len(js) != 0 {
				t.Fatalf("VM snapshot journals left: %v", js)
			}
		})
	}
}

// TestGroupKillChild is the child of TestKilledGroupLeavesNothing: it
// runs the group job and stops at its kill point, waiting to be killed.
func TestGroupKillChild(t *testing.T) {
	testutil.KillChild(t)
	at := os.Getenv("KILL_AT")
	ctx := context.Background()
	c, err := New(ctx, Config{URL: os.Getenv("KILL_URL"), User: simUser, Password: simPass,
		Thumbprint: os.Getenv("KILL_THUMB"), StateDir: os.Getenv("KILL_STATE"), TaskPoll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var providers policy.StorageSnapshots
	if err := json.Unmarshal([]byte(os.Getenv("KILL_PROVIDERS")), &providers); err != nil {
		t.Fatal(err)
	}
	st := &stopAt{StorageSnapshotter: storagesnap.For(providers, os.Getenv("KILL_STATE"), nil)["vc"], at: at}
	r := newRepo(t)
	eng, err := engine.New(ctx, engine.Options{Config: &policy.Config{Limits: policy.Limits{Tasks: 4}, StorageSnapshots: providers},
		Catalog: enginetest.NewCatalog(), Connectors: map[string]hypervisor.Connector{"vc": c},
		StorageSnapshotters: map[string]hypervisor.StorageSnapshotter{"vc": st},
		OpenRepository:      func(context.Context, string) (*repo.Repository, error) { return r, nil }})
	if err != nil {
		t.Fatal(err)
	}
	res, err := eng.Run(ctx, policy.Policy{Name: "vmfs", Connection: "vc", Group: "datastore"})
	t.Fatalf("the job ended instead of being killed: %v %+v", err, res)
}

// stopAt blocks the job for good at its kill point, once it is there.
type stopAt struct {
	hypervisor.StorageSnapshotter
	at string
}

func stop() { testutil.KillPoint() }

func (s *stopAt) SnapshotDatastore(ctx context.Context, ds, label string, disks []hypervisor.DiskInfo) (hypervisor.StorageSnapshot, error) {
	ss, err := s.StorageSnapshotter.SnapshotDatastore(ctx, ds, label, disks)
	if err == nil && s.at == "storage-snapshot" {
		stop()
	}
	return &stopRead{StorageSnapshot: ss}, err
}

// stopRead stops when the second VM opens its disk: the first one is
// being read (or read) from the storage snapshot.
type stopRead struct {
	hypervisor.StorageSnapshot
	mu  sync.Mutex
	vms map[string]bool
}

func (s *stopRead) OpenDisk(ctx context.Context, vm hypervisor.VMRef, d hypervisor.DiskInfo) (hypervisor.DiskReader, error) {
	s.mu.Lock()
	if s.vms == nil {
		s.vms = map[string]bool{}
	}
	s.vms[vm.ID] = true
	second := len(s.vms) == 2
	s.mu.Unlock()
	if second {
		stop()
	}
	return s.StorageSnapshot.OpenDisk(ctx, vm, d)
}
