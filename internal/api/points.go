package api

import "time"

// BackupPoint is one backup point: what `coffer snapshots` (from the
// repository), `coffer catalog points` (from the catalog), `backup --json`
// and the API's point listings all print.
type BackupPoint struct {
	ID      string `json:"id"`
	ShortID string `json:"short_id"`
	// Repository is the ID of the repository that holds the point.
	Repository string    `json:"repository"`
	Time       time.Time `json:"time"`
	// VM is the source's name: the VM's, or --name of a disk image.
	VM         string `json:"vm"`
	VMID       string `json:"vm_id,omitempty"`
	Connection string `json:"connection,omitempty"`
	// SourceKind is "disk" (images and block devices), "qemu", "vsphere".
	SourceKind string `json:"source_kind,omitempty"`
	// Host is where coffer ran the backup (absent from the catalog).
	Host string `json:"host,omitempty"`
	// Mode is how the point was made: full, incremental, differential.
	Mode string `json:"mode"`
	// SnapshotMode is the VM snapshot mode asked for (none for disk
	// images); SnapshotModeAchieved what the point really holds, "unknown"
	// for points written before coffer recorded it.
	SnapshotMode         string `json:"snapshot_mode,omitempty"`
	SnapshotModeAchieved string `json:"snapshot_mode_achieved"`
	// Hooks is how the policy's application hooks around the snapshot
	// went: ok, pre-failed (the point is not application-consistent),
	// post-failed (it is; the application may need attention); absent
	// when none ran.
	Hooks  string            `json:"hooks,omitempty" enum:"ok,pre-failed,post-failed"`
	Parent string            `json:"parent,omitempty"`
	Tags   map[string]string `json:"tags"`
	// Protected points are exempt from forget and retention (`coffer
	// protect`).
	Protected bool `json:"protected"`
	// LockedUntil is the object lock: until then the storage refuses to
	// delete the point (absent when it is not locked).
	LockedUntil  time.Time `json:"locked_until,omitzero"`
	JobID        int64     `json:"job_id,omitempty"`
	DiskCount    int       `json:"disk_count"`
	LogicalBytes int64     `json:"logical_bytes"`
	StoredBytes  int64     `json:"stored_bytes"`
	// What only the repository records (absent in catalog listings):
	ReadBytes       int64       `json:"read_bytes,omitempty"`
	NewBytes        int64       `json:"new_bytes,omitempty"`
	DurationSeconds float64     `json:"duration_seconds,omitempty"`
	Disks           []PointDisk `json:"disks,omitempty"`
	Warnings        []string    `json:"warnings,omitempty"`
	// Damage is what the point lacks: chunks verify found lost (until a new
	// backup of the source stores them again) and spans a repair recorded
	// as lost; absent for an intact point.
	Damage string `json:"damage,omitempty"`
	// BootVerification is the point's last boot verification (`coffer
	// verify boot`), absent when it was never verified.
	BootVerification *BootSummary `json:"boot_verification,omitempty"`
}

// PointDisk is one disk (or memory state) of a backup point.
type PointDisk struct {
	Key            string `json:"key"`
	Name           string `json:"name"`
	Kind           string `json:"kind"` // disk, memory
	SizeBytes      int64  `json:"size_bytes"`
	ChunkSizeBytes int    `json:"chunk_size_bytes"`
	Format         string `json:"format,omitempty"`
	Path           string `json:"path,omitempty"`
	// Mode is how it was read: full, incremental, differential, compared.
	Mode      string `json:"mode"`
	Warning   string `json:"warning,omitempty"`
	ReadBytes int64  `json:"read_bytes"`
	ZeroBytes int64  `json:"zero_bytes"` // holes and all-zero chunks
	NewBytes  int64  `json:"new_bytes"`
	// LostSpans counts spans a repair recorded as lost.
	LostSpans int64 `json:"lost_spans"`
}

// Range is a byte range of a disk.
type Range struct {
	OffsetBytes int64 `json:"offset_bytes"`
	LengthBytes int64 `json:"length_bytes"`
}

// RestoredDisk is the result of restoring one disk.
type RestoredDisk struct {
	PointID      string `json:"point_id"`
	Disk         string `json:"disk"`
	Target       string `json:"target"`
	Format       string `json:"format"`
	SizeBytes    int64  `json:"size_bytes"`
	WrittenBytes int64  `json:"written_bytes"`
	ZeroBytes    int64  `json:"zero_bytes"`
	// ZeroOffloadedBytes of the zeros were made without sending them
	// (holes of a sparse file, a device's own zeroing); ZeroWrittenBytes
	// were written as zeros (a device without zeroing offload). A qcow2
	// target, written by qemu-img, reports neither.
	ZeroOffloadedBytes int64   `json:"zero_offloaded_bytes"`
	ZeroWrittenBytes   int64   `json:"zero_written_bytes"`
	ReadRequests       int     `json:"read_requests"`
	DurationSeconds    float64 `json:"duration_seconds"`
	Resumed            bool    `json:"resumed"`
	// LostRanges were lost to repository damage (recorded by a repair):
	// zeros in the target.
	LostRanges []Range `json:"lost_ranges"`
	// Copies are the test copies made from the restored disk (restore
	// --copies), each cloned by the filesystem or copied.
	Copies []DiskCopy `json:"copies"`
}

// DiskCopy is one copy of a restored disk and how it was made: "cloned"
// (shared extents, nothing through the host), "kernel-copied"
// (copy_file_range) or "copied" (through coffer).
type DiskCopy struct {
	Target    string `json:"target"`
	Method    string `json:"method" enum:"cloned,kernel-copied,copied"`
	DataBytes int64  `json:"data_bytes"`
}

