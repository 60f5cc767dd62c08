// Package hypervisor defines what coffer needs from a virtualisation
// platform, independent of the platform: an inventory of VMs, a consistent
// point-in-time snapshot of all disks of one VM, reading those disks
// (allocated and changed ranges only), releasing everything afterwards, and
// creating a new VM from a recorded configuration at restore time.
//
// Implementations live in subpackages (qemu, libvirt, vsphere) and in fake
// (an in-memory connector for engine tests and benchmarks). The job engine,
// the backup pipeline and restore only ever see these interfaces. The
// contract written on them below is checked, against each connector's
// real platform, by the suite in connectortest: a new connector runs it
// too.
//
// # Session lifecycle
//
//	s, err := conn.Snapshot(ctx, vm, req)   // all disks frozen in one atomic step
//	for _, d := range s.Disks() { r, _ := s.OpenDisk(ctx, d.Key); ...read...; r.Close() }
//	tokens, err := s.Close(ctx, ok)         // ALWAYS called; releases snapshot, exports, temp files
//
// Close(ctx, true) advances change tracking: the returned per-disk tokens are
// the base for the next incremental. Close(ctx, false) rolls tracking back
// so that the next backup covers everything this one would have covered.
// Once every session is closed, nothing the connector created for them is
// left on the hypervisor (block nodes, exports, jobs, VM snapshots) or in
// its state directory, except the change tracking the next backup of each
// chain needs; CleanupLeftovers then finds nothing.
//
// # Crash safety
//
// A connector records what it is about to create (bitmaps, block nodes,
// exports, overlays, VM snapshots) in durable state before creating it, and
// CleanupLeftovers removes whatever a dead coffer process left behind. It
// never touches objects it did not create: everything it creates carries a
// recognisable name (prefix "coffer-") and is listed in its journal.
package hypervisor

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"time"
)

// Errors connectors return (wrapped) so the engine can decide on retries.
var (
	// ErrTransient: a temporary condition (busy, timeout talking to the
	// management endpoint, task in progress); the engine may retry.
	ErrTransient = errors.New("transient hypervisor error")
	// ErrNotFound: the VM or disk no longer exists.
	ErrNotFound = errors.New("vm or disk not found")
	// ErrUnsupported: the requested mode is not possible on this VM/platform.
	ErrUnsupported = errors.New("not supported")
	// ErrQuiesceFailed: quiescing was required by policy but the guest agent
	// / VMware Tools did not answer or refused.
	ErrQuiesceFailed = errors.New("guest quiesce failed")
	// ErrSnapshotSpace: the snapshot's temporary space ran out (QEMU
	// fleecing overlay full); production was kept running, the backup failed.
	ErrSnapshotSpace = errors.New("snapshot space exhausted")
)

// Connector is one connection to a hypervisor (a set of QEMU monitors, a
// vCenter or ESXi host). Safe for concurrent use by many sessions.
type Connector interface {
	// Kind names the platform: "qemu", "vsphere", "fake".
	Kind() string
	// Inventory lists the VMs this connection can protect, each with an
	// ID that stays the same from one inventory to the next and its disks
	// with keys unique within the VM and their sizes.
	Inventory(ctx context.Context) ([]VM, error)
	// Snapshot freezes all disks of a VM at one instant, as req asks, and
	// returns the session through which they are read: writes after it
	// returns do not reach the session's reads. A VM that does not exist
	// is ErrNotFound; a mode the VM or platform cannot take is
	// ErrUnsupported; a quiesce that QuiesceRequired needs and that cannot
	// happen is ErrQuiesceFailed. A failed Snapshot (a cancelled ctx
	// included) leaves nothing behind.
	Snapshot(ctx context.Context, vm VMRef, req SnapshotRequest) (Session, error)
	// CleanupLeftovers removes what crashed coffer processes created and
	// left behind, and reports what it removed: nothing, when every
	// session of this process was closed.
	CleanupLeftovers(ctx context.Context) ([]Leftover, error)
}

