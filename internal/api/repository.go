package api

import "time"

// Repository describes a repository (`coffer init`).
type Repository struct {
	ID               string    `json:"id"`
	Location         string    `json:"location"`
	FormatVersion    int       `json:"format_version"`
	Created          time.Time `json:"created"`
	Encryption       string    `json:"encryption"` // aes-256-gcm, none
	ChunkSizeBytes   int       `json:"chunk_size_bytes"`
	PackSizeBytes    int       `json:"pack_size_bytes"`
	Compression      string    `json:"compression"` // zstd, none
	CompressionLevel int       `json:"compression_level"`
	// ConditionalWrites: the storage enforces create-if-absent and
	// compare-and-swap; without, coffer falls back to check-write-verify.
	ConditionalWrites bool `json:"conditional_writes"`
	// ObjectLock: the storage can lock objects (S3 Object Lock).
	ObjectLock bool `json:"object_lock"`
}

// Key is one key file: a password that opens the repository.
type Key struct {
	ID      string    `json:"id"`
	Label   string    `json:"label"`
	User    string    `json:"user"`
	Host    string    `json:"host"`
	Created time.Time `json:"created"`
	// Current: the key the password given opened the repository with.
	Current bool `json:"current"`
}

// KeyRemoval is the result of removing a key.
type KeyRemoval struct {
	Removed string `json:"removed"`
}

// Lease is one holder working on the repository.
type Lease struct {
	Kind        string    `json:"kind"` // backup, restore, verify, gc, repair, copy, ...
	Host        string    `json:"host"`
	User        string    `json:"user"`
	PID         int       `json:"pid"`
	Description string    `json:"description"`
	Since       time.Time `json:"since"`
	Expires     time.Time `json:"expires"`
	// Alive is false when the holder can no longer be working (expired, or
	// its process on this host is gone); the next run removes the lease.
	Alive bool `json:"alive"`
}

// Stats are a repository's sizes and ratios.
type Stats struct {
	Points        int   `json:"points"`
	Disks         int   `json:"disks"`
	LogicalBytes  int64 `json:"logical_bytes"` // sum of disk sizes over all points
	DataBytes     int64 `json:"data_bytes"`    // non-zero bytes referenced over all points
	UniqueBytes   int64 `json:"unique_bytes"`  // plaintext of distinct chunks
	Chunks        int64 `json:"chunks"`        // distinct chunks
	ChunkBytes    int64 `json:"chunk_bytes"`   // compressed and encrypted chunk bytes
	StoredBytes   int64 `json:"stored_bytes"`  // everything in the storage
	PackBytes     int64 `json:"pack_bytes"`
	Packs         int   `json:"packs"`
	IndexSegments int   `json:"index_segments"`
	Objects       int   `json:"objects"`
	// Ratios, x:1.
	DedupRatio       float64 `json:"dedup_ratio"`       // data / unique
	CompressionRatio float64 `json:"compression_ratio"` // unique / chunk bytes
	TotalRatio       float64 `json:"total_ratio"`       // logical / stored
}

// VerifyReport is what `coffer verify` found.
type VerifyReport struct {
	Points           int       `json:"points"`
	Disks            int       `json:"disks"`
	ChunksReferenced int64     `json:"chunks_referenced"`
	Packs            int       `json:"packs"`
	PacksRead        int       `json:"packs_read"`
	ChunksRead       int64     `json:"chunks_read"`
	ReadBytes        int64     `json:"read_bytes"`
	Problems         []Problem `json:"problems"`
	// DamagedPoints lost data; every other point is intact.
	DamagedPoints []DamagedPoint `json:"damaged_points"`
	IntactPoints  int            `json:"intact_points"`
	// Repairs are the next steps, in the order to run them.
	Repairs []string `json:"repairs"`
	// DamageRecorded counts broken chunk copies added to the damage record.
	DamageRecorded int `json:"damage_recorded"`
	// Notices need a decision but are not damage.
	Notices []string `json:"notices"`
}

