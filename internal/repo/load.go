package repo

import (
	"context"
	"errors"
	"fmt"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

// ErrChunkMissing means a disk map references a chunk the index does not know.
var ErrChunkMissing = errors.New("chunk missing from the index")

// Locate finds a chunk.
func (r *Repository) Locate(ctx context.Context, x id.ID) (index.Location, error) {
	loc, ok, err := r.Index().Lookup(ctx, x)
	if err != nil {
		return loc, err
	}
	if !ok {
		return loc, fmt.Errorf("%w: %s", ErrChunkMissing, x.Short())
	}
	return loc, nil
}

// ReadBlob reads one sealed blob.
func (r *Repository) ReadBlob(ctx context.Context, loc index.Location) ([]byte, error) {
	b, err := store.Get(ctx, r.st, pack.ObjectName(loc.Pack), int64(loc.Offset), int64(loc.Length))
	if err != nil {
		return nil, fmt.Errorf("read pack %s: %w", loc.Pack, err)
	}
	return b, nil
}

// LoadChunk reads, verifies and appends chunk x's plaintext to dst.
func (r *Repository) LoadChunk(ctx context.Context, x id.ID, dec *Decoder, dst []byte) ([]byte, error) {
	loc, err := r.Locate(ctx, x)
	if err != nil {
		return nil, err
	}
	sealed, err := r.ReadBlob(ctx, loc)
	if err != nil {
		return nil, err
	}
	return dec.Decode(dst, sealed, x, int(loc.RawLength))
}