// BusyLister is a Connector that can list its VMs without waiting for
// those it cannot describe now (a QEMU monitor held by a backup): they
// come back marked Busy instead. The inventory's refresher uses it; a
// backup, which must describe the VM it reads, waits with Inventory.
type BusyLister interface {
	InventoryNow(ctx context.Context) ([]VM, error)
}

// Noter is a Session that can say how it reads its disks, or a NewVM how
// it wrote them (the route the bytes take, a transport chosen), as lines
// for the task log.
type Noter interface {
	Notes() []string
}

// VMRef identifies a VM within one connector.
type VMRef struct {
	ID   string // stable: QEMU VM UUID, vSphere instance UUID or MoRef
	Name string
}

// VM is an inventory entry.
type VM struct {
	VMRef
	Host       string            // hypervisor host the VM runs on
	Datastores []string          // datastores holding its disks
	Tags       map[string]string // platform tags / custom attributes
	PowerState string            // "running", "paused", "stopped", "suspended"
	// GuestAgent reports a responding guest agent (qemu-guest-agent,
	// VMware Tools) so quiesced snapshots are possible.
	GuestAgent bool
	// ChangeTracking reports changed block tracking is enabled on all disks.
	ChangeTracking bool
	Disks          []DiskInfo
	// Busy: the VM is there but could not be described now (a backup
	// holds its QEMU monitor, which serves one client at a time). Only
	// what names it is set: its ID when known, else the tags that find
	// it (its monitor's socket); the rest is zero, not its state.
	Busy bool
}

// ProvisionedBytes is the sum of disk sizes, the engine's size estimate.
func (vm VM) ProvisionedBytes() int64 {
	var n int64
	for _, d := range vm.Disks {
		n += d.Size
	}
	return n
}

// DiskInfo describes one virtual disk in the inventory.
type DiskInfo struct {
	Key       string // stable identity within the VM (QEMU device id, vSphere device key)
	Name      string // human label ("vda", "Hard disk 1")
	Size      int64
	Datastore string
	Path      string // file on its datastore ("/vm/disk.qcow2", "[ds1] vm/vm.vmdk")
	Format    string // "qcow2", "raw", "vmdk-flat", ...
}

// SnapshotMode is how the point-in-time image is taken.
type SnapshotMode string

const (
	// CrashConsistent: disks frozen at one instant, like a power cut.
	CrashConsistent SnapshotMode = "crash-consistent"
	// Quiesced: filesystems flushed and frozen by the guest agent around the
	// instant. Whether a missing agent fails the backup is QuiescePolicy.
	Quiesced SnapshotMode = "quiesced"
	// WithMemory: disks plus the VM's RAM and device state, so a restore can
	// resume the running VM.
	WithMemory SnapshotMode = "with-memory"
	// Suspend: the VM is paused (or suspended) for the snapshot, then resumed.
	Suspend SnapshotMode = "suspend"
	// AsIs: no hypervisor action; for storage-level snapshots where the
	// storage layer provides consistency.
	AsIs SnapshotMode = "as-is"
)

// QuiescePolicy decides what happens when quiescing is impossible.
type QuiescePolicy string

const (
	// QuiesceFallback: continue crash-consistent and add a warning.
	QuiesceFallback QuiescePolicy = "fallback"
	// QuiesceRequired: fail the VM with ErrQuiesceFailed.
	QuiesceRequired QuiescePolicy = "required"
)