// RestoredVM is the result of restoring a backup point as a VM: into a
// directory (QEMU) or through a hypervisor connection (vSphere).
type RestoredVM struct {
	PointID string `json:"point_id"`
	// VM is the restored VM's name; VMID its UUID (QEMU) or managed object
	// ID (vSphere).
	VM   string `json:"vm"`
	VMID string `json:"vm_id"`
	// OriginalVM is the name of the VM the point was taken of.
	OriginalVM string `json:"original_vm"`
	// Connection is set when the VM was created through one.
	Connection   string `json:"connection,omitempty"`
	OntoOriginal bool   `json:"onto_original"`
	// Disks are the restored disks: files (QEMU) or disk names (vSphere).
	Disks   []string `json:"disks"`
	Started bool     `json:"started"`
	// QEMU only: the directory, its launch script, sockets and console,
	// the process, and the memory state a with-memory point restored.
	Dir               string   `json:"dir,omitempty"`
	LaunchScript      string   `json:"launch_script,omitempty"`
	QMPSocket         string   `json:"qmp_socket,omitempty"`
	Console           string   `json:"console,omitempty"`
	PID               int      `json:"pid,omitempty"`
	MemoryState       string   `json:"memory_state,omitempty"`
	ResumedFromMemory bool     `json:"resumed_from_memory"`
	Warnings          []string `json:"warnings"`
	// Mapping is set for a restore onto another platform: how the VM's
	// hardware maps onto it. DryRun: only the mapping, nothing restored.
	Mapping *VMMapping `json:"mapping,omitempty"`
	DryRun  bool       `json:"dry_run,omitempty"`
}

// VMMapping is a VM of one platform mapped onto another's virtual
// hardware, reported before a restore starts.
type VMMapping struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Mapped are the items carried over; Unmapped those the target
	// cannot reproduce (left out, or on a substitute the guest may not
	// drive); Needs what the guest must have on its new platform.
	Mapped   []MappingItem `json:"mapped"`
	Unmapped []MappingItem `json:"unmapped"`
	Needs    []string      `json:"needs"`
}

// MappingItem is one piece of a mapped VM.
type MappingItem struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	From string `json:"from"`
	To   string `json:"to,omitempty"`
	Note string `json:"note,omitempty"`
}

// Export is a backup point's disks served over NBD (`coffer instant
// export`).
type Export struct {
	PointID string   `json:"point_id"`
	Listen  string   `json:"listen"`
	Exports []string `json:"exports"`
}

// StorageSnapshot is a storage snapshot a policy keeps as a fast restore
// point (keep-storage-snapshots): its VMs' disk files as they were at the
// run's instant, on the datastore itself. Restoring clones them in
// seconds without reading the repository; the repository's point of the
// same run is the copy that survives the loss of the storage.
type StorageSnapshot struct {
	Label      string `json:"label"`
	Policy     string `json:"policy"`
	Connection string `json:"connection"`
	// Datastore is the datastore root the snapshot covers; Provider the
	// storage-snapshots entry that took it, of Kind reflink, btrfs or
	// exec.
	Datastore string    `json:"datastore"`
	Provider  string    `json:"provider"`
	Kind      string    `json:"kind" enum:"reflink,btrfs,exec"`
	Time      time.Time `json:"time"`
	JobID     int64     `json:"job_id"`
	// SnapshotMode is the VM snapshot mode the batch was taken with.
	SnapshotMode string              `json:"snapshot_mode"`
	VMs          []StorageSnapshotVM `json:"vms"`
	// Orphaned, when set, says why no run deletes the snapshot any more
	// (its policy, or the policy's connection, is gone from the
	// configuration) and how to delete it: forget-storage-snapshot.
	Orphaned string `json:"orphaned,omitempty"`
}

// StorageSnapshotVM is one VM a storage snapshot holds, with its disk
// files there.
type StorageSnapshotVM struct {
	VM    string   `json:"vm"`
	VMID  string   `json:"vm_id"`
	Disks []string `json:"disks"`
}

// StorageRestore is the result of restoring a VM's disks from a kept
// storage snapshot.
type StorageRestore struct {
	Label string                `json:"label"`
	VM    string                `json:"vm"`
	Disks []StorageRestoredDisk `json:"disks"`
}

// StorageRestoredDisk is one disk file made from a storage snapshot, and
// how: "cloned" (shared extents, nothing through the host),
// "kernel-copied" (copy_file_range) or "copied" (through coffer).
type StorageRestoredDisk struct {
	Disk      string  `json:"disk"`
	Source    string  `json:"source"`
	Target    string  `json:"target"`
	Method    string  `json:"method" enum:"cloned,kernel-copied,copied"`
	DataBytes int64   `json:"data_bytes"`
	Seconds   float64 `json:"seconds"`
}

// StorageShipment is what a shipment of kept storage snapshots sent.
type StorageShipment struct {
	Shipped []ShippedStorageSnapshot `json:"shipped"`
}

// ShippedStorageSnapshot is one kept btrfs snapshot sent to a ship-to
// directory: whole, or against Parent (the one shipped before it).
type ShippedStorageSnapshot struct {
	Label     string  `json:"label"`
	Provider  string  `json:"provider"`
	Datastore string  `json:"datastore"`
	To        string  `json:"to"`
	Parent    string  `json:"parent,omitempty"`
	Bytes     int64   `json:"stream_bytes" doc:"the size of the btrfs send stream"`
	Seconds   float64 `json:"seconds"`
}
