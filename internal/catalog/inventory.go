package catalog

import (
	"context"
	"time"
)

// Inventory is each connection's VMs as its last refresh listed them:
// what the server's VM view reads, a page at a time, instead of asking
// the hypervisors (a vCenter takes seconds to list 10,000 VMs).
type Inventory interface {
	// ReplaceInventory makes vms the inventory of connection as listed
	// at `at`, in one transaction: rows of VMs not listed are deleted; a
	// VM marked Busy keeps the rest of its row (its last known state)
	// and only becomes busy, or is inserted as given when it has no row;
	// the connection's state records the success (InventoryState). A
	// replace older than the connection's last success is ignored, so
	// that a slow refresh never undoes a newer one.
	ReplaceInventory(ctx context.Context, connection string, at time.Time, vms []VMRecord) error
	// RecordInventoryFailure records a failed refresh of connection at
	// `at`: its rows stay as they were, and its state carries msg.
	RecordInventoryFailure(ctx context.Context, connection string, at time.Time, msg string) error
	// ListInventory lists a page of VMs by connection, name and ID.
	ListInventory(ctx context.Context, f InventoryFilter) ([]VMRecord, error)
	// InventoryStates returns the refresh state of every connection ever
	// refreshed, by connection.
	InventoryStates(ctx context.Context) ([]InventoryState, error)
}

// InventoryFilter selects VMs of the inventory; zero fields match
// everything. Limit 0 means no limit.
type InventoryFilter struct {
	Connections []string
	// Protection is "protected" (a policy selects the VM), "unprotected"
	// (none does) or "" (both).
	Protection string
	// NameContains matches names containing it, ignoring ASCII case.
	NameContains string
	// Search matches VMs whose name, a space and connection contain it,
	// ignoring ASCII case: the console's search box.
	Search string
	// VMs keeps only these VMs: the whole rows of a page whose VMs were
	// chosen among brief ones.
	VMs   []VMRef
	After VMCursor // continue after this VM (keyset paging)
	Limit int
	// Brief reads only what choosing VMs needs: the connection, ID, name,
	// host, datastores and tags that policies select by, and Protected.
	// The rest of each record (its disks, power state, the policies of
	// the last refresh) stays zero, so that judging a fleet of 10,000
	// VMs decodes no VM's disks.
	Brief bool
}

// Protection filters of InventoryFilter.
const (
	Protected   = "protected"
	Unprotected = "unprotected"
)

// VMCursor is a position in the inventory's listing, which is by
// connection, then name, then ID: the last VM of a page. The zero cursor
// is the listing's start.
type VMCursor struct {
	Connection, Name, ID string
}

// Cursor is the position of v in the listing.
func (v VMRecord) Cursor() VMCursor {
	return VMCursor{Connection: v.Connection, Name: v.Name, ID: v.ID}
}

// InventoryState is how the last refreshes of a connection went.
type InventoryState struct {
	Connection string
	// RefreshedAt is the last successful refresh (zero: none yet);
	// AttemptedAt the last one tried, Error its error ("" when it
	// succeeded).
	RefreshedAt time.Time
	AttemptedAt time.Time
	Error       string
	VMs         int // listed by the last success
}

// DiskRecord is one virtual disk of a VM in the inventory.
type DiskRecord struct {
	Key       string `json:"key"`
	Name      string `json:"name,omitempty"`
	Size      int64  `json:"size"`
	Datastore string `json:"datastore,omitempty"`
	Path      string `json:"path,omitempty"`
	Format    string `json:"format,omitempty"`
}