// SnapshotRequest says how to take a snapshot.
type SnapshotRequest struct {
	// SessionID names everything the connector creates for this session
	// ("coffer-<SessionID>-..."), so leftovers can be traced to it.
	SessionID string
	// Chain names the backup chain (policy and repository) the session
	// belongs to. A connector that keeps change tracking per chain
	// (libvirt's checkpoints) names what it creates after it, so that two
	// chains of one VM never consume each other's tracking. "" is one
	// default chain.
	Chain   string
	Mode    SnapshotMode
	Quiesce QuiescePolicy
	// Since holds, per disk key, the change token returned by Close of the
	// backup point to diff against (the previous backup for incremental,
	// the last full for differential). Empty means a full read. A token
	// the connector cannot use (never issued, from a lost bitmap, of a
	// resized disk) reads that disk in full and says why in
	// DiskSnapshot.ChangeWarning; it is never an empty change set.
	Since map[string]string
	// Differential asks for changes since Since while keeping the tracking
	// base where it is (the next differential diffs against the same full).
	Differential bool
	// Track starts change tracking if it is off (vSphere: enable CBT; QEMU:
	// create persistent bitmaps), so the next backup can be incremental.
	Track bool
	// Timeouts for individual hypervisor operations; zero means the
	// connector's default.
	Timeouts Timeouts
	// Hold: a storage snapshot of the VM's datastore follows, and the
	// session's disks are read from it, not through the session. A
	// connector whose snapshot leaves the disk files changing (QEMU
	// fleecing) instead keeps the VM stopped, and frozen when quiesced,
	// until Release, and takes no snapshot of its own; change tracking
	// is handed over at the stop as usual. Release must follow soon.
	Hold bool
	// Owner names who takes the snapshot when it is not this process
	// alone: a fleet worker's registration ("worker proxy1 epoch 3"). A
	// connector that leaves a mark on the VM (a vSphere snapshot's
	// description) records it, so that another process can tell whose a
	// leftover is. "" (a single coffer) records none.
	Owner string
	// OwnerGone, when set, is asked about the owner another process's
	// coffer snapshot on the VM names: true means that owner is dead
	// (its registration lost, replaced or gone) and its snapshot a
	// leftover the connector removes before it takes its own. Unset, or
	// for a snapshot without an owner, the connector refuses as before.
	OwnerGone func(ctx context.Context, owner string) (bool, error)
}

// Timeouts bound individual hypervisor operations.
type Timeouts struct {
	SnapshotCreate time.Duration
	SnapshotRemove time.Duration
	Quiesce        time.Duration // guest freeze + thaw
	Setup          time.Duration // bitmaps, exports, block nodes
}

// Session is one VM frozen at one instant.
type Session interface {
	// Config is the VM's configuration at the snapshot instant, recorded in
	// the backup so a restore can reproduce the VM.
	Config() VMConfig
	// Disks lists the frozen disks, every disk of the VM's inventory entry
	// with the same key and size (and, when WithMemory was achieved, a
	// memory-state stream with Kind == KindMemory).
	Disks() []DiskSnapshot
	// OpenDisk opens one frozen disk for reading; an unknown key is
	// ErrNotFound. Several disks (and several readers of one disk, each
	// read from several goroutines) may be open at once. The reader's
	// reads end with ctx: once it is done, ReadAt fails with its error
	// (a cancelled job stops reading). After Release, OpenDisk still gives
	// the disk's change set; its data is read from the storage snapshot.
	OpenDisk(ctx context.Context, key string) (DiskReader, error)
	// Warnings collected while snapshotting (quiesce fallback, tracking
	// reset forcing a full read, ...), for the job result.
	Warnings() []string
	// AchievedMode is the snapshot mode the connector really carried out.
	// It is weaker than the requested one when an action the mode needs
	// did not happen: no guest agent or Tools froze the filesystems
	// (quiesce fallback), no memory was saved (the VM was not running),
	// coffer did not pause or suspend the VM; such a session is
	// CrashConsistent and says why in Warnings. The backup point records
	// it next to the requested mode, so a point never claims more than it
	// holds.
	AchievedMode() SnapshotMode
	// Release drops the hypervisor-side snapshot early while keeping the
	// session's bookkeeping (change sets and tokens), for storage-level
	// (group) protection where the data is then read from a storage
	// snapshot. Close still must be called.
	Release(ctx context.Context) error
	// Close releases everything and settles change tracking (see package
	// doc). It returns the new change token per disk key when ok. It is
	// idempotent (a second call returns the same tokens) and must be
	// called on every path, with a context that is still valid (callers
	// pass a fresh one when theirs was cancelled).
	Close(ctx context.Context, ok bool) (map[string]string, error)
}

