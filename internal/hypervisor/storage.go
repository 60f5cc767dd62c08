package hypervisor

import (
	"context"
	"errors"
)

// StorageSnapshotter takes snapshots at the storage layer (an array's
// FlashCopy, a ZFS or LVM snapshot) of a whole datastore, for storage-level
// (group) protection:
//
//  1. the engine snapshots (or quiesces) every VM of a batch on one
//     datastore concurrently, within the limits, through the Connector;
//  2. it takes ONE storage snapshot of the datastore;
//  3. it Releases every VM session at once, so production VMs run without
//     hypervisor snapshots again after seconds, not hours;
//  4. it reads every VM from the storage snapshot at leisure, and deletes
//     the storage snapshot when the last VM of the batch is done.
//
// While a VM snapshot exists, the hypervisor writes to a delta and leaves the
// VM's base disk files unchanged, so the base files inside the storage
// snapshot hold exactly the VM-snapshot instant. Change sets still come from
// the (released) hypervisor sessions, which keep their bookkeeping.
//
// QEMU has no delta file: its sessions for a batch are taken with
// SnapshotRequest.Hold, which keeps each VM stopped (and its filesystems
// frozen when quiesced) until Release, so the disk files are still while
// the storage snapshot is taken.
//
// Providers live in internal/storagesnap (reflink, btrfs, exec). Like
// connectors, a provider names what it creates after the label it is given
// ("coffer-..."), journals it before creating it, so its own leftovers can
// be recognised and removed after a crash (StorageCleaner), and never
// touches anything else.
type StorageSnapshotter interface {
	// SnapshotDatastore takes one crash-consistent snapshot of the storage
	// behind a datastore. disks are the disk files of the batch's VMs on
	// it: a provider that snapshots files rather than a volume (reflink)
	// snapshots exactly those.
	SnapshotDatastore(ctx context.Context, datastore, label string, disks []DiskInfo) (StorageSnapshot, error)
}

// StorageCleaner is implemented by providers that can find and remove the
// storage snapshots a killed coffer process left behind.
type StorageCleaner interface {
	CleanupLeftovers(ctx context.Context) ([]Leftover, error)
}

// ErrStorageUnsupported: the datastore cannot be snapshotted by its
// provider (not on a reflink filesystem, not a btrfs subvolume, not
// covered by any provider). A policy may fall back to VM-by-VM backups
// on it (storage-fallback: vm).
var ErrStorageUnsupported = errors.New("storage snapshot not possible on this datastore")

// StorageSnapshot is one storage-level snapshot of a datastore.
type StorageSnapshot interface {
	// OpenDisk opens one VM disk file as it is inside the storage snapshot.
	// Its Changed method may report false: the engine takes change sets
	// from the hypervisor session instead.
	OpenDisk(ctx context.Context, vm VMRef, disk DiskInfo) (DiskReader, error)
	// Delete removes the storage snapshot. It is idempotent.
	Delete(ctx context.Context) error
}

// StorageKeeper is implemented by storage snapshots that can outlive the
// run that read them: a policy with keep-storage-snapshots keeps the
// newest ones of each datastore as fast restore points (restored by
// cloning, without the repository) instead of deleting them.
type StorageKeeper interface {
	// Keep turns the snapshot into a kept restore point of k.Policy; it
	// is not deleted after an error.
	Keep(ctx context.Context, k KeptSnapshot) error
	// PruneKept deletes the kept snapshots of the same policy and
	// datastore beyond the newest retain (this one included), returning
	// their labels.
	PruneKept(ctx context.Context, retain int) (pruned []string, err error)
}

// KeptSnapshot is what a kept storage snapshot records of its run: enough
// to list it beside the repository's points and to restore its VMs.
type KeptSnapshot struct {
	Policy     string
	Connection string
	JobID      int64
	// SnapshotMode is the VM snapshot mode the batch was taken with.
	SnapshotMode string
	VMs          []KeptVM
}

// KeptVM is one VM read from a kept storage snapshot, with the disks of it
// that the snapshot holds.
type KeptVM struct {
	VMRef
	Disks []DiskInfo
}

// StorageChangeTracker is implemented by storage snapshots that can tell
// which ranges of a disk changed since the kept storage snapshot of an
// earlier run (reflink clones and btrfs snapshots share the blocks nobody
// wrote: FIEMAP). The engine asks when the hypervisor's change tracking
// is lost (a QEMU crash or a host reboot took the dirty bitmaps), so an
// incremental stays incremental.
type StorageChangeTracker interface {
	// ChangedSince returns a superset of the ranges of disk that changed
	// since the kept snapshot of job jobID was taken, and that snapshot's
	// label; ErrNotFound when no kept snapshot of that job holds the disk.
	ChangedSince(ctx context.Context, jobID int64, vm VMRef, disk DiskInfo) (changed []Extent, base string, err error)
}
