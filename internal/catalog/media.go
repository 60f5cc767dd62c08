package catalog

import (
	"context"
	"time"
)

// MediaVolume is a volume (a labelled cartridge) as its last index on the
// medium describes it.
type MediaVolume struct {
	Barcode        string
	Library        string // where it was last seen (a library of the configuration, a VTL directory, a changer device)
	Pool           string
	MediaSet       string
	BlockSize      int
	Labelled       time.Time
	Written        time.Time // its last index
	ProtectedUntil time.Time
	Full           bool
	// WORM: the cartridge is write-once (appended to, never overwritten).
	WORM     bool
	Segments int // filled in by ListMediaVolumes
}

// MediaExtent is a run of consecutive blocks on a volume.
type MediaExtent struct {
	Pos   int64 `json:"pos"`
	Count int64 `json:"count"`
}

// MediaSegment is the part of one backup point's stream on one volume:
// a row of the media catalogue (point, stream, volume, blocks).
type MediaSegment struct {
	Barcode    string
	Session    string
	Stream     int64
	Point      string
	VM         string
	Repository string
	PointTime  time.Time
	FirstSeq   int64
	LastSeq    int64
	Bytes      int64
	End        bool // the stream's last block is on this volume
	Extents    []MediaExtent
}

// MediaSegmentFilter selects segments: of a point (an ID or a unique
// prefix is resolved by the caller), of a volume, or all.
type MediaSegmentFilter struct {
	Point   string
	Barcode string
}

// MediaCatalog records what is on which volume. It is a cache of the
// volumes' own indexes: `coffer media catalog` rebuilds it from the media.
type MediaCatalog interface {
	// ReplaceMediaVolume records a volume and replaces all its segments,
	// in one transaction.
	ReplaceMediaVolume(ctx context.Context, v MediaVolume, segs []MediaSegment) error
	// ListMediaVolumes lists volumes by barcode, those of one pool if pool
	// is not empty.
	ListMediaVolumes(ctx context.Context, pool string) ([]MediaVolume, error)
	// ListMediaSegments lists segments by point, session, stream and first
	// block number.
	ListMediaSegments(ctx context.Context, f MediaSegmentFilter) ([]MediaSegment, error)
	// DeleteMediaVolume forgets a volume and its segments (relabelled or
	// taken out); a missing one is no error.
	DeleteMediaVolume(ctx context.Context, barcode string) error
}