// Disk kinds.
const (
	KindDisk   = "disk"
	KindMemory = "memory" // RAM + device state stream (WithMemory mode)
)

// DiskSnapshot describes one frozen disk in a session.
type DiskSnapshot struct {
	DiskInfo
	Kind string // KindDisk or KindMemory
	// Changes says what OpenDisk's reader reports as Changed: "full" (no
	// valid change set: read everything allocated), "incremental" or
	// "differential".
	Changes string
	// ChangeWarning explains why a change set was not usable (bitmap
	// missing or inconsistent, CBT reset, disk resized, VM moved).
	ChangeWarning string
	// NewToken, when the connector knows it at snapshot time, is the change
	// token that describes this instant once Close(ok=true) succeeds. It is
	// recorded in the backup point before tracking is committed, so a crash
	// between the two can only cause a full read, never a gap. Connectors
	// that leave it empty return the token from Close instead.
	NewToken string
}

// Extent is a byte range of a disk.
type Extent struct {
	Offset, Length int64
}

// DiskReader reads one frozen disk.
type DiskReader interface {
	io.ReaderAt
	// Size is the disk's virtual size in bytes.
	Size() int64
	// Allocated returns the ranges that may hold data, sorted and
	// non-overlapping; everything else reads as zeros and is never read.
	// A reader that cannot tell returns one extent covering the disk; a
	// cancelled ctx is an error, not a reason to claim the whole disk.
	Allocated(ctx context.Context) ([]Extent, error)
	// Changed returns the ranges changed since the session's Since token,
	// sorted and non-overlapping, and true; or nil and false when this disk
	// must be read in full (see DiskSnapshot.Changes). The ranges hold
	// every write since the token's instant (a superset is safe, a range
	// missing loses data); a tracked disk nobody wrote to may report
	// false positives, but connectors whose tracking is exact report none.
	Changed(ctx context.Context) ([]Extent, bool, error)
	Close() error
}

// VMConfig is a VM's recorded configuration.
type VMConfig struct {
	Kind      string      `json:"kind"`
	Name      string      `json:"name"`
	UUID      string      `json:"uuid,omitempty"`
	CPUs      int         `json:"cpus,omitempty"`
	MemoryMiB int64       `json:"memory_mib,omitempty"`
	Disks     []DiskInfo  `json:"disks"`
	NICs      []NICConfig `json:"nics,omitempty"`
	Firmware  string      `json:"firmware,omitempty"`
	// Native is the platform's full description (QEMU command line and
	// machine properties; a vSphere VirtualMachineConfigInfo subset),
	// interpreted only by the same platform's connector at restore time.
	Native json.RawMessage `json:"native,omitempty"`
}

// NICConfig describes one network interface.
type NICConfig struct {
	Key     string `json:"key"`
	Network string `json:"network"`
	MAC     string `json:"mac,omitempty"`
	Model   string `json:"model,omitempty"`
}

// Leftover is something a crashed coffer created and cleanup removed.
type Leftover struct {
	VM     VMRef
	Kind   string // "bitmap", "block-node", "export", "job", "overlay-file", "vm-snapshot", ...
	Name   string
	Action string // "removed", "merged back", "thawed", "resumed", ...
}

// Restorer is implemented by connectors that can create a VM from a
// recorded configuration (restore to a new VM).
type Restorer interface {
	// CreateVM creates, without starting it, a new VM from cfg. It never
	// replaces an existing VM unless opts.ReplaceExisting is set (which the
	// CLI only sets after an explicit confirmation flag), and never touches
	// a running VM.
	CreateVM(ctx context.Context, cfg VMConfig, opts NewVMOptions) (NewVM, error)
}

