package repo

import (
	"context"
	"fmt"
	"io"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/repo/chunk"
	"github.com/coffer-backup/coffer/internal/repo/diskmap"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
)

// Only the repository reads and writes its object formats: the packages
// above it (backup, restore, copy, stats, the CLI) reach chunks, packs,
// index entries and disk maps through this file, never through the format
// packages themselves (a lint rule holds them to it, see .golangci.yml).
// The aliases name the few format values a caller has to hold; everything
// else is a method that does the one thing the caller needs.

// DiskMap is an open disk map: the chunk ID of every span of one disk.
type DiskMap = diskmap.Map

// Location is where a chunk's sealed blob lives: a pack and a range in it.
type Location = index.Location

// PackID names a pack.
type PackID = pack.ID

// Encoder compresses and seals chunks; one per goroutine.
type Encoder = chunk.Encoder

// Decoder opens, decompresses and verifies sealed chunks; one per goroutine.
type Decoder = chunk.Decoder

// Compressor names the zstd implementation this build compresses with.
const Compressor = chunk.Compressor

// OpenDiskMap opens the disk map object name (a Disk's Map).
func (r *Repository) OpenDiskMap(ctx context.Context, name string) (*DiskMap, error) {
	return diskmap.Open(ctx, r.st, r.key, name)
}

// NewEncoder returns a chunk encoder at the repository's compression level.
func (r *Repository) NewEncoder() (*Encoder, error) {
	return chunk.NewEncoder(r.key, r.cfg.Level())
}

// NewEncoderWith returns a chunk encoder with key at a compression level
// of the caller's choice: `coffer bench pipeline` (internal/measure)
// measures the pipeline at every level without a repository.
func NewEncoderWith(key *crypto.Key, level int) (*Encoder, error) {
	return chunk.NewEncoder(key, level)
}

// NewDecoder returns a chunk decoder for this repository.
func (r *Repository) NewDecoder() (*Decoder, error) {
	return chunk.NewDecoder(r.key, MaxChunkSize)
}

// ReadPackRange fills buf with the bytes of pack p from off on: one request
// for a run of blobs. The caller owns buf, so a hot loop reuses one buffer
// for every read.
func (r *Repository) ReadPackRange(ctx context.Context, p PackID, off int64, buf []byte) error {
	rc, err := r.st.Read(ctx, pack.ObjectName(p), off, int64(len(buf)))
	if err != nil {
		return fmt.Errorf("read pack %s: %w", p, err)
	}
	defer rc.Close()
	if _, err := io.ReadFull(rc, buf); err != nil {
		return fmt.Errorf("read pack %s: %w", p, err)
	}
	return nil
}

// PackObjectName is the store object holding pack p (for checks of the
// object itself, such as its lock at the server).
func PackObjectName(p PackID) string { return pack.ObjectName(p) }

// ParsePackObjectName is the pack a store object's name holds (data/...).
func ParsePackObjectName(name string) (PackID, error) { return pack.ParseObjectName(name) }

// IndexTotals is what the index holds.
type IndexTotals struct {
	Chunks      int64 // distinct chunks (one stored twice counts once)
	RawBytes    int64 // their plaintext
	SealedBytes int64 // their compressed and encrypted blobs
	Segments    int
}

// IndexTotals walks the whole index once.
func (r *Repository) IndexTotals(ctx context.Context) (IndexTotals, error) {
	var t IndexTotals
	idx := r.Index()
	var last index.Entry
	first := true
	err := idx.Iterate(ctx, func(e index.Entry) error {
		// Iterate yields IDs in order, so copies of a chunk (two sessions
		// that stored it at once) are adjacent.
		if !first && e.ID == last.ID {
			return nil
		}
		first, last = false, e
		t.Chunks++
		t.RawBytes += int64(e.RawLength)
		t.SealedBytes += int64(e.Length)
		return nil
	})
	t.Segments = len(idx.Segments())
	return t, err
}
