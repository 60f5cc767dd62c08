package bootverify

import (
	"context"
	"errors"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store"
)

// Proven lists the points of r whose last boot verification passed.
// Retention keeps the newest of each source (internal/forget), so it
// must know them all; a repository without any has none.
func Proven(ctx context.Context, r *repo.Repository) (map[id.ID]bool, error) {
	docs, err := r.BootVerifications(ctx)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	out := map[id.ID]bool{}
	for x, b := range docs {
		if res, err := Decode(b); err == nil && res.Passed {
			out[x] = true
		}
	}
	return out, nil
}

// LastVerifiedScreen is the screenshot of the newest passed verification
// of the VM named vm, and the point it booted; nil when there is none.
// The next verification compares its screen with it.
func LastVerifiedScreen(ctx context.Context, r *repo.Repository, vm string) ([]byte, string, error) {
	docs, err := r.BootVerifications(ctx)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, "", err
	}
	var last *Result
	for _, b := range docs {
		res, err := Decode(b)
		if err != nil || !res.Passed || res.VM != vm || len(res.Screenshot) == 0 {
			continue
		}
		if last == nil || res.Started.After(last.Started) {
			last = res
		}
	}
	if last == nil {
		return nil, "", nil
	}
	return last.Screenshot, last.PointID, nil
}
