// Package stats measures a repository: logical size of all backup points,
// what deduplication and compression saved, and what is stored.
package stats

import (
	"context"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store"
)

// Stats of a repository.
type Stats struct {
	Snapshots int   `json:"snapshots"`
	Disks     int   `json:"disks"`
	Logical   int64 `json:"logical_bytes"` // sum of disk sizes over all points
	Data      int64 `json:"data_bytes"`    // non-zero bytes referenced over all points
	Unique    int64 `json:"unique_bytes"`  // plaintext of distinct chunks
	Chunks    int64 `json:"chunks"`        // distinct chunks
	Sealed    int64 `json:"chunk_bytes"`   // compressed+encrypted chunk bytes
	Stored    int64 `json:"stored_bytes"`  // everything in the store
	PackBytes int64 `json:"pack_bytes"`    // pack objects
	Packs     int   `json:"packs"`
	Segments  int   `json:"index_segments"`
	Objects   int   `json:"objects"`
	// Ratios (x:1).
	Dedup       float64 `json:"dedup_ratio"`       // Data / Unique
	Compression float64 `json:"compression_ratio"` // Unique / Sealed
	Total       float64 `json:"total_ratio"`       // Logical / Stored
}

// Compute walks manifests, disk maps, the index and a store listing.
func Compute(ctx context.Context, r *repo.Repository) (*Stats, error) {
	s := &Stats{}
	snaps, err := r.Points(ctx, nil)
	if err != nil {
		return nil, err
	}
	s.Snapshots = len(snaps)
	for _, sn := range snaps {
		for _, d := range sn.Disks {
			s.Disks++
			s.Logical += d.Size
			m, err := r.OpenDiskMap(ctx, d.Map)
			if err != nil {
				return nil, err
			}
			if err := m.Iterate(ctx, func(i uint64, x id.ID) error {
				if !x.IsZero() {
					s.Data += int64(m.SpanLength(i))
				}
				return nil
			}); err != nil {
				return nil, err
			}
		}
	}
	idx, err := r.IndexTotals(ctx)
	if err != nil {
		return nil, err
	}
	s.Chunks, s.Unique, s.Sealed, s.Segments = idx.Chunks, idx.RawBytes, idx.SealedBytes, idx.Segments
	err = r.Store().List(ctx, "", func(fi store.ObjectInfo) error {
		s.Objects++
		s.Stored += fi.Size
		if len(fi.Name) > 5 && fi.Name[:5] == "data/" {
			s.Packs++
			s.PackBytes += fi.Size
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.Dedup = ratio(s.Data, s.Unique)
	s.Compression = ratio(s.Unique, s.Sealed)
	s.Total = ratio(s.Logical, s.Stored)
	return s, nil
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