// Problem is one finding of verify.
type Problem struct {
	// Kind: config, key, manifest, disk-map, index-segment, missing-pack,
	// truncated-pack, pack-header, pack-trailer, unreadable-pack,
	// missing-chunk, corrupt-chunk, orphan-maps.
	Kind   string `json:"kind"`
	Object string `json:"object"`
	Detail string `json:"detail"`
	// DataLoss: a backup point lost data (false: metadata damage a repair
	// mends without loss).
	DataLoss bool       `json:"data_loss"`
	Repair   string     `json:"repair"`
	Affects  []Affected `json:"affects"`
}

// Affected is one disk of a backup point that lost data.
type Affected struct {
	PointID string `json:"point_id"`
	VM      string `json:"vm"`
	Disk    string `json:"disk"`
	// OffsetBytes is the first damaged byte (-1: the whole disk); Spans
	// counts the chunk-sized spans lost.
	OffsetBytes int64 `json:"offset_bytes"`
	Spans       int64 `json:"spans"`
}

// DamagedPoint is a backup point that lost data.
type DamagedPoint struct {
	PointID string   `json:"point_id"`
	VM      string   `json:"vm"`
	Disks   []string `json:"disks"`
}

// ForgetResult is what forget removed (or would remove, DryRun), per
// source.
type ForgetResult struct {
	DryRun  bool           `json:"dry_run"`
	Sources []ForgetSource `json:"sources"`
	// CatalogWarning says the catalog could not be brought in step (the
	// repository changed; `coffer catalog rebuild` mends the catalog).
	CatalogWarning string `json:"catalog_warning,omitempty"`
}

// ForgetSource is the verdict for the points of one source.
type ForgetSource struct {
	VM         string         `json:"vm"`
	VMID       string         `json:"vm_id,omitempty"`
	Connection string         `json:"connection,omitempty"`
	SourceKind string         `json:"source_kind"`
	Keep       []PointVerdict `json:"keep"`
	Remove     []PointVerdict `json:"remove"`
	// Locked are points the keep rules would remove but the object lock
	// keeps.
	Locked []LockedPoint `json:"locked"`
}

// PointVerdict is one point and why the keep rules keep it.
type PointVerdict struct {
	PointID   string    `json:"point_id"`
	Time      time.Time `json:"time"`
	Protected bool      `json:"protected"`
	Reasons   []string  `json:"reasons"` // e.g. "last", "daily 2026-11-21", "protected"
}

// LockedPoint is a point under object lock.
type LockedPoint struct {
	PointID     string    `json:"point_id"`
	LockedUntil time.Time `json:"locked_until"`
}

// ProtectResult is a point's protection after `coffer protect`.
type ProtectResult struct {
	PointID   string `json:"point_id"`
	Protected bool   `json:"protected"`
	// CatalogWarning: the catalog could not be brought in step.
	CatalogWarning string `json:"catalog_warning,omitempty"`
}

// GCReport is what garbage collection did (or would do, DryRun).
type GCReport struct {
	DryRun           bool     `json:"dry_run"`
	Points           int      `json:"points"`
	ChunksReferenced int64    `json:"chunks_referenced"`
	ChunksIndexed    int64    `json:"chunks_indexed"`
	PacksPlanned     int      `json:"packs_planned"`
	PacksDeleted     int      `json:"packs_deleted"`
	PacksRepacked    int      `json:"packs_repacked"`
	FreedBytes       int64    `json:"freed_bytes"`
	RepackedBytes    int64    `json:"repacked_bytes"`
	SegmentsMerged   int      `json:"segments_merged"`
	MapsDeleted      int      `json:"maps_deleted"`
	ChunksRescued    int      `json:"chunks_rescued"`
	Deferred         bool     `json:"deferred"`
	WaitingFor       []string `json:"waiting_for"`
	// ObjectsLocked were kept because the storage locks them.
	ObjectsLocked    int `json:"objects_locked"`
	LeftoversRemoved int `json:"leftovers_removed"`
}

