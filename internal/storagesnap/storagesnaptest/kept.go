// Package storagesnaptest makes the storage snapshots other packages'
// tests need, as the engine makes them, on real loop-mounted filesystems.
package storagesnaptest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/storagesnap"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// Kept is a storage snapshot a policy keeps, of one VM (web-1) with one
// raw disk on an XFS with reflinks.
type Kept struct {
	Label string
	// Mnt is the XFS's mount point (the datastore root); Disk the VM's
	// disk file in it.
	Mnt, Disk string
	// Then is the disk as the snapshot holds it; production has written
	// other bytes over all of it since.
	Then []byte
}

// Keep mounts an XFS (reflink=1), writes web-1's disk, has the reflink
// provider snapshot it under the state directory and keeps the snapshot
// for the policy, as job jobID's run would, then overwrites the disk.
func Keep(t *testing.T, state, label, policyName string, jobID int64, size int) Kept {
	t.Helper()
	mnt := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	ds := filepath.Join(mnt, "vms")
	if err := os.Mkdir(ds, 0o755); err != nil {
		t.Fatal(err)
	}
	k := Kept{Label: label, Mnt: mnt, Disk: filepath.Join(ds, "web-1.raw"), Then: bytes.Repeat([]byte("then"), size/4)}
	if err := os.WriteFile(k.Disk, k.Then, 0o600); err != nil {
		t.Fatal(err)
	}
	d := hypervisor.DiskInfo{Key: "vda", Name: "vda", Size: int64(len(k.Then)), Datastore: ds, Path: k.Disk, Format: "raw"}
	ss, err := storagesnap.Create(context.Background(), policy.StorageProvider{Name: "xfs", Kind: "reflink"}, mnt, state, label, []hypervisor.DiskInfo{d})
	if err != nil {
		t.Fatal(err)
	}
	keep := hypervisor.KeptSnapshot{Policy: policyName, Connection: "lab", JobID: jobID, SnapshotMode: "crash-consistent",
		VMs: []hypervisor.KeptVM{{VMRef: hypervisor.VMRef{Name: "web-1", ID: "u-1"}, Disks: []hypervisor.DiskInfo{d}}}}
	if err := ss.(hypervisor.StorageKeeper).Keep(context.Background(), keep); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(k.Disk, bytes.Repeat([]byte("now!"), size/4), 0o600); err != nil { // production moves on
		t.Fatal(err)
	}
	return k
}
