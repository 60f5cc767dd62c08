package api

import "time"

// The request documents of the REST API: the JSON bodies of operations
// that take more than their path and query say. Fields a request may leave
// out are optional (omitempty, or required:"false" for lists, which are
// never left out of answers); the server refuses unknown fields.

// InitRequest creates a repository at the location the server configures
// for it, with the password it configures.
type InitRequest struct {
	NoEncryption     bool   `json:"no_encryption,omitempty" doc:"store data in the clear (integrity is still checked)"`
	ChunkSizeBytes   int    `json:"chunk_size_bytes,omitempty" minimum:"0"`
	PackSizeBytes    int    `json:"pack_size_bytes,omitempty" minimum:"0"`
	CompressionLevel int    `json:"compression_level,omitempty" minimum:"0" maximum:"22"`
	KeyLabel         string `json:"key_label,omitempty" maxLength:"200"`
}

// BackupDiskRequest backs up disk images the server reads from its image
// directory (server.image-dir): paths are relative to it.
type BackupDiskRequest struct {
	Paths       []string          `json:"paths" minItems:"1" maxItems:"64"`
	Name        string            `json:"name,omitempty" maxLength:"255"`
	Tags        map[string]string `json:"tags,omitempty"`
	LockedUntil time.Time         `json:"locked_until,omitzero" doc:"lock the point (object lock) until then"`
}

// BackupVMRequest backs up a VM of a configured connection now.
type BackupVMRequest struct {
	Mode         string            `json:"mode,omitempty" enum:"full,incremental,differential" doc:"default incremental (the first backup is full)"`
	SnapshotMode string            `json:"snapshot_mode,omitempty" enum:"crash-consistent,quiesced,suspend,as-is,with-memory"`
	Quiesce      string            `json:"quiesce,omitempty" enum:"fallback,required"`
	Tags         map[string]string `json:"tags,omitempty"`
	LockedUntil  time.Time         `json:"locked_until,omitzero"`
	// ChangeCheckSpans is how many spans of each disk an incremental
	// reads to check change tracking (0: the default, 6; -1: off).
	ChangeCheckSpans int `json:"change_check_spans,omitempty" minimum:"-1" maximum:"1000000"`
	// NoHooks skips the hooks of the policies that protect the VM, which
	// run around its snapshot by default.
	NoHooks bool `json:"no_hooks,omitempty"`
}

// RestoreRequest restores disks of a point to files under the server's
// restore directory (server.restore-dir): To is relative to it.
type RestoreRequest struct {
	Disk      string `json:"disk,omitempty" doc:"index, key or name; all disks when absent"`
	To        string `json:"to" minLength:"1" maxLength:"4096"`
	Format    string `json:"format,omitempty" enum:"raw,qcow2"`
	Overwrite bool   `json:"overwrite,omitempty"`
	Resume    bool   `json:"resume,omitempty"`
	Copies    int    `json:"copies,omitempty" minimum:"1" maximum:"64" doc:"copies of each disk in all: the restored one and copies cloned from it (NAME-copyK.EXT)"`
	NoOffload bool   `json:"no_offload,omitempty" doc:"write zeros and copy through the host even where the storage could (storage whose offload misbehaves)"`
}

// StorageRestoreRequest restores one VM's disk files from a kept storage
// snapshot into a directory.
type StorageRestoreRequest struct {
	VM        string `json:"vm" minLength:"1" maxLength:"255" doc:"the VM's name or ID"`
	To        string `json:"to,omitempty" maxLength:"4096" doc:"the directory, relative to the restore directory (not with onto_original)"`
	Overwrite bool   `json:"overwrite,omitempty"`
	NoOffload bool   `json:"no_offload,omitempty" doc:"copy through the host even where the filesystem could clone"`
	// OntoOriginal replaces the VM's own disk files (it must be shut
	// off), with ConfirmOverwrite set as well.
	OntoOriginal     bool `json:"onto_original,omitempty" doc:"replace the shut-off VM's own disk files with clones of the snapshot's"`
	ConfirmOverwrite bool `json:"confirm_overwrite,omitempty" doc:"required with onto_original"`
	// From restores from the copy shipped to a storage-snapshots
	// provider's ship-to directory (at the DR site) instead of the kept
	// snapshot itself.
	From string `json:"from,omitempty" maxLength:"4096" doc:"a provider's ship-to directory: restore from the snapshot's shipped copy there"`
}