// NewVMOptions adjust a restored VM.
type NewVMOptions struct {
	Name            string // new VM name (required unless ReplaceExisting)
	Datastore       string // where disks go; "" = as recorded
	TargetDir       string // QEMU: directory for disk files and sockets
	DiskFormat      string // "raw" or "qcow2" (QEMU)
	ReplaceExisting bool
	// ColdBoot: a VM given its memory state (MemoryWriter) boots when
	// started instead of resuming where it was (QEMU).
	ColdBoot bool
	// Point is the backup point being restored; a connector that
	// journals its restores (vSphere) names it there.
	Point string
	// Resume continues a broken restore of Point into the VM called
	// Name that a journalling connector kept, writing only what the
	// journal does not have.
	Resume bool
	// Streams bounds the ranged writes in flight per disk and
	// PerDatastore those into one datastore (0: the connector's
	// defaults), for connectors that write disks in ranges.
	Streams, PerDatastore int
	// Retries: a disk write that breaks on a transient error resumes
	// from the journal, up to Retries.Attempts attempts in all.
	Retries RetryPolicy
}

// RetryPolicy is how often, and after what waits, a connector takes up
// again an operation that broke on a transient error.
type RetryPolicy struct {
	Attempts            int           // attempts in all (0 or 1: no retry)
	Backoff, MaxBackoff time.Duration // the first wait, doubled each time up to MaxBackoff
}

// Wait is the pause before attempt n+1 (n >= 1).
func (r RetryPolicy) Wait(n int) time.Duration {
	d := r.Backoff
	for i := 1; i < n && d < r.MaxBackoff; i++ {
		d *= 2
	}
	if r.MaxBackoff > 0 {
		d = min(d, r.MaxBackoff)
	}
	return d
}

// NewVM is a VM being restored.
type NewVM interface {
	Ref() VMRef
	// WriteDisk fills one disk from src, writing only src's allocated ranges.
	WriteDisk(ctx context.Context, key string, src DiskSource) error
	// Start powers the VM on.
	Start(ctx context.Context) error
	// Abort deletes the half-restored VM and its disks.
	Abort(ctx context.Context) error
}

// DiskSource is what restore offers a connector to write a disk from.
type DiskSource interface {
	io.ReaderAt
	Size() int64
	// Allocated lists the ranges holding data; the rest is zeros.
	Allocated() []Extent
}

// FileSource is a DiskSource that restores itself into an image file on
// this host, faster than a copy through ReadAt (in parallel, sparse; qcow2
// through qemu-img). A NewVM whose disks are files here (QEMU restored
// into a directory) writes them with it.
type FileSource interface {
	DiskSource
	// WriteFile writes the disk to a new file at path, in format "raw"
	// or "qcow2"; it never overwrites a file that exists.
	WriteFile(ctx context.Context, path, format string) error
}

// MemoryWriter is a NewVM that takes the memory state of a with-memory
// point, so that it resumes where the VM was instead of booting (QEMU).
// A NewVM without it restores disks only.
type MemoryWriter interface {
	WriteMemory(ctx context.Context, src DiskSource) error
}

// ParallelWriter is a NewVM whose disks may be written at the same time
// (it bounds the streams into each datastore itself).
type ParallelWriter interface {
	ParallelDisks() bool
}

// Resumer is a NewVM that journals its restore: after a failure it says
// whether the half-restored VM should stay, so that the same restore
// with NewVMOptions.Resume finishes it, rather than be deleted.
type Resumer interface {
	KeepForResume(err error) bool
}

// Completer is a NewVM with work left once its disks (and memory) are
// written, before it can start: QEMU writes the script that starts it.
type Completer interface {
	Complete(ctx context.Context) error
}

// Standby is a replica's standby VM as a DR host defines it
// (internal/replica): never autostarted, its disks naming files that only
// a failover creates, so that nothing starts it by accident.
type Standby struct {
	Name string // the domain's name on the DR host
	UUID string // stable across runs: each run redefines the same domain
	// Disks are the files the standby's disks name, by disk key.
	Disks map[string]string
	// Networks maps the source's networks to the DR site's own.
	Networks map[string]string
}
