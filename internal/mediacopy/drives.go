package mediacopy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/coffer-backup/coffer/internal/media/volume"
	"github.com/coffer-backup/coffer/internal/repo"
)

// CopyOnDrives writes backup points to a media pool through several
// drives of one library at once, a session per drive, as openBench's
// NetBackup wrote eight streams to eight drives: the points are dealt
// out by size, largest first to the drive with the least so far, and
// the drives take cartridges of the pool apart from each other
// (volume.Claims). A drive that fails does not stop the others: the
// sessions that completed come back with the error, so that their
// volumes are catalogued. Result i is the session of drives[i], nil where
// that drive failed; the drives used are at most one per point. Each
// drive waits for o.DriveSlot before it writes: with fewer slots than
// drives, a drive starts when another has ended its session.
func CopyOnDrives(ctx context.Context, src *repo.Repository, snaps []*repo.Point, drives []*volume.Library, o CopyOptions) ([]*volume.WriteResult, error) {
	if len(snaps) == 0 {
		return nil, errors.New("no backup point selected")
	}
	if len(drives) == 0 {
		return nil, errors.New("no drive to write with")
	}
	groups := deal(snaps, min(len(drives), len(snaps)))
	claims := volume.NewClaims()
	results := make([]*volume.WriteResult, len(groups))
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for i, group := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = copyWithSlot(ctx, src, group, drives[i], o, claims)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("drive %d: %w", drives[i].DriveIndex, errs[i])
			}
		}()
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

// copyWithSlot writes a drive's session once the drive has its slot.
func copyWithSlot(ctx context.Context, src *repo.Repository, snaps []*repo.Point, lib *volume.Library, o CopyOptions,
	claims *volume.Claims) (*volume.WriteResult, error) {
	if o.DriveSlot != nil {
		var bytes int64
		for _, s := range snaps {
			bytes += s.Logical()
		}
		release, err := o.DriveSlot(ctx, lib.DriveIndex, bytes)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	return copyOn(ctx, src, snaps, lib, o, claims)
}

// deal splits points into n groups of about equal bytes: largest first,
// each to the group with the fewest bytes so far (the longest-processing-
// time rule, within 4/3 of the best split). A point's stream holds all
// its chunks, not only those it added to the repository, so its logical
// bytes are the measure.
func deal(snaps []*repo.Point, n int) [][]*repo.Point {
	bySize := slices.Clone(snaps)
	slices.SortStableFunc(bySize, func(a, b *repo.Point) int { return cmp.Compare(b.Logical(), a.Logical()) })
	groups := make([][]*repo.Point, n)
	bytes := make([]int64, n)
	for _, s := range bySize {
		least := 0
		for g := range groups {
			if bytes[g] < bytes[least] {
				least = g
			}
		}
		groups[least] = append(groups[least], s)
		bytes[least] += s.Logical()
	}
	return groups
}