// RestoreVMRequest restores a point as a new VM: into a directory under
// the restore directory (QEMU), or through the connection the query names.
type RestoreVMRequest struct {
	Dir              string `json:"dir,omitempty" maxLength:"4096" doc:"QEMU: the directory, relative to the restore directory"`
	Name             string `json:"name,omitempty" maxLength:"255"`
	Format           string `json:"format,omitempty" enum:"raw,qcow2"`
	Datastore        string `json:"datastore,omitempty" maxLength:"255"`
	Start            bool   `json:"start,omitempty"`
	ColdBoot         bool   `json:"cold_boot,omitempty"`
	OntoOriginal     bool   `json:"onto_original,omitempty"`
	ConfirmOverwrite bool   `json:"confirm_overwrite,omitempty"`
	Resume           bool   `json:"resume,omitempty" doc:"vSphere: finish a broken restore of this point into the VM called name, writing only what its journal lacks"`
	// Onto a connection of another platform than the point's: the
	// mapping's report only (DryRun), and the target network every
	// adapter joins (Network, default: the recorded names).
	DryRun  bool   `json:"dry_run,omitempty" doc:"onto another platform: report how the VM maps onto the connection's platform, and restore nothing"`
	Network string `json:"network,omitempty" maxLength:"255" doc:"onto another platform: the target's network every adapter joins"`
}

// FilesExtractRequest extracts files into a directory under the restore
// directory.
type FilesExtractRequest struct {
	Paths []string `json:"paths" minItems:"1" maxItems:"1000"`
	To    string   `json:"to" minLength:"1" maxLength:"4096"`
}

// InstantStartRequest starts a VM from a backup point on the server.
type InstantStartRequest struct {
	ReconnectDelaySeconds float64 `json:"reconnect_delay_seconds,omitempty" minimum:"0" maximum:"3600"`
	// A libvirt domain's point runs as a new domain (name, default
	// VM-instant) of connection (default: the one it was taken through),
	// its overlays in storage pool datastore (default: as recorded).
	Connection string `json:"connection,omitempty" maxLength:"255"`
	Name       string `json:"name,omitempty" maxLength:"255"`
	Datastore  string `json:"datastore,omitempty" maxLength:"255"`
	// A vSphere VM's point runs as VM name (default VM-instant) on ESXi
	// host host (default: the first connected one) of connection, from an
	// NFS export coffer serves on nfs_listen (HOST:PORT, default :2049,
	// the port ESXi mounts) that the host mounts from nfs_address
	// (default: nfs_listen's host).
	Host       string `json:"host,omitempty" maxLength:"255"`
	NFSListen  string `json:"nfs_listen,omitempty" maxLength:"255"`
	NFSAddress string `json:"nfs_address,omitempty" maxLength:"255"`
}

// ExportRequest serves a point's disks over NBD for a while: on a unix
// socket in the server's export directory (unix:NAME) or on TCP
// (tcp:HOST:PORT).
type ExportRequest struct {
	Listen          string  `json:"listen" minLength:"5" maxLength:"255"`
	DurationSeconds float64 `json:"duration_seconds" minimum:"1" maximum:"604800"`
}

// InstantCommitRequest moves a recovered VM onto storage under the
// restore directory.
type InstantCommitRequest struct {
	To     string `json:"to" minLength:"1" maxLength:"4096"`
	Format string `json:"format,omitempty" enum:"raw,qcow2"`
}

// ProtectRequest protects points from forget and retention, or releases
// them.
type ProtectRequest struct {
	Points []string `json:"points" minItems:"1" maxItems:"1000"`
	Remove bool     `json:"remove,omitempty"`
}

// VerifyBootRequest says how a boot verification checks the point.
type VerifyBootRequest struct {
	TimeoutSeconds      float64  `json:"timeout_seconds,omitempty" minimum:"0" maximum:"86400" doc:"bound of the whole ladder (default 300)"`
	Marker              string   `json:"marker,omitempty" maxLength:"1024" doc:"console regex of step 3 (default login:)"`
	Probes              []string `json:"probes" maxItems:"32" doc:"tcp:PORT, http:PORT/PATH=STATUS, exec:COMMAND ARGS"`
	ProbeTimeoutSeconds float64  `json:"probe_timeout_seconds,omitempty" minimum:"0" maximum:"3600" doc:"bound of each probe (default 30)"`
}

// VerifyRequest says how much verify reads.
type VerifyRequest struct {
	ReadData      bool    `json:"read_data,omitempty"`
	SubsetPercent float64 `json:"subset_percent,omitempty" minimum:"0" maximum:"100"`
	SubsetNum     int     `json:"subset_num,omitempty" minimum:"0"`
	SubsetDen     int     `json:"subset_den,omitempty" minimum:"0"`
	MemoryBytes   int64   `json:"memory_bytes,omitempty" minimum:"0" maximum:"1099511627776"`
	NoRecord      bool    `json:"no_record,omitempty"`
}

// KeepRules are forget's keep rules.
type KeepRules struct {
	Last          int     `json:"keep_last,omitempty" minimum:"0"`
	Hourly        int     `json:"keep_hourly,omitempty" minimum:"0"`
	Daily         int     `json:"keep_daily,omitempty" minimum:"0"`
	Weekly        int     `json:"keep_weekly,omitempty" minimum:"0"`
	Monthly       int     `json:"keep_monthly,omitempty" minimum:"0"`
	Yearly        int     `json:"keep_yearly,omitempty" minimum:"0"`
	WithinSeconds float64 `json:"keep_within_seconds,omitempty" minimum:"0"`
}

