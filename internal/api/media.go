package api

import "time"

// MediaVolume is a tape volume as the media catalogue knows it.
type MediaVolume struct {
	Barcode string `json:"barcode"`
	// Library is where it was last seen: a library of the configuration
	// (or the directory or devices the command line named).
	Library        string    `json:"library"`
	Pool           string    `json:"pool"`
	MediaSet       string    `json:"media_set"`
	BlockSizeBytes int       `json:"block_size_bytes"`
	Labelled       time.Time `json:"labelled"`
	Written        time.Time `json:"written"`
	ProtectedUntil time.Time `json:"protected_until"`
	Full           bool      `json:"full"`
	// WORM: a write-once cartridge, appended to and never overwritten
	// (whatever ProtectedUntil says).
	WORM     bool `json:"worm"`
	Segments int  `json:"segments"`
}

// MediaSegment is the part of a backup point's copy on one volume.
type MediaSegment struct {
	Barcode    string        `json:"barcode"`
	PointID    string        `json:"point_id"`
	VM         string        `json:"vm"`
	Repository string        `json:"repository"`
	Session    string        `json:"session"`
	Stream     int64         `json:"stream"`
	FirstBlock int64         `json:"first_block"` // the stream's block numbers held here
	LastBlock  int64         `json:"last_block"`
	DataBytes  int64         `json:"data_bytes"`
	End        bool          `json:"end"` // the stream ends on this volume
	Extents    []MediaExtent `json:"extents"`
}

// MediaExtent is a run of consecutive blocks on a volume.
type MediaExtent struct {
	Position int64 `json:"position"`
	Count    int64 `json:"count"`
}

// MediaCopyResult is what a copy to media wrote.
type MediaCopyResult struct {
	// Sessions are the sessions written, one per drive used.
	Sessions []string `json:"sessions"`
	Drives   int      `json:"drives"`
	// DriveLimit is how many of the library's drives may write at once:
	// its drive-limit, else its drives (the slots are shared with the
	// other copies to the library, and each drive takes one of
	// limits.tasks too); DrivesAtOnce, how many this copy wrote with at
	// once at most.
	DriveLimit   int            `json:"drive_limit"`
	DrivesAtOnce int            `json:"drives_at_once"`
	Copied       []string       `json:"copied"` // point IDs
	Volumes      []MediaVolume  `json:"volumes"`
	Segments     []MediaSegment `json:"segments"`
	Blocks       int64          `json:"blocks"`
	DataBytes    int64          `json:"data_bytes"`
	// NoIndex lists volumes that ended before their index was written
	// (an unexpected end of medium): their catalogue rows come from the
	// copy, and `coffer media catalog --scan` finds them on the tape.
	NoIndex []string `json:"no_index"`
	// Multiplex is the points written at once on each drive.
	Multiplex       int     `json:"multiplex"`
	DurationSeconds float64 `json:"duration_seconds"`
}

// MediaCatalogResult is what rebuilding the media catalogue from the
// volumes found.
type MediaCatalogResult struct {
	Volumes []MediaVolume `json:"volumes"`
	// Skipped are cartridges that are blank, foreign or unreadable, with
	// the reason.
	Skipped []MediaSkipped `json:"skipped"`
}

// MediaSkipped is a cartridge the catalogue rebuild left out.
type MediaSkipped struct {
	Barcode string `json:"barcode"`
	Reason  string `json:"reason"`
}

// MediaRestoreResult is a restore from media.
type MediaRestoreResult struct {
	Disks []RestoredDisk `json:"disks"`
	// What reading the point's stream cost: its own blocks, every block
	// read (others' included when a gap was read through), locates.
	BlocksNeeded int64 `json:"blocks_needed"`
	BlocksRead   int64 `json:"blocks_read"`
	ReadBytes    int64 `json:"read_bytes"`
	Locates      int64 `json:"locates"`
}

// MediaVerifyReport is a volume read back and compared with its index and
// the catalogue.
type MediaVerifyReport struct {
	Barcode string `json:"barcode"`
	Blocks  int64  `json:"blocks"`
	// BadBlocks failed their checksum or could not be read; DamagedBlocks
	// are those of them inside catalogued extents (data lost).
	BadBlocks     []MediaBadBlock `json:"bad_blocks"`
	DamagedBlocks int64           `json:"damaged_blocks"`
	// MissingBlocks: catalogued by the volume's index but not found on it
	// as catalogued.
	MissingBlocks int64 `json:"missing_blocks"`
	// UnindexedBlocks belong to sessions cut by a crash: never catalogued.
	UnindexedBlocks int64 `json:"unindexed_blocks"`
	// CatalogueMatches: the catalog database lists exactly the volume's
	// index.
	CatalogueMatches bool `json:"catalogue_matches"`
	OK               bool `json:"ok"`
}

// MediaBadBlock is a block that failed its check.
type MediaBadBlock struct {
	Position int64  `json:"position"`
	Error    string `json:"error"`
}

// MediaLibraryStatus is a library's changer inventory, as `mtx status`
// reports it: its drives and slots and the cartridges in them.
type MediaLibraryStatus struct {
	Library string       `json:"library"`
	Kind    string       `json:"kind"` // vtl (a file-backed virtual tape library), mtx
	Drives  []MediaDrive `json:"drives"`
	// Slots are the storage slots, then the import/export ones, numbered
	// from 1.
	Slots []MediaSlot `json:"slots"`
}

// MediaDrive is a drive of a library and the cartridge it holds.
type MediaDrive struct {
	Index      int    `json:"index"`
	Full       bool   `json:"full"`
	Barcode    string `json:"barcode"`
	SourceSlot int    `json:"source_slot"` // the slot its cartridge came from, 0 if unknown
	WORM       bool   `json:"worm"`
}

// MediaSlot is a slot of a library and the cartridge it holds.
type MediaSlot struct {
	Number       int    `json:"number"`
	ImportExport bool   `json:"import_export"`
	Full         bool   `json:"full"`
	Barcode      string `json:"barcode"`
	// WORM: a write-once cartridge (known of a virtual library's; a real
	// drive reports it of the cartridge it holds).
	WORM bool `json:"worm"`
}
