package bootverify

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store"
)

// ErrNotVerified is the answer for a point that has no stored boot
// verification.
var ErrNotVerified = errors.New("no boot verification is stored for this backup point")

// ResolvePoint finds a point by ID, prefix or "latest", or else the
// newest point of the VM of that name: what `coffer verify boot` and the
// reads of its results take.
func ResolvePoint(ctx context.Context, r *repo.Repository, target string) (*repo.Point, error) {
	snap, err := r.FindPoint(ctx, target)
	if err == nil || !errors.Is(err, repo.ErrSnapshotNotFound) {
		return snap, err
	}
	all, lerr := r.Points(ctx, nil)
	if lerr != nil {
		return nil, lerr
	}
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Source.VMName == target {
			return all[i], nil
		}
	}
	return nil, fmt.Errorf("%w: no backup point and no VM is named %q (see `coffer snapshots`)", repo.ErrSnapshotNotFound, target)
}

// Stored reads the result the repository keeps for the point named by
// target (as ResolvePoint takes it); ErrNotVerified (wrapped) when the
// point was never verified.
func Stored(ctx context.Context, r *repo.Repository, target string) (*Result, error) {
	snap, err := ResolvePoint(ctx, r, target)
	if err != nil {
		return nil, err
	}
	b, err := r.BootVerification(ctx, snap.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: backup point %s of %s (run `coffer verify boot %s`)", ErrNotVerified, snap.ID.Short(), snap.Source.VMName, snap.ID.Short())
	}
	if err != nil {
		return nil, err
	}
	return Decode(b)
}

// All reads every result the repository keeps, newest first. A result that
// cannot be decoded is left out, as the points' listing leaves out its
// column.
func All(ctx context.Context, r *repo.Repository) ([]*Result, error) {
	docs, err := r.BootVerifications(ctx)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	out := make([]*Result, 0, len(docs))
	for _, b := range docs {
		if res, err := Decode(b); err == nil {
			out = append(out, res)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Started.Equal(out[j].Started) {
			return out[i].Started.After(out[j].Started)
		}
		return out[i].PointID < out[j].PointID
	})
	return out, nil
}