// CopyResult is what a copy to a second repository did.
type CopyResult struct {
	Copied         []string `json:"copied"` // point IDs
	AlreadyPresent []string `json:"already_present"`
	ChunksRead     int64    `json:"chunks_read"`
	ChunksWritten  int64    `json:"chunks_written"`
	WrittenBytes   int64    `json:"written_bytes"` // sealed bytes added to the target
	ReEncrypted    bool     `json:"re_encrypted"`
	// Offload: of what was written, the whole packs the storage copied
	// itself (a clone, an S3 server-side copy) instead of coffer.
	Offload CopyOffload `json:"offload"`
}

// CopyOffload says which path a copy's packs took: whole packs copied by
// the storage (Method: cloned, server-side; kernel-copied and copied are
// fallbacks through the host), the rest chunk by chunk through coffer.
type CopyOffload struct {
	Method        string `json:"method,omitempty"`
	PacksAdopted  int64  `json:"packs_adopted"`
	ChunksAdopted int64  `json:"chunks_adopted"`
	BytesAdopted  int64  `json:"adopted_bytes"`
	PacksPartial  int64  `json:"packs_partial"` // packs only partly needed: their chunks went through coffer
	// Unavailable says why no pack could be copied whole (different
	// master keys, storage without copies, --no-offload).
	Unavailable string `json:"unavailable,omitempty"`
}

// RepairReport is what a repair did (or would do, DryRun).
type RepairReport struct {
	DryRun bool     `json:"dry_run"`
	Steps  []string `json:"steps"`
	// Kept counts chunks (or spans) that stay readable, Dropped the
	// unreadable ones the repair cannot keep.
	Kept    int64 `json:"kept"`
	Dropped int64 `json:"dropped"`
	// AffectedPoints lost data through what was dropped (it was unreadable
	// before the repair already).
	AffectedPoints []LostDisk `json:"affected_points"`
}

// LostDisk is a disk of a backup point that a repair recorded lost spans
// of.
type LostDisk struct {
	PointID string `json:"point_id"`
	VM      string `json:"vm"`
	Disk    string `json:"disk"`
	Spans   int64  `json:"spans"`
}

// UndeleteReport is what `coffer repair undelete` made current again.
type UndeleteReport struct {
	Objects       int      `json:"objects"`
	DeleteMarkers int      `json:"delete_markers"`
	Versions      int      `json:"versions"`
	Names         []string `json:"names"`
}

// CatalogRebuild is the result of recreating a catalog's backup points
// from a repository.
type CatalogRebuild struct {
	Repository string         `json:"repository"`
	Points     int            `json:"points"`
	Skipped    []SkippedPoint `json:"skipped"`
}

// SkippedPoint is a manifest that could not be read.
type SkippedPoint struct {
	PointID string `json:"point_id"`
	Error   string `json:"error"`
}

// RepositoryUsage is a repository's usage over time (the samples the
// server's health monitor records each time it computes the repository's
// statistics) and where it leads: the trend and the date the repository
// would be full if it kept growing so.
type RepositoryUsage struct {
	// Samples of the window, oldest first, thinned to at most 60 evenly
	// spread (the newest always kept).
	Samples       []UsageSample `json:"samples"`
	StoredBytes   int64         `json:"stored_bytes"`   // the newest sample's
	CapacityBytes int64         `json:"capacity_bytes"` // the newest sample's; 0 when unknown
	WindowDays    float64       `json:"window_days"`    // the time the samples span
	// GrowthPerDayBytes is the slope of the least-squares line through the
	// window's samples; set only with enough history (HasTrend).
	GrowthPerDayBytes float64 `json:"growth_per_day_bytes"`
	HasTrend          bool    `json:"has_trend"`
	// EstimatedFull is when the newest sample reaches the capacity at the
	// trend; absent without a trend, a capacity, or growth.
	EstimatedFull time.Time `json:"estimated_full,omitzero"`
	// Estimate says how the trend and the date were made, or why there
	// are none.
	Estimate string `json:"estimate"`
}

// UsageSample is what a repository stored at a time.
type UsageSample struct {
	At            time.Time `json:"at"`
	StoredBytes   int64     `json:"stored_bytes"`
	CapacityBytes int64     `json:"capacity_bytes"`
}
