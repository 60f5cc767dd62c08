package hypervisor

import "context"

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
// Providers (array vendors, ZFS, LVM) come later; today only the test fake in
// hypervisor/fake implements it. Like connectors, a provider names what it
// creates after the label it is given ("coffer-..."), so its own leftovers
// can be recognised and nothing else is ever touched.
type StorageSnapshotter interface {
	// SnapshotDatastore takes one crash-consistent snapshot of the storage
	// behind a datastore.
	SnapshotDatastore(ctx context.Context, datastore, label string) (StorageSnapshot, error)
}

// StorageSnapshot is one storage-level snapshot of a datastore.
type StorageSnapshot interface {
	// OpenDisk opens one VM disk file as it is inside the storage snapshot.
	// Its Changed method may report false: the engine takes change sets
	// from the hypervisor session instead.
	OpenDisk(ctx context.Context, vm VMRef, disk DiskInfo) (DiskReader, error)
	// Delete removes the storage snapshot. It is idempotent.
	Delete(ctx context.Context) error
}