// ForgetRequest removes the points no keep rule selects.
type ForgetRequest struct {
	Keep   KeepRules         `json:"keep"`
	VM     string            `json:"vm,omitempty"`
	Tags   map[string]string `json:"tags,omitempty"`
	DryRun bool              `json:"dry_run,omitempty"`
	// ForgetBootVerified lets the rules remove the newest point of a
	// source that passed boot verification (kept by default).
	ForgetBootVerified bool `json:"forget_boot_verified,omitempty"`
}

// GCRequest tunes garbage collection.
type GCRequest struct {
	DryRun          bool    `json:"dry_run,omitempty"`
	MemoryBytes     int64   `json:"memory_bytes,omitempty" minimum:"0" maximum:"1099511627776"`
	WaitSeconds     float64 `json:"wait_seconds,omitempty" minimum:"0" maximum:"86400"`
	RepackThreshold float64 `json:"repack_threshold,omitempty" minimum:"0" maximum:"1"`
}

// CopyRequest selects the points a copy copies.
type CopyRequest struct {
	Points      []string  `json:"points" required:"false" maxItems:"1000"`
	VM          string    `json:"vm,omitempty"`
	Latest      bool      `json:"latest,omitempty"`
	LockedUntil time.Time `json:"locked_until,omitzero"`
}

// RepairRequest runs a repair, or only plans it.
type RepairRequest struct {
	DryRun bool `json:"dry_run,omitempty"`
}

// AddKeyRequest adds a password to a repository.
type AddKeyRequest struct {
	Password string `json:"password" minLength:"1" maxLength:"1024" writeOnly:"true"`
	Label    string `json:"label,omitempty" maxLength:"200"`
}

// MediaLabelRequest labels a cartridge of a library into a media pool,
// erasing it. A coffer volume is refused until its retention has passed,
// a WORM cartridge holding anything always.
type MediaLabelRequest struct {
	Barcode        string `json:"barcode" minLength:"1" maxLength:"16" pattern:"^[A-Z0-9]+$"`
	Pool           string `json:"pool" minLength:"1" maxLength:"255"`
	BlockSizeBytes int    `json:"block_size_bytes,omitempty" minimum:"0" doc:"bytes per block (default 256 KiB)"`
	Foreign        bool   `json:"foreign,omitempty" doc:"overwrite a cartridge holding data that is not a coffer volume"`
}

// MediaLoadRequest names the cartridge to load into a drive.
type MediaLoadRequest struct {
	Barcode string `json:"barcode" minLength:"1" maxLength:"16" pattern:"^[A-Z0-9]+$"`
}

// MediaCopyRequest selects the points of the repository a copy to media
// writes (as CopyRequest does), and how it writes them.
type MediaCopyRequest struct {
	Pool   string   `json:"pool" minLength:"1" maxLength:"255"`
	Points []string `json:"points" required:"false" maxItems:"1000" doc:"IDs or unique prefixes (none: every point, or those vm and latest select)"`
	VM     string   `json:"vm,omitempty" maxLength:"255" doc:"only points of this source name"`
	Latest bool     `json:"latest,omitempty" doc:"only the newest point of each source"`
	// Multiplex is how many points are written at once onto the drive (0:
	// as many as selected, at most MaxMultiplex, 4 by default).
	Multiplex        int     `json:"multiplex,omitempty" minimum:"0" maximum:"64"`
	MaxMultiplex     int     `json:"max_multiplex,omitempty" minimum:"0" maximum:"64"`
	Drives           int     `json:"drives,omitempty" minimum:"0" maximum:"64" doc:"drives of the library written with, a session each (default 1); at most the library's drive-limit write at once, the others wait their turn"`
	RunBlocks        int     `json:"run_blocks,omitempty" minimum:"0" doc:"blocks of one point kept together on tape (default 1)"`
	BlockSizeBytes   int     `json:"block_size_bytes,omitempty" minimum:"0" doc:"bytes per block of newly labelled volumes (default 256 KiB)"`
	RetentionSeconds float64 `json:"retention_seconds,omitempty" minimum:"0" doc:"the volumes written are protected from overwriting this long"`
}

// MediaRestoreRequest restores disks of a point on media to files under
// the server's restore directory (server.restore-dir): To is relative to
// it.
type MediaRestoreRequest struct {
	Disk              string `json:"disk,omitempty" maxLength:"255" doc:"index, key or name; all disks when absent"`
	To                string `json:"to" minLength:"1" maxLength:"4096"`
	Overwrite         bool   `json:"overwrite,omitempty"`
	ReadThroughBlocks int64  `json:"read_through_blocks,omitempty" minimum:"0" doc:"read gaps of up to this many blocks of other points instead of locating"`
}

// MediaCatalogRequest rebuilds the media catalogue from a library's
// volumes.
type MediaCatalogRequest struct {
	Scan bool `json:"scan,omitempty" doc:"read every block instead of each volume's last index (for volumes whose index is missing)"`
}
